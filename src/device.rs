//! Which RLX device a graph compiles for, whether this build and this machine have it, and
//! what a graph must satisfy to run there.
//!
//! * `cpu`: RLX's CPU backend, always built.
//! * `cuda`: RLX's CUDA backend (`rlx-cuda`: cudarc, cuBLAS, NVRTC), built only with this
//!   crate's `cuda` cargo feature. It needs the NVIDIA driver's `libcuda` where it runs,
//!   loaded when the first CUDA graph is compiled, and no CUDA toolkit.
//!
//! Asking for a device this build lacks, or one the machine lacks, is a
//! [`CoreError::Device`] naming which of the two is missing, before RLX is called (RLX
//! itself would fall back, panic or abort).
//!
//! RLX's CUDA backend keeps every value in a float32 arena, whatever its dtype
//! (`rlx-cuda` `arena.rs`: "F16/BF16/F64 are all f32-stored here"; integer inputs, constants
//! and parameters are widened to f32 on upload). [`check_graph`] therefore refuses, for
//! `cuda`, what float32 storage cannot hold: any float64 value (it would be computed in
//! float32, outside the float64 budget), an integer constant float32 does not hold exactly,
//! and op kinds the backend has no kernel or rewrite for (RLX's own legalization, run here
//! before compiling). [`check_inputs`] refuses integer inputs float32 does not hold exactly.
//!
//! Float32 math on the GPU is strict by default ([`prepare`]): `RLX_CUDA_PARITY=1` (no TF32
//! in GEMM or convolution, GEMM-only convolution algorithms) and `RLX_CUDA_ATTENTION=scalar`
//! (no half-precision tensor-core attention), each unless the process environment sets it.

use rlx_ir::{DType, Graph, Op};
use rlx_runtime::Device;

use crate::error::CoreError;

/// The device names the core accepts.
pub const NAMES: &[&str] = &["cpu", "cuda"];

/// Whether this build of the core includes RLX's CUDA backend (the `cuda` cargo feature).
pub const CUDA_BUILT: bool = cfg!(feature = "cuda");

/// The RLX settings strict float32 on the GPU needs, with the value the core gives each
/// unless the process environment sets it.
pub const CUDA_STRICT_SETTINGS: &[(&str, &str)] =
    &[("RLX_CUDA_PARITY", "1"), ("RLX_CUDA_ATTENTION", "scalar")];

/// `name` as an RLX device, or a [`CoreError::Check`] listing the accepted names.
pub fn parse(name: &str) -> Result<Device, CoreError> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda),
        other => Err(CoreError::Check(format!(
            "unknown device {other:?}; the devices are {}",
            NAMES.join(", ")
        ))),
    }
}

/// The lower-case name of a device this core compiles for.
pub fn name(device: Device) -> &'static str {
    match device {
        Device::Cuda => "cuda",
        _ => "cpu",
    }
}

/// What this build and this machine have of `device`: `Ok(description)` (e.g.
/// `"cuda: NVIDIA H200"`), or [`CoreError::Device`] saying whether the build or the machine
/// lacks it. Loading the CUDA driver happens once per process, on the first call for `cuda`.
pub fn available(device: Device) -> Result<String, CoreError> {
    match device {
        Device::Cuda => cuda_available(),
        _ => Ok("cpu".to_string()),
    }
}

/// Why device `cuda` cannot be used: the build lacks the `cuda` feature (`built` false), or the
/// machine lacks the NVIDIA driver (`driver` false) or a GPU it can open.
pub fn cuda_missing(built: bool, driver: bool) -> String {
    if !built {
        return "device 'cuda' is not in this build: the Rust core was built without its `cuda` \
                cargo feature (RTI_CUDA=0); rebuild it with `make setup` (README, GPU)"
            .to_string();
    }
    let why = if driver {
        "the NVIDIA driver (libcuda) loads, but it found no usable GPU (device 0)"
    } else {
        "no NVIDIA driver was found (libcuda.so.1 could not be loaded)"
    };
    format!("device 'cuda' is not available on this machine: {why}")
}

#[cfg(feature = "cuda")]
fn cuda_available() -> Result<String, CoreError> {
    // rlx-cuda loads libcuda and creates the context for device 0 under its own panic guard
    // (cudarc panics when the library is missing); None means either failed.
    if !rlx_cuda::is_available() {
        let driver = ["libcuda.so.1", "libcuda.so"]
            .iter()
            .any(|lib| library_loads(lib));
        return Err(CoreError::Device(cuda_missing(true, driver)));
    }
    let gpu = rlx_cuda::device::device_name().unwrap_or_else(|| "an NVIDIA GPU".to_string());
    Ok(format!("cuda: {gpu}"))
}

#[cfg(feature = "cuda")]
fn library_loads(name: &str) -> bool {
    // SAFETY: loading the driver library runs only its initializers, as cudarc's load does.
    unsafe { libloading::Library::new(name) }.is_ok()
}

