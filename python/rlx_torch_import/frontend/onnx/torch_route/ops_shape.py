"""Shape and layout ops: Reshape, Flatten, (Un)Squeeze, Transpose, Concat, Split, Slice, Expand, Tile,
Shape, Size, Constant(OfShape), Pad, Depth/SpaceToDepth, Trilu, Range, EyeLike, CenterCropPad.

Shape operands (Reshape's shape, Slice's starts / ends / axes / steps, pads, repeats, ...) must be
translation-time constants; the output shapes are then static, as torch.export needs."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from rlx_torch_import.frontend.onnx.torch_route.module import Const, Fn, NodeCtx, handles, torch_dtype

T = torch.Tensor


@handles("Reshape")
def reshape(ctx: NodeCtx) -> Fn:
    """0 copies the input dim (unless allowzero), -1 is inferred."""
    shape = ctx.attr("shape") if ctx.opset < 5 else ctx.ints(1, "the shape")
    allowzero = ctx.attr("allowzero", 0)
    src = ctx.shape(0)
    target = [src[i] if s == 0 and not allowzero else s for i, s in enumerate(shape)]
    return lambda x, *_: x.reshape(target)


@handles("Flatten")
def flatten(ctx: NodeCtx) -> Fn:
    shape = ctx.shape(0)
    a = ctx.attr("axis", 1)
    a = a + len(shape) if a < 0 else a
    rows = math.prod(shape[:a])
    cols = math.prod(shape[a:])
    return lambda x: x.reshape(rows, cols)


def _axes(ctx: NodeCtx, idx: int) -> list[int] | None:
    """Axes from the attribute (before opset 13) or input `idx` (opset 13 on); None when not given."""
    if ctx.opset < 13:
        return ctx.attr("axes")
    return ctx.ints(idx, "axes") if ctx.has(idx) else None


@handles("Squeeze")
def squeeze(ctx: NodeCtx) -> Fn:
    shape = ctx.shape(0)
    axes = _axes(ctx, 1)
    drop = {ctx.axis(a, len(shape)) for a in axes} if axes is not None else {i for i, d in enumerate(shape) if d == 1}
    bad = [a for a in drop if shape[a] != 1]
    if bad:
        raise ctx.fail(f"squeezed axes {bad} are not of size 1 in shape {shape}")
    target = [d for i, d in enumerate(shape) if i not in drop]
    return lambda x, *_: x.reshape(target)


@handles("Unsqueeze")
def unsqueeze(ctx: NodeCtx) -> Fn:
    shape = ctx.shape(0)
    axes = _axes(ctx, 1) or []
    rank = len(shape) + len(axes)
    put = sorted(ctx.axis(a, rank) for a in axes)
    target = list(shape)
    for a in put:
        target.insert(a, 1)
    return lambda x, *_: x.reshape(target)


@handles("Transpose")
def transpose(ctx: NodeCtx) -> Fn:
    perm = ctx.attr("perm") or list(range(ctx.rank(0)))[::-1]
    return lambda x: x.permute(perm)


@handles("Concat")
def concat(ctx: NodeCtx) -> Fn:
    a = ctx.axis(ctx.attr("axis", 0), ctx.rank(0))
    return lambda *xs: torch.cat([x for x in xs if x is not None], dim=a)


@handles("Split")
def split(ctx: NodeCtx) -> Fn:
    """Sizes from the `split` attribute / input; else len(outputs) (or num_outputs) chunks of ceil size."""
    a = ctx.axis(ctx.attr("axis", 0), ctx.rank(0))
    dim = ctx.shape(0)[a]
    sizes = ctx.attr("split") if ctx.opset < 13 else (ctx.ints(1, "split") if ctx.has(1) else None)
    if not sizes:
        n = ctx.attr("num_outputs", len(ctx.node.output))
        step = -(-dim // n)
        sizes = [min(step, dim - k * step) for k in range(n)]
    return lambda x, *_: tuple(torch.split(x, sizes, dim=a))


def _slice_axis(x: T, axis: int, start: int, end: int, step: int) -> T:
    r = range(*slice(start, end, step).indices(x.shape[axis]))
    if len(r) == 0:
        return x.narrow(axis, 0, 0)
    if step > 0:
        return x.narrow(axis, r[0], r[-1] - r[0] + 1)[(slice(None),) * axis + (slice(None, None, step),)]
    y = x.narrow(axis, r[-1], r[0] - r[-1] + 1).flip(axis)
    return y[(slice(None),) * axis + (slice(None, None, -step),)]


@handles("Slice")
def slice_(ctx: NodeCtx) -> Fn:
    """Python-style clamping of starts / ends per axis; negative steps through flip."""
    rank = ctx.rank(0)
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes, steps = ctx.attr("axes") or list(range(len(starts))), [1] * len(starts)
    else:
        starts, ends = ctx.ints(1, "starts"), ctx.ints(2, "ends")
        axes = ctx.ints(3, "axes") if ctx.has(3) else list(range(len(starts)))
        steps = ctx.ints(4, "steps") if ctx.has(4) else [1] * len(starts)
    plan = [(ctx.axis(a, rank), s, e, st) for a, s, e, st in zip(axes, starts, ends, steps, strict=True)]
    if any(st == 0 for *_, st in plan):
        raise ctx.fail("Slice step 0")

    def fn(x: T, *_: T | None) -> T:
        for a, s, e, st in plan:
            x = _slice_axis(x, a, s, e, st)
        return x

    return fn


@handles("Expand")
def expand(ctx: NodeCtx) -> Fn:
    """Bidirectional broadcast of the input with the given shape."""
    out = list(torch.broadcast_shapes(tuple(ctx.shape(0)), tuple(ctx.ints(1, "the shape"))))
    return lambda x, *_: x.expand(out).clone()


@handles("Tile")
def tile(ctx: NodeCtx) -> Fn:
    reps = ctx.ints(1, "repeats")
    return lambda x, *_: x.repeat(reps)


@handles("Shape", "Size")
def shape(ctx: NodeCtx) -> Const:
    """Static: the example's shape (Shape's start / end clamped as the spec says)."""
    dims = ctx.shape(0)
    ctx.unused(0)
    if ctx.op == "Size":
        return Const((torch.tensor(math.prod(dims), dtype=torch.int64),))
    r = len(dims)
    s, e = ctx.attr("start", 0), ctx.attr("end", r)
    s, e = max(0, min(r, s + r if s < 0 else s)), max(0, min(r, e + r if e < 0 else e))
    return Const((torch.tensor(dims[s:e], dtype=torch.int64),))


@handles("Constant")
def constant(ctx: NodeCtx) -> Const:
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        v = ctx.attr(key)
        if v is None:
            continue
        if isinstance(v, torch.Tensor):
            return Const((v,))
        dt = torch.float32 if "float" in key else torch.int64
        return Const((torch.tensor(v, dtype=dt),))
    raise ctx.fail("Constant without a numeric tensor value (strings / sparse are not translated)")


@handles("ConstantOfShape")
def constant_of_shape(ctx: NodeCtx) -> Fn:
    dims = ctx.ints(0, "the shape")
    v = ctx.attr("value")
    value = v.reshape(()) if v is not None else torch.tensor(0.0, dtype=torch.float32)
    return lambda *_: value.expand(dims).clone()


def _pad_index(d: int, before: int, after: int, mode: str) -> list[int]:
    idx = []
    for j in range(-before, d + after):
        if mode == "edge":
            idx.append(min(max(j, 0), d - 1))
        elif mode == "wrap":
            idx.append(j % d)
        else:  # reflect, without repeating the edge
            period = 2 * (d - 1)
            k = j % period if period else 0
            idx.append(k if k < d else period - k)
    return idx


@handles("Pad")
def pad(ctx: NodeCtx) -> Fn:
    """constant / reflect / edge / wrap; negative pads crop; `axes` (opset 18) selects the padded axes."""
    rank = ctx.rank(0)
    if ctx.opset < 11:
        pads, mode, value = ctx.attr("pads", ctx.attr("paddings")), ctx.attr("mode", "constant"), ctx.attr("value", 0.0)
    else:
        pads, mode = ctx.ints(1, "pads"), ctx.attr("mode", "constant")
        value = ctx.const(2, "constant_value").reshape(()).item() if ctx.has(2) else 0
    axes = [ctx.axis(a, rank) for a in ctx.ints(3, "axes")] if ctx.has(3) else list(range(rank))
    n = len(axes)
    plan = {a: (pads[k], pads[k + n]) for k, a in enumerate(axes)}
    shape = ctx.shape(0)

    def fn(x: T, *_: T | None) -> T:
        for a, (b, e) in plan.items():  # crop first
            if b < 0 or e < 0:
                x = x.narrow(a, max(-b, 0), x.shape[a] - max(-b, 0) - max(-e, 0))
        for a, (b, e) in plan.items():
            b, e = max(b, 0), max(e, 0)
            if b == 0 and e == 0:
                continue
            if mode == "constant":
                spec = [0, 0] * (rank - 1 - a) + [b, e]
                x = F.pad(x, spec, value=value)
            else:
                idx = torch.tensor(_pad_index(x.shape[a], b, e, mode), dtype=torch.int64)
                x = x.index_select(a, idx)
        return x

    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.fail(f"Pad mode {mode!r}")
    if mode == "reflect" and any(shape[a] < 2 and (b > 0 or e > 0) for a, (b, e) in plan.items()):
        raise ctx.fail("reflect Pad of an axis of size < 2")
    return fn


@handles("DepthToSpace", "SpaceToDepth")
def depth_space(ctx: NodeCtx) -> Fn:
    bs = ctx.attr("blocksize")
    b, c, h, w = ctx.shape(0)
    crd = ctx.attr("mode", "DCR") == "CRD"
    if ctx.op == "SpaceToDepth":
        perm = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        return lambda x: (
            x.reshape(b, c, h // bs, bs, w // bs, bs).permute(perm).reshape(b, c * bs * bs, h // bs, w // bs)
        )
    c2 = c // (bs * bs)
    if not crd:
        return lambda x: x.reshape(b, bs, bs, c2, h, w).permute(0, 3, 4, 1, 5, 2).reshape(b, c2, h * bs, w * bs)
    return lambda x: x.reshape(b, c2, bs, bs, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c2, h * bs, w * bs)


@handles("Trilu")
def trilu(ctx: NodeCtx) -> Fn:
    """Keep the upper (upper=1) / lower triangle of the last two axes, diagonal shifted by k."""
    k = ctx.ints(1, "k")[0] if ctx.has(1) else 0
    h, w = ctx.shape(0)[-2:]
    rows = torch.arange(h).reshape(h, 1)
    cols = torch.arange(w).reshape(1, w)
    keep = (cols - rows >= k) if ctx.attr("upper", 1) else (cols - rows <= k)
    return lambda x, *_: torch.where(keep, x, torch.zeros((), dtype=x.dtype))


@handles("Range")
def range_(ctx: NodeCtx) -> Fn:
    """start + i * delta for i < max(ceil((limit - start) / delta), 0)."""
    dt = ctx.dtype(0)
    start, limit, delta = (ctx.const(i, n).reshape(()) for i, n in enumerate(("start", "limit", "delta")))
    count = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
    wide = torch.float64 if dt.is_floating_point else torch.int64
    out = (start.to(wide) + torch.arange(count, dtype=wide) * delta.to(wide)).to(dt)
    return lambda *_: out


@handles("EyeLike")
def eye_like(ctx: NodeCtx) -> Const:
    n, m = ctx.shape(0)
    dt = torch_dtype(ctx.attr("dtype"), "EyeLike ") if ctx.attr("dtype") is not None else ctx.dtype(0)
    ctx.unused(0)
    k = ctx.attr("k", 0)
    out = (torch.arange(m).reshape(1, m) - torch.arange(n).reshape(n, 1) == k).to(dt)
    return Const((out,))


@handles("CenterCropPad")
def center_crop_pad(ctx: NodeCtx) -> Fn:
    """Per axis: a centred crop (start (d - s) // 2) or zero pad (before (s - d) // 2)."""
    rank = ctx.rank(0)
    sizes = ctx.ints(1, "shape")
    axes = [ctx.axis(a, rank) for a in ctx.attr("axes", list(range(rank)))]
    shape = ctx.shape(0)

    def fn(x: T, *_: T | None) -> T:
        for a, s in zip(axes, sizes, strict=True):
            d = shape[a]
            if s < d:
                x = x.narrow(a, (d - s) // 2, s)
            elif s > d:
                b = (s - d) // 2
                x = F.pad(x, [0, 0] * (rank - 1 - a) + [b, s - d - b])
        return x

    return fn
