"""Helpers several op families share (families import only this module, never each other)."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import FLOAT_DTYPES, HALF_DTYPES, promote
from ..builder import Builder
from ..call import Call, Value
from ..rlx import exact

# ── operands of elementwise ops (arithmetic, unary, logical) ─────────────


def operand(b: Builder, call: Call, name: str, opmath: bool = False) -> Value:
    """A tensor argument, or a Python scalar as a rank-0 constant of the result dtype.

    `opmath`: the op reads a scalar `other` as torch's CPU mul/div kernels do for float16/bfloat16
    results: a Python scalar or a rank-0 float32/float64 tensor in float32, unrounded (`Builder.opmath`)."""
    value, dtype = call[name], call.out_dtype
    half_scalar = opmath and dtype in HALF_DTYPES
    if isinstance(value, Value):
        if half_scalar and name == "other" and value.rank == 0 and value.dtype in ("float32", "float64"):
            wide = b.cast(value, "float32")
            return Value(wide.id, wide.dims, dtype)
        return value
    if half_scalar:
        return b.opmath(value, dtype)
    return b.const(value, dtype if dtype != "bool" else "float32")


def operands(b: Builder, call: Call, opmath: bool = False) -> tuple[Value, Value]:
    """(self, other) in the result dtype; either may be a Python scalar in Core ATen graphs."""
    dtype = call.out_dtype
    return b.cast(operand(b, call, "self"), dtype), b.cast(operand(b, call, "other", opmath), dtype)


def scaled(b: Builder, x: Value, alpha: float | int, opmath: bool = False) -> Value:
    """alpha * x; `opmath`: alpha as torch's half kernels read it (`Builder.opmath`), else in x's dtype."""
    return x if alpha == 1 else b.binary("Mul", x, b.opmath(alpha, x.dtype) if opmath else b.const(alpha, x.dtype))


def _signs_differ(b: Builder, x: Value, y: Value) -> Value:
    """(x < 0) != (y < 0), as float32 0/1."""
    zero = b.const(0, x.dtype)
    return b.cast(b.compare("Ne", b.compare("Lt", x, zero), b.compare("Lt", y, zero)), "float32")


def when(b: Builder, cond: Value, x: Value, y: Value) -> Value:
    """cond (bool) ? x : y, broadcast."""
    dims = tuple(np.broadcast_shapes(cond.dims, x.dims, y.dims))
    return b.emit("Where", [b.expand(cond, dims), b.expand(x, dims), b.expand(y, dims)], dims, x.dtype)


def fix_sign(b: Builder, x: Value, y: Value, mod: Value) -> Value:
    """1 where the C remainder `mod` is nonzero and its sign differs from the divisor's (floor moves by one)."""
    nonzero = b.cast(b.compare("Ne", mod, b.const(0, mod.dtype)), "float32")
    return b.binary("Mul", nonzero, _signs_differ(b, y, mod))


def floor_divide(b: Builder, x: Value, y: Value) -> Value:
    """torch's floor division (c10 div_floor_*), exact: integers through int64 Div/Sub (truncating,
    exact over the whole range); floats from fmod, so rounding boundaries match torch
    (floor_divide(1.0, 0.1) == 9), a zero quotient signed as a / b (floor_divide(-0.0, 1) = -0.0), with a / b
    for a zero divisor."""
    dtype = promote(x.dtype, y.dtype)
    if dtype not in FLOAT_DTYPES:
        a, c = b.cast(x, "int64"), b.cast(y, "int64")
        quot = b.binary("Div", a, c)
        rem = b.binary("Sub", a, b.binary("Mul", quot, c))
        return b.cast(b.binary("Sub", quot, b.cast(fix_sign(b, a, c, rem), "int64")), dtype)
    a, c = b.cast(x, dtype), b.cast(y, dtype)
    mod = b.binary("Mod", a, c)
    div = b.binary("Div", b.binary("Sub", a, mod), c)
    div = b.binary("Sub", div, b.cast(fix_sign(b, a, c, mod), dtype))
    floor = b.unary("Floor", div)
    bump = b.cast(b.compare("Gt", b.binary("Sub", div, floor), b.const(0.5, dtype)), dtype)
    result = b.binary("Add", floor, bump)
    quotient = b.binary("Div", a, c)
    zero = b.expand(b.const(0.0, dtype), quotient.dims)  # torch: copysign(0, a / b) where div is 0
    result = when(b, b.compare("Eq", div, b.const(0.0, dtype)), exact.with_sign_of(b, zero, quotient), result)
    return when(b, b.compare("Eq", c, b.const(0.0, dtype)), quotient, result)


