"""Complex values at a bundle's boundary: a complex graph input or output crosses RLX as its float pairs.

A complex tensor of torch shape S (complex64 / complex128) crosses as a float tensor of shape S + [2]
(float32 / float64), real and imaginary parts interleaved on the last axis as `torch.view_as_real` lays
them out (`lower/complexes.py`). meta.json declares such an input or output by its carrier (`dtype` the
parts' float dtype, `shape` S + [2]) and records the logical dtype as `"complex": "complex64"`; files
(weights.safetensors, reference.safetensors) hold the float pairs under the tensor's own key, and torch-ir
keeps the complex dtype. `BundleModel.run` takes complex arrays (or their float pairs) for a complex input
and returns complex numpy arrays (np.complex64 / np.complex128) for a complex output. docs/design.md (az).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import complex_part, is_complex
from .errors import BundleError, InputError
from .limits import short

# meta.json's field naming a boundary value's complex dtype
FIELD = "complex"


def carrier(dtype: str, shape: list[Any]) -> dict[str, Any]:
    """meta.json's `dtype`/`shape` (and `complex`) for a boundary value of torch-ir `dtype` and torch `shape`
    (a complex one: its float pairs, shape + [2]; any other: as it is)."""
    if not is_complex(dtype):
        return {"shape": list(shape), "dtype": dtype}
    return {"shape": [*shape, 2], "dtype": complex_part(dtype), FIELD: dtype}


def stored(dtype: str, shape: list[Any]) -> tuple[str, list[Any]]:
    """(dtype, shape) a tensor of torch-ir `dtype` and `shape` is stored as in a safetensors file (a complex
    one: its float pairs, shape + [2]; `safetensors_io.iter_torch`)."""
    return (complex_part(dtype), [*shape, 2]) if is_complex(dtype) else (dtype, list(shape))


def pairs(arr: np.ndarray) -> np.ndarray:
    """A complex array as its float pairs (shape + [2], as `torch.view_as_real`); any other as it is."""
    if arr.dtype.kind != "c":
        return arr
    arr = np.ascontiguousarray(arr)
    return arr.view(arr.real.dtype).reshape(*arr.shape, 2)


def compared(
    actual: np.ndarray, expected: np.ndarray, judge: np.ndarray | None, actual_dtype: str, expected_dtype: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str, str, list[str]]:
    """An output's arrays and dtypes as `verify.compare.compare_output` compares them: a complex output as
    its view_as_real float pairs in the parts' float dtype (the float budgets apply to the pairs), with a
    note saying so for the report row; anything else as it is (no note)."""
    logical = next((d for d in (expected_dtype, actual_dtype) if is_complex(d)), None)  # files hold the pairs
    notes = [f"{logical}: compared as its float pairs (view_as_real)"] if logical else []
    return (
        pairs(np.asarray(actual)),
        pairs(np.asarray(expected)),
        None if judge is None else pairs(np.asarray(judge)),
        stored(actual_dtype, [])[0],
        stored(expected_dtype, [])[0],
        notes,
    )


def check_spec(spec: dict[str, Any], at: str) -> None:
    """A meta.json input/output's `complex` field, if present: a complex dtype whose parts are its `dtype`,
    its `shape` ending in the pair axis 2. Raises BundleError naming the field and the value."""
    logical = spec.get(FIELD)
    if logical is None:
        return
    if not isinstance(logical, str) or not is_complex(logical):
        raise BundleError(f"{at}.{FIELD}: {short(logical)} is not complex64 or complex128")
    if complex_part(logical) != spec.get("dtype") or spec.get("rlx_dtype", spec.get("dtype")) != spec.get("dtype"):
        raise BundleError(f"{at}: a {logical} value crosses as {complex_part(logical)} pairs, not {spec.get('dtype')}")
    shape = spec.get("shape")
    if not isinstance(shape, list) or not shape or shape[-1] != 2:
        raise BundleError(f"{at}.shape: {short(shape)} does not end in the pair axis 2 of a {logical} value")


def to_pairs(name: str, value: Any, spec: dict[str, Any]) -> Any:
    """A value given for input `spec` (meta.json): a complex array of the input's complex dtype (or one that
    numpy casts to it without loss) as its float pairs; anything else as it is (float pairs are taken as
    they are, and checked as floats by `as_input`). Raises InputError for a complex input given a real array
    of its torch shape (not its pairs), naming the input."""
    logical = spec.get(FIELD)
    if logical is None:
        return value
    if hasattr(value, "is_complex") and hasattr(value, "resolve_conj"):  # a torch tensor (conj views resolved)
        value = value.detach().cpu().resolve_conj().resolve_neg()
    try:
        arr = np.asarray(value)
    except Exception:  # `as_input` says why
        return value
    if arr.dtype.kind != "c":
        shape = spec["shape"]
        if arr.ndim == len(shape) - 1 and arr.dtype.kind in "biuf":
            raise InputError(
                f"input {name!r} is {logical}: give complex values (numpy {np.dtype(logical).name} or a torch "
                f"{logical} tensor) or their float pairs (torch.view_as_real, shape [..., 2]); got real {arr.dtype}"
            )
        return value
    want = np.dtype(logical)
    if not np.can_cast(arr.dtype, want, "safe"):
        raise InputError(
            f"input {name!r} has dtype {arr.dtype}; the bundle expects {logical} (cast it first, e.g. "
            f"x.astype(np.{want.name}))"
        )
    arr = np.ascontiguousarray(arr.astype(want, copy=False))
    return arr.view(np.dtype(complex_part(logical))).reshape(*arr.shape, 2)


def from_pairs(arr: np.ndarray, spec: dict[str, Any]) -> np.ndarray:
    """A result for output `spec` (meta.json): a complex output's float pairs as a complex numpy array of
    its torch shape (np.complex64 / np.complex128); any other as it is."""
    logical = spec.get(FIELD)
    if logical is None:
        return arr
    pairs = np.ascontiguousarray(arr)
    return pairs.view(np.dtype(logical)).reshape(pairs.shape[:-1])
