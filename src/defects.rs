//! The RLX defect catalogue: (op, dtype) pairs whose RLX 0.2.19 CPU kernel corrupts the heap,
//! segfaults or hangs whatever the shapes ([`KERNEL_DEFECTS`], found by
//! `scripts/probe_core_safety.py`; docs/rlx-defects.md lists them), and the graph outputs RLX
//! reads past (Bool/I8/U8/I16, read with 4 bytes per element). None of these can be caught once
//! they happen, so the graph checks ([`crate::graph_check`]) refuse them first:
//! [`check_kernel`] for each node, nested bodies included, and [`check_output`] for each output.
//!
//! A refusal is a [`CoreError::Check`]: our lowering never emits a listed pair
//! (lower/rlx/workarounds.py routes around each), so only a hand-edited or foreign model file
//! reaches one, and for that file it is bad input.

use std::sync::OnceLock;

use rlx_ir::{DType, Graph, Node, Op};

use crate::dtype_name;
use crate::error::CoreError;

/// The op kind's name (`rlx_ir::OpKind`'s Debug form): what [`KernelDefect::op`] names.
pub(crate) fn op_kind(op: &Op) -> String {
    format!("{:?}", op.kind())
}

/// Which operands of a node a [`KernelDefect`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// The node's own (output) dtype.
    Output,
    /// Input `i`'s dtype.
    Input(usize),
}

/// An (op, dtype) pair whose RLX 0.2.19 CPU kernel takes the process down (heap
/// corruption, an abort, a hang), found by `scripts/probe_core_safety.py`.
#[derive(Debug)]
pub struct KernelDefect {
    /// The op kind (`rlx_ir::OpKind`'s name).
    pub op: &'static str,
    /// The operands whose dtype the defect depends on (any one of them matching).
    pub operands: &'static [Operand],
    pub dtypes: &'static [DType],
    /// What the kernel does, completing "RLX 0.2.19's <op> kernel ...".
    pub what: &'static str,
}

/// The dtypes carried across the boundary as F32 are the ones these kernels corrupt.
const NARROW: &[DType] = crate::boundary::NARROW;
const BYTES: &[DType] = &[DType::Bool, DType::I8, DType::U8];
const I16: &[DType] = &[DType::I16];
/// Every input and the output.
const ALL: &[Operand] = &[
    Operand::Output,
    Operand::Input(0),
    Operand::Input(1),
    Operand::Input(2),
    Operand::Input(3),
    Operand::Input(4),
];
const CORRUPTS: &str = "corrupts memory on 1- and 2-byte data";

/// `op` with every input and its output checked against `dtypes`.
const fn all(op: &'static str, dtypes: &'static [DType], what: &'static str) -> KernelDefect {
    KernelDefect {
        op,
        operands: ALL,
        dtypes,
        what,
    }
}

/// Every (op, dtype) pair `scripts/probe_core_safety.py` found to take the process down on RLX
/// 0.2.19 (heap corruption, a segfault or a hang from 64 elements per axis; at 4 most of them
/// write past their slot into arena padding unnoticed): refused before compiling. Pairs that only
/// panic (a caught error) are left to RLX. Op kinds the probe does not cover are not listed.
pub static KERNEL_DEFECTS: &[KernelDefect] = &[
    all("Activation", NARROW, CORRUPTS),
    all("ArgMax", NARROW, CORRUPTS),
    all("ArgMin", NARROW, CORRUPTS),
    all("Attention", NARROW, CORRUPTS),
    all("BatchNormInference", NARROW, CORRUPTS),
    all("Binary", NARROW, CORRUPTS),
    all("Clamp", &[DType::Bool, DType::I8, DType::I16], CORRUPTS),
    all("Conv", NARROW, CORRUPTS),
    all("Conv3d", NARROW, CORRUPTS),
    all("ConvTranspose2d", NARROW, CORRUPTS),
    all("ConvTranspose3d", NARROW, CORRUPTS),
    all("CumProd", NARROW, CORRUPTS),
    all("Cumsum", NARROW, CORRUPTS),
    all("GroupNorm", NARROW, CORRUPTS),
    all("LayerNorm", NARROW, CORRUPTS),
    all("MatMul", NARROW, CORRUPTS),
    all("Pool", NARROW, CORRUPTS),
    all("Reduce", NARROW, CORRUPTS),
    all("RmsNorm", NARROW, CORRUPTS),
    all("RoundToFormat", NARROW, CORRUPTS),
    all("Slice", NARROW, CORRUPTS),
    all("Softmax", NARROW, CORRUPTS),
    all("Sort", NARROW, CORRUPTS),
    all("Trilu", NARROW, CORRUPTS),
    all("Rope", BYTES, "corrupts memory on 1-byte data"),
    all("Expand", I16, "corrupts memory on I16 data"),
    all("Transpose", I16, "corrupts memory on I16 data"),
    KernelDefect {
        op: "Gather",
        operands: &[Operand::Output, Operand::Input(0)],
        dtypes: BYTES,
        what: "corrupts memory on 1-byte data",
    },
    KernelDefect {
        op: "Where",
        operands: &[Operand::Output, Operand::Input(1), Operand::Input(2)],
        dtypes: NARROW,
        what: "corrupts memory on 1- and 2-byte values",
    },
    KernelDefect {
        op: "ScatterElements",
        operands: &[Operand::Output, Operand::Input(0), Operand::Input(2)],
        dtypes: NARROW,
        what: CORRUPTS,
    },
    KernelDefect {
        op: "ScatterNd",
        operands: &[Operand::Output, Operand::Input(0), Operand::Input(2)],
        dtypes: NARROW,
        what: CORRUPTS,
    },
    KernelDefect {
        op: "GatherElements",
        operands: &[Operand::Input(1)],
        dtypes: NARROW,
        what: "corrupts memory with a 1- or 2-byte index",
    },
];

