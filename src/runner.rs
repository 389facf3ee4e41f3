//! Compile a HIR module on an RLX device (`device.rs`) and run it with raw bytes.
//!
//! Tensors cross this boundary as `(bytes, dtype)` in their native dtype;
//! the Python side owns shapes and numpy conversion. Nothing reaches RLX unchecked:
//! every graph passes `graph_check::check_hir` / `graph_check::check_graph` before RLX
//! compiles or allocates anything, and every parameter and input is checked against its
//! declaration (name, dtype, byte length) before RLX reads it.

use std::collections::{HashMap, HashSet};

use rlx_ir::hir::{HirModule, HirOp};
use rlx_ir::{DType, Graph, Op, Shape};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};

use crate::device;
use crate::dtype_name;
use crate::error::{CoreError, catch};
use crate::graph_check;
use crate::memory::{self, MemoryLimit};
use crate::sizing::{self, TensorDecl};

mod resident;

/// A compiled RLX graph plus the declared shapes of its inputs, parameters and outputs.
pub struct Runner {
    graph: CompiledGraph,
    /// The device the graph was compiled for.
    device: Device,
    /// Run with flush-to-zero / denormals-are-zero (`fpmode`).
    flush_denormals: bool,
    output_dims: Vec<Vec<usize>>,
    output_dtypes: Vec<DType>,
    /// The graph inputs, in declaration order: what `run` must be given.
    inputs: Vec<TensorDecl>,
    /// The parameters by name: what `set_param` may bind.
    params: HashMap<String, TensorDecl>,
    /// Set when RLX panicked part-way through a call: its state may be half-written, so
    /// every later call is refused.
    poisoned: Option<String>,
    /// The inputs the compiled graph still reads, when RLX says (a graph compiled from MIR):
    /// RLX's pre-compile cleanup drops an input nothing reads (a model whose outputs are only
    /// sizes, or that ignores an argument) and then panics when it is fed. `run` checks every
    /// declared input and feeds RLX these. `None`: every declared input (compiled from HIR).
    read: Option<HashSet<String>>,
    /// Inputs held in RLX's arena between runs ([`Runner::bind_resident`]): `run` may leave
    /// them out. By name, the output index whose rows [`Runner::feed_rows`] copies into each.
    resident: HashMap<String, usize>,
    /// Runs so far (started, whether or not they succeeded): a caller that keeps resident inputs
    /// tells from it whether another run came in between (which may have rebound them).
    runs: u64,
}

/// An output's elements as RLX returned them: bytes in its dtype, or `f32` values
/// (the f32 entry point), read as little-endian bytes without another copy.
pub enum OutputData {
    Bytes(Vec<u8>),
    F32(Vec<f32>),
}

impl OutputData {
    /// The little-endian bytes of the elements.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Bytes(b) => b,
            // SAFETY: a `[f32]` is `len * 4` initialized bytes; u8 has no alignment needs.
            Self::F32(v) => unsafe {
                std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len() * 4)
            },
        }
    }
    /// The little-endian bytes of the elements, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Self::Bytes(b) => b,
            // SAFETY: as in `as_bytes`; every byte pattern is a valid f32.
            Self::F32(v) => unsafe {
                std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 4)
            },
        }
    }
}

/// One output tensor: its elements, dtype, dims.
pub type TensorBytes = (OutputData, DType, Vec<usize>);

