//! Baked indices and slices against the shapes they address (part of [`crate::graph_check`]'s graph
//! check, run on every node before RLX compiles the graph).
//!
//! RLX's kernels trust their indices: `Gather` copies the row an index names whatever it is (past
//! the table it reads other memory or zeros, a negative index reads row 0), `Narrow`/`Slice` read
//! `start..start + len` of their axis unchecked, and the ONNX-style gathers and scatters clamp an
//! index that is out of range to the nearest row. Our lowering never bakes such an index (a value
//! torch refuses stays an error), so only a hand-edited or foreign model file has one; it is
//! refused here, naming the node, the op, the axis, the index and its bound.
//!
//! What is checked (the range each kernel reads correctly):
//! * `Narrow {axis, start, len}`: `start + len <= n` (n the axis' size);
//! * `Slice {axis, start, len, step}`: every position `start + j*step`, `j < len`, in `[0, n)`;
//! * `Gather {axis}`, `ScatterAdd {axis}`, `ScatterElements {axis}`: each index in `[0, n)`
//!   (Gather reads a negative index as 0 and ScatterElements writes it at 0: no wrap);
//! * `GatherElements {axis}`: each index in `[-n, n)` (the kernel wraps a negative one);
//! * `GatherNd`, `ScatterNd`: component `m` of each index tuple in `[-d, d)`, `d` the size of the
//!   axis it addresses.
//!
//! An index is *baked* when it is a `Constant`, possibly through `Reshape` and `Cast` nodes (which
//! keep its values in flat order). Indices computed at run time are not bounded here: the host
//! checks the graph inputs that feed an index (`bundle/ranges.py`, docs/usage.md).

use rlx_ir::{DType, Dim, Graph, Node, NodeId, Op};

use crate::dtype_name;
use crate::error::CoreError;
use crate::sizing::dims_text;

/// The static dims of node `id` (None if one is dynamic: `check_shape` refuses those first).
fn dims_of(graph: &Graph, id: NodeId) -> Option<Vec<usize>> {
    graph
        .node(id)
        .shape
        .dims()
        .iter()
        .map(|d| match d {
            Dim::Static(n) => Some(*n),
            Dim::Dynamic(_) => None,
        })
        .collect()
}

/// `F32 [10, 4]`, an operand for messages.
fn operand_text(graph: &Graph, id: NodeId) -> String {
    let shape = &graph.node(id).shape;
    format!("{} {}", dtype_name(shape.dtype()), dims_text(shape))
}

/// The values of little-endian `data` of `dtype` as f64 (exact for every index a tensor can
/// hold); None for dtypes no index is stored in. Empty data reads as `count` zeros (RLX's rule).
fn decode(data: &[u8], dtype: DType, count: usize) -> Option<Vec<f64>> {
    if data.is_empty() {
        return Some(vec![0.0; count]);
    }
    fn each<const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        data.chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect()
    }
    Some(match dtype {
        DType::F32 => each(data, |b| f32::from_le_bytes(b) as f64),
        DType::F64 => each(data, f64::from_le_bytes),
        DType::I64 => each(data, |b| i64::from_le_bytes(b) as f64),
        DType::I32 => each(data, |b| i32::from_le_bytes(b) as f64),
        DType::U32 => each(data, |b| u32::from_le_bytes(b) as f64),
        DType::I16 => each(data, |b| i16::from_le_bytes(b) as f64),
        DType::I8 => each(data, |b: [u8; 1]| b[0] as i8 as f64),
        DType::U8 | DType::Bool => each(data, |b: [u8; 1]| b[0] as f64),
        _ => return None,
    })
}

