//! PyO3 bindings: the only file that knows about Python types.

//!
//! Every entry point runs its whole body under [`entry`], so a Rust panic anywhere (RLX's or
//! the core's) becomes a Python exception, never PyO3's `PanicException` (a `BaseException`)
//! and never an abort. Failures are one of two classes:
//!
//! * `_core.CheckError` (a `ValueError`): the core's checks refused the input before RLX saw
//!   it: sizes past the machine's memory, a dtype, byte length or name other than declared,
//!   an invalid program, model file or op;
//! * `_core.RlxFailure` (a `RuntimeError`): RLX failed or panicked, or the graph holds an op
//!   and dtype whose RLX kernel is known to corrupt memory (refused before it runs);
//! * `_core.DeviceError` (a `RuntimeError`): the device is not in this build or not on this
//!   machine, or cannot run this graph or input as the budgets need (`device.rs`).

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

use pyo3::ffi;

use crate::error::CoreError;
use crate::runner::{OutputData, Runner};

create_exception!(
    _core,
    CheckError,
    PyValueError,
    "The core's checks refused the input before RLX saw it (a size past the machine's memory, \
     a dtype, byte length or name other than declared, an invalid program or model file)."
);
create_exception!(
    _core,
    RlxFailure,
    PyRuntimeError,
    "RLX failed or panicked, or the graph holds an op and dtype whose RLX kernel is known to \
     corrupt memory (refused before it runs)."
);

create_exception!(
    _core,
    DeviceError,
    PyRuntimeError,
    "The device asked for is not in this build of the core or not on this machine, or cannot \
     run this graph or input as the parity budgets need (float64 or inexact integers on CUDA)."
);

fn to_py(e: CoreError) -> PyErr {
    match e {
        CoreError::Check(m) => CheckError::new_err(m),
        CoreError::Rlx(m) => RlxFailure::new_err(m),
        CoreError::Device(m) => DeviceError::new_err(m),
    }
}

/// `name` as an RLX device, or `CheckError` listing the device names.
fn device_of(name: &str) -> PyResult<rlx_runtime::Device> {
    crate::device::parse(name).map_err(to_py)
}

fn check_err(message: String) -> PyErr {
    CheckError::new_err(message)
}

/// Run an entry point's body; a panic anywhere in it becomes `RlxFailure` naming `what`.
fn entry<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    crate::error::catch(what, f).unwrap_or_else(|e| Err(to_py(e)))
}

/// One output as Python sees it: its bytes (lent to numpy without a copy), RLX dtype name, dims.
type PyTensor<'py> = (Bound<'py, PyOutputBuffer>, String, Vec<usize>);

/// An output's elements, owned here and lent to Python through the buffer protocol:
/// `numpy.frombuffer` views them writably without copying, and they are freed when the
/// last view goes (a 16 MB output is not allocated, faulted in and copied a second time).
#[pyclass(name = "OutputBuffer")]
struct PyOutputBuffer {
    data: OutputData,
}

#[pymethods]
impl PyOutputBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        entry("lending an output's bytes", || {
            Self::fill_buffer(slf, view, flags)
        })
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> PyResult<usize> {
        entry("measuring an output", || Ok(self.data.as_bytes().len()))
    }
}

impl PyOutputBuffer {
    fn fill_buffer(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let (ptr, len) = {
            let mut this = slf.borrow_mut();
            let bytes = this.data.as_bytes_mut();
            (bytes.as_mut_ptr(), bytes.len())
        };
        // SAFETY: `ptr`/`len` are this object's own bytes, which live as long as the object; the
        // view holds a reference to it (PyBuffer_FillInfo increments `slf`), and the bytes are never
        // reallocated (no method resizes them).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr.cast::<c_void>(),
                len as ffi::Py_ssize_t,
                0,
                flags,
            )
        };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

/// Borrow a contiguous byte buffer (bytes, memoryview of an mmap, numpy) without copying.
fn bytes_of(buf: &PyBuffer<u8>) -> PyResult<&[u8]> {
    if !buf.is_c_contiguous() {
        return Err(check_err(
            "tensor data must be a contiguous byte buffer".to_string(),
        ));
    }
    // SAFETY: the buffer is C-contiguous, of `len_bytes` u8 elements, and the
    // exporter keeps it alive and unmodified for as long as `buf` is held.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) })
}

/// One symbolic graph (`.rlxmodel` text) from the HIR JSON of a program at several bindings,
/// and the check lowerings it does not reproduce; `sizes`: each RLX symbol number with its
/// size in each HIR; `names`: each one's name in the text; the first `probes` HIRs are
/// generalized from, the rest checked (`dynamic::generalize`).
#[pyfunction]
fn generalize(
    py: Python<'_>,
    hir_jsons: Vec<String>,
    sizes: Vec<(u32, Vec<usize>)>,
    names: Vec<(u32, String)>,
    probes: usize,
) -> PyResult<(String, Vec<usize>)> {
    entry("generalizing the lowerings", || {
        py.allow_threads(|| crate::dynamic::generalize(&hir_jsons, &sizes, &names, probes))
            .map(|g| (g.text, g.unreproduced))
            .map_err(to_py)
    })
}

