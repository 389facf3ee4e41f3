"""Workaround rules for reductions, scans, sorting, matmul, convolution, normalization and pooling."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...dtypes import compute_rlx
from ...errors import LoweringError
from . import exact, hits
from .routing import RlxLimit, kind_of, rlx_of

if TYPE_CHECKING:
    from ..builder import Builder
    from ..call import Value

Rule = Callable[["Builder", Any, list["Value"], tuple[int, ...], str], "Value"]


# ── reductions, scans, sorting ───────────────────────────────────────────────────────────────


def _reduce(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    spec = op["Reduce"]
    red, keep = spec["op"], spec["keep_dim"]
    axes = sorted({a % x.rank for a in spec["axes"]}) if x.rank else []
    if not axes:  # a rank-0 tensor, or no axes: nothing to reduce (RLX's kernel panics on rank 0)
        return b.reshape(x, dims)
    rlx = rlx_of(x)
    if rlx == "Bool":
        return b.cast(b.emit({"Reduce": {**spec, "axes": axes}}, [b.cast(x, "float32")], dims, "float32"), dtype)
    if rlx in hits.INTS:  # reduce-int: pairwise with exact int64 ops
        if red == "Mean":
            return b.cast(b.emit(op, [b.cast(x, "float64")], dims, "float64"), dtype)
        wide = b.cast(x, "int64")
        if red == "Sum" and b.provenance.node in b.program.size_dependent:  # one graph at every length
            return b.cast(exact.running_total(b, wide, axes, keep), dtype)
        pair = {"Sum": "Add", "Prod": "Mul", "Max": "Max", "Min": "Min"}[red]
        return b.cast(exact.pairwise(b, pair, wide, axes, keep), dtype)
    if rlx == "F64" and red != "Sum":  # reduce-f64
        if red == "Mean":
            total = b.emit({"Reduce": {"op": "Sum", "axes": axes, "keep_dim": keep}}, [x], dims, dtype)
            return b.binary("Div", total, b.const(float(math.prod(x.dims[a] for a in axes)), dtype))
        pair = {"Prod": "Mul", "Max": "Max", "Min": "Min"}[red]
        return exact.pairwise(b, pair, x, axes, keep)
    nan_fix = red in ("Max", "Min") and rlx in ("F32", "F64") and not b.nan_free(x)
    y = _contiguous_reduce(b, red, x, axes, keep, dtype, compensated="reduce-nan" if nan_fix else "")
    if nan_fix:  # reduce-nan
        nan = b.cast(exact.is_nan(b, x), "float32")
        any_nan = b.compare("Ne", _contiguous_reduce(b, "Sum", nan, axes, keep, "float32"), b.const(0.0, "float32"))
        y = b.emit("Where", [any_nan, b.expand(b.const(math.nan, dtype), dims), y], dims, dtype)
    return y


def _contiguous_reduce(
    b: Builder, red: str, x: Value, axes: list[int], keep: bool, dtype: str, compensated: str = ""
) -> Value:
    """Raw Reduce nodes over runs of adjacent axes (the CPU kernel wants a contiguous range), highest first."""
    runs: list[list[int]] = []
    for a in axes:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    y = x
    for run in reversed(runs):  # highest axes first, so lower indices stay valid
        out = tuple((1 if i in run else d) for i, d in enumerate(y.dims) if keep or i not in run)
        y = b.raw({"Reduce": {"op": red, "axes": run, "keep_dim": keep}}, [y], out, dtype, compensated=compensated)
    return y


def _scan(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    kind = kind_of(op)
    spec = op[kind]
    if x.rank == 0:
        return b.reshape(b.emit({kind: {**spec, "axis": -1}}, [b.reshape(x, (1,))], (1,), dtype), dims)
    axis = spec["axis"] % x.rank
    if axis != x.rank - 1:  # scan-axis
        moved, back = b.to_last_axis(x, axis)
        y = b.emit({kind: {**spec, "axis": -1}}, [moved], moved.dims, dtype)
        return b.transpose(y, back)
    if spec["axis"] != -1:
        op = {kind: {**spec, "axis": -1}}
    rlx = rlx_of(x)
    if spec.get("exclusive"):
        raise RlxLimit(f"exclusive {kind} is not used by any lowering")
    if rlx == "F32" or (kind == "Cumsum" and rlx == "I64"):
        return b.raw(op, [x], dims, dtype)
    if rlx in (*hits.INTS, "Bool"):  # cumprod-int; narrower ints accumulate in int64
        return b.cast(exact.scan(b, "Add" if kind == "Cumsum" else "Mul", b.cast(x, "int64")), dtype)
    return exact.scan(b, "Add" if kind == "Cumsum" else "Mul", x)  # scan-f64


def _check_sortable(x: Value, axis: int) -> None:
    n = x.dims[axis] if x.rank else 1
    if n > exact.MAX_EXACT_SORT:
        raise RlxLimit(
            f"sorting {x.dtype} over {n} > {exact.MAX_EXACT_SORT} elements has no exact RLX route "
            "(the exact counting sort is O(n^2))"
        )


def _nan_order(b: Builder, x: Value, axis: int, descending: bool) -> Value:
    """sort-nan: the float32 indices of torch's stable sort of a float32 x that may hold NaN (NaN above +inf,
    ties in index order): a stable ArgSort of x with NaN read as +inf, then a stable ArgSort of the NaN flags
    taken in that order (RLX's CPU sort is a stable merge sort, so the second pass keeps the first's order
    within each flag), composed. Neither key holds NaN. Two O(n log n) sorts and three gathers."""
    nan = exact.is_nan(b, x)
    key = b.emit("Where", [nan, b.expand(b.const(math.inf, x.dtype), x.dims), x], x.dims, x.dtype)
    spec = {"ArgSort": {"axis": axis, "descending": descending}}
    first = b.raw(spec, [key], x.dims, "float32", compensated="sort-nan")
    flags = exact.gather_along(b, b.cast(nan, "float32"), b.cast(first, "int64"), axis)
    second = b.raw(spec, [flags], x.dims, "float32", compensated="sort-nan")
    return exact.gather_along(b, first, b.cast(second, "int64"), axis)


def _sort(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    kind = kind_of(op)
    spec = op[kind]
    if rlx_of(x) == "F32":
        if b.nan_free(x):
            return b.raw(op, inputs, dims, dtype)
        axis = spec["axis"] % max(x.rank, 1)
        desc = spec["descending"]
        order = b.memo(("nan-sort", x.id, axis, desc), lambda: _nan_order(b, x, axis, desc))
        if kind == "ArgSort":
            return b.cast(order, dtype)
        return exact.gather_along(b, x, b.cast(order, "int64"), axis)
    # sort-f64 (integers too)
    axis = spec["axis"] % max(x.rank, 1)
    _check_sortable(x, axis)
    values, order = b.memo(("sort", x.id, axis, spec["descending"]), lambda: exact.sort(b, x, axis, spec["descending"]))
    return values if kind == "Sort" else b.cast(order, dtype)


def _topk(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    if rlx_of(x) == "F32":
        if b.nan_free(x):
            return b.raw(op, inputs, dims, dtype)
        last = x.rank - 1  # sort-nan: the NaN-aware descending order, first k
        order = b.memo(("nan-sort", x.id, last, True), lambda: _nan_order(b, x, last, True))
        return b.cast(b.narrow(order, last, 0, op["TopK"]["k"]), dtype)
    _check_sortable(x, x.rank - 1)  # topk-f64: the exact sort, first k
    _, order = b.memo(("sort", x.id, x.rank - 1, True), lambda: exact.sort(b, x, x.rank - 1, True))
    return b.cast(b.narrow(order, x.rank - 1, 0, op["TopK"]["k"]), dtype)


def _arg_extreme(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """argmax: the first index equal to the NaN-propagating extreme (every dtype)."""
    (x,) = inputs
    kind = kind_of(op)
    axis = op[kind]["axis"] % max(x.rank, 1)
    values = b.reduce("Max" if kind == "ArgMax" else "Min", x, [axis], keep_dim=True)
    index = exact.first_index(b, x, values, axis)
    return b.cast(b.reshape(index, dims), dtype)


# ── linear algebra, convolution, normalization ───────────────────────────────────────────────

_MAX_INT_MATMUL = 1 << 24


def _matmul(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, y = inputs
    if rlx_of(x) not in (*hits.INTS, "Bool"):
        return b.raw(op, inputs, dims, dtype)
    m, k, n = x.dims[-2], x.dims[-1], y.dims[-1]  # matmul-int: broadcast Mul, pairwise Sum over k
    if math.prod(dims) * k > _MAX_INT_MATMUL:
        raise RlxLimit(
            f"integer matmul with {math.prod(dims) * k} products > {_MAX_INT_MATMUL} has no exact RLX "
            "route (RLX's MatMul is float-only)"
        )
    a = b.reshape(b.cast(x, "int64"), (*x.dims[:-2], m, k, 1))
    c = b.reshape(b.cast(y, "int64"), (*y.dims[:-2], 1, k, n))
    products = b.binary("Mul", a, c)
    return b.cast(exact.pairwise(b, "Add", products, [products.rank - 2], keep_dim=False), dtype)


def _conv(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, w = inputs
    spec = op[kind_of(op)]
    if rlx_of(x) in hits.INTS:  # conv-f64 / conv3d-f64 (integers too): in float64, exact while |sums| < 2**53
        wide = exact.conv(b, b.cast(x, "float64"), b.cast(w, "float64"), spec, dims)
        return b.cast(wide, dtype)
    if rlx_of(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    return exact.conv(b, x, w, spec, dims)  # conv-f64 / conv3d-f64


def _conv_transpose(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, w = inputs
    spec = op[kind_of(op)]
    if rlx_of(x) in hits.INTS:  # conv-transpose-f64 / conv-transpose3d-f64 (integers too): in float64
        wide = exact.conv_transpose(b, b.cast(x, "float64"), b.cast(w, "float64"), spec, dims)
        return b.cast(wide, dtype)
    if rlx_of(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    return exact.conv_transpose(b, x, w, spec, dims)  # conv-transpose-f64 / conv-transpose3d-f64


def _batch_norm(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, gamma, beta, mean, var = inputs
    if rlx_of(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    eps = b.const(op["BatchNormInference"]["eps"], dtype)  # norm-f64: (x - mean) * gamma / sqrt(var + eps) + beta
    scale = b.binary("Mul", gamma, b.emit({"Activation": "Rsqrt"}, [b.binary("Add", var, eps)], var.dims, dtype))
    return b.binary("Add", b.binary("Mul", b.binary("Sub", x, mean), scale), beta)


def _group_norm(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, gamma, beta = inputs
    if rlx_of(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    spec = op["GroupNorm"]  # norm-f64: per (n, group) statistics from Sum reductions
    n, c, groups = x.dims[0], x.dims[1], spec["num_groups"]
    flat = b.reshape(x, (n, groups, x.numel // (n * groups)))
    mean = b.reduce("Mean", flat, [2], keep_dim=True)
    centered = b.binary("Sub", flat, mean)
    var = b.reduce("Mean", b.binary("Mul", centered, centered), [2], keep_dim=True)
    rstd = b.emit({"Activation": "Rsqrt"}, [b.binary("Add", var, b.const(spec["eps"], dtype))], var.dims, dtype)
    y = b.reshape(b.binary("Mul", centered, rstd), x.dims)
    affine = (1, c, *([1] * (x.rank - 2)))
    return b.binary("Add", b.binary("Mul", y, b.reshape(gamma, affine)), b.reshape(beta, affine))


def _pool(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    if rlx_of(inputs[0]) != "F32":  # pool-f64: the pool family unrolls other dtypes (native_pool)
        raise LoweringError(f"internal error: Pool on {inputs[0].dtype} reached RLX; the pool family unrolls it")
    return b.raw(op, inputs, dims, dtype)


def native_pool(dtype: str) -> bool:
    """Whether RLX's fused Pool computes this dtype right (pool-f64)."""
    return compute_rlx(dtype) == "F32"


RULES: dict[str, Rule] = {
    "Reduce": _reduce,
    "Cumsum": _scan,
    "CumProd": _scan,
    "Sort": _sort,
    "ArgSort": _sort,
    "TopK": _topk,
    "ArgMax": _arg_extreme,
    "ArgMin": _arg_extreme,
    "MatMul": _matmul,
    "Conv": _conv,
    "Conv3d": _conv,
    "ConvTranspose2d": _conv_transpose,
    "ConvTranspose3d": _conv_transpose,
    "BatchNormInference": _batch_norm,
    "GroupNorm": _group_norm,
    "Pool": _pool,
}