#[cfg(not(feature = "cuda"))]
fn cuda_available() -> Result<String, CoreError> {
    Err(CoreError::Device(cuda_missing(false, false)))
}

/// Make `device` ready to compile for: for `cuda`, check it is there ([`available`]) and put
/// the strict float32 settings ([`CUDA_STRICT_SETTINGS`]) in effect unless the environment
/// sets them. Returns the settings in effect for the device (`KEY=value`, empty for `cpu`).
pub fn prepare(device: Device) -> Result<Vec<String>, CoreError> {
    if device != Device::Cuda {
        return Ok(Vec::new());
    }
    for (key, value) in CUDA_STRICT_SETTINGS {
        if std::env::var_os(key).is_none() && rlx_ir::env::var(key).is_none() {
            rlx_ir::env::set(*key, *value);
        }
    }
    #[cfg(feature = "cuda")]
    rlx_cuda::config::reload_runtime_config();
    available(device)?;
    Ok(CUDA_STRICT_SETTINGS
        .iter()
        .map(|(key, _)| format!("{key}={}", rlx_ir::env::var(key).unwrap_or_default()))
        .collect())
}

/// The CUDA defect probes (`lower/rlx/cuda_defects.py`) set this to `1` around a probe, so the raw
/// behaviour [`check_graph`] and [`check_value`] refuse can be observed on a GPU. Read at each
/// check; nothing else should set it.
pub const RAW_DEVICE_ENV: &str = "RLX_TORCH_IMPORT_PROBE_RAW_DEVICE";

fn raw_device() -> bool {
    std::env::var_os(RAW_DEVICE_ENV).is_some_and(|v| v == "1")
}

/// Whether float32 holds the integer `v` exactly (as RLX's CUDA arena stores it and reads it
/// back: `v as f32`, then `as i64`, which saturates at the i64 bounds).
pub fn f32_holds(v: i64) -> bool {
    (v as f32) as i64 == v
}

/// The first integer among little-endian `bytes` of `dtype` that float32 does not hold
/// exactly, or None (also for float and bool dtypes).
pub fn first_inexact_integer(bytes: &[u8], dtype: DType) -> Option<i64> {
    let values: Box<dyn Iterator<Item = i64>> = match dtype {
        DType::I64 => Box::new(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))),
        ),
        DType::I32 => Box::new(
            bytes
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4 bytes")))),
        ),
        DType::U32 => Box::new(
            bytes
                .chunks_exact(4)
                .map(|c| i64::from(u32::from_le_bytes(c.try_into().expect("4 bytes")))),
        ),
        _ => return None,
    };
    let mut values = values;
    values.find(|v| !f32_holds(*v))
}

/// A node's label for messages: its name when it has one, else its id.
fn label(node: &rlx_ir::Node) -> String {
    match (&node.op, &node.name) {
        (Op::Input { name } | Op::Param { name }, _) => format!("{name:?}"),
        (_, Some(name)) => format!("node {name:?}"),
        (_, None) => format!("node {}", node.id),
    }
}

/// Refuse, for `device`, what it cannot run as the budgets need (see the module docs). `graph`
/// is the static MIR graph about to be compiled. Errors are [`CoreError::Device`].
pub fn check_graph(device: Device, graph: &Graph) -> Result<(), CoreError> {
    if device != Device::Cuda || raw_device() {
        return Ok(());
    }
    for node in graph.nodes() {
        if node.shape.dtype() == DType::F64 {
            return Err(refuse(format!(
                "{} ({:?}) is float64, and RLX's CUDA backend stores every value as float32 \
                 (rlx-cuda arena), so float64 results would miss the float64 budget",
                label(node),
                node.op.kind()
            )));
        }
        if let Op::Constant { data } = &node.op
            && let Some(v) = first_inexact_integer(data, node.shape.dtype())
        {
            return Err(refuse(format!(
                "integer constant {} holds {v}, which RLX's CUDA backend (float32 storage for \
                 every dtype) cannot hold exactly",
                label(node)
            )));
        }
    }
    check_kernels(graph)
}

/// The [`CoreError::Device`] refusing a graph on CUDA for `what`.
fn refuse(what: String) -> CoreError {
    CoreError::Device(format!(
        "this graph cannot run on device 'cuda': {what}; run it on 'cpu'"
    ))
}