/// A symbolic RLX graph read from `.rlxmodel` text; `compile(binding)` gives the
/// `CompiledModel` of one binding (symbol number → size). Read-only, so usable from any thread.
#[pyclass(name = "SymbolicModel", frozen)]
struct PySymbolicModel {
    graph: rlx_ir::Graph,
}

#[pymethods]
impl PySymbolicModel {
    #[new]
    fn new(text: &str) -> PyResult<Self> {
        entry("reading the symbolic graph", || {
            Ok(Self {
                graph: crate::dynamic::read(text).map_err(to_py)?,
            })
        })
    }

    #[pyo3(signature = (binding, device="cpu"))]
    fn compile(
        &self,
        py: Python<'_>,
        binding: Vec<(u32, usize)>,
        device: &str,
    ) -> PyResult<PyCompiledModel> {
        entry("compiling the symbolic graph", || {
            let graph = &self.graph;
            let device = device_of(device)?;
            let runner = py
                .allow_threads(|| {
                    crate::dynamic::specialize(graph, &binding)
                        .and_then(|g| Runner::from_graph(g, device))
                })
                .map_err(to_py)?;
            Ok(PyCompiledModel::of(runner))
        })
    }
}

/// Lowered-program JSON → rlx-ir HIR JSON (validates wiring and every Op).
#[pyfunction]
fn program_to_hir_json(py: Python<'_>, program_json: &str) -> PyResult<String> {
    entry("building the HIR", || {
        py.allow_threads(|| crate::program::program_to_hir_json(program_json))
            .map_err(to_py)
    })
}

/// An ONNX file → (program JSON, weights as (name, RLX dtype, bytes), the importer's report JSON),
/// named symbolic dims bound by `dims` (`src/onnx.rs`).
#[cfg(feature = "onnx")]
#[pyfunction]
#[pyo3(signature = (path, dims, strict=false))]
#[allow(clippy::type_complexity)]
fn onnx_import<'py>(
    py: Python<'py>,
    path: &str,
    dims: std::collections::HashMap<String, usize>,
    strict: bool,
) -> PyResult<(
    String,
    Vec<(String, String, Bound<'py, pyo3::types::PyBytes>)>,
    String,
)> {
    entry("importing the ONNX file", || {
        let imported = py
            .allow_threads(|| crate::onnx::import(std::path::Path::new(path), &dims, strict))
            .map_err(to_py)?;
        let weights = imported
            .weights
            .into_iter()
            .map(|w| {
                (
                    w.name,
                    crate::dtype_name(w.dtype),
                    pyo3::types::PyBytes::new(py, &w.data),
                )
            })
            .collect();
        Ok((imported.program_json, weights, imported.report_json))
    })
}

/// The ONNX op types RLX's importer lowers or rewrites (empty without the `onnx` feature).
#[pyfunction]
fn onnx_op_types() -> PyResult<Vec<&'static str>> {
    entry("listing the ONNX op types", || {
        #[cfg(feature = "onnx")]
        return Ok(crate::onnx::known_op_types());
        #[cfg(not(feature = "onnx"))]
        Ok(Vec::new())
    })
}

/// One op (rlx-ir serde JSON) as a Rust expression, plus the type names it uses.
/// A `Constant` prints `data_expr` as its payload.
#[pyfunction]
fn op_to_rust(op_json: &str, data_expr: &str) -> PyResult<(String, Vec<String>)> {
    entry("printing an op as Rust", || {
        let expr = crate::rust_syntax::op_json_to_rust(op_json, data_expr).map_err(to_py)?;
        Ok((expr.code, expr.types.into_iter().collect()))
    })
}

/// Set (`Some`) or clear (`None`) an `RLX_*` setting as an in-process override
/// (`rlx_ir::env`), e.g. `RLX_PROFILE_THUNKS` around a profiled run.
#[pyfunction]
#[pyo3(signature = (key, value=None))]
fn set_rlx_env(key: &str, value: Option<&str>) -> PyResult<()> {
    entry("setting an RLX_* override", || {
        if !key.starts_with("RLX_") {
            return Err(check_err(format!("{key:?} is not an RLX_* setting")));
        }
        match value {
            Some(v) => rlx_ir::env::set(key, v),
            None => rlx_ir::env::unset(key),
        }
        Ok(())
    })
}

