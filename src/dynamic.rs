//! Symbolic graphs: one RLX graph for every size of the dynamic dims.
//!
//! The lowering works at concrete sizes, so the importer lowers a program at a few
//! *probe* bindings and hands the HIR of each here. [`generalize`] lowers each to MIR
//! and lets RLX's own `rlx_ir::dynamic::generalize_many` find which dims and shape
//! attributes are which symbol (or a derived one: `seq*16`, `(h+1)/2`), checks the
//! result against every probe, and writes it as RLX's `.rlxmodel` text, the format
//! that keeps derived symbols and symbolic attributes (the HIR JSON does not).
//! [`specialize`] makes the static graph for one binding (`rlx_ir::dynamic::specialize`),
//! which [`crate::runner::Runner::from_graph`] compiles like any other (docs/design.md, z).

use rlx_ir::dynamic::{generalize_many, specialize as rlx_specialize};
use rlx_ir::{DimBinding, Graph};

use crate::runner::guarded;

/// Largest constant offset a derived dim may have (`seq + 1`, a padded conv's `h + 6`).
/// Four probes pin each fit, and the result is checked against all of them.
const MAX_OFFSET: i64 = 1 << 16;

/// rlx-ir HIR JSON → its MIR graph, shapes re-inferred (as RLX's `lower_hir` does).
pub fn mir_of_hir_json(text: &str) -> Result<Graph, String> {
    let hir = rlx_ir::serialize::hir_from_json(text)
        .map_err(|e| format!("not valid RLX HIR JSON: {e}"))?;
    let mut mir = guarded("lowering HIR to MIR", || hir.lower_to_mir())?
        .map_err(|e| format!("RLX could not lower the HIR: {e:?}"))?;
    guarded("inferring shapes", || {
        rlx_ir::dynamic::sync_graph_shapes(mir.as_graph_mut())
    })?;
    Ok(mir.into_graph())
}

/// The binding of probe `k`: each symbol with its size there.
fn binding_at(sizes: &[(u32, Vec<usize>)], k: usize) -> DimBinding {
    sizes.iter().map(|(s, v)| (*s, v[k])).collect()
}

/// Where two static graphs differ (None: same ops, wiring and shapes).
fn first_difference(got: &Graph, want: &Graph) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} nodes vs {}", got.len(), want.len()));
    }
    for (a, b) in got.nodes().iter().zip(want.nodes()) {
        if a.op != b.op || a.inputs != b.inputs || a.shape != b.shape {
            return Some(format!(
                "node {} ({}): {} {} vs {} {}",
                a.id, b.op, a.op, a.shape, b.op, b.shape
            ));
        }
    }
    (got.outputs != want.outputs).then(|| "different outputs".to_string())
}

/// One symbolic graph from the HIR of the same program at several bindings.
///
/// `sizes` lists each symbol (its RLX number) with its size in each HIR, in order.
/// Returns the `.rlxmodel` text. Errors name the node where the graphs are not one
/// symbolic graph (a structure or a constant that depends on a size), or the probe
/// the generalized graph does not reproduce.
pub fn generalize(
    hir_jsons: &[String],
    sizes: &[(u32, Vec<usize>)],
    names: &[(u32, String)],
) -> Result<String, String> {
    let graphs = hir_jsons
        .iter()
        .enumerate()
        .map(|(k, t)| mir_of_hir_json(t).map_err(|e| format!("probe {k}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Graph> = graphs.iter().collect();
    let general = guarded("generalizing the probe graphs", || {
        generalize_many(&refs, sizes, Some(MAX_OFFSET))
    })??;
    for (k, probe) in graphs.iter().enumerate() {
        let binding = binding_at(sizes, k);
        let again = guarded("specializing the symbolic graph", || {
            rlx_specialize(&general, &binding)
        })?;
        if let Some(diff) = first_difference(&again, probe) {
            return Err(format!(
                "the symbolic graph does not reproduce probe {k} ({binding:?}): {diff}"
            ));
        }
    }
    let text = write(&general, names)?;
    let back = read(&text)?;
    if let Some(diff) = first_difference(&rlx_specialize(&back, &binding_at(sizes, 0)), &graphs[0])
    {
        return Err(format!(
            "the .rlxmodel text of the symbolic graph does not read back the same: {diff}"
        ));
    }
    Ok(text)
}

/// `graph` as `.rlxmodel` text, every symbol named: `names` for the base symbols,
/// `d<n>` for derived ones. (RLX 0.2.19 writes a scaled unnamed symbol in an attribute
/// as `?0*4`, which its own reader refuses; a named one, `seq*4`, reads back.)
fn write(graph: &Graph, names: &[(u32, String)]) -> Result<String, String> {
    let mut dims: Vec<(String, u32)> = names.iter().map(|(s, n)| (n.clone(), *s)).collect();
    let mut symbols = rlx_ir::dynamic::collect_dynamic_symbols(graph);
    symbols.extend(graph.sym_defs().iter().map(|d| d.sym));
    symbols.extend(graph.sym_attrs().iter().map(|a| a.sym));
    for s in symbols {
        if !dims.iter().any(|(_, d)| *d == s) {
            dims.push((format!("d{s}"), s));
        }
    }
    let mut module = rlx_ir::rlxmodel::Module::new(vec![graph.clone()]);
    module.dims = dims;
    rlx_ir::rlxmodel::write_module(&module)
        .map_err(|e| format!("RLX could not write the symbolic graph as .rlxmodel: {e}"))
}

/// The one graph of a `.rlxmodel` text.
pub fn read(text: &str) -> Result<Graph, String> {
    rlx_ir::rlxmodel::from_text(text).map_err(|e| format!("not a valid .rlxmodel graph: {e}"))
}

/// The static graph of `graph` at `binding` (symbol number → size).
pub fn specialize(graph: &Graph, binding: &[(u32, usize)]) -> Result<Graph, String> {
    let binding: DimBinding = binding.iter().copied().collect();
    let g = guarded("specializing the symbolic graph", || {
        rlx_specialize(graph, &binding)
    })?;
    if let Some(n) = g.nodes().iter().find(|n| !n.shape.is_static()) {
        return Err(format!(
            "node {} ({}) keeps a dynamic dim at binding {binding:?}: {}",
            n.id, n.op, n.shape
        ));
    }
    Ok(g)
}
