//! The checks every graph passes before RLX compiles it or allocates anything.
//!
//! RLX trusts its graph: a shape whose byte size overflows wraps to a tiny arena the
//! kernels then write past; one larger than the machine aborts the process when the
//! arena allocation fails (`AlignedBytes::zeroed` → `handle_alloc_error`); a declared
//! output smaller than its operands give is overrun; and some kernels corrupt the heap
//! on some dtypes whatever the shapes (`scripts/probe_core_safety.py` finds them;
//! docs/rlx-defects.md lists them, [`crate::defects`] holds them). None of these can be
//! caught once they happen, so [`check_hir`] and [`check_graph`] refuse them first:
//!
//! * every node's shape is static, its element count and byte size fit (checked
//!   arithmetic), and no single tensor is larger than the machine's memory
//!   ([`crate::sizing::check_shape`] within [`crate::memory::machine_memory`]);
//! * the arena RLX's CPU backend plans for the graph (its own planner,
//!   `plan_memory_native_in_order`, run on the graph before fusion) fits that memory too;
//! * the graph is well formed (inputs defined before use, as many as the op takes),
//!   each declared shape is the one its operands give (RLX's own shape rules), and a
//!   `Constant` holds as many bytes as its shape;
//! * no node, nested bodies (`If`, `While`, `Scan`) included, is an (op, dtype) pair of
//!   [`crate::defects::KERNEL_DEFECTS`], and no graph output is Bool/I8/U8/I16 (RLX reads
//!   those with 4 bytes per element, past the buffer).
//! * every baked index (a constant index of `Gather`, `GatherElements`, `GatherNd`, the
//!   scatters) and every `Narrow`/`Slice` window lies inside the axis it addresses
//!   ([`crate::bounds`]).
//!
//! Every finding is a [`CoreError::Check`]: the graph was refused before RLX saw it. A known
//! crash too: our lowering never emits one (lower/rlx/workarounds.py routes around each), so only a
//! hand-edited or foreign model file reaches it, and for that file it is bad input, not a failure
//! of RLX on a graph it accepted. Every error names the node (id, label, op), and where they
//! matter dims, dtype, bytes and the limit.

use std::collections::HashSet;

use rlx_ir::hir::{HirModule, HirOp};
use rlx_ir::{DType, Dim, Graph, Node, Op, Shape};

use crate::defects::{self, op_kind};
use crate::dtype_name;
use crate::error::CoreError;
use crate::memory::{MemoryLimit, human};
use crate::sizing::{check_shape, dims_text};

/// `node %12 "label" (MatMul)` for messages. ("mir" is the name RLX's HIR lowering gives a
/// node that had none, not a label.)
fn node_text(id: impl std::fmt::Display, name: Option<&str>, op: &str) -> String {
    match name.filter(|n| !n.is_empty() && *n != "mir") {
        Some(n) => format!("node {id} {n:?} ({op})"),
        None => format!("node {id} ({op})"),
    }
}

/// A `Constant`'s data must fill its shape exactly (RLX copies `data.len()` bytes of a
/// true-width constant into its slot whatever the slot's size). Empty data reads as zeros.
fn check_constant(
    what: &str,
    data: &[u8],
    dims: &[usize],
    bytes: usize,
    dtype: DType,
) -> Result<(), CoreError> {
    if data.is_empty() || data.len() == bytes {
        return Ok(());
    }
    Err(CoreError::Check(format!(
        "{what}: a {} {dims:?} constant holds {bytes} bytes, but its data has {}",
        dtype_name(dtype),
        data.len()
    )))
}

/// Refuse two inputs (or two parameters) of one name: RLX binds by name, so one of them
/// could never be fed.
fn check_unique<'a>(kind: &str, names: impl Iterator<Item = &'a str>) -> Result<(), CoreError> {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(CoreError::Check(format!(
                "the graph declares two {kind}s named {name:?}"
            )));
        }
    }
    Ok(())
}

