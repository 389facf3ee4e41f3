"""Convolutions and pools: Conv, ConvTranspose, MaxPool (with Indices), AveragePool, LpPool, Global*Pool.

Padding is explicit: the ONNX pads (or auto_pad's SAME_UPPER / SAME_LOWER / VALID) are applied with
F.pad before a torch op with padding 0, and ceil_mode's extra windows get their own right padding, so
the output sizes are ONNX's (windows that would start in the right padding are dropped)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles

T = torch.Tensor
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}


def _torch_pads(pads: list[tuple[int, int]]) -> list[int]:
    """[(begin, end)] per spatial axis -> F.pad's list (last axis first)."""
    out: list[int] = []
    for b, e in reversed(pads):
        out += [b, e]
    return out


def _window(ctx: NodeCtx, kernel: list[int]) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """(strides, dilations, [(pad begin, pad end)] per spatial axis) with auto_pad resolved."""
    n = len(kernel)
    strides = ctx.attr("strides") or [1] * n
    dil = ctx.attr("dilations") or [1] * n
    auto = ctx.attr("auto_pad", "NOTSET")
    spatial = ctx.shape(0)[2:]
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i in range(n):
            out = -(-spatial[i] // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - spatial[i], 0)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return strides, dil, pads
    if auto == "VALID":
        return strides, dil, [(0, 0)] * n
    p = ctx.attr("pads") or [0] * (2 * n)
    return strides, dil, [(p[i], p[i + n]) for i in range(n)]


def _ceil_extra(ctx: NodeCtx, kernel: list[int], strides: list[int], dil: list[int], pads: list) -> list[int]:
    """Extra right padding so that ceil_mode's last windows exist (none past the padded input's start)."""
    if not ctx.attr("ceil_mode", 0):
        return [0] * len(kernel)
    extra = []
    for i, size in enumerate(ctx.shape(0)[2:]):
        span = size + pads[i][0] + pads[i][1]
        eff = (kernel[i] - 1) * dil[i] + 1
        out = -(-(span - eff) // strides[i]) + 1
        if (out - 1) * strides[i] >= size + pads[i][0]:
            out -= 1  # a window starting in the right padding is dropped
        extra.append(max((out - 1) * strides[i] + eff - span, 0))
    return extra


@handles("Conv")
def conv(ctx: NodeCtx) -> Fn:
    w = ctx.shape(1)
    kernel = ctx.attr("kernel_shape") or w[2:]
    strides, dil, pads = _window(ctx, kernel)
    group = ctx.attr("group", 1)
    f = _CONV.get(len(kernel))
    if f is None:
        raise ctx.fail(f"Conv with {len(kernel)} spatial axes")
    tp = _torch_pads(pads)
    return lambda x, w, b=None: f(F.pad(x, tp), w, b, strides, 0, dil, group)


@handles("ConvTranspose")
def conv_transpose(ctx: NodeCtx) -> Fn:
    """Full transposed convolution, then output_padding and the pads (or output_shape's) cropped."""
    w = ctx.shape(1)
    kernel = ctx.attr("kernel_shape") or w[2:]
    n = len(kernel)
    strides = ctx.attr("strides") or [1] * n
    dil = ctx.attr("dilations") or [1] * n
    outpad = ctx.attr("output_padding") or [0] * n
    group = ctx.attr("group", 1)
    spatial = ctx.shape(0)[2:]
    auto = ctx.attr("auto_pad", "NOTSET")
    out_shape = ctx.attr("output_shape")
    if out_shape is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [spatial[i] * strides[i] for i in range(n)]
    pads: list[tuple[int, int]] = []
    for i in range(n):
        full = strides[i] * (spatial[i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1
        if out_shape is not None:
            total = full - out_shape[-n + i]
            half = total // 2
            pads.append((half, total - half) if auto == "SAME_UPPER" else (total - half, half))
        elif auto == "VALID":
            pads.append((0, 0))
        else:
            p = ctx.attr("pads") or [0] * (2 * n)
            pads.append((p[i], p[i + n]))
    crop = _torch_pads([(-b, op - e) for (b, e), op in zip(pads, outpad, strict=True)])
    f = _CONVT.get(n)
    if f is None:
        raise ctx.fail(f"ConvTranspose with {n} spatial axes")

    def fn(x: T, w: T, b: T | None = None) -> T:
        y = F.pad(f(x, w, None, strides, 0, 0, group, dil), crop)
        return y if b is None else y + b.reshape([1, -1] + [1] * n)

    return fn


def _pool_setup(ctx: NodeCtx) -> tuple[list[int], list[int], list[int], list[tuple[int, int]], list[int]]:
    kernel = ctx.attr("kernel_shape")
    strides, dil, pads = _window(ctx, kernel)
    extra = _ceil_extra(ctx, kernel, strides, dil, pads)
    return kernel, strides, dil, pads, extra


def _flat_indices(idx: T, pads: list[tuple[int, int]], padded: list[int], shape: list[int], col: bool) -> T:
    """Indices into the padded spatial plane -> ONNX's indices into the whole input (N, C included)."""
    coords = []
    rest = idx
    for size in reversed(padded):
        coords.append(rest % size)
        rest = torch.div(rest, size, rounding_mode="floor")
    coords = [c - p[0] for c, p in zip(reversed(coords), pads, strict=True)]
    spatial = shape[2:]
    flat = torch.zeros_like(idx)
    order = list(range(len(spatial)))
    for i in reversed(order) if col else order:
        flat = flat * spatial[i] + coords[i]
    nc = torch.arange(shape[0] * shape[1], dtype=torch.int64).reshape([shape[0], shape[1]] + [1] * len(spatial))
    return flat + nc * math.prod(spatial)


@handles("MaxPool")
def max_pool(ctx: NodeCtx) -> Fn:
    """Max over windows (padding never wins); Indices flattened over the whole input, row-major
    (column-major within a plane with storage_order=1)."""
    kernel, strides, dil, pads, extra = _pool_setup(ctx)
    f = _MAXPOOL.get(len(kernel))
    if f is None:
        raise ctx.fail(f"MaxPool with {len(kernel)} spatial axes")
    tp = _torch_pads([(b, e + x) for (b, e), x in zip(pads, extra, strict=True)])
    shape = ctx.shape(0)
    padded = [s + b + e + x for s, (b, e), x in zip(shape[2:], pads, extra, strict=True)]
    col = bool(ctx.attr("storage_order", 0))
    want_idx = len(ctx.node.output) > 1 and bool(ctx.node.output[1])

    def fn(x: T) -> T | tuple[T, T]:
        xf = x if x.is_floating_point() else x.to(torch.float64)
        xp = F.pad(xf, tp, value=-math.inf)
        if not want_idx:
            return f(xp, kernel, strides, 0, dil).to(x.dtype)
        y, i = f(xp, kernel, strides, 0, dil, return_indices=True)
        return y.to(x.dtype), _flat_indices(i, pads, padded, shape, col)

    return fn


def _window_sum(x: T, kernel: list[int], strides: list[int], dil: list[int]) -> T:
    """Per-channel sums over the windows (a depthwise convolution with ones)."""
    c = x.shape[1]
    ones = torch.ones([c, 1, *kernel], dtype=x.dtype)
    return _CONV[len(kernel)](x, ones, None, strides, 0, dil, c)


@handles("AveragePool")
def average_pool(ctx: NodeCtx) -> Fn:
    """Window sums / element counts (explicit pads counted with count_include_pad, ceil's never)."""
    kernel, strides, dil, pads, extra = _pool_setup(ctx)
    include = bool(ctx.attr("count_include_pad", 0))
    shape = ctx.shape(0)
    real = _torch_pads([(b, e + x) for (b, e), x in zip(pads, extra, strict=True)])
    ones = torch.ones([1, 1, *shape[2:]], dtype=torch.float64)
    mask = F.pad(F.pad(ones, _torch_pads(pads), value=1.0 if include else 0.0), _torch_pads([(0, x) for x in extra]))
    count = _window_sum(mask, kernel, strides, dil)

    def fn(x: T) -> T:
        s = _window_sum(F.pad(x, real), kernel, strides, dil)
        return (s / count.to(x.dtype)).to(x.dtype)

    return fn


@handles("LpPool")
def lp_pool(ctx: NodeCtx) -> Fn:
    """(sum over the window of |x|^p)^(1/p); pads count as zeros."""
    kernel, strides, dil, pads, extra = _pool_setup(ctx)
    p = ctx.attr("p", 2)
    tp = _torch_pads([(b, e + x) for (b, e), x in zip(pads, extra, strict=True)])
    return lambda x: torch.pow(_window_sum(F.pad(torch.abs(x) ** p, tp), kernel, strides, dil), 1.0 / p)


@handles("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(ctx: NodeCtx) -> Fn:
    dims = tuple(range(2, ctx.rank(0)))
    if ctx.op == "GlobalAveragePool":
        return lambda x: torch.mean(x, dims, keepdim=True)
    if ctx.op == "GlobalMaxPool":
        return lambda x: torch.amax(x, dims, keepdim=True)
    p = ctx.attr("p", 2)
    return lambda x: torch.pow(torch.sum(torch.abs(x) ** p, dims, keepdim=True), 1.0 / p)