/// What this build and machine have of device `name`: a description (`"cuda: NVIDIA H200"`),
/// after putting the device's settings in effect; `DeviceError` says whether the build or the
/// machine lacks it, `CheckError` names an unknown device (`device::prepare`).
#[pyfunction]
fn device_info(py: Python<'_>, name: &str) -> PyResult<(String, Vec<String>)> {
    entry("looking for the device", || {
        let device = device_of(name)?;
        py.allow_threads(|| {
            let settings = crate::device::prepare(device)?;
            Ok((crate::device::available(device)?, settings))
        })
        .map_err(to_py)
    })
}

/// Why RLX's CUDA backend cannot run a HIR JSON graph as the budgets need (float64 values,
/// integer constants float32 does not hold, op kinds with no CUDA kernel or rewrite), or None
/// (`device::check_graph`). Needs no GPU: the static probe of the op samples and the tests use it.
#[pyfunction]
fn cuda_refusal(py: Python<'_>, hir_json: &str) -> PyResult<Option<String>> {
    entry("checking the graph for CUDA", || {
        py.allow_threads(|| {
            let hir = rlx_ir::serialize::hir_from_json(hir_json)
                .map_err(|e| CoreError::Check(format!("not valid RLX HIR: {e}")))?;
            let mir = hir
                .lower_to_mir()
                .map_err(|e| CoreError::Rlx(format!("RLX could not lower the graph: {e:?}")))?;
            match crate::device::check_graph(rlx_runtime::Device::Cuda, &mir.into_graph()) {
                Ok(()) => Ok(None),
                Err(CoreError::Device(why)) => Ok(Some(why)),
                Err(e) => Err(e),
            }
        })
        .map_err(to_py)
    })
}

/// The BLAS provider RLX computes with (loaded now if it was not yet): `(provider, library path,
/// detail, chosen_by)`; `CheckError` says why none could be loaded (`blas::info`).
#[pyfunction]
fn blas_info() -> PyResult<(String, String, String, String)> {
    entry("loading the BLAS provider", || {
        crate::blas::info()
            .map(|i| (i.provider, i.path, i.detail, i.chosen_by))
            .map_err(|why| to_py(CoreError::Check(why)))
    })
}

/// RLX version the core was built against.
#[pyfunction]
fn rlx_version() -> PyResult<&'static str> {
    entry("reading the RLX version", || Ok(crate::RLX_VERSION))
}

/// A compiled RLX graph; tensors cross as `(bytes, dtype_name)`.
///
/// Usable from any thread: the compiled graph (RLX's arena is one per graph) sits behind a
/// mutex, so calls on one model are serialised, each taken without the GIL; runs of different
/// models overlap (`fpmode::enter_pool` keeps their denormal modes apart).
#[pyclass(name = "CompiledModel", frozen)]
struct PyCompiledModel {
    runner: Mutex<Runner>,
    device: rlx_runtime::Device,
    output_dtypes: Vec<String>,
}

impl PyCompiledModel {
    fn of(runner: Runner) -> Self {
        Self {
            device: runner.device(),
            output_dtypes: runner
                .output_dtypes()
                .iter()
                .map(|d| crate::dtype_name(*d))
                .collect(),
            runner: Mutex::new(runner),
        }
    }

    /// Run `f` on the runner without the GIL, once no other call holds it. A poisoned mutex
    /// (a panic while a call held it) refuses every later call, as a poisoned `Runner` does.
    fn with_runner<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Runner) -> Result<T, CoreError> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| {
            let mut runner = self.runner.lock().map_err(|_| {
                CoreError::Rlx(
                    "this compiled model is unusable: an earlier call panicked while holding it; \
                     compile the model again"
                        .to_string(),
                )
            })?;
            f(&mut runner)
        })
        .map_err(to_py)
    }
}

#[pymethods]
impl PyCompiledModel {
    #[new]
    #[pyo3(signature = (hir_json, device="cpu"))]
    fn new(py: Python<'_>, hir_json: &str, device: &str) -> PyResult<Self> {
        entry("compiling the graph", || {
            let device = device_of(device)?;
            let runner = py
                .allow_threads(|| Runner::from_hir_json(hir_json, device))
                .map_err(to_py)?;
            Ok(Self::of(runner))
        })
    }

