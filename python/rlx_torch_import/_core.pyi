"""Type stubs for the Rust core (src/python.rs).

Every call raises one of three classes (never PyO3's PanicException, never an abort): `CheckError`
when the core's checks refuse the input before RLX sees it (an op and dtype whose RLX kernel is
known to corrupt memory included, src/defects.rs), `DeviceError` when the device asked for is not in
this build or on this machine or cannot run the graph as the budgets need (src/device.rs),
`RlxFailure` when RLX fails or panics.
"""

from collections.abc import Sequence
from typing import Any, TypeAlias

from numpy.typing import NDArray
from typing_extensions import Buffer, Self, final

__all__ = [
    "BOUNDARY_HALF",
    "BOUNDARY_NARROW",
    "CUDA_BUILT",
    "CUDA_STRICT_SETTINGS",
    "ONNX_BUILT",
    "PROBE_RAW_DEVICE_ENV",
    "PROBE_RAW_KERNELS_ENV",
    "CheckError",
    "CompiledModel",
    "DeviceError",
    "RlxFailure",
    "SymbolicModel",
    "blas_info",
    "cuda_refusal",
    "device_info",
    "generalize",
    "onnx_import",
    "onnx_op_types",
    "op_to_rust",
    "program_to_hir_json",
    "rlx_version",
    "set_rlx_env",
]

# Bytes the core reads through the buffer protocol. A numpy array exports it on every Python, but
# numpy's stubs declare `__buffer__` (so an array is a `Buffer`) only for Python >= 3.12.
_Bytes: TypeAlias = Buffer | NDArray[Any]

class CheckError(ValueError):
    """The core's checks refused the input before RLX saw it: a shape past this machine's memory
    (or one whose size overflows), an arena larger than it, a dtype, byte length or name other
    than declared (parameters and inputs), an invalid program, model file or op, a known
    memory-corrupting op and dtype, a symbolic graph that does not specialize."""

class RlxFailure(RuntimeError):
    """RLX failed or panicked (the message names the step and the panic), or a compiled model that
    panicked before is used again."""

class DeviceError(RuntimeError):
    """Device "cuda" is not in this build (no `cuda` cargo feature) or not on this machine (no NVIDIA
    driver or GPU), or cannot run this graph or input within the budgets (float64 values, integers
    float32 does not hold exactly): RLX's CUDA backend stores every value as float32."""

CUDA_BUILT: bool
ONNX_BUILT: bool  # the core was built with the `onnx` feature (RLX's ONNX importer)
"""Whether this build of the core includes RLX's CUDA backend (the `cuda` cargo feature)."""

CUDA_STRICT_SETTINGS: list[tuple[str, str]]
"""The RLX settings (key, value) every CUDA compile makes unless the environment sets them."""

BOUNDARY_NARROW: list[str]
"""RLX dtypes (serde names: Bool, I8, U8, I16) that cross the graph boundary as F32: RLX's
f32-aliased CPU arena cannot pass them natively (src/boundary.rs)."""

BOUNDARY_HALF: list[str]
"""RLX dtypes (F16, BF16) that compute inside RLX, and cross the graph boundary, as F32."""

PROBE_RAW_KERNELS_ENV: str
"""Environment variable the kernel-safety probe sets to `1` to run RLX's kernels unguarded."""

PROBE_RAW_DEVICE_ENV: str
"""Environment variable the CUDA defect probes set to `1` to skip the device checks."""

def device_info(name: str) -> tuple[str, list[str]]:
    """What this build and machine have of device `name` ("cpu", "cuda"): a description ("cuda:
    NVIDIA H200") and the RLX settings in effect for it ("RLX_CUDA_PARITY=1", ...); DeviceError
    saying whether the build or the machine lacks it, CheckError for an unknown name."""

def cuda_refusal(hir_json: str) -> str | None:
    """Why RLX's CUDA backend cannot run this HIR graph within the budgets, or None; needs no GPU."""

def onnx_import(path: str, dims: dict[str, int], strict: bool = False) -> tuple[str, list[tuple[str, str, bytes]], str]:
    """An ONNX file through RLX's importer (rlx-onnx-import, the `onnx` cargo feature; src/onnx.rs): the
    program JSON (`program_to_hir_json`'s vocabulary), its weights as (name, RLX dtype, little-endian
    bytes) and the importer's report JSON (`lowered`, `stubbed_nodes`, `unsupported`: [op type, count]).
    `dims`: ONNX symbolic dim name -> size; `strict`: the importer refuses a stubbed node itself.
    CheckError when the importer fails (its message names the node), RlxFailure when it panics."""

