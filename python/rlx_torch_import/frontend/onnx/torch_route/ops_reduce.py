"""Reductions and ops along an axis: Reduce*, ArgMax / ArgMin, CumSum / CumProd, TopK,
Softmax / LogSoftmax / Hardmax, LpNormalization."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles

T = torch.Tensor
Dims = tuple[int, ...]


def _sum(x: T, d: Dims, k: bool) -> T:
    return torch.sum(x, d, keepdim=k, dtype=x.dtype if x.dtype != torch.bool else torch.int64)


def _prod(x: T, d: Dims, k: bool) -> T:
    for a in sorted(d, reverse=True):
        x = torch.prod(x, a, keepdim=k, dtype=x.dtype)
    return x


def _mean(x: T, d: Dims, k: bool) -> T:
    if x.is_floating_point():
        return torch.mean(x, d, keepdim=k)
    n = math.prod(x.shape[a] for a in d)
    return torch.div(_sum(x, d, k), n, rounding_mode="trunc").to(x.dtype)


def _max(x: T, d: Dims, k: bool) -> T:
    return torch.amax(x.to(torch.uint8), d, keepdim=k).bool() if x.dtype == torch.bool else torch.amax(x, d, keepdim=k)


def _min(x: T, d: Dims, k: bool) -> T:
    return torch.amin(x.to(torch.uint8), d, keepdim=k).bool() if x.dtype == torch.bool else torch.amin(x, d, keepdim=k)


def _l2(x: T, d: Dims, k: bool) -> T:
    if x.is_floating_point():
        return torch.sqrt(_sum(x * x, d, k))
    return torch.sqrt(_sum(x * x, d, k).to(torch.float64)).to(x.dtype)


_REDUCE: dict[str, Callable[[T, Dims, bool], T]] = {
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _max,
    "ReduceMin": _min,
    "ReduceProd": _prod,
    "ReduceL1": lambda x, d, k: _sum(torch.abs(x), d, k),
    "ReduceL2": _l2,
    "ReduceLogSum": lambda x, d, k: torch.log(_sum(x, d, k)),
    "ReduceLogSumExp": lambda x, d, k: torch.logsumexp(x, d, keepdim=k),
    "ReduceSumSquare": lambda x, d, k: _sum(x * x, d, k),
}
# the value of a reduction over an empty set
_EMPTY = {
    "ReduceMax": -math.inf,
    "ReduceMin": math.inf,
    "ReduceLogSum": -math.inf,
    "ReduceLogSumExp": -math.inf,
    "ReduceProd": 1,
}


@handles(*_REDUCE)
def reduce(ctx: NodeCtx) -> Fn:
    """Axes from the attribute (opset < 18; ReduceSum < 13) or input 1; empty axes: every axis, or the
    identity with noop_with_empty_axes."""
    rank = ctx.rank(0)
    as_input = ctx.opset >= (13 if ctx.op == "ReduceSum" else 18)
    axes = (ctx.ints(1, "axes") if ctx.has(1) else []) if as_input else (ctx.attr("axes") or [])
    keep = bool(ctx.attr("keepdims", 1))
    if not axes and ctx.attr("noop_with_empty_axes", 0):
        return lambda x, *_: x
    dims = tuple(sorted({ctx.axis(a, rank) for a in axes})) if axes else tuple(range(rank))
    f = _REDUCE[ctx.op]
    shape = ctx.shape(0)
    if any(shape[a] == 0 for a in dims):
        out = [1 if a in dims else s for a, s in enumerate(shape) if keep or a not in dims]
        value = _EMPTY.get(ctx.op, 0)
        if ctx.dtype(0) == torch.bool:
            value = ctx.op == "ReduceMin"  # all() of nothing is true, any() false
        return lambda x, *_: torch.full(out, value, dtype=x.dtype)
    if rank == 0:
        return lambda x, *_: f(x.reshape(1), (0,), False).reshape(())
    return lambda x, *_: f(x, dims, keep)


@handles("ArgMax", "ArgMin")
def argmax(ctx: NodeCtx) -> Fn:
    """First extreme index (last with select_last_index), int64."""
    rank = ctx.rank(0)
    a = ctx.axis(ctx.attr("axis", 0), rank)
    keep = bool(ctx.attr("keepdims", 1))
    f = torch.argmax if ctx.op == "ArgMax" else torch.argmin
    n = ctx.shape(0)[a]
    if ctx.attr("select_last_index", 0):
        return lambda x: (n - 1) - f(x.flip(a), dim=a, keepdim=keep)
    return lambda x: f(x, dim=a, keepdim=keep)


@handles("CumSum", "CumProd")
def cumulative(ctx: NodeCtx) -> Fn:
    """Along the (constant) axis input; `exclusive` shifts in the identity, `reverse` runs from the end."""
    a = ctx.axis(ctx.ints(1, "axis")[0], ctx.rank(0))
    excl, rev = ctx.attr("exclusive", 0), ctx.attr("reverse", 0)
    prod = ctx.op == "CumProd"

    def fn(x: T, *_: T | None) -> T:
        y = x.flip(a) if rev else x
        c = torch.cumprod(y, a, dtype=x.dtype) if prod else torch.cumsum(y, a, dtype=x.dtype)
        if excl:
            first = torch.ones_like(y.narrow(a, 0, 1)) if prod else torch.zeros_like(y.narrow(a, 0, 1))
            c = torch.cat([first, c.narrow(a, 0, y.shape[a] - 1)], dim=a)
        return c.flip(a) if rev else c

    return fn


@handles("TopK")
def topk(ctx: NodeCtx) -> Fn:
    """k largest (or smallest) along axis; ties keep the lower index first (a stable sort)."""
    k = ctx.attr("k") if ctx.opset < 10 else ctx.ints(1, "k")[0]
    a = ctx.axis(ctx.attr("axis", -1), ctx.rank(0))
    largest = bool(ctx.attr("largest", 1))

    def fn(x: T, *_: T | None) -> tuple[T, T]:
        v, i = torch.sort(x, dim=a, descending=largest, stable=True)
        return v.narrow(a, 0, k), i.narrow(a, 0, k)

    return fn


def _along(ctx: NodeCtx, f: Callable[[T, int], T]) -> Fn:
    """f along one axis (opset >= 13), or over the input flattened to 2-D at `axis` (before 13)."""
    shape = ctx.shape(0)
    rank = len(shape)
    if ctx.opset >= 13:
        a = ctx.axis(ctx.attr("axis", -1), rank)
        return lambda x: f(x, a)
    a = ctx.axis(ctx.attr("axis", 1), rank) if rank else 0
    rows, cols = math.prod(shape[:a]), math.prod(shape[a:])
    return lambda x: f(x.reshape(rows, cols), 1).reshape(shape)


def _hardmax(x: T, a: int) -> T:
    idx = torch.argmax(x, dim=a, keepdim=True)
    return torch.zeros_like(x).scatter(a, idx, torch.ones_like(idx, dtype=x.dtype))


@handles("Softmax", "LogSoftmax", "Hardmax")
def softmax(ctx: NodeCtx) -> Fn:
    f: Callable[[T, int], T] = {
        "Softmax": lambda x, a: torch.softmax(x, a),
        "LogSoftmax": lambda x, a: torch.log_softmax(x, a),
        "Hardmax": _hardmax,
    }[ctx.op]
    return _along(ctx, f)


@handles("LpNormalization")
def lp_normalization(ctx: NodeCtx) -> Fn:
    """x / ||x||_p along axis (p 1 or 2); 0 where the norm is 0."""
    a = ctx.axis(ctx.attr("axis", -1), ctx.rank(0))
    p = ctx.attr("p", 2)

    def fn(x: T) -> T:
        n = torch.sum(torch.abs(x), a, keepdim=True) if p == 1 else torch.sqrt(torch.sum(x * x, a, keepdim=True))
        return torch.where(n == 0, torch.zeros_like(x), x / n)  # a zero vector stays zero

    return fn
