"""Tensors made from scalars: full/zeros/ones, scalar_tensor, arange, linspace/logspace.

A size-dependent one (a dynamic program's) must be the same RLX graph at every size:
full/zeros/ones are one scalar expanded (the Expand follows the size), an integer arange a
running sum (`iota`), a fractional-step arange a slice of the constant range over the dim's maximum
length (the slice's length follows the size)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import FLOAT_DTYPES
from ...errors import InputError
from ...sizes import SizeInt
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ._common import iota


@lowers(
    "aten.full_like.default",
    "aten.zeros_like.default",
    "aten.ones_like.default",
    "aten.full.default",
    "aten.zeros.default",
    "aten.ones.default",
    "aten.new_zeros.default",
    "aten.new_ones.default",
    kind="movement",
)
@lowers("aten.new_full.default")
def full(b: Builder, call: Call) -> Value:
    """A constant of the result shape: one scalar broadcast, not a dense blob."""
    if "zeros" in call.target:
        fill = 0
    elif "ones" in call.target:
        fill = 1
    else:
        fill = call.get("fill_value", 0)
    return b.expand(b.const(fill, call.out_dtype), call.out_dims)


@lowers("aten.scalar_tensor.default")
def scalar_tensor(b: Builder, call: Call) -> Value:
    """A rank-0 constant."""
    return b.const(call["s"], call.out_dtype)


def _check_arange(call: Call) -> str | None:
    start, step = call.get("start", 0), call.get("step", 1)
    if isinstance(start, SizeInt) and call.out_dtype in FLOAT_DTYPES and float(step) != int(step):
        return f"a {call.out_dtype} range starting at a dynamic size ({start.expr}) with a fractional step"
    return None


@lowers("aten.arange.default", "aten.arange.start", "aten.arange.start_step", check=_check_arange)
def arange(b: Builder, call: Call) -> Value:
    """start + i * step for i < n, as torch's CPU kernel computes it: in the dtype's accumulate type
    (integer dtypes truncate start and step to int64 first, so `arange(1, 4, 0.5, dtype=int64)` is all
    ones), float dtypes by its vectorized loop; the values come from torch.arange itself. A start that
    is a dynamic size (`arange(past, past + new)`) is added at run time to the range from 0: integer
    sums, exact (float dtypes only with an integer step, whose sums are integers, exact below 2^24)."""
    start = call.get("start", 0) if call.target != "aten.arange.default" else 0
    step = call.get("step", 1)
    if isinstance(start, SizeInt):
        offset = b.const(int(start), call.out_dtype)  # a one-element constant: symbolic per binding
        return b.binary("Add", _arange(b, call, 0, step, None), offset)
    return _arange(b, call, start, step, call.get("end"))


def _arange(b: Builder, call: Call, start: float, step: float, end: Any) -> Value:
    """The node's n values of torch.arange(start, end, step); `end` None: the first n from start."""
    n = call.out_dims[0]
    if b.provenance.node in b.program.size_dependent:
        bounds = b.program.size_bounds.get(call.node.outputs[0].name)
        if float(start).is_integer() and float(step).is_integer():
            # an integer range: start + step * i from a running sum in int64, exact (float dtypes: integers,
            # exact below 2^24), the same graph at every size, past a narrow range's max as well (the
            # symbolic lowering probes there: `lower.generalize`)
            scaled = b.binary("Mul", iota(b, n), b.const(int(step), "int64"))
            return b.cast(b.binary("Add", scaled, b.const(int(start), "int64")), call.out_dtype)
        if bounds is None:
            raise InputError(
                f"arange at node {call.node.name} has a length that depends on a dynamic dim with no maximum",
                hint="give the Dim a max (torch.export.Dim(name, max=...)) so the range can be precomputed",
            )
        full = b.const(_torch_arange(start, step, max(bounds[0], n) + 1, call.out_dtype), call.out_dtype)
        return b.narrow(full, 0, 0, n)
    return b.const(_torch_arange(start, step, n, call.out_dtype, end), call.out_dtype)


def _torch_arange(start: float, step: float, n: int, dtype: str, end: float | None = None) -> np.ndarray:
    """The first `n` values of torch.arange(start, end, step) in `dtype` (as float64 for float dtypes,
    which holds every half/float32 value). Without `end` (a size-dependent range), one whose length is
    n; its values equal the shorter eager range's except where torch's vectorized loop splits them
    differently (within 1 ULP)."""
    import torch

    if end is None or isinstance(end, Value):
        end = start + step * (n - 0.5)
    values = torch.arange(start, end, step, dtype=getattr(torch, dtype))[:n]
    if values.numel() != n:  # the node's recorded length wins (a shape torch.export computed)
        values = torch.arange(start, start + step * (n - 0.5), step, dtype=getattr(torch, dtype))[:n]
    return _as_numpy(values)


def _as_numpy(values: Any) -> np.ndarray:
    """A torch tensor's values for `Builder.const` (floats as float64, which holds every half/float32)."""
    return (values.double() if values.is_floating_point() else values).numpy()


def _check_space(call: Call) -> str | None:
    if any(isinstance(call.get(k), Value) for k in ("start", "end")):
        return "start/end read from tensors are not supported (a graph-time range)"
    sized = [f"{k}={call.get(k).expr}" for k in ("start", "end") if isinstance(call.get(k), SizeInt)]
    if sized:  # the points are computed at conversion, one size at a time
        return f"a start/end that is a dynamic size ({', '.join(sized)}) is not supported; make that dim static"
    if call.node.outputs and any(not isinstance(d, int) for d in call.node.outputs[0].shape):
        return "a step count that depends on a dynamic dim is not supported"
    return None


@lowers("aten.linspace.default", "aten.logspace.default", check=_check_space)
def linspace_logspace(b: Builder, call: Call) -> Value:
    """`steps` points from start to end, evenly spaced (logspace: base ** those points), as torch's CPU
    kernel computes them: integer dtypes truncate start and end first, floats fill the two halves from
    each end; the values come from torch.linspace/logspace itself."""
    import torch

    dtype = getattr(torch, call.out_dtype)
    if call.target == "aten.linspace.default":
        values = torch.linspace(call["start"], call["end"], call["steps"], dtype=dtype)
    else:
        values = torch.logspace(call["start"], call["end"], call["steps"], call.get("base", 10.0), dtype=dtype)
    return b.const(_as_numpy(values), call.out_dtype)


@lowers("aten.empty_like.default", "aten.empty_permuted.default")
def empty_like(b: Builder, call: Call) -> Value:
    """Uninitialized in torch (its values are never read before being written); zeros here."""
    return b.expand(b.const(0, call.out_dtype), call.out_dims)


@lowers("aten.fill.Scalar", kind="movement")
def fill(b: Builder, call: Call) -> Value:
    """A tensor of self's shape and dtype, every element `value` (functional fill_)."""
    return b.expand(b.const(call["value"], call.out_dtype), call.out_dims)


@lowers("aten.empty_strided.default")
def empty_strided(b: Builder, call: Call) -> Value:
    """Uninitialized memory in torch (a result that reads it has no defined value); zeros here.

    The strides only say how torch lays the memory out; RLX values are logical tensors.
    """
    return b.expand(b.const(0, call.out_dtype), call.out_dims)
