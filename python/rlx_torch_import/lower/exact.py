"""Exact comparisons and reductions for dtypes RLX 0.2.17's CPU kernels get wrong.

Its Compare reads only int64 and float32 correctly, and its Reduce Max/Min/Prod
are wrong in float64 (integers reduce through float64 too). These builders get
the exact answer from the kernels that are right: float32 compares and
reductions on float32-exact pieces, int64 compares, float64 elementwise math.
`Builder.compare`/`Builder.reduce` route here; lowerings never call this module.
See docs/design.md (m).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..dtypes import INT_COMPUTE, NARROW_DTYPES

if TYPE_CHECKING:
    from .context import Builder, Value


def _reduce_last(b: Builder, op: str, x: Value) -> Value:
    """RLX Reduce over the last axis, kept."""
    return b.emit({"Reduce": {"op": op, "axes": [x.rank - 1], "keep_dim": True}}, [x], (*x.dims[:-1], 1), x.dtype)


def _flag(b: Builder, cond: Value) -> Value:
    """bool -> float32 0/1, for and/or/not as Mul/Max/1-x."""
    return b.cast(cond, "float32")


def compare_f64(b: Builder, op: str, x: Value, y: Value) -> Value:
    """float64 x <op> y: the sign of x - y (float64 Sub/Sign and the int64 Compare are exact).

    x - y is NaN when an operand is NaN (then only `Ne` holds) or for equal infinities
    (then they are equal); NaN survives a float32 cast, where x != x finds it."""
    diff = b.binary("Sub", x, y)
    sign = b.cast(b.emit({"Activation": "Sign"}, [diff], diff.dims, "float64"), "int64")
    ordered = _flag(b, b.emit({"Compare": op}, [sign, b.const(0, "int64")], diff.dims, "bool"))

    def is_nan(v: Value) -> Value:
        v32 = b.cast(v, "float32")
        return _flag(b, b.emit({"Compare": "Ne"}, [v32, v32], v.dims, "bool"))

    def negate(v: Value) -> Value:
        return b.binary("Sub", b.const(1.0, "float32"), v)

    undefined = is_nan(diff)
    nan_operand = b.binary("Max", is_nan(x), is_nan(y))
    result = b.binary("Mul", ordered, negate(undefined))
    if op == "Ne":
        result = b.binary("Max", result, nan_operand)
    elif op in ("Eq", "Le", "Ge"):
        result = b.binary("Max", result, b.binary("Mul", undefined, negate(nan_operand)))
    return b.emit({"Compare": "Ne"}, [result, b.const(0.0, "float32")], result.dims, "bool")


def _last_axes(b: Builder, x: Value, axes: list[int], dtype: str) -> Value:
    """`x` in `dtype` with the reduced axes moved last and merged into one."""
    rest = [a for a in range(x.rank) if a not in axes]
    y = b.cast(b.transpose(x, rest + axes), dtype)
    return b.reshape(y, (*(x.dims[a] for a in rest), math.prod(x.dims[a] for a in axes)))


def _reduced_dims(x: Value, axes: list[int], keep_dim: bool) -> tuple[int, ...]:
    return tuple((1 if a in axes else d) for a, d in enumerate(x.dims) if keep_dim or a not in axes)


def extreme(b: Builder, op: str, x: Value, axes: list[int], keep_dim: bool) -> Value:
    """Max/Min over `axes` of integer or float64 `x`. Min is -max(-x) (negation is exact)."""
    if x.dtype in NARROW_DTYPES:  # float32 holds them exactly
        y = _reduce_last(b, op, _last_axes(b, x, axes, "float32"))
    else:
        wide = INT_COMPUTE.get(x.dtype, x.dtype)
        flat = _last_axes(b, x, axes, wide)
        largest = _max_last_f64 if wide == "float64" else _max_last_int
        if op == "Max":
            y = largest(b, flat)
        else:
            minus = b.const(-1, wide)
            y = b.binary("Mul", largest(b, b.binary("Mul", flat, minus)), minus)
    return b.cast(b.reshape(y, _reduced_dims(x, axes, keep_dim)), x.dtype)


def _max_last_int(b: Builder, x: Value) -> Value:
    """Max over the last axis of int64 `x` as hi * 2**24 + lo (`split24`, exact while |x| < 2**48):
    the max hi, then the max lo among the elements holding it."""
    hi, lo = b.split24(x)
    top = _reduce_last(b, "Max", hi)
    others = b.binary("Sub", b.const(1.0, "float32"), _flag(b, b.compare("Eq", hi, top)))
    # Elements without the top hi drop below every candidate's lo (>= 0); their rounding cannot matter.
    low = _reduce_last(b, "Max", b.binary("Sub", lo, b.binary("Mul", others, b.const(float(1 << 25), "float32"))))
    wide = b.binary("Mul", b.cast(top, "int64"), b.const(1 << 24, "int64"))
    return b.binary("Add", wide, b.cast(low, "int64"))


def _max_last_f64(b: Builder, x: Value) -> Value:
    """Max over the last axis of float64 `x` by peeling float32 levels: the max of the
    float32-rounded values is the rounded maximum (rounding is monotonic); then the max residual
    among the elements that rounded to it; three levels cover 53 bits. Exact for magnitudes in
    float32's normal range; a ±inf maximum passes through."""
    residual, total, first, alive = x, None, None, None
    lowest = b.const(-math.inf, "float32")
    for _ in range(3):
        level = b.cast(residual, "float32")
        if alive is not None:
            level = b.emit("Where", [alive, level, b.expand(lowest, level.dims)], level.dims, "float32")
        top = _reduce_last(b, "Max", level)
        holds = b.compare("Eq", level, top)
        if alive is not None:
            both = b.binary("Mul", _flag(b, alive), _flag(b, holds))
            holds = b.compare("Ne", both, b.const(0.0, "float32"))
        alive = holds
        step = b.cast(top, "float64")
        first = top if first is None else first
        total = step if total is None else b.binary("Add", total, step)
        residual = b.binary("Sub", residual, step)
    infinite = b.compare("Eq", b.unary("Abs", first), b.const(math.inf, "float32"))
    return b.emit("Where", [infinite, b.cast(first, "float64"), total], total.dims, "float64")