/// The probe (`scripts/probe_core_safety.py`) sets this to run RLX's kernels unguarded, so the
/// table above can be re-derived after an RLX upgrade. Nothing else should set it.
pub const RAW_KERNELS_ENV: &str = "RLX_TORCH_IMPORT_PROBE_RAW_KERNELS";

fn raw_kernels() -> bool {
    static RAW: OnceLock<bool> = OnceLock::new();
    *RAW.get_or_init(|| std::env::var_os(RAW_KERNELS_ENV).is_some_and(|v| v == "1"))
}

/// The first [`KERNEL_DEFECTS`] row `node` falls in, and the dtype that put it there.
fn kernel_defect(graph: &Graph, node: &Node) -> Option<(&'static KernelDefect, DType)> {
    let kind = op_kind(&node.op);
    KERNEL_DEFECTS
        .iter()
        .filter(|d| d.op == kind)
        .find_map(|d| {
            d.operands.iter().find_map(|o| {
                let dtype = match o {
                    Operand::Output => node.shape.dtype(),
                    Operand::Input(i) => graph.node(*node.inputs.get(*i)?).shape.dtype(),
                };
                d.dtypes.contains(&dtype).then_some((d, dtype))
            })
        })
}

/// Refuse `node` (`what` names it in the message) when it falls in a [`KERNEL_DEFECTS`] row,
/// unless the probe runs RLX's kernels unguarded ([`RAW_KERNELS_ENV`]).
pub(crate) fn check_kernel(graph: &Graph, node: &Node, what: &str) -> Result<(), CoreError> {
    if !raw_kernels()
        && let Some((defect, dtype)) = kernel_defect(graph, node)
    {
        return Err(CoreError::Check(format!(
            "{what}: refused before running: RLX {}'s {} kernel {} ({} here)",
            crate::RLX_VERSION,
            defect.op,
            defect.what,
            dtype_name(dtype)
        )));
    }
    Ok(())
}

