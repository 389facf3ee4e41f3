"""Dtypes: ONE record per dtype RLX computes (its torch, RLX, safetensors and numpy names, item
size, machine epsilon, and the RLX carrier it crosses the graph boundary in), the item size of
every dtype torch has, and torch's promotion and accumulation rules the lowerings follow.

Which dtypes cross RLX's boundary as float32 is the Rust core's rule (`src/boundary.rs`,
exported as `_core.BOUNDARY_NARROW` / `_core.BOUNDARY_HALF`); this module reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core

# Bytes per element of every dtype torch has, by torch-ir name (`str(torch.float32)` without
# `torch.`); sub-byte dtypes (int4, float4_e2m1fn_x2, ...) are stored a byte per element. RLX
# computes only some of them (`RECORDS`, `is_supported`); the capability pass reports the others.
TORCH_ITEMSIZE: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "bcomplex32": 4,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "float4_e2m1fn_x2": 1,
    "qint32": 4,
    "qint8": 1,
    "quint8": 1,
    "quint4x2": 1,
    "quint2x4": 1,
    "bits16": 2,
    "bits8": 1,
    "bits1x8": 1,
    "bits2x4": 1,
    "bits4x2": 1,
    **{f"int{n}": 1 for n in range(1, 8)},
    **{f"uint{n}": 1 for n in range(1, 8)},
}


@dataclass(frozen=True)
class DtypeRecord:
    """One dtype RLX computes, in every vocabulary the converter meets."""

    name: str  # torch-ir / torch name ("bfloat16"; `getattr(torch, name)`)
    rlx: str  # RLX serde name ("BF16")
    safetensors: str  # safetensors header tag ("BF16")
    numpy: str | None  # numpy dtype name; None where numpy lacks it (bfloat16 travels as uint16 bits)
    short: str  # short spelling for table headers ("bf16")
    eps: float | None  # machine epsilon (floats; None for integers and bool)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return TORCH_ITEMSIZE[self.name]

    @property
    def carrier(self) -> str:
        """The RLX dtype a graph input or output of this dtype crosses the boundary in: F32 for
        the core's narrow and half dtypes (`_core.BOUNDARY_NARROW`, `_core.BOUNDARY_HALF`), else
        its own."""
        return "F32" if self.rlx in _core.BOUNDARY_NARROW or self.rlx in _core.BOUNDARY_HALF else self.rlx


# torch-ir dtype name -> its record, in this order (error messages list them so).
RECORDS: dict[str, DtypeRecord] = {
    r.name: r
    for r in (
        DtypeRecord("float32", "F32", "F32", "float32", "f32", 2.0**-23),
        DtypeRecord("float16", "F16", "F16", "float16", "f16", 2.0**-10),
        DtypeRecord("bfloat16", "BF16", "BF16", None, "bf16", 2.0**-7),
        DtypeRecord("float64", "F64", "F64", "float64", "f64", 2.0**-52),
        DtypeRecord("int8", "I8", "I8", "int8", "i8", None),
        DtypeRecord("int16", "I16", "I16", "int16", "i16", None),
        DtypeRecord("int32", "I32", "I32", "int32", "i32", None),
        DtypeRecord("int64", "I64", "I64", "int64", "i64", None),
        DtypeRecord("uint8", "U8", "U8", "uint8", "u8", None),
        DtypeRecord("bool", "Bool", "BOOL", "bool", "bool", None),
    )
}
# RLX serde name -> record.
BY_RLX: dict[str, DtypeRecord] = {r.rlx: r for r in RECORDS.values()}

# Bool and narrow integers: RLX's f32-aliased CPU arena cannot pass them across the graph
# boundary natively, and several kernels move them with the wrong width; the workaround
# layer (lower/rlx/) carries and moves them as float32 (exact for these ranges).
NARROW_DTYPES = frozenset(BY_RLX[d].name for d in _core.BOUNDARY_NARROW)
# Half precision computes as float32 inside RLX and is rounded where torch rounds (casts,
# some kernels' intermediates, the outputs), as torch's CPU opmath does. docs/design.md (l).
HALF_DTYPES = frozenset(BY_RLX[d].name for d in _core.BOUNDARY_HALF)


def compute_rlx(dtype: str) -> str:
    """The RLX dtype a value of this torch-ir dtype is computed in (half -> F32)."""
    return "F32" if dtype in HALF_DTYPES else to_rlx(dtype)


# Integer dtypes narrower than int64 (RLX's exact integer kernels are int64; these compute there).
NARROWER_INTS = frozenset({"int32", "int16", "int8", "uint8"})
# Integers below this magnitude are exact in float32 (RLX's f32-encoded indices and counts).
F32_EXACT = 1 << 24

FLOAT_DTYPES = frozenset(r.name for r in RECORDS.values() if r.eps is not None)
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})


# torch's CPU kernels that accumulate (cumsum, cumprod, logcumsumexp) run in `at::acc_type<T, /*is_cuda=*/
# false>`: float64 for float32 and float64, float32 for float16/bfloat16, int64 for integers and bool; each
# running value is rounded to the result dtype only when stored.
_CPU_ACCUMULATE = {"float32": "float64", "float64": "float64", "float16": "float32", "bfloat16": "float32"}


def cpu_accumulate(dtype: str) -> str:
    """The dtype torch's CPU scan kernels accumulate a `dtype` result in (`at::acc_type<T, false>`)."""
    return _CPU_ACCUMULATE.get(dtype, "int64")


