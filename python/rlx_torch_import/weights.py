"""Derived and materialised weights: parameters a conversion-time pass computes from stored ones.

`lower/passes/layouts.py` and `lower/passes/batch_norm.py` record them on the program
(`Program.derived_params`); the bundle writer computes their elements here (`materialize`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .dtypes import RECORDS
from .program import DequantizedWeight, DerivedParam, FoldedBatchNorm, Program, QuantizedTable, QuantizedWeight


def derive(array: np.ndarray, steps: tuple[tuple[str, tuple[int, ...]], ...]) -> np.ndarray:
    """Apply a `DerivedParam`'s moves and broadcasts to the weight's elements (any dtype, bytes unchanged).

    The copy runs in torch (blocked and multi-threaded; numpy's strided copy of a large
    transpose was most of the bundle-writing time)."""
    import torch

    signed = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[array.dtype.itemsize]
    with warnings.catch_warnings():  # a read-only (mapped) weight: only read here, the moves copy it
        warnings.simplefilter("ignore", UserWarning)
        t = torch.from_numpy(np.ascontiguousarray(array).view(f"<i{array.dtype.itemsize}")).view(signed)
    for kind, arg in steps:
        t = t.permute(arg) if kind == "transpose" else t.expand(arg) if kind == "broadcast" else t.reshape(arg)
    return t.contiguous().numpy().view(array.dtype)


def derived_spec(program: Program, name: str, weights: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    """A derived parameter's stored dtype and shape, without computing it."""
    d = program.derived_params[name]
    if isinstance(d, FoldedBatchNorm):
        return "float32", d.dims
    if isinstance(d, DequantizedWeight):
        return "float32", next(p.dims for p in program.params if p.name == name)
    if isinstance(d, QuantizedTable):
        return ("int64" if d.part == "words" else "float16"), next(p.dims for p in program.params if p.name == name)
    if isinstance(d, QuantizedWeight):
        from .quant.schemes import BY_RLX, packed_size

        return "uint8", (packed_size(*d.dims, BY_RLX[d.scheme]),)
    source = d.source
    while isinstance(step := program.derived_params.get(source), DerivedParam):
        source = step.source
    dtype = "float32" if source in program.derived_params else weights[source].dtype
    return dtype, next(p.dims for p in program.params if p.name == name)


def materialize(program: Program, name: str, weights: dict[str, Any]) -> tuple[str, np.ndarray]:
    """A parameter's stored dtype and elements, derived ones computed from `weights` (safetensors_io.RawTensor).

    A quantized weight is its packed blocks, uint8 (`quant.schemes.pack`). Moves keep the source's exact bytes
    (the array holds them as unsigned integers of the element's size); a folded batch norm is float32.
    """
    d = program.derived_params.get(name)
    if d is None:
        t = weights[name]
        size = RECORDS[t.dtype].itemsize
        return t.dtype, np.frombuffer(t.data, dtype=f"<u{size}").reshape(t.shape)
    if isinstance(d, DerivedParam):
        dtype, array = materialize(program, d.source, weights)
        return dtype, derive(array, d.steps)
    if isinstance(d, QuantizedWeight):
        from .quant.schemes import BY_RLX, pack

        return "uint8", pack(_float_values(program, d.source, weights).astype("<f4").reshape(d.dims), BY_RLX[d.scheme])
    if isinstance(d, DequantizedWeight):
        return "float32", _dequantized(program, d, weights)
    if isinstance(d, QuantizedTable):
        from .quant.schemes import BY_RLX, table_parts

        table = _float_values(program, d.source, weights).astype("<f4").reshape(d.dims)
        words, scales = table_parts(table, BY_RLX[d.scheme])
        return ("int64", words.astype("<i8")) if d.part == "words" else ("float16", scales.astype("<f2"))
    return "float32", _fold_values(program, d, weights).astype("<f4")


def _dequantized(program: Program, d: DequantizedWeight, weights: dict[str, Any]) -> np.ndarray:
    """torch's dequantize of a weight in float32: the integer difference is exact, then one float32 multiply."""
    dtype, raw = materialize(program, d.codes, weights)
    codes = raw.view(_numpy_of(dtype)).astype(np.float32)
    if d.axis is None:
        return ((codes - np.float32(d.zero_point)) * np.float32(d.scale)).astype("<f4")
    shape = [1] * codes.ndim
    shape[d.axis] = codes.shape[d.axis]

    def channel(name: str) -> np.ndarray:
        kind, values = materialize(program, name, weights)
        return values.view(_numpy_of(kind)).astype(np.float32).reshape(shape)

    if d.scales is None:
        raise ValueError(f"per-channel dequantization of {d.codes!r} names no scales")
    zero = channel(d.zero_points) if d.zero_points is not None else np.float32(0)
    return ((codes - zero) * channel(d.scales)).astype("<f4")


def _numpy_of(dtype: str) -> str:
    """The numpy dtype of a stored integer or float32 weight (quantization codes, scales, zero points)."""
    name = RECORDS[dtype].numpy
    if name is None:
        raise ValueError(f"a quantized weight's {dtype} values have no numpy dtype")
    return name


def _float_values(program: Program, name: str, weights: dict[str, Any]) -> np.ndarray:
    dtype, raw = materialize(program, name, weights)
    if dtype != "float32":
        raise ValueError(f"batch-norm folding reads float32 weights, {name!r} is {dtype}")
    return raw.view("<f4").astype(np.float64)


def _fold_values(program: Program, d: FoldedBatchNorm, weights: dict[str, Any]) -> np.ndarray:
    gamma, beta, mean, var = (_float_values(program, n, weights).reshape(-1) for n in (d.gamma, d.beta, d.mean, d.var))
    scale = gamma / np.sqrt(var + d.eps)
    if d.role == "weight":
        w = _float_values(program, d.conv, weights) if d.conv else None
        assert w is not None
        return (w * scale.reshape((-1,) + (1,) * (w.ndim - 1))).reshape(d.dims)
    if d.role == "bias":
        bias = _float_values(program, d.conv, weights).reshape(-1) if d.conv else 0.0
        return ((bias - mean) * scale + beta).reshape(d.dims)
    if d.role == "scale":
        return scale.reshape(d.dims)
    return (beta - mean * scale).reshape(d.dims)
