//! Model `golden`, converted from PyTorch by rlx-torch-import 0.1.0
//! (torch 2.15.0+cu132, RLX 0.2.19, decomposition `high`, style `graph`).
//!
//! ATen ops in the source graph:
//! - `aten.linear.default` x 2
//! - `aten.relu.default` x 1
//!
//! Generated file: regenerate it rather than editing it, or own it from here on.
//!
//! `Model::load(weights)` builds and compiles the graph and binds the weights;
//! `Model::run` runs it. `cargo test --release` checks the outputs against PyTorch.

pub mod blas;
pub mod graph;
pub mod host;
pub mod weights;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rlx_ir::DType;
use rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};

pub use host::{HostTensor, IndexRange, ParamSpec, Parity, Symbol, TensorSpec, compare};
use host::{check_index_ranges, from_carrier, to_carrier};

/// The model's name at conversion time.
pub const NAME: &str = "golden";

/// Graph inputs, in call order (PyTorch dtype, and the dtype that carries it into RLX).
pub const INPUTS: &[TensorSpec] = &[TensorSpec {
    name: "input",
    dims: &[2, 4],
    dtype: "float32",
    carrier: DType::F32,
    padded: None,
}];

/// Graph outputs, in order.
pub const OUTPUTS: &[TensorSpec] = &[TensorSpec {
    name: "output",
    dims: &[2, 2],
    dtype: "float32",
    carrier: DType::F32,
    padded: None,
}];

/// Parameters by `state_dict` name, in declaration order, with the dtype the graph computes them in.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "0.bias",
        dims: &[3],
        dtype: DType::F32,
    },
    ParamSpec {
        name: "2.bias",
        dims: &[2],
        dtype: DType::F32,
    },
    ParamSpec {
        name: "0.weight.T",
        dims: &[4, 3],
        dtype: DType::F32,
    },
    ParamSpec {
        name: "2.weight.T",
        dims: &[3, 2],
        dtype: DType::F32,
    },
];

/// Inputs that feed an index, with the range PyTorch allows there: `run` refuses a value outside it.
pub const INDEX_RANGES: &[IndexRange] = &[];

/// No sweep points: every dim is static.
pub const SWEEP: &[&str] = &[];

/// Where the weights are unless told otherwise: `$RLX_WEIGHTS`, else the
/// bundle written beside this crate (`../bundle/weights.safetensors`).
pub fn default_weights() -> PathBuf {
    match std::env::var_os("RLX_WEIGHTS") {
        Some(path) => PathBuf::from(path),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle/weights.safetensors"),
    }
}

/// The reference inputs and PyTorch outputs recorded at conversion time.
pub fn default_reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/reference.safetensors")
}

/// The compile options rlx-torch-import's own runner uses, so this crate computes
/// the bundle's outputs bit for bit: matmuls read their weights in place (no
/// per-run concatenation of the QKV or gate/up weights).
pub fn compile_options() -> CompileOptions {
    CompileOptions {
        fusion_opts: FusionOptions {
            no_weight_concat: true,
            ..FusionOptions::default()
        },
        ..CompileOptions::default()
    }
}

/// Why this model cannot run on RLX's CUDA backend within rlx-torch-import's budgets (its CUDA
/// arena stores every value as float32: float64 values, integer constants float32 does not hold),
/// found at conversion; `None` when it can.
pub const CUDA_REFUSAL: Option<&str> = None;

/// The RLX device [`Model::load`] compiles for: `$RLX_TORCH_IMPORT_DEVICE` (`cpu` or `cuda`),
/// else the CPU.
pub fn default_device() -> Result<Device, String> {
    match std::env::var("RLX_TORCH_IMPORT_DEVICE").as_deref() {
        Err(_) | Ok("") | Ok("cpu") => Ok(Device::Cpu),
        Ok("cuda") => Ok(Device::Cuda),
        Ok(other) => Err(format!(
            "RLX_TORCH_IMPORT_DEVICE={other:?}: the devices are cpu and cuda"
        )),
    }
}

/// Check that `device` is in this build and on this machine, and can run this model
/// ([`CUDA_REFUSAL`]). On CUDA, float32 math is made strict as rlx-torch-import verifies it (no
/// TF32 in GEMM or convolution, no half-precision attention), unless the environment sets
/// `RLX_CUDA_PARITY` / `RLX_CUDA_ATTENTION` itself.
pub fn check_device(device: Device) -> Result<(), String> {
    match device {
        Device::Cpu => Ok(()),
        Device::Cuda => prepare_cuda().and(CUDA_REFUSAL.map_or(Ok(()), |why| Err(why.to_string()))),
        other => Err(format!(
            "device {other:?} is not one this crate runs on (Cpu, Cuda)"
        )),
    }
}

#[cfg(feature = "cuda")]
fn prepare_cuda() -> Result<(), String> {
    for (key, value) in [("RLX_CUDA_PARITY", "1"), ("RLX_CUDA_ATTENTION", "scalar")] {
        if std::env::var_os(key).is_none() {
            rlx_ir::env::set(key, value);
        }
    }
    rlx_cuda::config::reload_runtime_config();
    if rlx_cuda::is_available() {
        Ok(())
    } else {
        Err(
            "device cuda is not available on this machine: no NVIDIA driver or GPU was found"
                .to_string(),
        )
    }
}