/// The HIR as read from a model file: well formed (each node's id is its position, its
/// inputs come before it, the outputs exist), names unique, every shape static and within
/// `limit`, every constant the size of its shape. (Its ops are checked on the MIR graph
/// it lowers to, [`check_graph`].)
pub fn check_hir(hir: &HirModule, limit: &MemoryLimit) -> Result<(), CoreError> {
    let nodes = hir.nodes();
    let mut inputs = Vec::new();
    let mut params = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let op = match &node.op {
            HirOp::Mir(op) => op_kind(op),
            other => format!("{other:?}")
                .split([' ', '{', '('])
                .next()
                .unwrap_or("?")
                .to_string(),
        };
        let what = node_text(node.id, node.name.as_deref(), &op);
        if node.id.0 as usize != i {
            return Err(CoreError::Check(format!(
                "{what} is at position {i} of the HIR; a node's id must be its position"
            )));
        }
        if let Some(bad) = node.inputs.iter().find(|id| id.0 as usize >= i) {
            return Err(CoreError::Check(format!(
                "{what} takes {bad}, which is not defined before it"
            )));
        }
        let (dims, _, bytes) = check_shape(&what, &node.shape, limit)?;
        match &node.op {
            HirOp::Constant { data } | HirOp::Mir(Op::Constant { data }) => {
                check_constant(&what, data, &dims, bytes, node.shape.dtype())?
            }
            HirOp::Input { name } | HirOp::Mir(Op::Input { name }) => inputs.push(name.as_str()),
            HirOp::Param { name } | HirOp::Mir(Op::Param { name }) => params.push(name.as_str()),
            _ => {}
        }
    }
    if let Some(bad) = hir.outputs.iter().find(|id| id.0 as usize >= nodes.len()) {
        return Err(CoreError::Check(format!(
            "graph output {bad} is not a node of the HIR ({} nodes)",
            nodes.len()
        )));
    }
    check_unique("input", inputs.into_iter())?;
    check_unique("parameter", params.into_iter())
}

/// Non-unit extents: what addresses memory (`[]` and `[1]` are the same scalar).
fn extents(dims: &[Dim]) -> Vec<usize> {
    dims.iter()
        .filter_map(|d| match d {
            Dim::Static(n) if *n != 1 => Some(*n),
            _ => None,
        })
        .collect()
}

/// The MIR graph RLX compiles: well formed, every shape static, within `limit` and the one
/// its operands give, every constant filled, no known-crashing kernel, and the arena RLX
/// will plan for it within `limit`. Errors name the node (id, label, op).
pub fn check_graph(graph: &Graph, limit: &MemoryLimit) -> Result<(), CoreError> {
    if let Some(e) = rlx_ir::verify::verify(graph).into_iter().next() {
        let at = e
            .node
            .map(|id| {
                let n = graph.node(id);
                format!("{}: ", node_text(id, n.name.as_deref(), &op_kind(&n.op)))
            })
            .unwrap_or_default();
        return Err(CoreError::Check(format!(
            "{at}the graph is malformed: {}",
            e.message
        )));
    }
    let names = |input: bool| {
        graph.nodes().iter().filter_map(move |n| match &n.op {
            Op::Input { name } if input => Some(name.as_str()),
            Op::Param { name } if !input => Some(name.as_str()),
            _ => None,
        })
    };
    check_unique("input", names(true))?;
    check_unique("parameter", names(false))?;
    check_nodes(graph, limit, "")?;
    for (i, &id) in graph.outputs.iter().enumerate() {
        let node = graph.node(id);
        let what = node_text(id, node.name.as_deref(), &op_kind(&node.op));
        defects::check_output(i, &what, node.shape.dtype())?;
    }
    check_arena(graph, limit)
}

