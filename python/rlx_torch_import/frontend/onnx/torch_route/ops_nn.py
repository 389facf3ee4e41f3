"""Neural-network ops: normalizations (Batch / Instance / Layer / Group / RMS / MeanVariance, LRN),
Gemm, MatMul, Einsum, Dropout (inference)."""

from __future__ import annotations

import torch

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles, torch_dtype

T = torch.Tensor


def _chan(v: T, rank: int) -> T:
    """A per-channel vector [C] shaped to broadcast over [N, C, ...]."""
    return v.reshape([1, -1] + [1] * (rank - 2))


@handles("BatchNormalization")
def batch_norm(ctx: NodeCtx) -> Fn:
    """Inference: (x - mean) / sqrt(var + eps) * scale + B, per channel (axis 1)."""
    if ctx.attr("training_mode", 0) or (ctx.opset < 7 and not ctx.attr("is_test", 0)):
        raise ctx.fail("BatchNormalization in training mode (batch statistics, running-stat outputs)")
    eps = ctx.attr("epsilon", 1e-5)
    rank = ctx.rank(0)
    return lambda x, s, b, m, v: (
        (x - _chan(m, rank)) / torch.sqrt(_chan(v, rank) + eps) * _chan(s, rank) + _chan(b, rank)
    )


@handles("InstanceNormalization")
def instance_norm(ctx: NodeCtx) -> Fn:
    """Per (n, c): normalize over the spatial axes (population variance), then scale and B per channel."""
    eps = ctx.attr("epsilon", 1e-5)
    rank = ctx.rank(0)
    dims = tuple(range(2, rank))

    def fn(x: T, s: T, b: T) -> T:
        m = torch.mean(x, dims, keepdim=True)
        v = torch.mean((x - m) ** 2, dims, keepdim=True)
        return (x - m) / torch.sqrt(v + eps) * _chan(s, rank) + _chan(b, rank)

    return fn


def _stash(ctx: NodeCtx) -> torch.dtype:
    """The computation dtype of LayerNormalization / RMSNormalization (stash_type; default float32)."""
    return torch_dtype(ctx.attr("stash_type", 1), "stash_type ")


@handles("LayerNormalization")
def layer_norm(ctx: NodeCtx) -> Fn:
    """Normalize over axes [axis, rank) in stash_type; outputs Y (X's dtype), Mean, InvStdDev (stash)."""
    rank = ctx.rank(0)
    a = ctx.axis(ctx.attr("axis", -1), rank)
    eps = ctx.attr("epsilon", 1e-5)
    dims = tuple(range(a, rank))
    st = _stash(ctx)

    def fn(x: T, s: T, b: T | None = None) -> tuple[T, T, T]:
        xs = x.to(st)
        m = torch.mean(xs, dims, keepdim=True)
        d = xs - m
        inv = 1.0 / torch.sqrt(torch.mean(d * d, dims, keepdim=True) + eps)
        y = (d * inv).to(x.dtype) * s
        if b is not None:
            y = y + b
        return y, m, inv

    return fn


@handles("RMSNormalization")
def rms_norm(ctx: NodeCtx) -> Fn:
    """x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale, computed in stash_type."""
    rank = ctx.rank(0)
    a = ctx.axis(ctx.attr("axis", -1), rank)
    eps = ctx.attr("epsilon", 1e-5)
    dims = tuple(range(a, rank))
    st = _stash(ctx)

    def fn(x: T, s: T) -> T:
        xs = x.to(st)
        r = torch.sqrt(torch.mean(xs * xs, dims, keepdim=True) + eps)
        return (xs / r).to(x.dtype) * s

    return fn


@handles("GroupNormalization")
def group_norm(ctx: NodeCtx) -> Fn:
    """Normalize each group of channels; scale / bias per group (opset 18) or per channel (21)."""
    g = ctx.attr("num_groups")
    eps = ctx.attr("epsilon", 1e-5)
    shape = ctx.shape(0)
    rank, c = len(shape), shape[1]
    per_group = ctx.shape(1)[0] == g and ctx.opset < 21
    st = _stash(ctx) if ctx.opset >= 21 else ctx.dtype(0)

    def fn(x: T, s: T, b: T) -> T:
        xs = x.to(st).reshape(shape[0], g, -1)
        m = torch.mean(xs, 2, keepdim=True)
        v = torch.mean((xs - m) ** 2, 2, keepdim=True)
        y = ((xs - m) / torch.sqrt(v + eps)).reshape(shape).to(x.dtype)
        if per_group:
            s, b = s.repeat_interleave(c // g), b.repeat_interleave(c // g)
        return y * _chan(s, rank) + _chan(b, rank)

    return fn


@handles("MeanVarianceNormalization")
def mean_variance_norm(ctx: NodeCtx) -> Fn:
    """(x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes` (default [0, 2, 3])."""
    dims = tuple(ctx.axis(a, ctx.rank(0)) for a in ctx.attr("axes", [0, 2, 3]))

    def fn(x: T) -> T:
        m = torch.mean(x, dims, keepdim=True)
        std = torch.sqrt(torch.mean(x * x, dims, keepdim=True) - m * m)
        return (x - m) / (std + 1e-9)

    return fn


@handles("LRN")
def lrn(ctx: NodeCtx) -> Fn:
    """x / (bias + alpha / size * sum of x^2 over the channel window)^beta."""
    alpha, beta, bias = ctx.attr("alpha", 1e-4), ctx.attr("beta", 0.75), ctx.attr("bias", 1.0)
    size = ctx.attr("size")
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    c = ctx.shape(0)[1]

    def fn(x: T) -> T:
        sq = torch.nn.functional.pad(x * x, [0, 0] * (x.dim() - 2) + [lo, hi])
        total = sum(sq.narrow(1, k, c) for k in range(size))
        return x / (bias + alpha / size * total) ** beta

    return fn


@handles("Gemm")
def gemm(ctx: NodeCtx) -> Fn:
    """alpha * A' @ B' + beta * C (A' = A^T with transA, B' likewise; C broadcast)."""
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    ta, tb = ctx.attr("transA", 0), ctx.attr("transB", 0)

    def fn(a: T, b: T, c: T | None = None) -> T:
        y = torch.matmul(a.t() if ta else a, b.t() if tb else b)
        if alpha != 1.0:
            y = y * alpha
        if c is not None:
            y = y + (c * beta if beta != 1.0 else c)
        return y

    return fn


@handles("MatMul")
def matmul(ctx: NodeCtx) -> Fn:
    """numpy matmul semantics (1-D operands, batch broadcasting)."""
    return torch.matmul


@handles("Einsum")
def einsum(ctx: NodeCtx) -> Fn:
    eq = ctx.attr("equation").replace(" ", "")
    return lambda *xs: torch.einsum(eq, *xs)


@handles("Dropout")
def dropout(ctx: NodeCtx) -> Fn:
    """Inference: identity, mask all true. Training mode with a nonzero ratio is random: untranslatable."""
    training = bool(ctx.ints(2, "training_mode")[0]) if ctx.has(2) else False
    if training and (ctx.floats(1, "ratio")[0] if ctx.has(1) else 0.5) != 0:
        raise ctx.fail("Dropout in training mode with ratio != 0 (random)")
    mask_dt = torch.bool if ctx.opset >= 10 else ctx.dtype(0)

    def fn(x: T, *_: T | None) -> tuple[T, T]:
        return x.clone(), torch.ones(x.shape, dtype=mask_dt)

    return fn
