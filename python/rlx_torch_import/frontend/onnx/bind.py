"""Sizes for an ONNX model's symbolic dims, and the inputs a conversion runs on: the user's (a
mapping, a .safetensors or .npz file), or random ones of the declared dtypes and shapes."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...dtypes import numpy_dtype
from ...errors import InputError, Unsupported, UnsupportedOpsError
from ...limits import check_tensor_size
from .gaps import HINT
from .source import OnnxSource, TensorInfo, elem_name

# Random integer inputs are drawn from [0, INT_HIGH): valid as indices into any axis of size >= 4.
INT_HIGH = 4
SEED = 0


def parse_dims(items: Mapping[str, int] | list[str] | None) -> dict[str, int]:
    """`{"batch": 2}` or `["batch=2", "x:0=6", ...]` (the CLI's --dim: a dim's name, or INPUT:AXIS) as a
    dict; InputError on a bad item."""
    if items is None:
        return {}
    pairs: list[tuple[str, Any]]
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        pairs = []
        for item in items:
            name, sep, size = str(item).partition("=")
            if not sep or not name.strip():
                raise InputError(f"--dim {item!r}: expected NAME=SIZE or INPUT:AXIS=SIZE, e.g. --dim batch=2")
            pairs.append((name.strip(), size.strip()))
    found: dict[str, int] = {}
    for name, size in pairs:
        try:
            value = int(size)
        except (TypeError, ValueError):
            raise InputError(f"dim {name!r}: size {size!r} is not an integer") from None
        if value < 1:
            raise InputError(f"dim {name!r}: size {value} must be >= 1")
        found[str(name)] = value
    return found


def _host(value: Any) -> np.ndarray:
    """A numpy array of `value` (a torch tensor, an array); bfloat16 (torch's, or ml_dtypes') as its
    uint16 bits, as our files keep it."""
    if hasattr(value, "detach"):
        import torch

        t = value.detach().cpu()
        return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()
    arr = np.asarray(value)
    return arr.view(np.uint16) if arr.dtype.name == "bfloat16" else arr


def read_inputs(inputs: Any) -> dict[str, np.ndarray] | None:
    """The user's inputs by name: a mapping (arrays or torch tensors), or a .safetensors / .npz file
    keyed by input name. InputError naming the file or key otherwise."""
    if inputs is None:
        return None
    if isinstance(inputs, (str, os.PathLike)):
        path = Path(inputs)
        if not path.is_file():
            raise InputError(f"{path}: no such inputs file")
        if path.suffix == ".npz":
            try:
                with np.load(path) as data:
                    return {k: np.asarray(data[k]) for k in data.files}
            except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:  # not an .npz numpy can read
                raise InputError(f"{path}: not a readable .npz file ({type(e).__name__}: {str(e)[:160]})") from None
        if path.suffix == ".safetensors":
            from ... import safetensors_io

            return {k: t.to_numpy().copy() for k, t in safetensors_io.read(path).items()}
        raise InputError(f"{path}: inputs must be a .safetensors or .npz file")
    if isinstance(inputs, Mapping):
        return {str(k): _host(v) for k, v in inputs.items()}
    raise InputError(f"inputs must be a mapping of input name to array or a file path, got {type(inputs).__name__}")


def bind_sizes(src: OnnxSource, dims: dict[str, int], given: dict[str, np.ndarray] | None) -> dict[str, int]:
    """Every symbolic dim of the model's inputs -> its size: from `dims` (by the dim's name, or as
    `INPUT:AXIS`, which names an unnamed dim and may name a named one), else read from the user's inputs.
    Each dim the file leaves unnamed is its own symbol (`source.unnamed_dim`). Raises InputError naming
    each dim without a size (and the inputs and axes it sizes), a `dims` key no input has, a static axis
    given a size, and two sizes for one dim."""
    _check_given(src, given)
    used: dict[str, list[str]] = {}
    at: dict[str, int | str] = {}  # "INPUT:AXIS" -> the dim there
    for spec in src.inputs:
        for axis, d in enumerate(spec.dims or ()):
            at[f"{spec.name}:{axis}"] = d
            if isinstance(d, str):
                used.setdefault(d, []).append(f"{spec.name}[{axis}]")
    sizes: dict[str, int] = {}
    for key, size in dims.items():
        name = at.get(key, key)
        if isinstance(name, int):
            raise InputError(f"--dim {key}={size}: that axis is static (size {name}) in the model")
        if name not in used:
            known = ", ".join(_shown(d, used) for d in used) or "none: every input dim is static"
            raise InputError(f"--dim {key}: no input of the model has such a dim (its symbolic dims: {known})")
        if sizes.get(name, size) != size:
            raise InputError(f"--dim {key}={size}: {_shown(name, used)} is given {sizes[name]} already")
        sizes[name] = size
    for spec in src.inputs:
        arr = given.get(spec.name) if given is not None else None
        if arr is None or spec.dims is None:
            continue
        for axis, d in enumerate(spec.dims or ()):
            if isinstance(d, str):
                sizes.setdefault(d, int(arr.shape[axis]))
    missing = [d for d in used if d not in sizes]
    if missing:
        where = "; ".join(f"{_shown(d, used)} sizes {', '.join(used[d])}" for d in missing)
        first = used[missing[0]][0].replace("[", ":").rstrip("]") if _unnamed(missing[0]) else missing[0]
        raise InputError(
            f"symbolic dim(s) without a size: {where}",
            hint=f"give each a size, e.g. --dim {first}=1 (from_onnx(..., dims={{{first!r}: 1}})), or pass the "
            "inputs (--inputs)",
        )
    return sizes


def _check_given(src: OnnxSource, given: dict[str, np.ndarray] | None) -> None:
    """InputError for a given input the model does not take, or one of another rank than it declares
    (before the sizes they would give are missed)."""
    names = {s.name for s in src.inputs}
    extra = sorted(set(given or {}) - names)
    if extra:
        raise InputError(
            f"inputs name(s) {', '.join(map(repr, extra))} the model does not take; its inputs: "
            + ", ".join(s.describe() for s in src.inputs)
        )
    for spec in src.inputs:
        arr = (given or {}).get(spec.name)
        if arr is not None and spec.dims is not None and arr.ndim != len(spec.dims):
            raise InputError(f"input {spec.name!r} has shape {list(arr.shape)}, the model takes {spec.describe()}")


def _unnamed(dim: str) -> bool:
    """Whether `dim` is the symbol of a dim the file leaves unnamed (`INPUT:AXIS`)."""
    tensor, sep, axis = dim.rpartition(":")
    return bool(sep and tensor) and axis.isdigit()


def _shown(dim: str, used: dict[str, list[str]]) -> str:
    """A symbolic dim as messages name it: `'batch'`, or an unnamed one as the file has it (`?`) with where."""
    return f"an unnamed dim ? ({used[dim][0]})" if _unnamed(dim) else repr(dim)


def input_shape(spec: TensorInfo, sizes: dict[str, int]) -> tuple[int, ...]:
    """The input's shape at `sizes` (every symbolic dim, unnamed ones included, has a size: `bind_sizes`)."""
    if spec.dims is None:
        raise InputError(f"input {spec.name!r}: the model declares no shape; pass its value with --inputs")
    shape = []
    for axis, d in enumerate(spec.dims):
        if isinstance(d, int):
            shape.append(d)
        elif d in sizes:
            shape.append(sizes[d])
        else:
            raise InputError(
                f"input {spec.name!r} axis {axis} has an unnamed dynamic size; pass its value with --inputs"
            )
    if spec.dtype is not None:  # within the machine's memory before anything is drawn (the torch path's limit)
        check_tensor_size(shape, spec.dtype, f"input {spec.describe()} at the sizes given", InputError)
    return tuple(shape)