/// Every node of `graph` and of the graphs nested in its ops (`If`, `While`, `Scan` bodies):
/// its size, constant data, kernel and declared shape. `prefix` names the enclosing node.
fn check_nodes(graph: &Graph, limit: &MemoryLimit, prefix: &str) -> Result<(), CoreError> {
    for node in graph.nodes() {
        let kind = op_kind(&node.op);
        let what = format!(
            "{prefix}{}",
            node_text(node.id, node.name.as_deref(), &kind)
        );
        let (dims, _, bytes) = check_shape(&what, &node.shape, limit)?;
        if let Op::Constant { data } = &node.op {
            check_constant(&what, data, &dims, bytes, node.shape.dtype())?;
        }
        defects::check_kernel(graph, node, &what)?;
        let (inferred, rejected) = match own_rule(graph, node) {
            Some(shape) => (Some(shape), None),
            // rlx-ir 0.2.19's rule for these is a placeholder (input 0's shape), not theirs
            None if matches!(
                node.op,
                Op::DotGeneral { .. }
                    | Op::If { .. }
                    | Op::While { .. }
                    | Op::SelectiveScan { .. }
                    | Op::GatedDeltaNet { .. }
                    | Op::Mamba2 { .. }
                    | Op::FusedAttentionBlock { .. }
                    | Op::FusedTransformerLayer { .. }
            ) =>
            {
                (None, None)
            }
            None => rlx_ir::infer_shape::infer_output_shape_reporting(graph, node),
        };
        if let Some(why) = rejected {
            let operands: Vec<String> = node
                .inputs
                .iter()
                .map(|&i| {
                    let s = &graph.node(i).shape;
                    format!("{} {}", dtype_name(s.dtype()), dims_text(s))
                })
                .collect();
            return Err(CoreError::Check(format!(
                "{what}: its operands ({}) are not valid for the op: {why}",
                operands.join(", ")
            )));
        }
        if let Some(shape) = inferred
            && shape.is_static()
            && extents(shape.dims()) != extents(node.shape.dims())
        {
            return Err(CoreError::Check(format!(
                "{what} declares {} {} but its operands give {} {}; the arena would be sized \
                 from the declaration while the kernel writes what the operands give",
                dtype_name(node.shape.dtype()),
                dims_text(&node.shape),
                dtype_name(shape.dtype()),
                dims_text(&shape)
            )));
        }
        crate::bounds::check_node(graph, node, &what)?;
        for body in node.op.subgraphs() {
            check_nodes(body, limit, &format!("{what}, in its body: "))?;
        }
    }
    Ok(())
}

/// Output shapes of the ops whose kernels write past a smaller declared output and for which
/// rlx-ir 0.2.19 has no shape rule (found by the probe's `lie` cases).
fn own_rule(graph: &Graph, node: &Node) -> Option<Shape> {
    let input = graph.node(*node.inputs.first()?);
    let dims = input.shape.dims();
    match &node.op {
        Op::Sort { .. } | Op::ArgSort { .. } | Op::BatchNormInference { .. } => {
            Some(Shape::from_dims(dims, node.shape.dtype()))
        }
        Op::TopK { k } => {
            let mut dims = dims.to_vec();
            *dims.last_mut()? = Dim::Static(*k);
            Some(Shape::from_dims(&dims, node.shape.dtype()))
        }
        _ => None,
    }
}

