"""Values across RLX's boundary: numpy inputs checked and carried in the dtype RLX takes
(`as_input`, `to_carrier`), results read back (`from_carrier`), weights bound (`bind_weight`)."""

from __future__ import annotations

import math
import os
import re
import tempfile
from typing import Any

import numpy as np

from .. import _core, complex_edge, safetensors_io
from ..dtypes import numpy_dtype, to_host, to_rlx
from ..errors import InputError
from ..limits import short
from ..sizes import evaluate_shape


def as_input(name: str, value: Any, declared: str) -> np.ndarray:
    """`value` as a numpy array for an input of torch-ir dtype `declared`, under `BundleModel.run`'s
    dtype policy (arrays: lossless casts only; Python numbers and lists: literals of the same
    kind; bfloat16: float32 values). Raises InputError naming the input for anything else."""
    literal = isinstance(value, (bool, int, float, list, tuple))
    arraylike = isinstance(value, (np.ndarray, np.generic)) or hasattr(value, "__array__")
    if value is None or isinstance(value, (str, bytes)) or not (literal or arraylike):
        raise InputError(f"input {name!r} is {type(value).__name__} {short(value)}, not an array of {declared}")
    try:
        arr = np.asarray(value)
    except Exception as e:  # a ragged list, a tensor that requires grad or has no numpy dtype, ...
        raise InputError(f"input {name!r} cannot be read as an array ({type(e).__name__}: {str(e)[:200]})") from None
    if arr.dtype.kind not in "biuf":
        raise InputError(f"input {name!r} holds {arr.dtype} values, not numbers; the bundle expects {declared}")
    target = np.dtype(np.float32) if declared == "bfloat16" else numpy_dtype(declared)
    if arr.dtype == target:
        return arr
    if literal:
        ok = bool(np.can_cast(arr.dtype, target, "same_kind"))
        if ok and target.kind in "iu" and arr.size:  # integers must fit
            info = np.iinfo(target)  # type: ignore[type-var]  # kind "iu": an integer dtype
            ok = info.min <= int(arr.min()) and int(arr.max()) <= info.max
        how = "Python numbers convert to it when of the same kind and in range"
    else:
        ok = bool(np.can_cast(arr.dtype, target, "safe"))
        how = f"only casts numpy makes without loss are applied: cast it first, e.g. x.astype(np.{target.name})"
    if not ok:
        shown = "" if declared != "bfloat16" else " (bfloat16 inputs take float32 values)"
        raise InputError(f"input {name!r} has dtype {arr.dtype}; the bundle expects {declared}{shown} ({how})")
    return arr


# A float32 weight larger than this is bound in slices of this size, each slice's file pages dropped once
# RLX holds it, so loading never keeps a second whole copy of a large weight.
_BIND_SLICE = 16 << 20


def bind_weight(model: Any, name: str, t: safetensors_io.RawTensor) -> None:
    """Bind weight `t` to RLX parameter `name`, then drop its file pages (RLX holds its own copy)."""
    if t.dtype == "float32" and t.data.nbytes > _BIND_SLICE:
        for start in range(0, t.data.nbytes, _BIND_SLICE):
            piece = safetensors_io.RawTensor(
                t.dtype, (), t.data[start : start + _BIND_SLICE], t.mapping, t.offset + start
            )
            if not model.set_param_range(name, start, piece.data):
                break  # RLX cannot write this parameter in pieces: bind it whole below
            piece.release()
        else:
            return
    model.set_param(name, t.data, to_rlx(t.dtype))
    t.release()


def encode_feed(specs: list[dict[str, Any]], arrays: dict[str, np.ndarray], at: dict[str, int]) -> list[Any]:
    """The core's feed `[(name, bytes, rlx dtype)]` for the `specs` (meta.json inputs) in `arrays`
    (inputs left out, such as resident ones, are skipped), at symbol sizes `at`. InputError when an
    array's bytes are not its input's size there (the checks before make it unreachable)."""
    feed = []
    for spec in specs:
        if spec["name"] not in arrays:
            continue
        name, carrier = spec["name"], spec.get("rlx_dtype", spec["dtype"])
        data = to_carrier(arrays[name], spec["dtype"], carrier)
        dims = evaluate_shape(spec["shape"], at)
        want = math.prod(dims) * numpy_dtype(carrier).itemsize
        if data.nbytes != want:  # RLX must never see it
            raise InputError(f"input {name!r} would reach RLX as {data.nbytes} bytes, but {carrier}{dims} takes {want}")
        feed.append((name, data, to_rlx(carrier)))
    return feed


