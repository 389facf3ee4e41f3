//! Checks every graph passes before RLX compiles it or allocates anything.
//!
//! RLX trusts its graph: a shape whose byte size overflows wraps to a tiny arena the
//! kernels then write past; one larger than the machine aborts the process when the
//! arena allocation fails (`AlignedBytes::zeroed` → `handle_alloc_error`); a declared
//! output smaller than its operands give is overrun; and some kernels corrupt the heap
//! on some dtypes whatever the shapes (`scripts/probe_core_safety.py` finds them;
//! docs/rlx-defects.md lists them). None of these can be caught once they happen, so
//! [`check_hir`] and [`check_graph`] refuse them first:
//!
//! * every node's shape is static, its element count and byte size fit (checked
//!   arithmetic), and no single tensor is larger than the machine's memory
//!   ([`machine_memory`]);
//! * the arena RLX's CPU backend plans for the graph (its own planner,
//!   `plan_memory_native_in_order`, run on the graph before fusion) fits that memory too;
//! * the graph is well formed (inputs defined before use, as many as the op takes),
//!   each declared shape is the one its operands give (RLX's own shape rules), and a
//!   `Constant` holds as many bytes as its shape;
//! * no node, nested bodies (`If`, `While`, `Scan`) included, is an (op, dtype) pair of
//!   [`KERNEL_DEFECTS`], and no graph output is Bool/I8/U8/I16 (RLX reads those with 4 bytes
//!   per element, past the buffer).
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
use std::sync::OnceLock;

use rlx_ir::hir::{HirModule, HirOp};
use rlx_ir::{DType, Dim, Graph, Node, Op, Shape};

use crate::dtype_name;
use crate::error::CoreError;

/// The memory a single tensor, and the whole arena, may take on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    /// Where the number comes from, for messages.
    pub source: String,
}

impl MemoryLimit {
    fn describe(&self) -> String {
        format!("{} ({})", human(self.bytes), self.source)
    }
}

/// `n` bytes with a binary unit (`24.7 GiB (26520123392 bytes)`).
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    format!("{value:.1} {unit} ({n} bytes)")
}

/// Without a memory size to read (not Linux): only the user address space of x86-64
/// and arm64 (2^47 bytes) bounds a tensor, which still refuses every overflowing size.
const ADDRESS_SPACE: u64 = 1 << 47;

/// The machine's memory: MemTotal from /proc/meminfo, lowered to the cgroup's memory limit
/// (v2 `memory.max`, v1 `memory.limit_in_bytes`) when one is set below it. Read once.
pub fn machine_memory() -> &'static MemoryLimit {
    static LIMIT: OnceLock<MemoryLimit> = OnceLock::new();
    LIMIT.get_or_init(detect_memory)
}

fn detect_memory() -> MemoryLimit {
    let Some(total) = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| meminfo_total(&t))
    else {
        return MemoryLimit {
            bytes: ADDRESS_SPACE,
            source: "no /proc/meminfo: the 2^47-byte user address space".into(),
        };
    };
    let mut limit = MemoryLimit {
        bytes: total,
        source: "MemTotal in /proc/meminfo".into(),
    };
    for (path, text) in cgroup_limits() {
        if let Some(bytes) = text.trim().parse::<u64>().ok().filter(|b| *b < limit.bytes) {
            limit = MemoryLimit {
                bytes,
                source: format!("the cgroup memory limit in {path}"),
            };
        }
    }
    limit
}

/// MemTotal of /proc/meminfo text, in bytes.
fn meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// (path, contents) of the cgroup memory limit files that exist for this process.
fn cgroup_limits() -> Vec<(String, String)> {
    let mut paths = vec![
        "/sys/fs/cgroup/memory.max".to_string(),
        "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string(),
    ];
    if let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") {
        for line in own.lines() {
            if let Some(rel) = line.strip_prefix("0::")
                && rel != "/"
            {
                paths.push(format!("/sys/fs/cgroup{rel}/memory.max"));
            }
        }
    }
    paths
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(&p).ok().map(|t| (p, t)))
        .collect()
}

/// A declared graph input or parameter: what `run` / `set_param` must be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDecl {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: DType,
    pub elements: usize,
    pub bytes: usize,
}

impl TensorDecl {
    /// `F32 [2, 3] (6 elements, 24 bytes)`.
    pub fn describe(&self) -> String {
        format!(
            "{} {:?} ({} elements, {} bytes)",
            dtype_name(self.dtype),
            self.dims,
            self.elements,
            self.bytes
        )
    }
}

/// Element count and byte size of `dims` in `dtype`; None when either overflows `usize`.
pub fn tensor_size(dims: &[usize], dtype: DType) -> Option<(usize, usize)> {
    let elements = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
    let bytes = elements.checked_mul(dtype.size_bytes())?;
    Some((elements, bytes))
}

