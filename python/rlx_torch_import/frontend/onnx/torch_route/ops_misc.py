"""Losses, quantization and window functions: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss,
QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear,
Hann / Hamming / BlackmanWindow."""

from __future__ import annotations

import math

import torch

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles, torch_dtype

T = torch.Tensor
_QUANT = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32)


def _nll(logp: T, target: T, weight: T | None, reduction: str, ignore: int | None) -> T:
    """-logp[n, target[n, ...], ...] * weight[target], ignored targets 0; reduced per `reduction`."""
    t = target.to(torch.int64)
    keep = torch.ones_like(t, dtype=torch.bool) if ignore is None else t != ignore
    safe = torch.where(keep, t, torch.zeros_like(t))
    picked = -torch.gather(logp, 1, safe.unsqueeze(1)).squeeze(1)
    w = weight[safe] if weight is not None else torch.ones_like(picked)
    w = torch.where(keep, w, torch.zeros_like(w))
    loss = picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


@handles("NegativeLogLikelihoodLoss")
def nll_loss(ctx: NodeCtx) -> Fn:
    red, ignore = ctx.attr("reduction", "mean"), ctx.attr("ignore_index")
    return lambda x, t, w=None: _nll(x, t, w, red, ignore)


@handles("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy(ctx: NodeCtx) -> Fn:
    """loss = NLL(log_softmax(scores, axis 1), labels, weights); second output the log-probabilities."""
    red, ignore = ctx.attr("reduction", "mean"), ctx.attr("ignore_index")

    def fn(x: T, t: T, w: T | None = None) -> tuple[T, T]:
        logp = torch.log_softmax(x, 1)
        return _nll(logp, t, w, red, ignore), logp

    return fn


def _per_axis(ctx: NodeCtx, idx: int, shape: list[int]) -> Fn:
    """A function shaping a scale / zero point (input idx) to broadcast over x (per tensor, axis or block)."""
    p = ctx.shape(idx)
    if len(p) == 0 or (math.prod(p) == 1 and len(p) <= 1):
        return lambda s: s.reshape(())
    a = ctx.axis(ctx.attr("axis", 1), len(shape))
    block = ctx.attr("block_size", 0)
    if block:
        return lambda s: s.repeat_interleave(block, a).narrow(a, 0, shape[a])
    target = [1] * len(shape)
    target[a] = shape[a]
    return lambda s: s.reshape(target)


@handles("QuantizeLinear")
def quantize(ctx: NodeCtx) -> Fn:
    """saturate(round_half_even(x / scale) + zero_point) in the zero point's (or output_dtype's) type."""
    if ctx.has(2):
        out = ctx.dtype(2)
    else:
        out = torch_dtype(ctx.attr("output_dtype", 2), "QuantizeLinear output ")
    if out not in _QUANT:
        raise ctx.fail(f"QuantizeLinear to {out}")
    shape = ctx.shape(0)
    shape_scale = _per_axis(ctx, 1, shape)
    shape_zp = _per_axis(ctx, 2, shape) if ctx.has(2) else None
    prec = ctx.attr("precision", 0)
    pdt = torch_dtype(prec, "precision ") if prec else None
    info = torch.iinfo(out)

    def fn(x: T, s: T, zp: T | None = None) -> T:
        sc = shape_scale(s)
        q = (x.to(pdt) / sc.to(pdt)) if pdt is not None else x / sc.to(x.dtype)
        q = torch.round(q.to(torch.float64))
        if zp is not None and shape_zp is not None:
            q = q + shape_zp(zp).to(torch.float64)
        return torch.clamp(q, info.min, info.max).to(out)

    return fn


@handles("DequantizeLinear")
def dequantize(ctx: NodeCtx) -> Fn:
    """(x - zero_point) * scale, in the scale's dtype (or output_dtype)."""
    shape = ctx.shape(0)
    if ctx.dtype(0) not in (*_QUANT, torch.int64):
        raise ctx.fail(f"DequantizeLinear of {ctx.dtype(0)}")
    shape_scale = _per_axis(ctx, 1, shape)
    shape_zp = _per_axis(ctx, 2, shape) if ctx.has(2) else None
    od = ctx.attr("output_dtype", 0)
    out = torch_dtype(od, "DequantizeLinear output ") if od else ctx.dtype(1)

    def fn(x: T, s: T, zp: T | None = None) -> T:
        xi = x.to(torch.int64)
        if zp is not None and shape_zp is not None:
            xi = xi - shape_zp(zp).to(torch.int64)
        sc = shape_scale(s)
        return (xi.to(sc.dtype) * sc).to(out)

    return fn


@handles("DynamicQuantizeLinear")
def dynamic_quantize(ctx: NodeCtx) -> Fn:
    """uint8 quantization with scale and zero point from the range of x (0 included)."""

    def fn(x: T) -> tuple[T, T, T]:
        lo = torch.clamp(torch.amin(x), max=0)
        hi = torch.clamp(torch.amax(x), min=0)
        scale = (hi - lo) / 255
        zp = torch.clamp(torch.round(-lo / scale), 0, 255)
        y = torch.clamp(torch.round(x / scale) + zp, 0, 255)
        return y.to(torch.uint8), scale, zp.to(torch.uint8)

    return fn


_WINDOWS = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (25 / 46, 21 / 46, 0.0),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


@handles(*_WINDOWS)
def window(ctx: NodeCtx) -> Fn:
    """a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N'), N' = size (periodic) or size - 1."""
    size = ctx.ints(0, "size")[0]
    a0, a1, a2 = _WINDOWS[ctx.op]
    denom = size if ctx.attr("periodic", 1) else size - 1
    n = torch.arange(size, dtype=torch.float64)
    w = a0 - a1 * torch.cos(2 * math.pi * n / denom) + a2 * torch.cos(4 * math.pi * n / denom)
    out = w.to(torch_dtype(ctx.attr("output_datatype", 1), "window output "))
    return lambda *_: out
