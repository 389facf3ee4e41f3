"""Dtype names across the three vocabularies: torch, torch-ir (strings), RLX serde."""

from __future__ import annotations

import numpy as np

# torch-ir dtype name -> (RLX serde name, numpy dtype or None when numpy lacks it)
_TABLE: dict[str, tuple[str, str | None]] = {
    "float32": ("F32", "float32"),
    "float16": ("F16", "float16"),
    "bfloat16": ("BF16", None),
    "float64": ("F64", "float64"),
    "int8": ("I8", "int8"),
    "int16": ("I16", "int16"),
    "int32": ("I32", "int32"),
    "int64": ("I64", "int64"),
    "uint8": ("U8", "uint8"),
    "bool": ("Bool", "bool"),
}

# Bool and narrow integers: RLX's f32-aliased CPU arena cannot pass them across the graph
# boundary natively, and several kernels move them with the wrong width; the workaround
# layer (lower/rlx/workarounds.py) carries and moves them as float32 (exact for these ranges).
NARROW_DTYPES = frozenset({"bool", "int8", "uint8", "int16"})
# Half precision computes as float32 inside RLX and is rounded where torch rounds (casts,
# some kernels' intermediates, the outputs), as torch's CPU opmath does. docs/design.md (l).
HALF_DTYPES = frozenset({"float16", "bfloat16"})


def compute_rlx(dtype: str) -> str:
    """The RLX dtype a value of this torch-ir dtype is computed in (half -> F32)."""
    return "F32" if dtype in HALF_DTYPES else to_rlx(dtype)


# Integer dtypes narrower than int64 (RLX's exact integer kernels are int64; these compute there).
NARROWER_INTS = frozenset({"int32", "int16", "int8", "uint8"})
# Integers below this magnitude are exact in float32 (RLX's f32-encoded indices and counts).
F32_EXACT = 1 << 24

FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})


# torch's CPU kernels that accumulate (cumsum, cumprod, logcumsumexp) run in `at::acc_type<T, /*is_cuda=*/
# false>`: float64 for float32 and float64, float32 for float16/bfloat16, int64 for integers and bool; each
# running value is rounded to the result dtype only when stored.
_CPU_ACCUMULATE = {"float32": "float64", "float64": "float64", "float16": "float32", "bfloat16": "float32"}


def cpu_accumulate(dtype: str) -> str:
    """The dtype torch's CPU scan kernels accumulate a `dtype` result in (`at::acc_type<T, false>`)."""
    return _CPU_ACCUMULATE.get(dtype, "int64")


def is_supported(dtype: str) -> bool:
    """Whether a torch-ir dtype name has an RLX counterpart."""
    return dtype in _TABLE


def to_rlx(dtype: str) -> str:
    """torch-ir dtype name -> RLX serde dtype (`"float32"` -> `"F32"`)."""
    try:
        return _TABLE[dtype][0]
    except KeyError:
        raise ValueError(f"dtype {dtype!r} has no RLX counterpart") from None


def from_rlx(rlx: str) -> str:
    """RLX serde dtype -> torch-ir dtype name."""
    for name, (r, _) in _TABLE.items():
        if r == rlx:
            return name
    raise ValueError(f"unknown RLX dtype {rlx!r}")


def numpy_dtype(dtype: str) -> np.dtype:
    """numpy dtype for a torch-ir dtype (bfloat16 travels as raw uint16 bits)."""
    np_name = _TABLE[dtype][1]
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