pub(crate) fn dims_text(shape: &Shape) -> String {
    let dims: Vec<String> = shape
        .dims()
        .iter()
        .map(|d| match d {
            Dim::Static(n) => n.to_string(),
            Dim::Dynamic(s) => format!("?{s}"),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// The static dims, element count and bytes of `shape` (a value `what` names), refusing a
/// dynamic dim, an overflowing size and a tensor larger than `limit`.
pub fn check_shape(
    what: &str,
    shape: &Shape,
    limit: &MemoryLimit,
) -> Result<(Vec<usize>, usize, usize), CoreError> {
    let dtype = dtype_name(shape.dtype());
    let mut dims = Vec::with_capacity(shape.rank());
    for d in shape.dims() {
        match d {
            Dim::Static(n) => dims.push(*n),
            Dim::Dynamic(s) => {
                return Err(CoreError::Check(format!(
                    "{what}: {dtype} {} has a dynamic dim (symbol {s}); a graph must be static \
                     (bound to sizes) before it is compiled",
                    dims_text(shape)
                )));
            }
        }
    }
    let Some((elements, bytes)) = tensor_size(&dims, shape.dtype()) else {
        return Err(CoreError::Check(format!(
            "{what}: {dtype} {dims:?} has more elements or bytes than a 64-bit size can count \
             (the product of its dims, times {} bytes per element, overflows)",
            shape.dtype().size_bytes()
        )));
    };
    if bytes as u64 > limit.bytes {
        return Err(CoreError::Check(format!(
            "{what}: {dtype} {dims:?} ({elements} elements) takes {}, more than this machine's \
             memory, {}",
            human(bytes as u64),
            limit.describe()
        )));
    }
    Ok((dims, elements, bytes))
}

/// `node %12 "label" (MatMul)` for messages. ("mir" is the name RLX's HIR lowering gives a
/// node that had none, not a label.)
fn node_text(id: impl std::fmt::Display, name: Option<&str>, op: &str) -> String {
    match name.filter(|n| !n.is_empty() && *n != "mir") {
        Some(n) => format!("node {id} {n:?} ({op})"),
        None => format!("node {id} ({op})"),
    }
}

fn op_kind(op: &Op) -> String {
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
        let dtype = node.shape.dtype();
        if !raw_kernels() && NARROW.contains(&dtype) {
            return Err(CoreError::Check(format!(
                "graph output {i} ({}) is {}: refused before running: RLX {} reads a 1- or 2-byte \
                 graph output with 4 bytes per element, past its buffer (the importer returns such \
                 outputs as F32 through a Cast)",
                node_text(id, node.name.as_deref(), &op_kind(&node.op)),
                dtype_name(dtype),
                crate::RLX_VERSION
            )));
        }
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

    fn limit(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            source: "a test limit".into(),
        }
    }

    fn f32s(dims: &[usize]) -> Shape {
        Shape::new(dims, DType::F32)
    }

    #[test]
    fn reads_memtotal_in_bytes() {
        let text = "MemFree:  100 kB\nMemTotal:       24683652 kB\nSwapTotal: 0 kB\n";
        assert_eq!(meminfo_total(text), Some(24683652 * 1024));
        assert_eq!(meminfo_total("MemFree: 1 kB\n"), None);
        let found = machine_memory();
        assert!(found.bytes > 0 && !found.source.is_empty(), "{found:?}");
    }

    #[test]
    fn sizes_use_checked_arithmetic() {
        assert_eq!(tensor_size(&[2, 3], DType::F64), Some((6, 48)));
        assert_eq!(tensor_size(&[], DType::Bool), Some((1, 1)));
        assert_eq!(tensor_size(&[1 << 31, 1 << 31], DType::F32), None);
        assert_eq!(tensor_size(&[usize::MAX, 2], DType::I8), None);
    }

    #[test]
    fn an_overflowing_shape_is_refused_naming_dims_and_dtype() {
        let shape = f32s(&[1 << 31, 1 << 31]);
        let err = check_shape("node %3 (Relu)", &shape, &limit(u64::MAX)).unwrap_err();
        assert!(err.is_check());
        let m = err.message();
        assert!(
            m.starts_with("node %3 (Relu): F32 [2147483648, 2147483648]")
                && m.contains("overflows"),
            "{m}"
        );
    }

    #[test]
    fn a_tensor_larger_than_memory_is_refused_naming_bytes_and_limit() {
        let err = check_shape("input \"x\"", &f32s(&[1000, 1000]), &limit(1 << 20)).unwrap_err();
        let m = err.message();
        assert!(
            m.contains("F32 [1000, 1000] (1000000 elements)")
                && m.contains("(4000000 bytes)")
                && m.contains("1.0 MiB (1048576 bytes) (a test limit)"),
            "{m}"
        );
        assert_eq!(
            check_shape("x", &f32s(&[256, 1024]), &limit(1 << 20)).unwrap(),
            (vec![256, 1024], 262144, 1 << 20)
        );
    }

    #[test]
    fn a_dynamic_dim_is_refused() {
        let shape = Shape::from_dims(&[Dim::Dynamic(4), Dim::Static(3)], DType::F32);
        let err = check_shape("node %1", &shape, &limit(u64::MAX)).unwrap_err();
        assert!(
            err.message()
                .contains("[?4, 3] has a dynamic dim (symbol 4)"),
            "{err}"
        );
    }

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
    fn human_sizes() {
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(3 << 30), "3.0 GiB (3221225472 bytes)");
    }
}
