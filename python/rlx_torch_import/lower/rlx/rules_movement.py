"""Workaround rules for data movement: moves of narrow and I32 data, Trilu, Gather(Elements), scatters."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...dtypes import F32_EXACT, NARROW_DTYPES
from . import exact, hits
from .routing import RlxLimit, kind_of, rlx_of, via

if TYPE_CHECKING:
    from ..builder import Builder
    from ..call import Value

Rule = Callable[["Builder", Any, list["Value"], tuple[int, ...], str], "Value"]


def _move(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """move-narrow / move-i32: data moves as float32 (narrow) or int64 (int32) when the kernel needs it."""
    kind = kind_of(op)
    data = hits.DATA_POSITIONS.get(kind, tuple(range(len(inputs))))
    if dtype in NARROW_DTYPES:
        return via(b, op, inputs, data, dims, dtype, "float32")
    if dtype == "int32" and kind not in hits.I32_SAFE:
        return via(b, op, inputs, data, dims, dtype, "int64")
    return b.raw(op, inputs, dims, dtype)


def _trilu(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    spec = op["Trilu"]  # trilu: a Where against the constant triangle
    rows, cols = dims[-2], dims[-1]
    tri = np.triu if spec["upper"] else np.tril
    keep = tri(np.ones((rows, cols), dtype=bool), spec["diagonal"])
    zero = b.expand(b.const(0, x.dtype), dims)
    return b.emit("Where", [b.expand(b.const(keep, "bool"), dims), x, zero], dims, dtype)


def _gather(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, index = inputs
    if index.dtype != "int64":  # gather-index-dtype
        index = b.cast(index, "int64")
    return _move(b, op, [x, index], dims, dtype)


def _gather_elements(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, index = inputs
    axis = op["GatherElements"]["axis"]
    rlx = rlx_of(x)
    if rlx == "F32" and x.dims[axis] < F32_EXACT:  # gather-elements: F32 data takes an F32 index
        return b.raw(op, [x, b.cast(index, "float32")], dims, dtype)
    if rlx == "I64":
        return b.raw(op, [x, b.cast(index, "int64")], dims, dtype)
    if dtype in NARROW_DTYPES:
        return b.cast(exact.gather_along(b, b.cast(x, "float32"), index, axis), dtype)
    return exact.gather_along(b, x, index, axis)


def _scatter(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    kind = kind_of(op)
    x, index, src = inputs
    if index.dtype not in ("int64", "float32"):  # gather-index-dtype
        index = b.cast(index, "int64")
    reduction = op[kind]["reduction"]
    rlx = rlx_of(x)
    if dtype in NARROW_DTYPES:
        return via(b, op, [x, index, src], (0, 2), dims, dtype, "float32")
    if rlx == "F32":
        return _scatter_f32(b, kind, op, x, index, src, dtype)
    if reduction == "None":  # scatter-f64 / scatter-i64: scatter which update wins, then gather it
        return _scatter_by_winner(b, kind, op, x, index, src, dtype)
    if reduction == "Add" and rlx in ("I64", "I32", "F64"):
        return _scatter_add_one_hot(b, kind, op, x, index, src, dtype)
    if kind == "ScatterElements":
        return _scatter_dense(b, op, x, index, src, dtype)
    raise RlxLimit(
        f"{kind} with reduction {reduction} on {x.dtype} has no exact RLX route (RLX's scatters are "
        "right for float32 data only)"
    )


_MAX_DENSE_SCATTER = 1 << 24


def _scatter_dense(b: Builder, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """ScatterElements with a Mul/Max/Min reduction on integer/float64 data, exactly: along the scattered axis,
    a [target, update] one-hot selects each target's updates, which exact reductions combine with x."""
    spec = op["ScatterElements"]
    axis, reduction = spec["axis"] % x.rank, spec["reduction"]
    n, m = x.dims[axis], index.dims[axis]
    if index.numel * n > _MAX_DENSE_SCATTER:
        raise RlxLimit(
            f"scatter with reduction {reduction} on {x.dtype} is exact only up to {_MAX_DENSE_SCATTER} "
            "(update, target) pairs (dense one-hot)"
        )
    wide = "int64" if dtype not in ("float64",) else "float64"
    xt, back = b.to_last_axis(b.cast(x, wide), axis)
    it, _ = b.to_last_axis(b.cast(index, "int64"), axis)
    st, _ = b.to_last_axis(b.cast(src, wide), axis)
    lead = it.dims[:-1]  # the index's other extents (at most x's)
    sub = b.narrow_to(xt, (*lead, n))
    grid = (*lead, n, m)
    targets = b.expand(b.const(np.arange(n, dtype=np.int64).reshape(n, 1), "int64"), grid)
    hot = b.compare("Eq", b.expand(b.reshape(it, (*lead, 1, m)), grid), targets)
    identity = {"Mul": 1, "Max": -math.inf, "Min": math.inf}[reduction]
    if wide == "int64" and reduction != "Mul":
        info = np.iinfo(np.int64)
        identity = int(info.min) if reduction == "Max" else int(info.max)
    updates = b.expand(b.reshape(st, (*lead, 1, m)), grid)
    picked = b.emit("Where", [hot, updates, b.expand(b.const(identity, wide), grid)], grid, wide)
    reduced = b.reduce({"Mul": "Prod", "Max": "Max", "Min": "Min"}[reduction], picked, [len(grid) - 1], keep_dim=False)
    touched = b.compare(
        "Ne", b.reduce("Sum", b.cast(hot, "float32"), [len(grid) - 1], keep_dim=False), b.const(0.0, "float32")
    )
    combined = b.emit("Where", [touched, b.binary(reduction, sub, reduced), sub], sub.dims, wide)
    if sub.dims != xt.dims:  # positions beyond the index's extent keep x
        pads = [[0, xt.dims[a] - sub.dims[a]] for a in range(xt.rank)]
        combined = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [combined], xt.dims, wide)
        inside = b.emit(
            {"Pad": {"pads": pads, "mode": {"Constant": 0.0}}},
            [b.expand(b.const(1.0, "float32"), sub.dims)],
            xt.dims,
            "float32",
        )
        combined = b.emit("Where", [b.compare("Ne", inside, b.const(0.0, "float32")), combined, xt], xt.dims, wide)
    return b.cast(b.transpose(combined, back), dtype)