# ── resampling along one axis (upsample, pool) ───────────────────────────


def gather_axis(b: Builder, x: Value, axis: int, index: np.ndarray) -> Value:
    """x[..., index, ...] along `axis` with a constant int64 index vector."""
    if index.tolist() == list(range(x.dims[axis])):
        return x
    dims = list(x.dims)
    dims[axis] = len(index)
    return b.emit({"Gather": {"axis": axis}}, [x, b.const(index.astype(np.int64), "int64")], dims, x.dtype)


def contract_axis(b: Builder, x: Value, axis: int, matrix: np.ndarray) -> Value:
    """y[..., o, ...] = sum_i matrix[o, i] * x[..., i, ...] as one 2-D matmul."""
    last = x.rank - 1
    perm = list(range(x.rank))
    perm[axis], perm[last] = perm[last], perm[axis]
    xt = b.transpose(x, perm)
    lead = xt.dims[:-1]
    flat = b.reshape(xt, (math.prod(lead), xt.dims[-1]))
    y = b.matmul(flat, b.const(np.ascontiguousarray(matrix.T), x.dtype))
    return b.transpose(b.reshape(y, (*lead, matrix.shape[0])), perm)


# ── one RLX convolution node (conv, backward) ────────────────────────────


def conv2d_node(
    b: Builder, x: Value, w: Value, out_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """One RLX Conv on NCHW `x` with weight [C_out, C_in/groups, kH, kW]; geometry = (stride, padding, dilation)."""
    stride, padding, dilation = geometry
    op = {
        "Conv": {
            "kernel_size": list(w.dims[2:]),
            "stride": list(stride),
            "padding": list(padding),
            "dilation": list(dilation),
            "groups": groups,
        }
    }
    return b.emit(op, [x, w], out_dims, x.dtype)


def conv_transpose2d_node(
    b: Builder, x: Value, w: Value, out_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """One RLX ConvTranspose2d (weight [C_in, C_out/groups, kH, kW]); geometry = (stride, padding, dilation,
    output_padding)."""
    stride, padding, dilation, output_padding = geometry
    op = {
        "ConvTranspose2d": {
            "kernel_size": list(w.dims[2:]),
            "stride": list(stride),
            "padding": list(padding),
            "dilation": list(dilation),
            "output_padding": list(output_padding),
            "groups": groups,
        }
    }
    return b.emit(op, [x, w], out_dims, x.dtype)


# ── results whose size depends on tensor values (size stages, docs/design.md decision ax) ──


def iota(b: Builder, length: int) -> Value:
    """0, 1, ..., length - 1 as int64, from a running sum of ones (no constant depends on `length`, so
    the graph generalizes when `length` is a size a stage computes). The sum runs over length + 1 ones,
    cut to `length`: RLX's CPU Cumsum divides by its axis length (a panic at 0)."""
    ones = b.expand(b.const(np.array([1], dtype=np.int64), "int64"), (length + 1,))
    running = b.emit({"Cumsum": {"axis": -1, "exclusive": False}}, [ones], (length + 1,), "int64")
    return b.binary("Sub", b.narrow(running, 0, 0, length), b.const(1, "int64"))


def true_positions(b: Builder, truth: Value, count: int) -> Value:
    """The flat positions (int64, ascending) of the `count` True elements of bool `truth` [n]: the
    positions of False elements are pushed past n, a float32 Sort puts the True ones first in order
    (exact: 2n < 2**24, checked by the callers' checks), a Narrow keeps `count` of them (its length a
    size a stage computes)."""
    (n,) = truth.dims
    pos = b.cast(iota(b, n), "float32")  # no constant of n elements: n may be a dynamic dim's
    far = b.binary("Add", pos, b.const(float(n), "float32"))
    key = b.emit("Where", [truth, pos, far], (n,), "float32")
    b.nan_free_ids.add(key.id)  # integers: one plain RLX Sort (no NaN pass, no constant of n elements)
    ordered = b.emit({"Sort": {"axis": 0, "descending": False}}, [key], (n,), "float32")
    first = b.emit({"Narrow": {"axis": 0, "start": 0, "len": count}}, [ordered], (count,), "float32")  # even at n
    return b.cast(first, "int64")


def positions_fit(numel: int) -> str | None:
    """Why `true_positions` cannot serve a tensor of `numel` elements (float32 keys), or None."""
    if 2 * numel > 1 << 24:
        return f"{numel} elements: the positions are sorted as float32 keys, exact below 2**23 elements"
    return None
