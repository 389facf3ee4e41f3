@@HEADER@@
//!
//! The model has dynamic dims, so the graph is RLX's symbolic graph (`model.rlxmodel`,
//! written at conversion: one node per RLX op, each named after its ATen op and
//! module path), made static for one binding of the symbols by `build`.

use rlx_ir::Graph;

/// The symbolic graph as RLX's `.rlxmodel` text.
pub const SYMBOLIC: &str = include_str!("@@SYMBOLIC_FILE@@");

/// The symbolic graph, read from [`SYMBOLIC`].
pub fn symbolic() -> Result<Graph, String> {
    rlx_ir::rlxmodel::from_text(SYMBOLIC).map_err(|e| format!("{}: {e}", crate::NAME))
}

/// The static graph at `binding` (symbol number, size): every dim and shape attribute
/// evaluated (`rlx_ir::dynamic::specialize`).
pub fn build(symbolic: &Graph, binding: &[(u32, usize)]) -> Result<Graph, String> {
    let sizes: rlx_ir::DimBinding = binding.iter().copied().collect();
    let graph = rlx_ir::dynamic::specialize(symbolic, &sizes);
    match graph.nodes().iter().find(|n| !n.shape.is_static()) {
        Some(n) => Err(format!("node {} keeps a dynamic dim at {binding:?}", n.id)),
        None => Ok(graph),
    }
}