#[cfg(not(feature = "cuda"))]
fn prepare_cuda() -> Result<(), String> {
    Err("device cuda is not in this build: build the crate with `--features cuda`".to_string())
}

/// Size RLX's thread pool like rlx-torch-import does: every core this process
/// may use, unless `RLX_WORKERS` is set (RLX's own default is 3/4 of the cores);
/// and load the BLAS provider as it does (`blas.rs`: `RTI_BLAS`, per CPU by
/// default), so an unloadable one is an error here rather than an abort later.
fn configure_cpu() -> Result<(), String> {
    if std::env::var_os("RLX_WORKERS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        rlx_ir::env::set("RLX_WORKERS", cores.to_string());
    }
    blas::info().map(|_| ())
}

/// The model compiled for an RLX device (the CPU, or CUDA with the `cuda` feature), with its
/// weights bound.
pub struct Model {
    graph: CompiledGraph,
}

impl Model {
    /// [`Model::load_on`] the device [`default_device`] names (the CPU unless
    /// `$RLX_TORCH_IMPORT_DEVICE` says `cuda`).
    pub fn load(weights: impl AsRef<Path>) -> Result<Self, String> {
        Self::load_on(weights, default_device()?)
    }

    /// Build the graph, compile it for `device` (`Device::Cpu`, or `Device::Cuda` with the
    /// `cuda` feature), and bind the `state_dict`-named weights read from the safetensors file
    /// at `weights`. An error says when the device is not in this build or not on this machine.
    pub fn load_on(weights: impl AsRef<Path>, device: Device) -> Result<Self, String> {
        configure_cpu()?;
        check_device(device)?;
        let tensors = weights::load(weights.as_ref(), PARAMS)?;
        let mut graph = Session::new(device)
            .compile_hir_with(graph::build(), &compile_options())
            .map_err(|e| format!("RLX could not compile {NAME}: {e:?}"))?;
        for (spec, t) in &tensors {
            graph.set_param_typed(
                spec.name,
                &t.data,
                host::rlx_dtype(&t.dtype).expect("checked on load"),
            );
        }
        Ok(Self { graph })
    }

    /// Run once: `inputs` follow [`INPUTS`], the outputs follow [`OUTPUTS`]. An input holding an
    /// index outside its [`INDEX_RANGES`] row is refused (PyTorch raises IndexError for it).
    pub fn run(&mut self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        if inputs.len() != INPUTS.len() {
            return Err(format!(
                "{NAME} takes {} input(s), got {}",
                INPUTS.len(),
                inputs.len()
            ));
        }
        let mut carried = Vec::with_capacity(inputs.len());
        for (spec, t) in INPUTS.iter().zip(inputs) {
            if t.dtype != spec.dtype || t.dims != spec.dims {
                return Err(format!(
                    "input {:?} must be {}{:?}, got {}{:?}",
                    spec.name, spec.dtype, spec.dims, t.dtype, t.dims
                ));
            }
            carried.push(to_carrier(t, spec.carrier));
        }
        check_index_ranges(INDEX_RANGES, INPUTS, inputs)?;
        let feed: Vec<(&str, &[u8], DType)> = INPUTS
            .iter()
            .zip(&carried)
            .map(|(spec, bytes)| (spec.name, bytes.as_slice(), spec.carrier))
            .collect();
        let raw = self.graph.run_typed(&feed);
        Ok(OUTPUTS
            .iter()
            .zip(raw)
            .map(|(spec, (data, _))| HostTensor {
                dtype: spec.dtype.to_string(),
                dims: spec.dims.to_vec(),
                data: from_carrier(data, spec.carrier, spec.dtype),
            })
            .collect())
    }
}

/// Run `model` on the reference inputs in `path` and compare every output with
/// PyTorch's, using the same budgets as the Python verifier. Returns the outputs
/// and their parity, both in [`OUTPUTS`] order.
pub fn check_reference(
    model: &mut Model,
    path: &Path,
) -> Result<(Vec<HostTensor>, Vec<Parity>), String> {
    check_reference_at(model, path, "")
}

/// [`check_reference`] on the tensors whose keys start with `prefix`: `""` for the
/// example inputs, `"sweep.<i>."` for the sweep points of a dynamic model ([`SWEEP`]).
pub fn check_reference_at(
    model: &mut Model,
    path: &Path,
    prefix: &str,
) -> Result<(Vec<HostTensor>, Vec<Parity>), String> {
    let reference: BTreeMap<String, HostTensor> = weights::read(path)?;
    let take = |key: String| {
        reference
            .get(&key)
            .cloned()
            .ok_or_else(|| format!("{}: {key:?} is missing", path.display()))
    };
    let inputs = INPUTS
        .iter()
        .map(|s| take(format!("{prefix}input.{}", s.name)))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = model.run(&inputs)?;
    let parity = OUTPUTS
        .iter()
        .zip(&outputs)
        .map(|(spec, got)| {
            Ok(compare(
                spec.name,
                got,
                &take(format!("{prefix}output.{}", spec.name))?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((outputs, parity))
}