def decode_outputs(specs: list[dict[str, Any]], raw: list[Any]) -> dict[str, np.ndarray]:
    """The core's results `[(data, rlx dtype, dims)]` as numpy arrays by meta.json output name."""
    return {
        spec["name"]: complex_edge.from_pairs(  # a complex output: complex values
            from_carrier(data, dims, spec["dtype"], spec.get("rlx_dtype", spec["dtype"])), spec
        )
        for spec, (data, _rlx_dtype, dims) in zip(specs, raw, strict=True)
    }


def unpad_outputs(specs: list[dict[str, Any]], raw: list[Any], at: dict[str, int]) -> list[Any]:
    """The core's results with each output read flattened with a padding element (meta.json `padded_axis`:
    it may be empty, `lower/rlx/boundary.pad_empty_output`) given back its shape at the sizes `at`
    (torch name -> size) and its elements without the padding."""
    found = []
    for spec, (data, rlx_dtype, dims) in zip(specs, raw, strict=False):
        if "padded_axis" in spec:
            want = [int(d) for d in evaluate_shape(spec["shape"], at)]
            size = math.prod(want) * numpy_dtype(spec.get("rlx_dtype", spec["dtype"])).itemsize
            if list(dims) == [math.prod(want) + 1]:
                data, dims = memoryview(data).cast("B")[:size], want
        found.append((data, rlx_dtype, dims))
    return found


def to_carrier(arr: Any, dtype: str, carrier: str) -> np.ndarray:
    """Values of torch-ir `dtype` as the bytes RLX takes them in, in `carrier` (bool/narrow ints and
    half floats cross as float32)."""
    arr = np.asarray(arr)
    if carrier != dtype:
        arr = to_host(arr, dtype)
    return np.ascontiguousarray(arr.astype(numpy_dtype(carrier), copy=False)).reshape(-1).view(np.uint8)


def from_carrier(data: Any, dims: list[int], dtype: str, carrier: str) -> np.ndarray:
    """An RLX result carried in `carrier` as numpy values of torch-ir `dtype` (a value carried as
    float32 rounded to its dtype)."""
    value = _from_bytes(data, carrier, dims)
    return to_host(value, dtype) if carrier != dtype else value


def _from_bytes(data: Any, dtype: str, dims: list[int]) -> np.ndarray:
    """A numpy view of an output the core handed over (`OutputBuffer`: writable, owned by the array)."""
    array = np.frombuffer(data, dtype=numpy_dtype(dtype)).reshape(dims)
    return array.copy() if isinstance(data, bytes) else array


def check_baked(name: str, value: Any, baked: Any) -> None:
    """InputError unless `value` equals the value input `name` was baked in as at conversion."""
    try:
        same = np.array_equal(np.asarray(value), np.asarray(baked))
    except Exception:
        same = False
    if not same:
        raise InputError(
            f"input {name!r} was baked into the bundle as {short(baked)} at conversion (it fixes shapes or a "
            f"branch); got {short(value)}",
            hint="convert again with the value you want",
        )


# One row of RLX's `[thunk-profile]` table: "  <kind>   <ms>ms  (<calls> calls)".
_PROFILE_LINE = re.compile(r"^\s+(\S+)\s+([0-9.]+)ms\s+\((\d+) calls\)")


def _thunk_profile(run: Any) -> dict[str, tuple[float, int]]:
    """Run `run()` under RLX_PROFILE_THUNKS and parse the table RLX prints to stderr."""
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            _core.set_rlx_env("RLX_PROFILE_THUNKS", "1")
            run()
        finally:
            _core.set_rlx_env("RLX_PROFILE_THUNKS", None)
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        text = sink.read().decode(errors="replace")
    found: dict[str, tuple[float, int]] = {}
    for line in text.splitlines():
        m = _PROFILE_LINE.match(line)
        if m:
            ms, calls = found.get(m[1], (0.0, 0))
            found[m[1]] = (ms + float(m[2]), calls + int(m[3]))
    return found