# Complex dtypes have no RLX counterpart: a complex tensor of shape S is carried as a float tensor of
# shape S + [2] (real and imaginary parts interleaved, as `torch.view_as_real` lays them out), in the
# float dtype of its parts. docs/design.md (az).
COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}


def is_complex(dtype: str) -> bool:
    """Whether a torch-ir dtype name is a complex dtype the converter carries as float pairs (`COMPLEX_PARTS`)."""
    return dtype in COMPLEX_PARTS


def complex_part(dtype: str) -> str:
    """The float dtype of a complex dtype's real and imaginary parts (`"complex64"` -> `"float32"`)."""
    return COMPLEX_PARTS[dtype]


def to_complex(part: str) -> str:
    """The complex dtype whose parts are float `part` (`"float64"` -> `"complex128"`); float16/bfloat16 -> complex64."""
    return "complex128" if part == "float64" else "complex64"


def is_supported(dtype: str) -> bool:
    """Whether a torch-ir dtype name has an RLX counterpart."""
    return dtype in RECORDS


def to_rlx(dtype: str) -> str:
    """torch-ir dtype name -> RLX serde dtype (`"float32"` -> `"F32"`)."""
    try:
        return RECORDS[dtype].rlx
    except KeyError:
        raise ValueError(f"dtype {dtype!r} has no RLX counterpart") from None


def from_rlx(rlx: str) -> str:
    """RLX serde dtype -> torch-ir dtype name."""
    try:
        return BY_RLX[rlx].name
    except KeyError:
        raise ValueError(f"unknown RLX dtype {rlx!r}") from None


def boundary_dtype(dtype: str) -> str:
    """The RLX dtype a graph input or output of torch-ir `dtype` crosses `run_typed` as: bool and narrow
    integers as F32 (boundary-narrow; exact), half precision as the F32 it computes in."""
    try:
        return RECORDS[dtype].carrier
    except KeyError:
        raise ValueError(f"dtype {dtype!r} has no RLX counterpart") from None


def numpy_dtype(dtype: str) -> np.dtype:
    """numpy dtype for a torch-ir dtype (bfloat16 travels as raw uint16 bits)."""
    np_name = RECORDS[dtype].numpy
    return np.dtype(np_name if np_name is not None else "uint16")


def torch_name(torch_dtype: object) -> str:
    """`torch.float32` -> `"float32"`."""
    return str(torch_dtype).removeprefix("torch.")


def promote(a: str, b: str) -> str:
    """Result dtype of a binary op on two tensors (torch's category rules)."""
    if a == b:
        return a
    order = ["bool", "uint8", "int8", "int16", "int32", "int64", "bfloat16", "float16", "float32", "float64"]
    if {a, b} == {"bfloat16", "float16"}:
        return "float32"
    return a if order.index(a) > order.index(b) else b


def round_half(arr: np.ndarray, dtype: str) -> np.ndarray:
    """Values rounded to float16 / bfloat16 (nearest even), held as float32 (numpy has no bfloat16)."""
    if dtype == "float16":
        with np.errstate(over="ignore"):  # past float16's range is inf, as torch's cast gives
            return np.asarray(arr).astype(np.float16).astype(np.float32)
    bits = np.asarray(arr).astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def to_host(arr: np.ndarray, dtype: str) -> np.ndarray:
    """numpy values of a torch-ir dtype: bfloat16 as bf16-rounded float32, others in their own dtype."""
    if dtype == "bfloat16":
        return round_half(arr, dtype)
    with np.errstate(over="ignore"):  # a float16 output past its range is inf in torch too
        return np.asarray(arr).astype(numpy_dtype(dtype))
