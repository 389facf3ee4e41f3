"""Indexing ops: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND, OneHot, Compress,
ReverseSequence, NonZero (constant input only). Negative indices count from the end of their axis."""

from __future__ import annotations

import math

import torch

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles

T = torch.Tensor


def _fix(idx: T, n: int) -> T:
    """int64 indices with negatives wrapped (i + n)."""
    idx = idx.to(torch.int64)
    return torch.where(idx < 0, idx + n, idx)


@handles("Gather")
def gather(ctx: NodeCtx) -> Fn:
    """data.take along axis: out shape data[:axis] + indices + data[axis+1:]."""
    shape = ctx.shape(0)
    a = ctx.axis(ctx.attr("axis", 0), len(shape))
    out = shape[:a] + ctx.shape(1) + shape[a + 1 :]
    return lambda x, i: x.index_select(a, _fix(i, shape[a]).reshape(-1)).reshape(out)


@handles("GatherElements")
def gather_elements(ctx: NodeCtx) -> Fn:
    a = ctx.axis(ctx.attr("axis", 0), ctx.rank(0))
    n = ctx.shape(0)[a]
    return lambda x, i: torch.gather(x, a, _fix(i, n))


def _linear(idx: T, dims: list[int]) -> T:
    """Row-major linear index over `dims` of index tuples idx[..., len(dims)] (negatives wrapped)."""
    lin = torch.zeros(idx.shape[:-1], dtype=torch.int64)
    for j, d in enumerate(dims):
        lin = lin * d + _fix(idx[..., j], d)
    return lin


@handles("GatherND")
def gather_nd(ctx: NodeCtx) -> Fn:
    """Index tuples of length k into data's axes [b, b + k) (b = batch_dims)."""
    b = ctx.attr("batch_dims", 0)
    data, ind = ctx.shape(0), ctx.shape(1)
    k = ind[-1]
    nb = math.prod(data[:b])
    rest = data[b + k :]
    out = ind[:-1] + rest

    def fn(x: T, i: T) -> T:
        x2 = x.reshape([nb, math.prod(data[b : b + k]), *rest])
        lin = _linear(i.reshape(nb, -1, k), data[b : b + k])
        rows = torch.arange(nb).reshape(nb, 1)
        return x2[rows, lin].reshape(out)

    return fn


_REDUCTION = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@handles("ScatterElements", "Scatter")
def scatter_elements(ctx: NodeCtx) -> Fn:
    a = ctx.axis(ctx.attr("axis", 0), ctx.rank(0))
    n = ctx.shape(0)[a]
    red = ctx.attr("reduction", "none")
    if red == "none":
        return lambda x, i, u: torch.scatter(x, a, _fix(i, n), u)
    mode = _REDUCTION[red]
    return lambda x, i, u: torch.scatter_reduce(x, a, _fix(i, n), u, mode, include_self=True)


@handles("ScatterND")
def scatter_nd(ctx: NodeCtx) -> Fn:
    """updates written (or reduced) at index tuples over data's leading k axes."""
    data, ind = ctx.shape(0), ctx.shape(1)
    k = ind[-1]
    rest = data[k:]
    red = ctx.attr("reduction", "none")

    def fn(x: T, i: T, u: T) -> T:
        x2 = x.reshape([math.prod(data[:k]), *rest]).clone()
        lin = _linear(i.reshape(-1, k), data[:k])
        u2 = u.reshape([-1, *rest])
        if red == "none":
            y = x2.index_copy(0, lin, u2)
        elif red == "add":
            y = x2.index_add(0, lin, u2)
        else:
            y = x2.index_reduce(0, lin, u2, _REDUCTION[red], include_self=True)
        return y.reshape(data)

    return fn


@handles("OneHot")
def one_hot(ctx: NodeCtx) -> Fn:
    """values[1] where the (wrapped) index equals the position along the new axis, else values[0]."""
    depth = int(ctx.floats(1, "depth")[0])
    rank = ctx.rank(0) + 1
    a = ctx.axis(ctx.attr("axis", -1), rank)
    pos_shape = [1] * rank
    pos_shape[a] = depth
    pos = torch.arange(depth).reshape(pos_shape)

    def fn(i: T, _: T | None, v: T) -> T:
        idx = i.to(torch.int64) if not i.is_floating_point() else i.trunc().to(torch.int64)
        idx = torch.where(idx < 0, idx + depth, idx).unsqueeze(a)
        return torch.where(idx == pos, v[1], v[0])

    return fn


@handles("Compress")
def compress(ctx: NodeCtx) -> Fn:
    """Slices where the (constant) condition is true, along axis (or over the flattened input)."""
    cond = ctx.const(1, "condition").reshape(-1).to(torch.bool)
    axis = ctx.attr("axis")
    a = 0 if axis is None else ctx.axis(axis, ctx.rank(0))
    n = ctx.shape(0)[a] if axis is not None else math.prod(ctx.shape(0))
    keep = torch.tensor([j for j, c in enumerate(cond.tolist()[:n]) if c], dtype=torch.int64)
    if axis is None:
        return lambda x, *_: x.reshape(-1).index_select(0, keep)
    return lambda x, *_: x.index_select(a, keep)


@handles("ReverseSequence")
def reverse_sequence(ctx: NodeCtx) -> Fn:
    """Reverse the first sequence_lens[b] steps along time_axis for each batch entry b."""
    tax, bax = ctx.attr("time_axis", 0), ctx.attr("batch_axis", 1)
    shape = ctx.shape(0)
    steps = shape[tax]
    t_shape = [1] * len(shape)
    t_shape[tax] = steps
    b_shape = [1] * len(shape)
    b_shape[bax] = shape[bax]
    t = torch.arange(steps).reshape(t_shape)

    def fn(x: T, lens: T) -> T:
        n = lens.to(torch.int64).reshape(b_shape)
        src = torch.where(t < n, n - 1 - t, t).expand(shape)
        return torch.gather(x, tax, src)

    return fn


@handles("NonZero")
def nonzero(ctx: NodeCtx) -> Fn:
    """Only of a constant input (the output's shape depends on the values)."""
    if not ctx.is_const(0):
        raise ctx.fail("NonZero of a run-time value: its output shape depends on the data")
    return lambda x: torch.nonzero(x).t().contiguous()