/// Refuse graph output `index` (the node `what` names) of `dtype` when RLX reads it past its
/// buffer: a 1- or 2-byte dtype, read with 4 bytes per element.
pub(crate) fn check_output(index: usize, what: &str, dtype: DType) -> Result<(), CoreError> {
    if !raw_kernels() && NARROW.contains(&dtype) {
        return Err(CoreError::Check(format!(
            "graph output {index} ({what}) is {}: refused before running: RLX {} reads a 1- or \
             2-byte graph output with 4 bytes per element, past its buffer (the importer returns \
             such outputs as F32 through a Cast)",
            dtype_name(dtype),
            crate::RLX_VERSION
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::Shape;

    /// A graph of one `op` node over inputs of `dtypes` (each `[4, 4]`), declared `out`.
    fn one_node(op: Op, dtypes: &[DType], out: DType) -> Graph {
        let mut g = Graph::new("t");
        let inputs = dtypes
            .iter()
            .enumerate()
            .map(|(i, &d)| g.input(format!("x{i}"), Shape::new(&[4, 4], d)))
            .collect();
        let n = g.add_node(op, inputs, Shape::new(&[4, 4], out));
        g.set_outputs(vec![n]);
        g
    }

    /// The catalogue row (op, dtype) the graph's last node falls in.
    fn defect_of(g: &Graph) -> Option<(&'static str, DType)> {
        let node = g.nodes().last().unwrap();
        kernel_defect(g, node).map(|(d, dtype)| (d.op, dtype))
    }

    #[test]
    fn every_row_names_an_rlx_op_kind() {
        for d in KERNEL_DEFECTS {
            let kind: rlx_ir::OpKind =
                serde_json::from_value(serde_json::Value::String(d.op.into()))
                    .unwrap_or_else(|e| panic!("{:?} is not an RLX op kind: {e}", d.op));
            assert_eq!(format!("{kind:?}"), d.op);
            assert!(!d.dtypes.is_empty() && !d.operands.is_empty(), "{d:?}");
        }
    }

    #[test]
    fn a_matmul_on_narrow_data_is_a_defect() {
        for dtype in [DType::Bool, DType::I8, DType::U8, DType::I16] {
            let g = one_node(Op::MatMul, &[dtype, dtype], dtype);
            assert_eq!(defect_of(&g), Some(("MatMul", dtype)));
        }
        for dtype in [DType::F32, DType::I64, DType::F64] {
            assert_eq!(
                defect_of(&one_node(Op::MatMul, &[dtype, dtype], dtype)),
                None
            );
        }
    }

    #[test]
    fn only_the_listed_operands_count() {
        // Where: a Bool condition is fine, 1-byte values are not.
        let g = one_node(
            Op::Where,
            &[DType::Bool, DType::F32, DType::F32],
            DType::F32,
        );
        assert_eq!(defect_of(&g), None);
        let g = one_node(Op::Where, &[DType::Bool, DType::I8, DType::I8], DType::I8);
        assert_eq!(defect_of(&g), Some(("Where", DType::I8)));
        // GatherElements: only a narrow index corrupts memory, not narrow data.
        let op = || Op::GatherElements { axis: 0 };
        assert_eq!(
            defect_of(&one_node(op(), &[DType::I8, DType::I64], DType::I8)),
            None
        );
        let g = one_node(op(), &[DType::F32, DType::I16], DType::F32);
        assert_eq!(defect_of(&g), Some(("GatherElements", DType::I16)));
        // Gather: 1-byte data only.
        let op = || Op::Gather { axis: 0 };
        let g = one_node(op(), &[DType::U8, DType::I64], DType::U8);
        assert_eq!(defect_of(&g), Some(("Gather", DType::U8)));
        assert_eq!(
            defect_of(&one_node(op(), &[DType::I16, DType::I64], DType::I16)),
            None
        );
    }

    #[test]
    fn a_refusal_names_the_node_kernel_and_dtype() {
        let g = one_node(Op::MatMul, &[DType::I8, DType::I8], DType::I8);
        let err = check_kernel(&g, &g.nodes()[2], "node %2 (MatMul)").unwrap_err();
        assert_eq!(
            err,
            CoreError::Check(
                "node %2 (MatMul): refused before running: RLX 0.2.19's MatMul kernel corrupts \
                 memory on 1- and 2-byte data (I8 here)"
                    .into()
            )
        );
        let g = one_node(Op::MatMul, &[DType::F32, DType::F32], DType::F32);
        check_kernel(&g, &g.nodes()[2], "node %2 (MatMul)").unwrap();
    }

    #[test]
    fn a_narrow_graph_output_is_refused() {
        let err = check_output(1, "node %5 (Compare)", DType::Bool).unwrap_err();
        assert_eq!(
            err.message(),
            "graph output 1 (node %5 (Compare)) is Bool: refused before running: RLX 0.2.19 reads \
             a 1- or 2-byte graph output with 4 bytes per element, past its buffer (the importer \
             returns such outputs as F32 through a Cast)"
        );
        for dtype in [DType::I8, DType::U8, DType::I16] {
            assert!(
                check_output(0, "node %1 (Cast)", dtype).is_err(),
                "{dtype:?}"
            );
        }
        for dtype in [DType::F32, DType::I32, DType::I64, DType::F64] {
            check_output(0, "node %1 (Cast)", dtype).unwrap();
        }
    }
}