/// Each output's static dims and dtype; an error names an output left with a dynamic dim.
fn output_layout(outputs: &[(String, Shape)]) -> Result<(Vec<Vec<usize>>, Vec<DType>), CoreError> {
    let mut dims = Vec::new();
    let mut dtypes = Vec::new();
    for (id, shape) in outputs {
        let static_dims = shape
            .dims()
            .iter()
            .map(|d| match d {
                rlx_ir::Dim::Static(n) => Ok(*n),
                rlx_ir::Dim::Dynamic(s) => Err(CoreError::Check(format!(
                    "output {id} has a dynamic dim (symbol {s}); bind it before running"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        dims.push(static_dims);
        dtypes.push(shape.dtype());
    }
    Ok((dims, dtypes))
}

/// The compile options every graph here (and every generated crate) uses.
///
/// `no_weight_concat`: RLX's QKV and gate/up fusions concatenate the separate
/// weight parameters into one on every run (a copy of most of a transformer's
/// weights per call); reading them in place was faster on every benchmark model
/// (docs/design.md, "Compile options").
pub fn compile_options() -> CompileOptions {
    CompileOptions {
        fusion_opts: FusionOptions {
            no_weight_concat: true,
            ..FusionOptions::default()
        },
        ..CompileOptions::default()
    }
}

/// The graph inputs (in order) and parameters (by name) among `(name, shape, is_param)`.
fn declarations<'a>(
    values: impl Iterator<Item = (&'a str, &'a Shape, bool)>,
) -> (Vec<TensorDecl>, HashMap<String, TensorDecl>) {
    let mut inputs = Vec::new();
    let mut params = HashMap::new();
    for (name, shape, is_param) in values {
        let dims: Vec<usize> = shape
            .dims()
            .iter()
            .map(|d| match d {
                rlx_ir::Dim::Static(n) => *n,
                // check_hir / check_graph refuse dynamic dims before this runs
                rlx_ir::Dim::Dynamic(_) => 0,
            })
            .collect();
        let (elements, bytes) = sizing::tensor_size(&dims, shape.dtype()).unwrap_or((0, 0));
        let decl = TensorDecl {
            name: name.to_string(),
            dims,
            dtype: shape.dtype(),
            elements,
            bytes,
        };
        if is_param {
            params.insert(name.to_string(), decl);
        } else {
            inputs.push(decl);
        }
    }
    (inputs, params)
}

/// The checks every MIR graph passes before RLX compiles it: [`graph_check::check_graph`] within
/// `limit`, then `device` made ready ([`device::prepare`]: present, its settings in effect) and
/// [`device::check_graph`] (what the device cannot run within the budgets).
fn check_before_compiling(
    graph: &Graph,
    device: Device,
    limit: &MemoryLimit,
) -> Result<(), CoreError> {
    catch("checking the graph", || {
        graph_check::check_graph(graph, limit)
    })??;
    device::prepare(device)?;
    catch("checking the graph for the device", || {
        device::check_graph(device, graph)
    })?
}

/// `"a", "b", "c"`, at most eight of them (sorted), then how many more.
fn name_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    let shown: Vec<String> = names.iter().take(8).map(|n| format!("{n:?}")).collect();
    let more = names.len().saturating_sub(8);
    let mut text = if shown.is_empty() {
        "none".to_string()
    } else {
        shown.join(", ")
    };
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

impl Runner {
    /// Compile `hir` for `device`, after [`graph_check::check_hir`], [`graph_check::check_graph`]
    /// (on the MIR graph it lowers to) within the machine's memory, and [`device::check_graph`].
    pub fn compile(hir: HirModule, device: Device) -> Result<Self, CoreError> {
        Self::compile_within(hir, device, memory::machine_memory())
    }

    /// [`Runner::compile`] with the memory limit given (tests).
    pub fn compile_within(
        hir: HirModule,
        device: Device,
        limit: &MemoryLimit,
    ) -> Result<Self, CoreError> {
        graph_check::check_hir(&hir, limit)?;
        let mir = catch("lowering the graph to check it", || {
            hir.clone().lower_to_mir()
        })?
        .map_err(|e| CoreError::Rlx(format!("RLX could not lower the graph: {e:?}")))?;
        check_before_compiling(&mir.into_graph(), device, limit)?;
        let outputs = hir
            .outputs
            .iter()
            .map(|id| (id.to_string(), hir.node(*id).shape.clone()))
            .collect::<Vec<_>>();
        let (output_dims, output_dtypes) = output_layout(&outputs)?;
        let (inputs, params) = declarations(hir.nodes().iter().filter_map(|n| match &n.op {
            HirOp::Input { name } | HirOp::Mir(Op::Input { name }) => {
                Some((name.as_str(), &n.shape, false))
            }
            HirOp::Param { name } | HirOp::Mir(Op::Param { name }) => {
                Some((name.as_str(), &n.shape, true))
            }
            _ => None,
        }));
        let graph = catch("compiling the graph", || {
            Session::new(device).compile_hir_with(hir, &compile_options())
        })?
        .map_err(|e| CoreError::Rlx(format!("RLX could not lower the graph: {e:?}")))?;
        Ok(Self {
            graph,
            device,
            flush_denormals: false,
            output_dims,
            output_dtypes,
            inputs,
            params,
            poisoned: None,
            read: None,
            resident: HashMap::new(),
            runs: 0,
        })
    }

    /// Compile a static MIR graph (a symbolic graph specialized to one binding) the way
    /// [`Runner::compile`] compiles HIR: RLX's pre-fusion cleanup, then the same fusion
    /// pipeline and options (`compile_hir_with` runs these two after lowering HIR to MIR).
    /// [`graph_check::check_graph`] and [`device::check_graph`] run first.
    pub fn from_graph(graph: Graph, device: Device) -> Result<Self, CoreError> {
        Self::from_graph_within(graph, device, memory::machine_memory())
    }

    /// [`Runner::from_graph`] with the memory limit given (tests).
    pub fn from_graph_within(
        graph: Graph,
        device: Device,
        limit: &MemoryLimit,
    ) -> Result<Self, CoreError> {
        check_before_compiling(&graph, device, limit)?;
        let outputs = graph
            .outputs
            .iter()
            .map(|id| (id.to_string(), graph.node(*id).shape.clone()))
            .collect::<Vec<_>>();
        let (output_dims, output_dtypes) = output_layout(&outputs)?;
        let (inputs, params) = declarations(graph.nodes().iter().filter_map(|n| match &n.op {
            Op::Input { name } => Some((name.as_str(), &n.shape, false)),
            Op::Param { name } => Some((name.as_str(), &n.shape, true)),
            _ => None,
        }));
        let options = compile_options();
        let compiled = catch("compiling the graph", || {
            let graph = rlx_runtime::precompile::precompile_cleanup(graph, &options);
            Session::new(device).compile_with(graph, &options)
        })?;
        let read = Some(compiled.inputs().into_iter().map(|i| i.name).collect());
        Ok(Self {
            graph: compiled,
            device,
            flush_denormals: false,
            output_dims,
            output_dtypes,
            inputs,
            params,
            poisoned: None,
            resident: HashMap::new(),
            runs: 0,
            read,
        })
    }

    /// Compile from rlx-ir's HIR JSON (a bundle's `model.hir.json`) for `device`.
    pub fn from_hir_json(text: &str, device: Device) -> Result<Self, CoreError> {
        let hir = rlx_ir::serialize::hir_from_json(text)
            .map_err(|e| CoreError::Check(format!("model.hir.json is not valid RLX HIR: {e}")))?;
        Self::compile(hir, device)
    }

    /// The device the graph was compiled for.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Run `f` on the compiled graph; a panic inside RLX poisons this runner.
    fn call<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut CompiledGraph) -> T,
    ) -> Result<T, CoreError> {
        if let Some(why) = &self.poisoned {
            return Err(CoreError::Rlx(format!(
                "this compiled model is unusable: an earlier call panicked inside RLX ({why}), \
                 which may have left it half-written; compile the model again"
            )));
        }
        let graph = &mut self.graph;
        catch(what, || f(graph)).inspect_err(|e| self.poisoned = Some(e.message().to_string()))
    }

    /// The declared parameters, by name.
    pub fn params(&self) -> &HashMap<String, TensorDecl> {
        &self.params
    }

    /// The declared graph inputs, in order.
    pub fn inputs(&self) -> &[TensorDecl] {
        &self.inputs
    }

    fn param(&self, name: &str) -> Result<&TensorDecl, CoreError> {
        self.params.get(name).ok_or_else(|| {
            CoreError::Check(format!(
                "unknown parameter {name:?}; the graph's parameters are {}",
                name_list(self.params.keys().map(String::as_str))
            ))
        })
    }

    fn input(&self, name: &str) -> Result<&TensorDecl, CoreError> {
        self.inputs.iter().find(|d| d.name == name).ok_or_else(|| {
            CoreError::Check(format!(
                "unknown input {name:?}; the graph's inputs are {}",
                name_list(self.inputs.iter().map(|d| d.name.as_str()))
            ))
        })
    }

    /// Bind a parameter by its `state_dict` name: `data` is its elements in `dtype`, which must
    /// be the declared dtype, or F16/BF16 for a declared F32 parameter (RLX widens those).
    pub fn set_param(&mut self, name: &str, data: &[u8], dtype: DType) -> Result<(), CoreError> {
        let decl = self.param(name)?;
        let widened = decl.dtype == DType::F32 && crate::boundary::HALF.contains(&dtype);
        if dtype != decl.dtype && !widened {
            let also = if decl.dtype == DType::F32 {
                " (or F16/BF16, which RLX widens)"
            } else {
                ""
            };
            return Err(CoreError::Check(format!(
                "parameter {name:?} is declared {}; got {} data, expected {}{also}",
                decl.describe(),
                dtype_name(dtype),
                dtype_name(decl.dtype)
            )));
        }
        let want = decl.elements.checked_mul(dtype.size_bytes());
        if want != Some(data.len()) {
            return Err(CoreError::Check(format!(
                "parameter {name:?} is declared {}; got {} bytes of {} data, expected {}",
                decl.describe(),
                data.len(),
                dtype_name(dtype),
                want.map_or("more than a 64-bit size".to_string(), |w| w.to_string())
            )));
        }
        device::check_value(self.device, "parameter", name, data, dtype)?;
        self.call(&format!("setting parameter {name:?}"), |g| {
            g.set_param_typed(name, data, dtype)
        })
    }

    /// Write `data` into f32 parameter `name` at `byte_offset` (a slice of a large weight, so
    /// loading never holds a whole second copy). `false`: RLX cannot write this parameter in
    /// pieces (not declared or not stored as f32); bind it whole with [`Runner::set_param`].
    /// A range past the parameter's end is refused.
    pub fn set_param_range(
        &mut self,
        name: &str,
        byte_offset: usize,
        data: &[u8],
    ) -> Result<bool, CoreError> {
        let decl = self.param(name)?;
        let end = byte_offset.checked_add(data.len());
        if end.is_none_or(|e| e > decl.bytes) {
            return Err(CoreError::Check(format!(
                "parameter {name:?} is declared {}; bytes {byte_offset}..{} are past its end",
                decl.describe(),
                end.map_or("(overflow)".to_string(), |e| e.to_string())
            )));
        }
        if decl.dtype != DType::F32 {
            return Ok(false);
        }
        self.call(&format!("setting part of parameter {name:?}"), |g| {
            g.set_param_range(name, byte_offset, data)
        })
    }

    /// Run later calls with flush-to-zero / denormals-are-zero on RLX's threads (`fpmode`).
    pub fn set_flush_denormals(&mut self, on: bool) {
        self.flush_denormals = on;
    }

    /// Each declared input given exactly once, in its declared dtype and byte length.
    fn check_inputs(&self, inputs: &[(&str, &[u8], DType)]) -> Result<(), CoreError> {
        let mut seen = HashSet::new();
        for (name, data, dtype) in inputs {
            let decl = self.input(name)?;
            if !seen.insert(*name) {
                return Err(CoreError::Check(format!("input {name:?} is given twice")));
            }
            if *dtype != decl.dtype {
                return Err(CoreError::Check(format!(
                    "input {name:?} is declared {}; got {} data",
                    decl.describe(),
                    dtype_name(*dtype)
                )));
            }
            if data.len() != decl.bytes {
                return Err(CoreError::Check(format!(
                    "input {name:?} is declared {}; got {} bytes",
                    decl.describe(),
                    data.len()
                )));
            }
        }
        let missing: Vec<&str> = self
            .inputs
            .iter()
            .map(|d| d.name.as_str())
            .filter(|n| !seen.contains(n) && !self.resident.contains_key(*n))
            .collect();
        if !missing.is_empty() {
            return Err(CoreError::Check(format!(
                "missing input(s) {}; the graph takes {}",
                name_list(missing.into_iter()),
                name_list(self.inputs.iter().map(|d| d.name.as_str()))
            )));
        }
        Ok(())
    }

    /// Run once; returns each output's bytes in its declared dtype and its dims.
    ///
    /// When every output is `F32` and every input is `F32` (or an integer input whose
    /// values are all within +-2^24, exact in f32) this takes RLX's f32 entry point
    /// (`CompiledGraph::run`), which copies outputs out of the arena in one pass;
    /// `run_typed` re-encodes every output element by element (slower by about
    /// 1 ms per MB of output on a 2-core machine; docs/design.md, decision x).
    pub fn run(&mut self, inputs: &[(&str, &[u8], DType)]) -> Result<Vec<TensorBytes>, CoreError> {
        self.runs += 1;
        self.check_inputs(inputs)?;
        device::check_inputs(self.device, inputs)?;
        for (name, _, _) in inputs {
            self.resident.remove(*name); // given again: RLX writes it per run from now on
        }
        // RLX's pool threads run only RLX work, so they keep the mode of the last model run
        // (held while this run is in flight); the calling thread gets its own mode back after.
        let _pool = crate::fpmode::enter_pool(self.flush_denormals);
        let saved = self
            .flush_denormals
            .then(|| crate::fpmode::set_this_thread(true));
        let result = self.run_inner(inputs);
        if let Some(csr) = saved {
            crate::fpmode::restore(csr);
        }
        result
    }

    fn run_inner(
        &mut self,
        inputs: &[(&str, &[u8], DType)],
    ) -> Result<Vec<TensorBytes>, CoreError> {
        let kept: Vec<(&str, &[u8], DType)>;
        let inputs = match &self.read {
            Some(read) => {
                kept = inputs
                    .iter()
                    .filter(|(name, _, _)| read.contains(*name))
                    .copied()
                    .collect();
                &kept[..]
            }
            None => inputs,
        };
        // RLX's f32 entry point writes each value into its slot's dtype (`as i64` for an I64
        // input), which is exact for integers of magnitude <= 2^24; checked on the actual values.
        let f32_inputs: Option<Vec<Vec<f32>>> =
            if self.output_dtypes.iter().all(|d| *d == DType::F32) {
                inputs.iter().map(|(_, b, d)| f32_values(b, *d)).collect()
            } else {
                None
            };
        let dims = self.output_dims.clone();
        if let Some(owned) = f32_inputs {
            let named: Vec<(&str, &[f32])> = inputs
                .iter()
                .zip(owned.iter())
                .map(|((n, _, _), v)| (*n, v.as_slice()))
                .collect();
            let raw = self.call("running the graph", |g| g.run(&named))?;
            return Ok(raw
                .into_iter()
                .zip(dims)
                .map(|(values, dims)| (OutputData::F32(values), DType::F32, dims))
                .collect());
        }
        let raw = self.call("running the graph", |g| g.run_typed(inputs))?;
        Ok(raw
            .into_iter()
            .zip(dims)
            .map(|((bytes, dtype), dims)| (OutputData::Bytes(bytes), dtype, dims))
            .collect())
    }

    /// Declared output dtypes, in output order.
    pub fn output_dtypes(&self) -> &[DType] {
        &self.output_dtypes
    }
}

/// Largest integer magnitude an `f32` holds exactly (and below which every integer is exact).
const F32_EXACT_INT: i64 = 1 << 24;

/// An input's little-endian bytes as the `f32` values RLX's f32 entry point takes: `F32` as is,
/// `I64`/`I32` when every value is an integer of magnitude <= 2^24 (exact in f32); else `None`.
fn f32_values(bytes: &[u8], dtype: DType) -> Option<Vec<f32>> {
    let ints = |width: usize| -> Option<Vec<f32>> {
        bytes
            .chunks_exact(width)
            .map(|c| {
                let v = if width == 8 {
                    i64::from_le_bytes(c.try_into().ok()?)
                } else {
                    i64::from(i32::from_le_bytes(c.try_into().ok()?))
                };
                (v.unsigned_abs() <= F32_EXACT_INT.unsigned_abs()).then_some(v as f32)
            })
            .collect()
    };
    match dtype {
        DType::F32 => Some(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::I64 => ints(8),
        DType::I32 => ints(4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::{check_message, f32_bytes, f32_from};

    #[test]
    fn bool_results_cross_the_boundary_as_f32() {
        let program = r#"{
            "name": "t",
            "inputs": [{"name": "x", "shape": {"dims": [{"Static": 4}], "dtype": "F32"}}],
            "params": [],
            "nodes": [
                {"id": "zero", "op": {"Constant": {"data": [0, 0, 0, 0]}}, "inputs": [],
                 "shape": {"dims": [], "dtype": "F32"}},
                {"id": "gt", "op": {"Compare": "Gt"}, "inputs": ["x", "zero"],
                 "shape": {"dims": [{"Static": 4}], "dtype": "Bool"}},
                {"id": "f", "op": {"Cast": {"to": "F32"}}, "inputs": ["gt"],
                 "shape": {"dims": [{"Static": 4}], "dtype": "F32"}}
            ],
            "outputs": ["f"]
        }"#;
        let json = crate::program::program_to_hir_json(program).unwrap();
        let mut runner = Runner::from_hir_json(&json, Device::Cpu).unwrap();
        let x = f32_bytes(&[1.0, -1.0, 0.0, 2.5]);
        let out = runner.run(&[("x", &x, DType::F32)]).unwrap();
        // RLX's CPU arena is f32-aliased and its Bool slots are not readable
        // as bytes at the boundary, so the importer casts such outputs to F32.
        assert_eq!(out[0].1, DType::F32);
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn integer_inputs_take_the_f32_entry_point_only_when_exact() {
        let program = r#"{
            "name": "t",
            "inputs": [{"name": "ids", "shape": {"dims": [{"Static": 3}], "dtype": "I64"}}],
            "params": [],
            "nodes": [
                {"id": "one", "op": {"Constant": {"data": [1, 0, 0, 0, 0, 0, 0, 0]}}, "inputs": [],
                 "shape": {"dims": [], "dtype": "I64"}},
                {"id": "next", "op": {"Binary": "Add"}, "inputs": ["ids", "one"],
                 "shape": {"dims": [{"Static": 3}], "dtype": "I64"}},
                {"id": "f", "op": {"Cast": {"to": "F32"}}, "inputs": ["next"],
                 "shape": {"dims": [{"Static": 3}], "dtype": "F32"}}
            ],
            "outputs": ["f"]
        }"#;
        let json = crate::program::program_to_hir_json(program).unwrap();
        let mut runner = Runner::from_hir_json(&json, Device::Cpu).unwrap();
        let bytes = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(
            f32_values(&bytes(&[7, -(1 << 24), 1 << 24]), DType::I64).map(|v| v.len()),
            Some(3)
        );
        assert_eq!(f32_values(&bytes(&[(1 << 24) + 1]), DType::I64), None);
        assert_eq!(f32_values(&bytes(&[i64::MIN]), DType::I64), None);
        for ids in [[7i64, -5, 1 << 24], [(1 << 30) + 1, -(1 << 40), 3]] {
            let out = runner.run(&[("ids", &bytes(&ids), DType::I64)]).unwrap();
            let want: Vec<f32> = ids.iter().map(|&i| (i + 1) as f32).collect();
            assert_eq!(f32_from(out[0].0.as_bytes()), want);
        }
    }

    const MATMUL_RELU: &str = r#"{
        "name": "t",
        "inputs": [{"name": "x", "shape": {"dims": [{"Static": 2}, {"Static": 3}], "dtype": "F32"}}],
        "params": [{"name": "w", "shape": {"dims": [{"Static": 3}, {"Static": 2}], "dtype": "F32"}},
                   {"name": "ids", "shape": {"dims": [{"Static": 2}], "dtype": "I64"}}],
        "nodes": [
            {"id": "mm", "op": "MatMul", "inputs": ["x", "w"],
             "shape": {"dims": [{"Static": 2}, {"Static": 2}], "dtype": "F32"}},
            {"id": "r", "op": {"Activation": "Relu"}, "inputs": ["mm"],
             "shape": {"dims": [{"Static": 2}, {"Static": 2}], "dtype": "F32"}},
            {"id": "f", "op": {"Cast": {"to": "F32"}}, "inputs": ["ids"],
             "shape": {"dims": [{"Static": 2}], "dtype": "F32"}}
        ],
        "outputs": ["r", "f"]
    }"#;

    fn matmul_relu() -> Runner {
        Runner::from_hir_json(
            &crate::program::program_to_hir_json(MATMUL_RELU).unwrap(),
            Device::Cpu,
        )
        .unwrap()
    }

    #[test]
    fn parameters_are_checked_against_their_declaration() {
        let mut r = matmul_relu();
        let w = f32_bytes(&[1.0, -1.0, 2.0, -2.0, 3.0, -3.0]);
        assert_eq!(
            check_message(r.set_param("v", &w, DType::F32)),
            "unknown parameter \"v\"; the graph's parameters are \"ids\", \"w\""
        );
        assert_eq!(
            check_message(r.set_param("w", &w[..20], DType::F32)),
            "parameter \"w\" is declared F32 [3, 2] (6 elements, 24 bytes); got 20 bytes of F32 \
             data, expected 24"
        );
        assert_eq!(
            check_message(r.set_param("w", &[0; 48], DType::F64)),
            "parameter \"w\" is declared F32 [3, 2] (6 elements, 24 bytes); got F64 data, expected \
             F32 (or F16/BF16, which RLX widens)"
        );
        assert_eq!(
            check_message(r.set_param("ids", &[0; 8], DType::I32)),
            "parameter \"ids\" is declared I64 [2] (2 elements, 16 bytes); got I32 data, expected I64"
        );
        assert_eq!(
            check_message(r.set_param_range("w", 16, &w[..12])),
            "parameter \"w\" is declared F32 [3, 2] (6 elements, 24 bytes); bytes 16..28 are past its end"
        );
        assert!(check_message(r.set_param_range("w", usize::MAX, &w[..4])).contains("(overflow)"));
        assert!(
            !r.set_param_range("ids", 0, &[0; 8]).unwrap(),
            "only F32 is written in pieces"
        );
        // F16 weights for an F32 parameter: RLX widens them (half of 24 bytes).
        let halves: Vec<u8> = [0x3c00u16, 0xbc00, 0x4000, 0xc000, 0x4200, 0xc200]
            .iter()
            .flat_map(|h| h.to_le_bytes())
            .collect();
        r.set_param("w", &halves, DType::F16).unwrap();
        let ids: Vec<u8> = [5i64, -7].iter().flat_map(|v| v.to_le_bytes()).collect();
        r.set_param("ids", &ids, DType::I64).unwrap();
        let x = f32_bytes(&[1.0, 1.0, 1.0, -1.0, 0.0, 2.0]);
        let out = r.run(&[("x", &x, DType::F32)]).unwrap();
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![6.0, 0.0, 5.0, 0.0]);
        assert_eq!(f32_from(out[1].0.as_bytes()), vec![5.0, -7.0]);
        // A range write within the parameter lands where it says.
        assert!(r.set_param_range("w", 8, &f32_bytes(&[10.0, 0.0])).unwrap());
        let out = r.run(&[("x", &x, DType::F32)]).unwrap();
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![14.0, 0.0, 5.0, 0.0]);
    }

    #[test]
    fn inputs_are_checked_against_their_declaration() {
        let mut r = matmul_relu();
        let x = f32_bytes(&[1.0; 6]);
        assert_eq!(
            check_message(r.run(&[])),
            "missing input(s) \"x\"; the graph takes \"x\""
        );
        assert_eq!(
            check_message(r.run(&[("x", &x, DType::F32), ("y", &x, DType::F32)])),
            "unknown input \"y\"; the graph's inputs are \"x\""
        );
        assert_eq!(
            check_message(r.run(&[("x", &x, DType::F32), ("x", &x, DType::F32)])),
            "input \"x\" is given twice"
        );
        assert_eq!(
            check_message(r.run(&[("x", &x[..20], DType::F32)])),
            "input \"x\" is declared F32 [2, 3] (6 elements, 24 bytes); got 20 bytes"
        );
        assert_eq!(
            check_message(r.run(&[("x", &[0; 48], DType::F64)])),
            "input \"x\" is declared F32 [2, 3] (6 elements, 24 bytes); got F64 data"
        );
        r.run(&[("x", &x, DType::F32)]).unwrap();
    }

    #[test]
    fn cuda_without_a_gpu_or_the_feature_is_a_device_error_not_a_panic() {
        let json = crate::program::program_to_hir_json(MATMUL_RELU).unwrap();
        match Runner::from_hir_json(&json, Device::Cuda) {
            Ok(runner) => assert_eq!(runner.device(), Device::Cuda), // a machine with a GPU
            Err(e) => {
                assert!(matches!(e, CoreError::Device(_)), "{e:?}");
                let missing = crate::device::cuda_missing(
                    crate::device::CUDA_BUILT,
                    e.message().contains("driver (libcuda) loads"),
                );
                assert_eq!(e.message(), missing);
            }
        }
    }

    #[test]
    fn a_graph_larger_than_the_memory_limit_is_refused_before_compiling() {
        let json = crate::program::program_to_hir_json(MATMUL_RELU).unwrap();
        let hir = rlx_ir::serialize::hir_from_json(&json).unwrap();
        let small = MemoryLimit {
            bytes: 20,
            source: "a test limit".into(),
        };
        let err = Runner::compile_within(hir, Device::Cpu, &small)
            .err()
            .unwrap();
        assert_eq!(
            err,
            CoreError::Check(
                "node h0 (Input): F32 [2, 3] (6 elements) takes 24 bytes, more than this \
                 machine's memory, 20 bytes (a test limit)"
                    .into()
            )
        );
    }

    #[test]
    fn a_panic_inside_rlx_makes_the_runner_unusable() {
        // RLX 0.2.19 cannot take an I16 graph input (`widen_bytes_to_f32` panics on it).
        let program = r#"{
            "name": "t",
            "inputs": [{"name": "x", "shape": {"dims": [{"Static": 4}], "dtype": "I16"}}],
            "params": [],
            "nodes": [{"id": "f", "op": {"Cast": {"to": "F32"}}, "inputs": ["x"],
                       "shape": {"dims": [{"Static": 4}], "dtype": "F32"}}],
            "outputs": ["f"]
        }"#;
        let json = crate::program::program_to_hir_json(program).unwrap();
        let mut r = match Runner::from_hir_json(&json, Device::Cpu) {
            Ok(r) => r,
            Err(e) => panic!("compiles, fails when run: {e:?}"),
        };
        let x: Vec<u8> = [1i16, 2, 3, 4]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let first = r.run(&[("x", &x, DType::I16)]).err().unwrap();
        assert!(
            matches!(&first, CoreError::Rlx(m) if m.starts_with("RLX panicked while running the graph: ")
                && m.contains("I16 unsupported")),
            "{first:?}"
        );
        let again = r.run(&[("x", &x, DType::I16)]).err().unwrap();
        assert!(
            matches!(&again, CoreError::Rlx(m) if m.starts_with("this compiled model is unusable: an earlier call panicked inside RLX")),
            "{again:?}"
        );
    }

    #[test]
    fn runs_matmul_relu_on_cpu() {
        let program = r#"{
            "name": "t",
            "inputs": [{"name": "x", "shape": {"dims": [{"Static": 2}, {"Static": 3}], "dtype": "F32"}}],
            "params": [{"name": "w", "shape": {"dims": [{"Static": 3}, {"Static": 2}], "dtype": "F32"}}],
            "nodes": [
                {"id": "mm", "op": "MatMul", "inputs": ["x", "w"],
                 "shape": {"dims": [{"Static": 2}, {"Static": 2}], "dtype": "F32"}},
                {"id": "r", "op": {"Activation": "Relu"}, "inputs": ["mm"],
                 "shape": {"dims": [{"Static": 2}, {"Static": 2}], "dtype": "F32"}}
            ],
            "outputs": ["r"]
        }"#;
        let json = crate::program::program_to_hir_json(program).unwrap();
        let mut runner = Runner::from_hir_json(&json, Device::Cpu).unwrap();
        let w = f32_bytes(&[1.0, -1.0, 2.0, -2.0, 3.0, -3.0]);
        runner.set_param("w", &w, DType::F32).unwrap();
        let x = f32_bytes(&[1.0, 1.0, 1.0, -1.0, 0.0, 2.0]);
        let out = runner.run(&[("x", &x, DType::F32)]).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].2, vec![2, 2]);
        // x @ w = [[6, -6], [5, -5]] → relu
        assert_eq!(f32_from(out[0].0.as_bytes()), vec![6.0, 0.0, 5.0, 0.0]);
    }
}
