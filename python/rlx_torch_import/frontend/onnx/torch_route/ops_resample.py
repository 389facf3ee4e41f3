"""Resampling ops: Resize, Upsample, GridSample, AffineGrid, Col2Im.

Resize is separable: for each resized axis a weight matrix [out, in] is built at translation time (in
float64) from the spec's coordinate transformation, the mode's coefficients (nearest rounding, linear,
cubic with cubic_coeff_a, antialias, exclude_outside) and edge clamping; nearest selects with
index_select (exact), linear / cubic contract the axis with the matrix in float64."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, NodeError, handles

T = torch.Tensor
Coeffs = Callable[[float, float], list[float]]


def _nearest(mode: str) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> list[float]:
        if ratio == 1:
            return [0.0, 1.0]
        up = {
            "round_prefer_floor": ratio > 0.5,
            "round_prefer_ceil": ratio >= 0.5,
            "floor": False,
            "ceil": True,
        }[mode]
        return [0.0, 1.0] if up else [1.0, 0.0]

    return coeffs


def _linear(antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> list[float]:
        if not antialias:
            return [1 - ratio, ratio]
        s = min(scale, 1.0)
        start = math.floor(-1 / s) + 1
        c = [min(max(1 - abs((i - ratio) * s), 0.0), 1.0) for i in range(start, 2 - start)]
        return [v / sum(c) for v in c]

    return coeffs


def _cubic(a: float, antialias: bool) -> Coeffs:
    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x**3 - (a + 3) * x**2 + 1
        if x < 2:
            return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
        return 0.0

    def coeffs(ratio: float, scale: float) -> list[float]:
        if not antialias:
            return [kernel(ratio + 1), kernel(ratio), kernel(1 - ratio), kernel(2 - ratio)]
        s = min(scale, 1.0)
        start = math.floor(-2 / s) + 1
        c = [kernel(s * (i - ratio)) for i in range(start, 2 - start)]
        return [v / sum(c) for v in c]

    return coeffs


def _source(x: int, n_in: int, n_out: int, scale: float, ctm: str, roi: tuple[float, float]) -> float:
    """The input coordinate of output position x (coordinate_transformation_mode)."""
    width = scale * n_in
    if ctm == "align_corners":
        return 0.0 if width == 1 else x * (n_in - 1) / (width - 1)
    if ctm == "asymmetric":
        return x / scale
    if ctm == "tf_crop_and_resize":
        lo, hi = roi
        base = (hi - lo) * (n_in - 1) / 2 if width == 1 else x * (hi - lo) * (n_in - 1) / (width - 1)
        return base + lo * (n_in - 1)
    if ctm == "pytorch_half_pixel":
        return -0.5 if width == 1 else (x + 0.5) / scale - 0.5
    if ctm == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        return offset + (x + 0.5) / scale - 0.5
    raise NodeError(f"coordinate_transformation_mode {ctm!r}")


def _weights(
    n_in: int, n_out: int, scale: float, coeffs: Coeffs, ctm: str, roi: tuple[float, float], exclude: bool
) -> tuple[np.ndarray, list[int]]:
    """(W [n_out, n_in] float64, output rows outside the input (tf_crop_and_resize's extrapolation))."""
    w = np.zeros((n_out, n_in))
    outside = []
    for x in range(n_out):
        src = _source(x, n_in, n_out, scale, ctm, roi)
        if ctm == "tf_crop_and_resize" and (src < 0 or src > n_in - 1):
            outside.append(x)
            continue
        base = math.floor(src)
        ratio = src - base
        if ratio == 0:
            base, ratio = base - 1, 1.0
        c = coeffs(ratio, scale)
        start = 1 - len(c) // 2
        idx = [base + start + k for k in range(len(c))]
        if exclude:
            c = [v if 0 <= i < n_in else 0.0 for v, i in zip(c, idx, strict=True)]
            c = [v / sum(c) for v in c]
        for v, i in zip(c, idx, strict=True):
            w[x, min(max(i, 0), n_in - 1)] += v
    return w, outside


def _plan(ctx: NodeCtx, shape: list[int]) -> tuple[list[float], list[int], list[float]]:
    """(scales, output sizes, roi) per axis of the input, from Resize's inputs and attributes."""
    r = len(shape)
    axes = [ctx.axis(a, r) for a in ctx.attr("axes", list(range(r)))]
    roi_in = ctx.floats(1, "roi") if ctx.opset >= 11 and ctx.has(1) else []
    roi = [0.0] * r + [1.0] * r
    if roi_in:
        for k, a in enumerate(axes):
            roi[a], roi[r + a] = roi_in[k], roi_in[len(axes) + k]
    sidx = 1 if ctx.opset < 11 else 2
    scales_in = ctx.floats(sidx, "scales") if ctx.has(sidx) else []
    sizes_in = ctx.ints(3, "sizes") if ctx.opset >= 11 and ctx.has(3) else []
    scales, sizes = [1.0] * r, list(shape)
    if sizes_in:
        for k, a in enumerate(axes):
            scales[a] = sizes_in[k] / shape[a]
            sizes[a] = sizes_in[k]
        policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = min(scales[a] for a in axes) if policy == "not_larger" else max(scales[a] for a in axes)
            for a in axes:
                scales[a], sizes[a] = s, int(s * shape[a] + 0.5)
    elif scales_in:
        for k, a in enumerate(axes):
            scales[a] = scales_in[k]
            sizes[a] = int(scales_in[k] * shape[a])
    else:
        raise ctx.fail("Resize without scales or sizes")
    return scales, sizes, roi


def _resize_fn(
    ctx: NodeCtx, mode: str, ctm: str, plan: tuple[list[float], list[int], list[float]], nearest: str | None = None
) -> Fn:
    scales, sizes, roi = plan
    shape = ctx.shape(0)
    r = len(shape)
    antialias = bool(ctx.attr("antialias", 0))
    if mode == "nearest":
        coeffs = _nearest(nearest or ctx.attr("nearest_mode", "round_prefer_floor"))
    elif mode == "linear":
        coeffs = _linear(antialias)
    elif mode == "cubic":
        coeffs = _cubic(ctx.attr("cubic_coeff_a", -0.75), antialias)
    else:
        raise ctx.fail(f"Resize mode {mode!r}")
    exclude = bool(ctx.attr("exclude_outside", 0))
    extrap = ctx.attr("extrapolation_value", 0.0)
    steps: list[tuple[int, T | None, T | None, list[int]]] = []
    for a in range(r):
        trivial = math.isclose(scales[a], 1.0) and sizes[a] == shape[a] and roi[a] == 0.0 and roi[a + r] == 1.0
        if trivial:
            continue
        w, outside = _weights(shape[a], sizes[a], scales[a], coeffs, ctm, (roi[a], roi[a + r]), exclude)
        if mode == "nearest":
            pick = torch.tensor(np.argmax(w, axis=1), dtype=torch.int64)
            steps.append((a, None, pick, outside))
        else:
            steps.append((a, torch.tensor(w, dtype=torch.float64), None, outside))

    def fn(x: T, *_: T | None) -> T:
        y = x if mode == "nearest" else x.to(torch.float64)
        for a, w, pick, outside in steps:
            y = y.index_select(a, pick) if pick is not None else torch.tensordot(y, w, dims=([a], [1])).movedim(-1, a)
            if outside:
                y = y.index_fill(a, torch.tensor(outside, dtype=torch.int64), extrap)
        if y.dtype == x.dtype:
            return y
        return y.to(x.dtype) if x.is_floating_point() else torch.round(y).clamp(*_int_range(x.dtype)).to(x.dtype)

    return fn


def _int_range(dt: torch.dtype) -> tuple[int, int]:
    info = torch.iinfo(dt)
    return int(info.min), int(info.max)


@handles("Resize")
def resize(ctx: NodeCtx) -> Fn:
    """nearest / linear / cubic, every coordinate_transformation_mode, antialias, axes, roi."""
    if ctx.opset < 11:
        ctm = "asymmetric"
    else:
        ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    return _resize_fn(ctx, ctx.attr("mode", "nearest"), ctm, _plan(ctx, ctx.shape(0)))


@handles("Upsample")
def upsample(ctx: NodeCtx) -> Fn:
    """Upsample (opset 7-9): scales attribute / input, asymmetric coordinates, nearest floors."""
    shape = ctx.shape(0)
    scales = ctx.attr("scales") if ctx.opset < 9 else ctx.floats(1, "scales")
    sizes = [int(s * d) for s, d in zip(scales, shape, strict=True)]
    roi = [0.0] * len(shape) + [1.0] * len(shape)
    mode = ctx.attr("mode", "nearest")
    mode = "linear" if mode in ("linear", "bilinear") else mode
    return _resize_fn(ctx, mode, "asymmetric", (list(scales), sizes, roi), nearest="floor")


@handles("GridSample")
def grid_sample(ctx: NodeCtx) -> Fn:
    """torch grid_sample (4-D input: bilinear / nearest / bicubic; 5-D: bilinear / nearest)."""
    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(ctx.attr("mode", "bilinear"), ctx.attr("mode", "bilinear"))
    pad = ctx.attr("padding_mode", "zeros")
    align = bool(ctx.attr("align_corners", 0))
    if ctx.rank(0) not in (4, 5) or (ctx.rank(0) == 5 and mode == "bicubic"):
        raise ctx.fail(f"GridSample of a rank-{ctx.rank(0)} input in mode {mode}")

    def fn(x: T, g: T) -> T:
        y = F.grid_sample(x.double(), g.double(), mode=mode, padding_mode=pad, align_corners=align)
        return y.to(x.dtype)

    return fn


@handles("AffineGrid")
def affine_grid(ctx: NodeCtx) -> Fn:
    size = ctx.ints(1, "size")
    align = bool(ctx.attr("align_corners", 0))
    return lambda theta, *_: F.affine_grid(theta, size, align_corners=align)


@handles("Col2Im")
def col2im(ctx: NodeCtx) -> Fn:
    """torch fold for 2 spatial axes; asymmetric pads by folding into the padded image and cropping."""
    image = ctx.ints(1, "image_shape")
    block = ctx.ints(2, "block_shape")
    if len(image) != 2:
        raise ctx.fail(f"Col2Im with {len(image)} spatial axes (torch fold is 2-D)")
    dil = tuple(ctx.attr("dilations") or [1, 1])
    strides = tuple(ctx.attr("strides") or [1, 1])
    p = ctx.attr("pads") or [0, 0, 0, 0]
    full = (image[0] + p[0] + p[2], image[1] + p[1] + p[3])

    def fn(x: T, *_: T | None) -> T:
        y = F.fold(x, full, tuple(block), dilation=dil, padding=0, stride=strides)
        return y[:, :, p[0] : p[0] + image[0], p[1] : p[1] + image[1]]

    return fn