def make_inputs(
    src: OnnxSource, sizes: dict[str, int], given: dict[str, np.ndarray] | None
) -> tuple[dict[str, np.ndarray], list[str]]:
    """The inputs the conversion runs on (input name -> array) and notes for the report: each input
    the user gave (checked against the model's dtype and shape), else random values (floats standard
    normal, integers in [0, INT_HIGH), bools fair coins; seeded)."""
    rng = np.random.default_rng(SEED)
    found: dict[str, np.ndarray] = {}
    notes: list[str] = []
    _check_given(src, given)
    drawn = []
    for spec in src.inputs:
        dtype = spec.dtype
        if dtype is None:
            raise UnsupportedOpsError(
                [Unsupported(f"<input dtype {elem_name(spec.elem_type)}>", spec.name, "", "a bundle cannot take it")],
                frontend_hint=HINT,
            )
        if given is not None and spec.name in given:
            arr = given[spec.name]
            if arr.dtype != numpy_dtype(dtype):
                raise InputError(f"input {spec.name!r} is {arr.dtype}, the model takes {dtype}")
            want = input_shape(spec, sizes)
            if tuple(arr.shape) != want:
                raise InputError(f"input {spec.name!r} has shape {list(arr.shape)}, the model takes {list(want)}")
            found[spec.name] = np.array(arr, order="C", copy=True)
            continue
        shape = input_shape(spec, sizes)
        if dtype.startswith("float") or dtype == "bfloat16":
            arr = rng.standard_normal(shape).astype(numpy_dtype(dtype))
        elif dtype == "bool":
            arr = rng.integers(0, 2, shape).astype(bool)
        else:
            arr = rng.integers(0, INT_HIGH, shape).astype(numpy_dtype(dtype))
        found[spec.name] = arr
        drawn.append(spec.name)
    if drawn:
        notes.append(
            f"random inputs (seed {SEED}; floats standard normal, integers in [0, {INT_HIGH}), bools 0/1): "
            + ", ".join(drawn)
        )
    return found, notes