/// RLX's own legalization for its CUDA backend (what its compile runs, and panics on): every
/// op kind must have a CUDA kernel or a rewrite into ops that do.
#[cfg(feature = "cuda")]
fn check_kernels(graph: &Graph) -> Result<(), CoreError> {
    let unfused = rlx_cuda::unfuse::unfuse(graph.clone());
    match rlx_compile::legalize_or_rewrite_for_backend(unfused, rlx_cuda::SUPPORTED_OPS) {
        Ok(_) => Ok(()),
        Err(errors) => {
            let mut kinds: Vec<String> = errors.iter().map(|(_, k)| format!("{k:?}")).collect();
            kinds.sort();
            kinds.dedup();
            Err(refuse(format!(
                "RLX's CUDA backend has no kernel for {} op kind(s): {}",
                kinds.len(),
                kinds.join(", ")
            )))
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn check_kernels(_graph: &Graph) -> Result<(), CoreError> {
    Ok(())
}

/// Refuse, for `device`, inputs its storage cannot hold exactly (`cuda`: integers float32 does
/// not hold). Errors are [`CoreError::Device`].
pub fn check_inputs(device: Device, inputs: &[(&str, &[u8], DType)]) -> Result<(), CoreError> {
    for (name, data, dtype) in inputs {
        check_value(device, "input", name, data, *dtype)?;
    }
    Ok(())
}

/// [`check_inputs`] for one tensor; `what` names its kind in the message (input, parameter).
pub fn check_value(
    device: Device,
    what: &str,
    name: &str,
    data: &[u8],
    dtype: DType,
) -> Result<(), CoreError> {
    if device != Device::Cuda || raw_device() {
        return Ok(());
    }
    match first_inexact_integer(data, dtype) {
        None => Ok(()),
        Some(v) => Err(CoreError::Device(format!(
            "{what} {name:?} holds {v}, which RLX's CUDA backend (float32 storage for every \
             dtype) cannot hold exactly; on device 'cuda' integers must be exact in float32 \
             (every one within +-2^24 is); run it on 'cpu'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::Shape;

    #[test]
    fn names_parse_and_unknown_ones_are_listed() {
        assert_eq!(parse("cpu").unwrap(), Device::Cpu);
        assert_eq!(parse("cuda").unwrap(), Device::Cuda);
        let e = parse("tpu").unwrap_err();
        assert!(e.is_check());
        assert!(e.message().contains("cpu, cuda"), "{e}");
    }

    #[test]
    fn cuda_says_which_is_missing() {
        match available(Device::Cuda) {
            Ok(what) => assert!(what.starts_with("cuda: "), "{what}"),
            Err(e) => {
                assert!(matches!(e, CoreError::Device(_)), "{e:?}");
                let want = if CUDA_BUILT {
                    "not available on this machine"
                } else {
                    "not in this build"
                };
                assert!(e.message().contains(want), "{e}");
            }
        }
        assert_eq!(available(Device::Cpu).unwrap(), "cpu");
    }

    #[test]
    fn each_missing_piece_has_its_own_message() {
        assert!(cuda_missing(false, true).contains("not in this build"));
        assert!(cuda_missing(false, false).contains("`cuda` cargo feature"));
        assert!(cuda_missing(true, false).contains("no NVIDIA driver was found"));
        assert!(cuda_missing(true, true).contains("found no usable GPU"));
    }

    #[test]
    fn float32_holds_integers_up_to_2_pow_24_and_exact_powers() {
        assert!(f32_holds(1 << 24));
        assert!(f32_holds(-(1 << 24)));
        assert!(!f32_holds((1 << 24) + 1));
        assert!(f32_holds(1 << 40));
        assert!(f32_holds(i64::MIN));
        let bytes: Vec<u8> = [3i64, 16_777_217, 5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(first_inexact_integer(&bytes, DType::I64), Some(16_777_217));
        assert_eq!(first_inexact_integer(&bytes, DType::F64), None);
    }

    #[test]
    fn cuda_refuses_float64_and_inexact_integer_constants() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[2], DType::F64));
        g.set_outputs(vec![x]);
        let e = check_graph(Device::Cuda, &g).unwrap_err();
        assert!(matches!(e, CoreError::Device(_)));
        assert!(e.message().contains("float64"), "{e}");
        assert!(check_graph(Device::Cpu, &g).is_ok());

        let mut g = Graph::new("g");
        let data: Vec<u8> = [1i64, 123_456_789]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let c = g.add_node(Op::Constant { data }, vec![], Shape::new(&[2], DType::I64));
        g.set_outputs(vec![c]);
        let e = check_graph(Device::Cuda, &g).unwrap_err();
        assert!(e.message().contains("123456789"), "{e}");
    }

    #[test]
    fn cuda_refuses_inexact_integer_inputs() {
        let big = 20_000_001i64.to_le_bytes();
        let e = check_inputs(Device::Cuda, &[("ids", &big, DType::I64)]).unwrap_err();
        assert!(e.message().contains("input \"ids\" holds 20000001"), "{e}");
        assert!(check_inputs(Device::Cpu, &[("ids", &big, DType::I64)]).is_ok());
        let small = 7i64.to_le_bytes();
        assert!(check_inputs(Device::Cuda, &[("ids", &small, DType::I64)]).is_ok());
    }
}