    /// The device the graph was compiled for (`"cpu"`, `"cuda"`).
    #[getter]
    fn device(&self) -> &'static str {
        crate::device::name(self.device)
    }

    /// Run with flush-to-zero / denormals-are-zero on RLX's threads (restored after each run).
    fn set_flush_denormals(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        entry("setting the denormal mode", || {
            self.with_runner(py, |r| {
                r.set_flush_denormals(on);
                Ok(())
            })
        })
    }

    fn set_param(
        &self,
        py: Python<'_>,
        name: &str,
        data: PyBuffer<u8>,
        dtype: &str,
    ) -> PyResult<()> {
        entry("setting a parameter", || {
            let dtype = crate::parse_dtype(dtype).map_err(to_py)?;
            let bytes = bytes_of(&data)?;
            self.with_runner(py, |r| r.set_param(name, bytes, dtype))
        })
    }

    /// Keep f32 input `name` in RLX's arena between runs (later runs may leave it out); rows of
    /// output `feed_from` are copied into it by `feed_rows`.
    fn bind_resident(
        &self,
        py: Python<'_>,
        name: &str,
        data: PyBuffer<u8>,
        feed_from: usize,
    ) -> PyResult<()> {
        entry("binding a resident input", || {
            let bytes = bytes_of(&data)?;
            self.with_runner(py, |r| r.bind_resident(name, bytes, feed_from))
        })
    }

    /// How many runs were started on this graph (a caller keeping resident inputs checks it).
    fn run_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_runner(py, |r| Ok(r.run_count()))
    }

    /// Copy output rows into the resident inputs: `(src, dst)` row pairs of `row_elems` elements.
    fn feed_rows(
        &self,
        py: Python<'_>,
        moves: Vec<(usize, usize)>,
        row_elems: usize,
    ) -> PyResult<()> {
        entry("copying rows into resident inputs", || {
            self.with_runner(py, |r| r.feed_rows(&moves, row_elems))
        })
    }

    /// Write a slice of an f32 parameter at `byte_offset`; False when RLX cannot (bind it whole).
    fn set_param_range(
        &self,
        py: Python<'_>,
        name: &str,
        byte_offset: usize,
        data: PyBuffer<u8>,
    ) -> PyResult<bool> {
        entry("setting part of a parameter", || {
            let bytes = bytes_of(&data)?;
            self.with_runner(py, |r| r.set_param_range(name, byte_offset, bytes))
        })
    }

    /// Run with `[(name, bytes, dtype_name)]`; returns `[(bytes, dtype_name, dims)]`.
    fn run<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<(String, PyBuffer<u8>, String)>,
    ) -> PyResult<Vec<PyTensor<'py>>> {
        entry("running the graph", || {
            let mut typed = Vec::with_capacity(inputs.len());
            for (name, data, dtype) in &inputs {
                let dtype = crate::parse_dtype(dtype)
                    .map_err(|e| to_py(e.map(|m| format!("input {name:?}: {m}"))))?;
                typed.push((name.as_str(), bytes_of(data)?, dtype));
            }
            let outputs = self.with_runner(py, |r| r.run(&typed))?;
            outputs
                .into_iter()
                .map(|(data, dtype, dims)| {
                    Ok((
                        Bound::new(py, PyOutputBuffer { data })?,
                        crate::dtype_name(dtype),
                        dims,
                    ))
                })
                .collect()
        })
    }

    fn output_dtypes(&self) -> PyResult<Vec<String>> {
        entry("listing the output dtypes", || {
            Ok(self.output_dtypes.clone())
        })
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::error::install_panic_hook();
    m.add("CheckError", m.py().get_type::<CheckError>())?;
    m.add("RlxFailure", m.py().get_type::<RlxFailure>())?;
    m.add("DeviceError", m.py().get_type::<DeviceError>())?;
    m.add("CUDA_BUILT", crate::device::CUDA_BUILT)?;
    m.add(
        "CUDA_STRICT_SETTINGS",
        crate::device::CUDA_STRICT_SETTINGS.to_vec(),
    )?;
    let names = |dtypes: &[rlx_ir::DType]| {
        dtypes
            .iter()
            .map(|d| crate::dtype_name(*d))
            .collect::<Vec<_>>()
    };
    m.add("BOUNDARY_NARROW", names(crate::boundary::NARROW))?;
    m.add("BOUNDARY_HALF", names(crate::boundary::HALF))?;
    m.add("PROBE_RAW_KERNELS_ENV", crate::defects::RAW_KERNELS_ENV)?;
    m.add("PROBE_RAW_DEVICE_ENV", crate::device::RAW_DEVICE_ENV)?;
    m.add_function(wrap_pyfunction!(device_info, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(program_to_hir_json, m)?)?;
    m.add_function(wrap_pyfunction!(rlx_version, m)?)?;
    m.add_function(wrap_pyfunction!(blas_info, m)?)?;
    m.add_function(wrap_pyfunction!(set_rlx_env, m)?)?;
    m.add_function(wrap_pyfunction!(op_to_rust, m)?)?;
    m.add("ONNX_BUILT", cfg!(feature = "onnx"))?;
    #[cfg(feature = "onnx")]
    m.add_function(wrap_pyfunction!(onnx_import, m)?)?;
    m.add_function(wrap_pyfunction!(onnx_op_types, m)?)?;
    m.add_function(wrap_pyfunction!(generalize, m)?)?;
    m.add_class::<PyCompiledModel>()?;
    m.add_class::<PySymbolicModel>()?;
    Ok(())
}
