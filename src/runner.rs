//! Compile a HIR module on the RLX CPU runtime and run it with raw bytes.
//!
//! Tensors cross this boundary as `(bytes, dtype)` in their native dtype;
//! the Python side owns shapes and numpy conversion.

use std::panic::{AssertUnwindSafe, catch_unwind};

use rlx_ir::hir::HirModule;
use rlx_ir::{DType, Graph, Shape};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};

/// A compiled RLX graph plus the declared shapes of its outputs.
pub struct Runner {
    graph: CompiledGraph,
    /// Run with flush-to-zero / denormals-are-zero (`fpmode`).
    flush_denormals: bool,
    output_dims: Vec<Vec<usize>>,
    output_dtypes: Vec<DType>,
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
fn output_layout(outputs: &[(String, Shape)]) -> Result<(Vec<Vec<usize>>, Vec<DType>), String> {
    let mut dims = Vec::new();
    let mut dtypes = Vec::new();
    for (id, shape) in outputs {
        let static_dims = shape
            .dims()
            .iter()
            .map(|d| match d {
                rlx_ir::Dim::Static(n) => Ok(*n),
                rlx_ir::Dim::Dynamic(s) => Err(format!(
                    "output {id} has a dynamic dim (symbol {s}); bind it before running"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        dims.push(static_dims);
        dtypes.push(shape.dtype());
    }
    Ok((dims, dtypes))
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Run `f`, turning an RLX panic into an error message that names `what`.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|p| format!("RLX panicked while {what}: {}", panic_message(p)))
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

impl Runner {
    /// Compile `hir` for the CPU device.
    pub fn compile(hir: HirModule) -> Result<Self, String> {
        let outputs = hir
            .outputs
            .iter()
            .map(|id| (id.to_string(), hir.node(*id).shape.clone()))
            .collect::<Vec<_>>();
        let (output_dims, output_dtypes) = output_layout(&outputs)?;
        let graph = guarded("compiling the graph", || {
            Session::new(Device::Cpu).compile_hir_with(hir, &compile_options())
        })?
        .map_err(|e| format!("RLX could not lower the graph: {e:?}"))?;
        Ok(Self {
            graph,
            flush_denormals: false,
            output_dims,
            output_dtypes,
        })
    }

    /// Compile a static MIR graph (a symbolic graph specialized to one binding) the way
    /// [`Runner::compile`] compiles HIR: RLX's pre-fusion cleanup, then the same fusion
    /// pipeline and options (`compile_hir_with` runs these two after lowering HIR to MIR).
    pub fn from_graph(graph: Graph) -> Result<Self, String> {
        let outputs = graph
            .outputs
            .iter()
            .map(|id| (id.to_string(), graph.node(*id).shape.clone()))
            .collect::<Vec<_>>();
        let (output_dims, output_dtypes) = output_layout(&outputs)?;
        let options = compile_options();
        let compiled = guarded("compiling the graph", || {
            let graph = rlx_runtime::precompile::precompile_cleanup(graph, &options);
            Session::new(Device::Cpu).compile_with(graph, &options)
        })?;
        Ok(Self {
            graph: compiled,
            flush_denormals: false,
            output_dims,
            output_dtypes,
        })
    }

    /// Compile from rlx-ir's HIR JSON (a bundle's `model.hir.json`).
    pub fn from_hir_json(text: &str) -> Result<Self, String> {
        let hir = rlx_ir::serialize::hir_from_json(text)
            .map_err(|e| format!("model.hir.json is not valid RLX HIR: {e}"))?;
        Self::compile(hir)
    }

    /// Bind a parameter by its `state_dict` name.
    pub fn set_param(&mut self, name: &str, data: &[u8], dtype: DType) -> Result<(), String> {
        guarded(&format!("setting parameter {name:?}"), || {
            self.graph.set_param_typed(name, data, dtype)
        })
    }

    /// Write `data` into f32 parameter `name` at `byte_offset` (a slice of a large weight, so
    /// loading never holds a whole second copy). `false`: RLX cannot write this parameter in
    /// pieces (not stored as f32, or out of range); bind it whole with [`Runner::set_param`].
    pub fn set_param_range(
        &mut self,
        name: &str,
        byte_offset: usize,
        data: &[u8],
    ) -> Result<bool, String> {
        guarded(&format!("setting part of parameter {name:?}"), || {
            self.graph.set_param_range(name, byte_offset, data)
        })
    }

    /// Run later calls with flush-to-zero / denormals-are-zero on RLX's threads (`fpmode`).
    pub fn set_flush_denormals(&mut self, on: bool) {
        self.flush_denormals = on;
    }

    /// Run once; returns each output's bytes in its declared dtype and its dims.
    ///
    /// When every output is `F32` and every input is `F32` (or an integer input whose
    /// values are all within +-2^24, exact in f32) this takes RLX's f32 entry point
    /// (`CompiledGraph::run`), which copies outputs out of the arena in one pass;
    /// `run_typed` re-encodes every output element by element (slower by about
    /// 1 ms per MB of output on a 2-core machine; docs/design.md, decision x).
    pub fn run(&mut self, inputs: &[(&str, &[u8], DType)]) -> Result<Vec<TensorBytes>, String> {
        // RLX's pool threads run only RLX work, so they keep the mode of the last model run;
        // the calling thread (Python's) gets its own mode back after the run.
        crate::fpmode::set_pool(self.flush_denormals);
        let saved = self
            .flush_denormals
            .then(|| crate::fpmode::set_this_thread(true));
        let result = self.run_inner(inputs);
        if let Some(csr) = saved {
            crate::fpmode::restore(csr);
        }
        result
    }

    fn run_inner(&mut self, inputs: &[(&str, &[u8], DType)]) -> Result<Vec<TensorBytes>, String> {
        // RLX's f32 entry point writes each value into its slot's dtype (`as i64` for an I64
        // input), which is exact for integers of magnitude <= 2^24; checked on the actual values.
        let f32_inputs: Option<Vec<Vec<f32>>> =
            if self.output_dtypes.iter().all(|d| *d == DType::F32) {
                inputs.iter().map(|(_, b, d)| f32_values(b, *d)).collect()
            } else {
                None
            };
        if let Some(owned) = f32_inputs {
            let named: Vec<(&str, &[f32])> = inputs
                .iter()
                .zip(owned.iter())
                .map(|((n, _, _), v)| (*n, v.as_slice()))
                .collect();
            let raw = guarded("running the graph", || self.graph.run(&named))?;
            return Ok(raw
                .into_iter()
                .zip(self.output_dims.iter())
                .map(|(values, dims)| (OutputData::F32(values), DType::F32, dims.clone()))
                .collect());
        }
        let raw = guarded("running the graph", || self.graph.run_typed(inputs))?;
        Ok(raw
            .into_iter()
            .zip(self.output_dims.iter())
            .map(|((bytes, dtype), dims)| (OutputData::Bytes(bytes), dtype, dims.clone()))
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

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn f32_from(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

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
        let mut runner = Runner::from_hir_json(&json).unwrap();
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
        let mut runner = Runner::from_hir_json(&json).unwrap();
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
        let mut runner = Runner::from_hir_json(&json).unwrap();
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