/// The values of a baked index: a `Constant`, through `Reshape`s and `Cast`s (flat order kept;
/// a cast to an integer dtype truncates toward zero, as the kernels read a float index).
/// Returns the values and the constant node they come from.
fn baked(graph: &Graph, mut id: NodeId) -> Option<(Vec<f64>, NodeId)> {
    let mut to_integer = false;
    for _ in 0..64 {
        let node = graph.node(id);
        match &node.op {
            Op::Constant { data } => {
                let count = node.shape.num_elements()?;
                let mut values = decode(data, node.shape.dtype(), count)?;
                if to_integer {
                    values.iter_mut().for_each(|v| *v = v.trunc());
                }
                return Some((values, id));
            }
            Op::Reshape { .. } => id = *node.inputs.first()?,
            Op::Cast { to } => {
                to_integer |= !matches!(to, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
                id = *node.inputs.first()?;
            }
            _ => return None,
        }
    }
    None
}

/// The first baked value outside `[lo, hi)` (as the kernel reads it: truncated toward zero; NaN is
/// outside every range), with its flat position; `bound(position)` gives (lo, hi) per position.
fn first_outside(values: &[f64], bound: impl Fn(usize) -> (i128, i128)) -> Option<(usize, f64)> {
    values.iter().enumerate().find_map(|(p, &v)| {
        let (lo, hi) = bound(p);
        let t = v.trunc();
        let inside = t.is_finite() && t >= lo as f64 && t < hi as f64;
        (!inside).then_some((p, v))
    })
}

fn show(v: f64) -> String {
    if v.fract() == 0.0 && v.is_finite() {
        format!("{}", v as i128)
    } else {
        format!("{v}")
    }
}

/// An index operand's range on one axis: Err naming the node, the index, its position and bound.
fn check_axis_index(
    graph: &Graph,
    node: &Node,
    what: &str,
    operand: usize,
    table: usize,
    axis: usize,
    wraps: bool,
) -> Result<(), CoreError> {
    let (Some(&idx), Some(&data)) = (node.inputs.get(operand), node.inputs.get(table)) else {
        return Ok(());
    };
    let (Some(dims), Some((values, source))) = (dims_of(graph, data), baked(graph, idx)) else {
        return Ok(());
    };
    let Some(&n) = dims.get(axis) else {
        return Ok(());
    };
    let (lo, hi) = (if wraps { -(n as i128) } else { 0 }, n as i128);
    if let Some((p, v)) = first_outside(&values, |_| (lo, hi)) {
        return Err(CoreError::Check(format!(
            "{what}: baked index {} (position {p} of {}, input {operand}) is outside [{lo}, {hi}), \
             the range of axis {axis} of input {table} ({}): RLX would read or write outside the \
             tensor",
            show(v),
            node_label(graph, source),
            operand_text(graph, data)
        )));
    }
    Ok(())
}

/// `GatherNd`/`ScatterNd`: component m of each index tuple (the indices' last axis, length k)
/// addresses axis `batch + m` of the data.
fn check_tuple_index(
    graph: &Graph,
    node: &Node,
    what: &str,
    batch: usize,
) -> Result<(), CoreError> {
    let (Some(&data), Some(&idx)) = (node.inputs.first(), node.inputs.get(1)) else {
        return Ok(());
    };
    let (Some(dims), Some(idx_dims), Some((values, source))) =
        (dims_of(graph, data), dims_of(graph, idx), baked(graph, idx))
    else {
        return Ok(());
    };
    let k = idx_dims.last().copied().unwrap_or(1).max(1);
    if dims.len() < batch + k {
        return Ok(()); // malformed operands: RLX's own shape rules report them
    }
    let size = |p: usize| dims[batch + p % k] as i128;
    if let Some((p, v)) = first_outside(&values, |p| (-size(p), size(p))) {
        let m = p % k;
        return Err(CoreError::Check(format!(
            "{what}: baked index {} (position {p} of {}, component {m} of its index tuple) is \
             outside [{}, {}), the range of axis {} of input 0 ({}): RLX would read or write \
             outside the tensor",
            show(v),
            node_label(graph, source),
            -size(p),
            size(p),
            batch + m,
            operand_text(graph, data)
        )));
    }
    Ok(())
}

fn node_label(graph: &Graph, id: NodeId) -> String {
    let n = graph.node(id);
    match n.name.as_deref().filter(|s| !s.is_empty() && *s != "mir") {
        Some(name) => format!("node {id} {name:?} ({:?})", n.op.kind()),
        None => format!("node {id} ({:?})", n.op.kind()),
    }
}

/// A signed axis attribute normalized against `rank` (None when out of range).
fn axis_of(axis: i32, rank: usize) -> Option<usize> {
    let a = if axis < 0 {
        axis as i64 + rank as i64
    } else {
        axis as i64
    };
    (0..rank as i64).contains(&a).then_some(a as usize)
}

/// A `Narrow`/`Slice` reading positions `start + j*step`, `j < len`, of an axis of size `n`.
fn check_window(
    graph: &Graph,
    node: &Node,
    what: &str,
    (axis, start, len, step): (usize, usize, usize, i64),
) -> Result<(), CoreError> {
    let Some(&x) = node.inputs.first() else {
        return Ok(());
    };
    let Some(&n) = dims_of(graph, x).as_ref().and_then(|d| d.get(axis)) else {
        return Ok(());
    };
    if len == 0 {
        return Ok(());
    }
    let first = start as i128;
    let last = first + (len as i128 - 1) * step as i128;
    let n = n as i128;
    if (0..n).contains(&first) && (0..n).contains(&last) {
        return Ok(());
    }
    let reads = if step == 1 {
        format!("reads positions [{first}, {}) of axis {axis}", last + 1)
    } else {
        format!("reads positions {first} to {last} (step {step}) of axis {axis}")
    };
    Err(CoreError::Check(format!(
        "{what}: start {start}, length {len} {reads}, which has {n} elements in its input ({}): \
         RLX would read past the tensor",
        operand_text(graph, x)
    )))
}

/// Refuse `node` when a baked index or slice of it addresses outside the shapes it reads.
pub fn check_node(graph: &Graph, node: &Node, what: &str) -> Result<(), CoreError> {
    let rank = |i: usize| {
        node.inputs
            .get(i)
            .map(|&id| graph.node(id).shape.rank())
            .unwrap_or(0)
    };
    match &node.op {
        Op::Narrow { axis, start, len } => {
            check_window(graph, node, what, (*axis, *start, *len, 1))
        }
        Op::Slice {
            axis,
            start,
            len,
            step,
        } => check_window(graph, node, what, (*axis, *start, *len, *step)),
        Op::Gather { axis } => check_axis_index(graph, node, what, 1, 0, *axis, false),
        Op::GatherElements { axis } => match axis_of(*axis, rank(0)) {
            Some(a) => check_axis_index(graph, node, what, 1, 0, a, true),
            None => Ok(()),
        },
        Op::ScatterElements { axis, .. } => match axis_of(*axis, rank(0)) {
            Some(a) => check_axis_index(graph, node, what, 1, 0, a, false),
            None => Ok(()),
        },
        Op::ScatterAdd { axis } => {
            // Inputs [updates, indices]; the destination is the node's own shape.
            let Some(&idx) = node.inputs.get(1) else {
                return Ok(());
            };
            let Some(&n) = node.shape.dims().get(*axis).and_then(|d| match d {
                Dim::Static(n) => Some(n),
                Dim::Dynamic(_) => None,
            }) else {
                return Ok(());
            };
            let Some((values, source)) = baked(graph, idx) else {
                return Ok(());
            };
            match first_outside(&values, |_| (0, n as i128)) {
                Some((p, v)) => Err(CoreError::Check(format!(
                    "{what}: baked index {} (position {p} of {}, input 1) is outside [0, {n}), \
                     the range of axis {axis} of its output: RLX would write outside the tensor",
                    show(v),
                    node_label(graph, source)
                ))),
                None => Ok(()),
            }
        }
        Op::GatherNd { batch_dims } => {
            check_tuple_index(graph, node, what, (*batch_dims).max(0) as usize)
        }
        Op::ScatterNd { .. } => check_tuple_index(graph, node, what, 0),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::Shape;

    fn f32s(dims: &[usize]) -> Shape {
        Shape::new(dims, DType::F32)
    }

    /// A [10, 4] table gathered at baked `idx` (I64 [len]) along axis 0.
    fn gather_graph(idx: &[i64]) -> Graph {
        let mut g = Graph::new("t");
        let table = g.input("table", f32s(&[10, 4]));
        let data = idx.iter().flat_map(|v| v.to_le_bytes()).collect();
        let c = g.add_node(
            Op::Constant { data },
            vec![],
            Shape::new(&[idx.len()], DType::I64),
        );
        let r = g.add_node(
            Op::Reshape {
                new_shape: vec![1, idx.len() as i64],
            },
            vec![c],
            Shape::new(&[1, idx.len()], DType::I64),
        );
        let y = g.add_node(
            Op::Gather { axis: 0 },
            vec![table, r],
            f32s(&[1, idx.len(), 4]),
        );
        g.node_mut(y).name = Some("aten.embedding".into());
        g.set_outputs(vec![y]);
        g
    }

    fn check(g: &Graph) -> Result<(), CoreError> {
        for node in g.nodes() {
            check_node(g, node, &format!("node {}", node.id))?;
        }
        Ok(())
    }

    #[test]
    fn a_baked_gather_index_past_the_table_is_refused() {
        check(&gather_graph(&[0, 9, 3])).unwrap();
        let err = check(&gather_graph(&[2, 1000])).unwrap_err();
        assert!(err.is_check());
        assert_eq!(
            err.message(),
            "node %3: baked index 1000 (position 1 of node %1 (Constant), input 1) is outside \
             [0, 10), the range of axis 0 of input 0 (F32 [10, 4]): RLX would read or write \
             outside the tensor"
        );
        // Gather does not wrap: -1 would read row 0.
        let err = check(&gather_graph(&[-1])).unwrap_err();
        assert!(
            err.message().contains("baked index -1 (position 0"),
            "{err}"
        );
    }

    fn window(op: Op, n: usize, out: usize) -> Graph {
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&[2, n]));
        let y = g.add_node(op, vec![x], f32s(&[2, out]));
        g.set_outputs(vec![y]);
        g
    }

    #[test]
    fn a_narrow_or_slice_past_the_axis_is_refused() {
        let narrow = |start, len| Op::Narrow {
            axis: 1,
            start,
            len,
        };
        check(&window(narrow(6, 2), 8, 2)).unwrap();
        let err = check(&window(narrow(7, 2), 8, 2)).unwrap_err();
        assert_eq!(
            err.message(),
            "node %1: start 7, length 2 reads positions [7, 9) of axis 1, which has 8 elements in \
             its input (F32 [2, 8]): RLX would read past the tensor"
        );
        let slice = |start, len, step| Op::Slice {
            axis: 1,
            start,
            len,
            step,
        };
        check(&window(slice(0, 4, 2), 8, 4)).unwrap();
        check(&window(slice(7, 8, -1), 8, 8)).unwrap();
        check(&window(slice(1, 4, 2), 8, 4)).unwrap();
        let err = check(&window(slice(1, 4, 2), 7, 4)).unwrap_err();
        assert!(
            err.message().contains(
                "start 1, length 4 reads positions 1 to 7 (step 2) of axis 1, which has 7"
            ),
            "{err}"
        );
        check(&window(slice(7, 9, -1), 8, 9)).unwrap_err();
    }

    #[test]
    fn onnx_style_gathers_take_negative_indices_in_range() {
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&[3, 5]));
        let bytes = |v: &[i64]| v.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        let ok = g.add_node(
            Op::Constant {
                data: bytes(&[-5, 4]),
            },
            vec![],
            Shape::new(&[1, 2], DType::I64),
        );
        let bad = g.add_node(
            Op::Constant {
                data: bytes(&[0, -6]),
            },
            vec![],
            Shape::new(&[1, 2], DType::I64),
        );
        let a = g.add_node(Op::GatherElements { axis: -1 }, vec![x, ok], f32s(&[1, 2]));
        let b = g.add_node(Op::GatherElements { axis: 1 }, vec![x, bad], f32s(&[1, 2]));
        g.set_outputs(vec![a, b]);
        let err = check(&g).unwrap_err();
        assert!(
            err.message()
                .starts_with("node %4: baked index -6 (position 1 of node %2 (Constant)")
                && err
                    .message()
                    .contains("outside [-5, 5), the range of axis 1"),
            "{err}"
        );
    }

    #[test]
    fn gather_nd_bounds_each_component_of_a_tuple() {
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&[2, 6]));
        let data = [1i64, 5, 1, 6]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let c = g.add_node(
            Op::Constant { data },
            vec![],
            Shape::new(&[2, 2], DType::I64),
        );
        let y = g.add_node(Op::GatherNd { batch_dims: 0 }, vec![x, c], f32s(&[2]));
        g.set_outputs(vec![y]);
        let err = check(&g).unwrap_err();
        assert!(
            err.message()
                .contains("baked index 6 (position 3 of node %1 (Constant), component 1")
                && err.message().contains("axis 1 of input 0 (F32 [2, 6])"),
            "{err}"
        );
    }
}