_F32_MAX = float(np.finfo(np.float32).max)
_SCATTER_IDENTITY = {"Add": 0.0, "Mul": 1.0, "Max": -_F32_MAX, "Min": _F32_MAX}


def _scatter_f32(b: Builder, kind: str, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """The raw kernel, corrected where the data may hold inf/NaN (scatter-nonfinite: ScatterElements reads
    them as 0): there the result is x op (the updates reduced from the op's identity), or x if untouched."""
    raw = b.raw(op, [x, index, src], x.dims, dtype, compensated="scatter-nonfinite")
    if kind != "ScatterElements" or b.finite(x):
        return raw
    reduction = op[kind]["reduction"]
    ones = b.expand(b.const(1.0, "float32"), index.dims)
    zeros = b.expand(b.const(0.0, "float32"), x.dims)
    touched_op = {kind: {**op[kind], "reduction": "None"}}
    marks = b.raw(touched_op, [zeros, index, ones], x.dims, "float32", compensated="scatter-nonfinite")
    touched = b.compare("Ne", marks, b.const(0.0, "float32"))
    if reduction == "None":
        changed = raw
    else:
        identity = b.const(_SCATTER_IDENTITY[reduction], "float32")  # finite in float32, whatever dtype x is
        base = b.expand(replace(identity, dtype=dtype), x.dims)
        part = b.raw(op, [base, index, src], x.dims, dtype, compensated="scatter-nonfinite")
        changed = b.binary(reduction, x, part)
    finite = b.compare("Eq", b.binary("Sub", x, x), b.const(0.0, dtype))  # inf - inf and NaN - NaN are NaN
    fixed = b.emit("Where", [touched, changed, x], x.dims, dtype)
    return b.emit("Where", [finite, raw, fixed], x.dims, dtype)


def _scatter_by_winner(b: Builder, kind: str, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """Overwriting scatter of any dtype, exactly: scatter each update's position (float32, exact below 2**24)
    with RLX's right float32 kernel, then Gather the winning updates; untouched positions keep x."""
    if kind == "ScatterNd":  # [count, 1] index into the first axis; updates [count, *rest]
        count = src.dims[0]
        if index.rank != 2 or index.dims[1] != 1 or count >= F32_EXACT:
            raise RlxLimit("ScatterNd on integer/float64 data needs a [count, 1] index with count < 2**24")
        order = b.const(np.arange(count, dtype=np.float32).reshape(count, 1), "float32")
        start = b.expand(b.const(-1.0, "float32"), (x.dims[0], 1))
        winner = b.emit(op, [start, index, order], (x.dims[0], 1), "float32")
        rows = b.binary("Max", b.reshape(winner, (x.dims[0],)), b.const(0.0, "float32"))
        picked = b.emit({"Gather": {"axis": 0}}, [src, b.cast(rows, "int64")], x.dims, dtype)
        hit = b.expand(
            b.reshape(b.compare("Ge", winner, b.const(0.0, "float32")), (x.dims[0],) + (1,) * (x.rank - 1)), x.dims
        )
        return b.emit("Where", [hit, picked, x], x.dims, dtype)
    axis = op[kind]["axis"] % x.rank
    if index.dims[axis] >= F32_EXACT:
        raise RlxLimit("scatter of integer/float64 data along an axis of 2**24 or more updates has no exact route")
    shape = [1] * index.rank
    shape[axis] = index.dims[axis]
    order = b.expand(b.const(np.arange(index.dims[axis], dtype=np.float32).reshape(shape), "float32"), index.dims)
    start = b.expand(b.const(-1.0, "float32"), x.dims)
    winner = b.emit(op, [start, index, order], x.dims, "float32")  # the axis coordinate of the update that lands
    pads = [[0, x.dims[a] - src.dims[a] if a != axis else 0] for a in range(x.rank)]
    if any(p[1] for p in pads):  # positions beyond the index's extent are never touched; pad src to reach them
        padded = tuple(x.dims[a] if a != axis else src.dims[a] for a in range(x.rank))
        src = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [src], padded, dtype)
    coord = b.cast(b.binary("Max", winner, b.const(0.0, "float32")), "int64")
    picked = exact.gather_along(b, src, coord, axis)
    return b.emit("Where", [b.compare("Ge", winner, b.const(0.0, "float32")), picked, x], x.dims, dtype)


def _scatter_add_one_hot(b: Builder, kind: str, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """Scatter-add of integer/float64 data as one-hot matmuls over the flattened target (exact.one_hot_add)."""
    if kind == "ScatterNd":  # the layer only sees ScatterNd with a [count, 1] index into the first axis
        if index.rank != 2 or index.dims[1] != 1:
            raise RlxLimit("ScatterNd add on integer/float64 data needs a [count, 1] index")
        flat, updates, target = b.reshape(b.cast(index, "int64"), (index.dims[0],)), src, x
    else:  # ScatterElements: flat positions of every update in the flattened target
        flat = b.reshape(exact.flat_positions(b, index, x.dims, op[kind]["axis"]), (index.numel,))
        updates, target = b.reshape(src, (index.numel, 1)), b.reshape(x, (x.numel, 1))
    if target.dims[0] * flat.dims[0] > exact.MAX_ONE_HOT:
        raise RlxLimit(
            f"integer/float64 scatter-add is exact only up to {exact.MAX_ONE_HOT} (target row, update) "
            "pairs (one-hot matmul)"
        )
    return b.reshape(exact.one_hot_add(b, target, flat, b.cast(updates, x.dtype)), x.dims)


RULES: dict[str, Rule] = {
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "ScatterElements": _scatter,
    "ScatterNd": _scatter,
    "Trilu": _trilu,
    **dict.fromkeys(("Transpose", "Slice", "Narrow", "Concat", "Expand", "Reverse", "Roll", "Tile", "Pad"), _move),
}