def product(b: Builder, x: Value, axes: list[int], keep_dim: bool) -> Value:
    """Product over `axes` of integer or float64 `x` by pairwise halving: int64 `Mul` is exact
    (wrapping like torch) and float64 `Mul` correctly rounded."""
    dtype = "int64" if x.dtype in NARROW_DTYPES else INT_COMPUTE.get(x.dtype, x.dtype)
    y = _last_axes(b, x, axes, dtype)
    while y.dims[-1] > 1:
        half, odd = divmod(y.dims[-1], 2)
        last = y.rank - 1
        paired = b.binary("Mul", b.narrow(y, last, 0, half), b.narrow(y, last, half, half))
        if odd:
            leftover = b.narrow(y, last, 2 * half, 1)
            paired = b.emit({"Concat": {"axis": last}}, [paired, leftover], (*y.dims[:-1], half + 1), dtype)
        y = paired
    return b.reshape(y, _reduced_dims(x, axes, keep_dim))


def first_index(b: Builder, x: Value, values: Value, axis: int) -> Value:
    """The smallest index along `axis` where x equals `values` (kept axis), as float32."""
    n = x.dims[axis]
    shape = [1] * x.rank
    shape[axis] = n
    positions = b.expand(b.const(np.arange(n, dtype=np.float32).reshape(shape), "float32"), x.dims)
    beyond = b.expand(b.const(float(n), "float32"), x.dims)
    picked = b.emit("Where", [b.compare("Eq", x, values), positions, beyond], x.dims, "float32")
    return b.emit({"Reduce": {"op": "Min", "axes": [axis], "keep_dim": True}}, [picked], values.dims, "float32")