def onnx_op_types() -> list[str]:
    """The op types in RLX's ONNX importer's registry (empty without the `onnx` feature)."""

def program_to_hir_json(program_json: str) -> str:
    """Lowered-program JSON -> rlx-ir HIR JSON; raises CheckError naming the bad node."""

def blas_info() -> tuple[str, str, str, str]:
    """The BLAS provider RLX computes with, loaded now if it was not yet (src/blas.rs): provider
    ("mkl", "openblas", "system", "custom"), library path, its version/kernel detail, and how it was
    chosen ("auto (GenuineIntel)", "RTI_BLAS=system"); CheckError says why none could be loaded."""

def rlx_version() -> str:
    """Version of the RLX crates the core was built against."""

def set_rlx_env(key: str, value: str | None = None) -> None:
    """Set or clear an in-process `RLX_*` override (rlx_ir::env); CheckError for other keys."""

@final
class OutputBuffer(Buffer):
    """An output's bytes, owned by the core and lent writably through the buffer protocol."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class CompiledModel:
    """A HIR module compiled on an RLX device, "cpu" or "cuda" (after the core's checks: CheckError
    for a malformed graph, a size past this machine's memory, a known-crashing kernel; DeviceError
    for a device this build or machine lacks, or a graph it cannot run within the budgets).
    Usable from any thread: calls are serialised by a mutex, each taken without the GIL."""

    def __new__(cls, hir_json: str, device: str = "cpu") -> Self: ...
    @property
    def device(self) -> str: ...
    def set_param(self, name: str, data: _Bytes, dtype: str) -> None:
        """Bind a declared parameter; `dtype` is its declared one (F16/BF16 also for a declared F32
        parameter, widened) and `data` exactly its bytes, else CheckError."""
    def set_param_range(self, name: str, byte_offset: int, data: _Bytes) -> bool:
        """Write bytes of a declared F32 parameter (False for other dtypes: bind it whole);
        CheckError for an unknown name or a range past its end."""
    def bind_resident(self, name: str, data: _Bytes, feed_from: int) -> None:
        """Keep F32 input `name` (`data`: exactly its bytes) in RLX's arena between runs: later runs
        may leave it out (giving it again unbinds it). `feed_rows` copies rows of output `feed_from`
        into it. CheckError for an unknown or non-F32 input, a wrong byte length, a `feed_from` that
        is not an F32 output, or a device RLX keeps no resident inputs on."""
    def run_count(self) -> int:
        """How many runs were started on this graph (whether or not they succeeded)."""
    def feed_rows(self, moves: Sequence[tuple[int, int]], row_elems: int) -> None:
        """After a run, copy each resident input's output rows into it: `(src, dst)` moves output row
        `src` to input row `dst`, rows of `row_elems` elements. CheckError for a row past either end."""
    def set_flush_denormals(self, on: bool) -> None: ...
    def run(self, inputs: Sequence[tuple[str, _Bytes, str]]) -> list[tuple[OutputBuffer, str, list[int]]]:
        """Every declared input exactly once (a resident one may be left out), in its declared dtype
        and byte length, else CheckError
        (DeviceError on "cuda" for an integer float32 does not hold exactly).
        After a panic inside RLX (RlxFailure) the model refuses every later call: compile it again."""
    def output_dtypes(self) -> list[str]: ...

def generalize(
    hir_jsons: list[str], sizes: list[tuple[int, list[int]]], names: list[tuple[int, str]], probes: int
) -> tuple[str, list[int]]:
    """One symbolic graph (`.rlxmodel` text) from the HIR JSON of a program at several bindings
    (the first `probes` generalized from, the rest checks), and the indices of the checks it does
    not reproduce. `sizes` gives each RLX symbol number with its size in each, `names` its name in
    the text. RlxFailure names the node where the probes are not one symbolic graph."""

@final
class SymbolicModel:
    """A symbolic RLX graph (`.rlxmodel` text, CheckError when it is not one); `compile` specializes
    and compiles one binding, with CompiledModel's checks (CheckError for a size past this machine's
    memory or a dim left dynamic)."""

    def __new__(cls, text: str) -> Self: ...
    def compile(self, binding: list[tuple[int, int]], device: str = "cpu") -> CompiledModel: ...

def op_to_rust(op_json: str, data_expr: str) -> tuple[str, list[str]]:
    """One op (rlx-ir serde JSON) as a Rust expression, plus the type names it mentions."""