/// The arena RLX's CPU backend allocates for `graph` must fit `limit`: past it the
/// allocation aborts the process. The size is RLX's own plan (`plan_memory_native_in_order`,
/// the planner and slot widths `CpuBackend` sizes its arena with) of the graph as given, before
/// RLX's fusion passes, which change the graph a little (fewer intermediate buffers, sometimes
/// an added broadcast or cast): an estimate of the arena, not its exact size.
fn check_arena(graph: &Graph, limit: &MemoryLimit) -> Result<(), CoreError> {
    let alignment = rlx_cpu::config::RuntimeConfig::global()
        .arena_alignment
        .max(1);
    // Every slot at its widest (4-byte f32 lanes) plus alignment, summed: no plan is larger,
    // so when this fits in 64 bits the planner's own sums cannot overflow.
    let total = graph.nodes().iter().try_fold(0u64, |acc, n| {
        let elements = n.shape.num_elements()? as u64;
        let slot = elements.checked_mul(n.shape.dtype().size_bytes().max(4) as u64)?;
        acc.checked_add(slot)?.checked_add(alignment as u64)
    });
    if total.is_none() {
        return Err(CoreError::Check(format!(
            "the graph's {} tensors together take more bytes than a 64-bit size can count",
            graph.len()
        )));
    }
    let plan = rlx_compile::memory::plan_memory_native_in_order(graph, alignment);
    if plan.arena_size as u64 > limit.bytes {
        let bytes = |n: &Node| n.shape.num_elements().unwrap_or(0) * n.shape.dtype().size_bytes();
        let biggest = graph
            .nodes()
            .iter()
            .fold(None::<&Node>, |best, n| match best {
                Some(b) if bytes(b) >= bytes(n) => Some(b),
                _ => Some(n),
            });
        let note = biggest
            .map(|n| {
                format!(
                    "; its largest tensor is {} {} {}",
                    node_text(n.id, n.name.as_deref(), &op_kind(&n.op)),
                    dtype_name(n.shape.dtype()),
                    dims_text(&n.shape)
                )
            })
            .unwrap_or_default();
        return Err(CoreError::Check(format!(
            "the graph needs a {} arena (RLX's memory plan for its {} nodes), more than this \
             machine's memory, {}{note}",
            human(plan.arena_size as u64),
            graph.len(),
            limit.describe()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::{f32s, limit};

    fn matmul_graph(dtype: DType, out: &[usize]) -> Graph {
        let mut g = Graph::new("t");
        let a = g.input("a", Shape::new(&[64, 64], DType::F32));
        let b = g.input("b", Shape::new(&[64, 64], DType::F32));
        let ca = g.add_node(
            Op::Cast { to: dtype },
            vec![a],
            Shape::new(&[64, 64], dtype),
        );
        let cb = g.add_node(
            Op::Cast { to: dtype },
            vec![b],
            Shape::new(&[64, 64], dtype),
        );
        let mm = g.add_node(Op::MatMul, vec![ca, cb], Shape::new(out, dtype));
        g.node_mut(mm).name = Some("aten.mm".into());
        let o = g.add_node(
            Op::Cast { to: DType::F32 },
            vec![mm],
            Shape::new(out, DType::F32),
        );
        g.set_outputs(vec![o]);
        g
    }

    #[test]
    fn known_crashing_kernels_are_refused_naming_node_op_and_dtype() {
        for dtype in [DType::I8, DType::U8, DType::I16, DType::Bool] {
            let err = check_graph(&matmul_graph(dtype, &[64, 64]), &limit(u64::MAX)).unwrap_err();
            assert!(err.is_check(), "refused before RLX sees it: {err}");
            let m = err.message();
            let want =
                "node %4 \"aten.mm\" (MatMul): refused before running: RLX 0.2.19's MatMul kernel";
            assert!(
                m.starts_with(want) && m.contains(&format!("({} here)", dtype_name(dtype))),
                "{m}"
            );
        }
        check_graph(&matmul_graph(DType::F32, &[64, 64]), &limit(u64::MAX)).unwrap();
        check_graph(&matmul_graph(DType::I64, &[64, 64]), &limit(u64::MAX)).unwrap();
    }

    #[test]
    fn kernels_inside_a_branch_are_checked_too() {
        let branch = |dtype: DType| {
            let mut g = matmul_graph(dtype, &[64, 64]);
            g.name = "branch".into();
            g
        };
        let mut g = Graph::new("t");
        let p = g.input("p", Shape::new(&[], DType::Bool));
        let x = g.input("x", f32s(&[64, 64]));
        let op = Op::If {
            then_branch: Box::new(branch(DType::I8)),
            else_branch: Box::new(branch(DType::F32)),
        };
        let y = g.add_node(op, vec![p, x], f32s(&[64, 64]));
        g.set_outputs(vec![y]);
        let err = check_nodes(&g, &limit(u64::MAX), "").unwrap_err();
        assert!(
            err.message().starts_with(
                "node %2 (If), in its body: node %4 \"aten.mm\" (MatMul): refused before running"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_declared_shape_smaller_than_the_operands_give_is_refused() {
        let err = check_graph(&matmul_graph(DType::F32, &[1]), &limit(u64::MAX)).unwrap_err();
        assert!(err.is_check());
        assert!(
            err.message().starts_with(
                "node %4 \"aten.mm\" (MatMul) declares F32 [1] but its operands give F32 [64, 64]"
            ),
            "{err}"
        );
    }

    #[test]
    fn operands_the_op_cannot_take_are_refused() {
        let mut g = Graph::new("t");
        let a = g.input("a", f32s(&[4, 8]));
        let b = g.input("b", f32s(&[9, 4]));
        let mm = g.add_node(Op::MatMul, vec![a, b], f32s(&[4, 4]));
        g.set_outputs(vec![mm]);
        let err = check_graph(&g, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.is_check()
                && err.message().starts_with(
                    "node %2 (MatMul): its operands (F32 [4, 8], F32 [9, 4]) are not valid for the op"
                ),
            "{err}"
        );
    }

    #[test]
    fn an_arena_larger_than_memory_is_refused_though_each_tensor_fits() {
        // Two 1 MiB inputs and their 1 MiB sum are live together: about 3 MiB of arena.
        let mut g = Graph::new("t");
        let a = g.input("a", f32s(&[512, 512]));
        let b = g.input("b", f32s(&[512, 512]));
        let s = g.add_node(
            Op::Binary(rlx_ir::op::BinaryOp::Add),
            vec![a, b],
            f32s(&[512, 512]),
        );
        g.set_outputs(vec![s]);
        let err = check_graph(&g, &limit(2 << 20)).unwrap_err();
        let m = err.message();
        assert!(
            err.is_check()
                && m.contains("arena (RLX's memory plan for its 3 nodes), more than this machine's memory, 2.0 MiB")
                && m.contains("its largest tensor is node %0"),
            "{m}"
        );
        check_graph(&g, &limit(4 << 20)).unwrap();
    }

    #[test]
    fn a_constant_must_fill_its_shape() {
        let mut g = Graph::new("t");
        let c = g.add_node(Op::Constant { data: vec![0; 12] }, vec![], f32s(&[4]));
        g.set_outputs(vec![c]);
        let err = check_graph(&g, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.message()
                == "node %0 (Constant): a F32 [4] constant holds 16 bytes, but its data has 12",
            "{err}"
        );
    }

    #[test]
    fn a_malformed_hir_is_refused_before_rlx_reads_it() {
        let program = |nodes: &str, outputs: &str| {
            format!(
                r#"{{"name": "t", "inputs": [{{"name": "x", "shape": {{"dims": [{{"Static": 4}}], "dtype": "F32"}}}}],
                   "params": [], "nodes": [{nodes}], "outputs": [{outputs}]}}"#
            )
        };
        let relu = r#"{"id": "r", "op": {"Activation": "Relu"}, "inputs": ["x"],
                       "shape": {"dims": [{"Static": 4}], "dtype": "F32"}}"#;
        let json = crate::program::program_to_hir_json(&program(relu, r#""r""#)).unwrap();
        let hir = rlx_ir::serialize::hir_from_json(&json).unwrap();
        check_hir(&hir, &limit(u64::MAX)).unwrap();
        // A node reading one defined after it, an output that is no node, an absurd shape.
        let forward = json.replacen("\"inputs\":[0]", "\"inputs\":[1]", 1);
        assert_ne!(forward, json);
        let hir = rlx_ir::serialize::hir_from_json(&forward).unwrap();
        let err = check_hir(&hir, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.message()
                .contains("takes h1, which is not defined before it"),
            "{err}"
        );
        let mut hir = rlx_ir::serialize::hir_from_json(&json).unwrap();
        hir.outputs = vec![rlx_ir::hir::HirNodeId(7)];
        let err = check_hir(&hir, &limit(u64::MAX)).unwrap_err();
        assert_eq!(
            err.message(),
            "graph output h7 is not a node of the HIR (2 nodes)"
        );
        let huge = relu.replace(
            r#"{"Static": 4}"#,
            r#"{"Static": 4294967296}, {"Static": 4294967296}"#,
        );
        let json = crate::program::program_to_hir_json(&program(&huge, r#""r""#)).unwrap();
        let hir = rlx_ir::serialize::hir_from_json(&json).unwrap();
        let err = check_hir(&hir, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.message()
                .starts_with("node h1 (Activation): F32 [4294967296, 4294967296]"),
            "{err}"
        );
    }

    #[test]
    fn two_inputs_of_one_name_are_refused() {
        let mut g = Graph::new("t");
        let a = g.input("x", f32s(&[2]));
        let b = g.input("x", f32s(&[2]));
        let s = g.add_node(
            Op::Binary(rlx_ir::op::BinaryOp::Add),
            vec![a, b],
            f32s(&[2]),
        );
        g.set_outputs(vec![s]);
        let err = check_graph(&g, &limit(u64::MAX)).unwrap_err();
        assert_eq!(err.message(), "the graph declares two inputs named \"x\"");
    }

    #[test]
    fn a_bool_graph_output_is_refused() {
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&[4]));
        let b = g.add_node(
            Op::Cast { to: DType::Bool },
            vec![x],
            Shape::new(&[4], DType::Bool),
        );
        g.set_outputs(vec![b]);
        let err = check_graph(&g, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.is_check()
                && err
                    .message()
                    .starts_with("graph output 0 (node %1 (Cast)) is Bool: refused before running"),
            "{err}"
        );
        let f = g.add_node(Op::Cast { to: DType::F32 }, vec![b], f32s(&[4]));
        g.set_outputs(vec![f]);
        check_graph(&g, &limit(u64::MAX)).unwrap();
    }
}
