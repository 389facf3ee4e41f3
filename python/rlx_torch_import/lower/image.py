"""Image ops: resampling, pixel (un)shuffle, padding, masked_fill, grid_sample.

Shapes are static, so resampling along an axis is a constant operator: nearest is a Gather
with constant indices (exact copy), linear/cubic/antialiased is a matmul with a constant
interpolation matrix whose rows hold torch's own weights (computed here in float64).
grid_sample has a runtime grid, so its coordinates, taps and weights are elementwise ops
and GatherElements on the flattened image.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..dtypes import F32_EXACT, FLOAT_DTYPES, HALF_DTYPES
from .context import Builder, Call, Value, norm_axis
from .registry import lowers

# ── shared helpers ───────────────────────────────────────────────────────


def gather_axis(b: Builder, x: Value, axis: int, index: np.ndarray) -> Value:
    """x[..., index, ...] along `axis` with a constant int64 index vector."""
    if index.tolist() == list(range(x.dims[axis])):
        return x
    dims = list(x.dims)
    dims[axis] = len(index)
    return b.emit({"Gather": {"axis": axis}}, [x, b.const(index.astype(np.int64), "int64")], dims, x.dtype)


def contract_axis(b: Builder, x: Value, axis: int, matrix: np.ndarray) -> Value:
    """y[..., o, ...] = sum_i matrix[o, i] * x[..., i, ...] as one 2-D matmul."""
    last = x.rank - 1
    perm = list(range(x.rank))
    perm[axis], perm[last] = perm[last], perm[axis]
    xt = b.transpose(x, perm)
    lead = xt.dims[:-1]
    flat = b.reshape(xt, (math.prod(lead), xt.dims[-1]))
    y = b.matmul(flat, b.const(np.ascontiguousarray(matrix.T), x.dtype))
    return b.transpose(b.reshape(y, (*lead, matrix.shape[0])), perm)


def _spatial_scales(call: Call, k: int) -> list[float | None]:
    """Per spatial axis user scale factors (None when torch derives the scale from the sizes)."""
    factors = call.get("scale_factors")
    if factors is not None:
        return [float(s) if s is not None else None for s in factors]
    names = {1: ["scales"], 2: ["scales_h", "scales_w"], 3: ["scales_d", "scales_h", "scales_w"]}[k]
    return [call.get(n) for n in names]


def _scale_value(scale: float | None, in_size: int, out_size: int) -> float:
    """torch's compute_scales_value: 1/scale when given, else in/out."""
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _area_scale(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> float:
    """torch's area_pixel_compute_scale."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return _scale_value(scale, in_size, out_size)


def _source_index(scale: float, dst: np.ndarray, align_corners: bool, cubic: bool) -> np.ndarray:
    """torch's area_pixel_compute_source_index."""
    if align_corners:
        return scale * dst
    src = scale * (dst + 0.5) - 0.5
    return src if cubic else np.maximum(src, 0.0)


# ── resampling matrices (rows = output positions, columns = input positions) ──


def _nearest_index(in_size: int, out_size: int, scale: float | None, exact: bool) -> np.ndarray:
    """floor(dst * s) (nearest) or floor((dst + 0.5) * s) (nearest-exact), in float32 like torch."""
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float64)
    if exact:
        src = np.floor(((dst + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(dst.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def _linear_matrix(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> np.ndarray:
    """Two-tap linear interpolation weights (torch's compute_indices_weights_linear)."""
    s = _area_scale(in_size, out_size, align_corners, scale)
    real = _source_index(s, np.arange(out_size, dtype=np.float64), align_corners, cubic=False)
    i0 = np.minimum(real.astype(np.int64), in_size - 1)
    lam1 = np.clip(real - i0, 0.0, 1.0)
    i1 = i0 + (i0 < in_size - 1)
    m = np.zeros((out_size, in_size))
    rows = np.arange(out_size)
    np.add.at(m, (rows, i0), 1.0 - lam1)
    np.add.at(m, (rows, i1), lam1)
    return m


def _cubic_conv1(x: np.ndarray, a: float) -> np.ndarray:
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic_conv2(x: np.ndarray, a: float) -> np.ndarray:
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def _cubic_matrix(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> np.ndarray:
    """Four-tap Keys cubic weights, A = -0.75, taps clamped to the border (torch's upsample_bicubic2d)."""
    s = _area_scale(in_size, out_size, align_corners, scale)
    real = _source_index(s, np.arange(out_size, dtype=np.float64), align_corners, cubic=True)
    i0 = np.floor(real).astype(np.int64)
    t = real - i0
    a = -0.75
    weights = [_cubic_conv2(t + 1, a), _cubic_conv1(t, a), _cubic_conv1(1 - t, a), _cubic_conv2(2 - t, a)]
    m = np.zeros((out_size, in_size))
    rows = np.arange(out_size)
    for k, w in enumerate(weights):
        np.add.at(m, (rows, np.clip(i0 - 1 + k, 0, in_size - 1)), w)
    return m


def _aa_linear_filter(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _aa_cubic_filter(x: float) -> float:
    a, x = -0.5, abs(x)  # torch's antialiased bicubic uses Pillow's a = -0.5
    if x < 1.0:
        return float(_cubic_conv1(np.float64(x), a))
    if x < 2.0:
        return float(_cubic_conv2(np.float64(x), a))
    return 0.0


def _aa_matrix(in_size: int, out_size: int, align_corners: bool, scale: float | None, cubic: bool) -> np.ndarray:
    """Antialiased weights: the filter stretched by the downscale factor, normalized per row (torch's _aa kernels)."""
    interp_size, fn = (4, _aa_cubic_filter) if cubic else (2, _aa_linear_filter)
    s = _area_scale(in_size, out_size, align_corners, scale)
    support = interp_size * 0.5 * s if s >= 1.0 else interp_size * 0.5
    max_size = math.ceil(support) * 2 + 1
    invscale = 1.0 / s if s >= 1.0 else 1.0
    m = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = s * (i + 0.5)
        xmin = max(int(center - support + 0.5), 0)
        xsize = min(max(min(int(center + support + 0.5), in_size) - xmin, 0), max_size)
        w = np.array([fn((j + xmin - center + 0.5) * invscale) for j in range(xsize)])
        total = w.sum()
        m[i, xmin : xmin + xsize] = w / total if total != 0.0 else w
    return m


# ── upsample ─────────────────────────────────────────────────────────────


def _image(call: Call) -> Value:
    """The resampled tensor: `input` in .vec overloads, `self` in .default ones."""
    return call.tensor("input") if call.target.endswith(".vec") else call.tensor("self")


_NEAREST = (
    "aten.upsample_nearest1d.vec",
    "aten.upsample_nearest2d.vec",
    "aten.upsample_nearest3d.vec",
)
_NEAREST_EXACT = (
    "aten._upsample_nearest_exact1d.vec",
    "aten._upsample_nearest_exact2d.vec",
    "aten._upsample_nearest_exact3d.vec",
)


@lowers(*_NEAREST, *_NEAREST_EXACT)
def upsample_nearest(b: Builder, call: Call) -> Value:
    """out[.., o] = x[.., min(floor(o * s), in - 1)] per spatial axis (nearest-exact: (o + 0.5) * s)."""
    x = _image(call)
    k = x.rank - 2
    exact = call.target in _NEAREST_EXACT
    for d, scale in enumerate(_spatial_scales(call, k)):
        axis = 2 + d
        index = _nearest_index(x.dims[axis], call.out_dims[axis], scale, exact)
        x = gather_axis(b, x, axis, index)
    return x


def _check_float_input(call: Call) -> str | None:
    x = _image(call)
    if x.dtype not in FLOAT_DTYPES:
        return f"interpolation of {x.dtype} tensors is not supported (float only)"
    return None


def _matrix_upsample(matrix_fn: Callable[[int, int, bool, float | None], np.ndarray], name: str):  # noqa: ANN202
    def lower_upsample(b: Builder, call: Call) -> Value:
        x = _image(call)
        align = bool(call.get("align_corners", False))
        for d, scale in enumerate(_spatial_scales(call, x.rank - 2)):
            axis = 2 + d
            if x.dims[axis] != call.out_dims[axis] or align or scale not in (None, 1.0):
                x = contract_axis(b, x, axis, matrix_fn(x.dims[axis], call.out_dims[axis], align, scale))
        return x

    lower_upsample.__name__ = name
    return lower_upsample


_linear = _matrix_upsample(_linear_matrix, "upsample_linear")
_linear.__doc__ = "out = A_d @ x along each spatial axis, A_d holding torch's two-tap linear weights."
lowers(
    "aten.upsample_linear1d.vec",
    "aten.upsample_bilinear2d.vec",
    "aten.upsample_trilinear3d.vec",
    check=_check_float_input,
)(_linear)

_cubic = _matrix_upsample(_cubic_matrix, "upsample_bicubic")
_cubic.__doc__ = "out = A_h @ x @ A_w^T, A holding torch's four-tap cubic weights (A = -0.75, clamped taps)."
lowers("aten.upsample_bicubic2d.vec", check=_check_float_input)(_cubic)

_aa_bilinear = _matrix_upsample(lambda i, o, ac, s: _aa_matrix(i, o, ac, s, cubic=False), "upsample_bilinear_antialias")
_aa_bilinear.__doc__ = "out = A_h @ x @ A_w^T, A the normalized triangle filter widened by the downscale."
lowers("aten._upsample_bilinear2d_aa.vec", "aten._upsample_bilinear2d_aa.default", check=_check_float_input)(
    _aa_bilinear
)

_aa_bicubic = _matrix_upsample(lambda i, o, ac, s: _aa_matrix(i, o, ac, s, cubic=True), "upsample_bicubic_antialias")
_aa_bicubic.__doc__ = "out = A_h @ x @ A_w^T, A the normalized cubic filter (a = -0.5) widened by the downscale."
lowers("aten._upsample_bicubic2d_aa.vec", "aten._upsample_bicubic2d_aa.default", check=_check_float_input)(_aa_bicubic)


# ── pixel shuffle ────────────────────────────────────────────────────────


@lowers("aten.pixel_shuffle.default")
def pixel_shuffle(b: Builder, call: Call) -> Value:
    """[.., C*r*r, H, W] -> [.., C, H*r, W*r]: reshape, move the r axes inside, reshape."""
    x, r = call.tensor("self"), call["upscale_factor"]
    *lead, c, h, w = x.dims
    n = math.prod(lead)
    y = b.reshape(x, (n, c // (r * r), r, r, h, w))
    y = b.transpose(y, [0, 1, 4, 2, 5, 3])
    return b.reshape(y, call.out_dims)


@lowers("aten.pixel_unshuffle.default")
def pixel_unshuffle(b: Builder, call: Call) -> Value:
    """[.., C, H*r, W*r] -> [.., C*r*r, H, W]: the inverse reshape/transpose of pixel_shuffle."""
    x, r = call.tensor("self"), call["downscale_factor"]
    *lead, c, h, w = x.dims
    n = math.prod(lead)
    y = b.reshape(x, (n, c, h // r, r, w // r, r))
    y = b.transpose(y, [0, 1, 3, 5, 2, 4])
    return b.reshape(y, call.out_dims)


# ── padding ──────────────────────────────────────────────────────────────


def _pad_pairs(rank: int, pad: list[int]) -> list[tuple[int, int]]:
    """torch's flat pad list (last axis first) as (before, after) per axis."""
    pairs = [(0, 0)] * rank
    for i in range(len(pad) // 2):
        pairs[rank - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return pairs


_MODE_OPS = {
    "aten.constant_pad_nd.default": "constant",
    "aten.reflection_pad1d.default": "reflect",
    "aten.reflection_pad2d.default": "reflect",
    "aten.reflection_pad3d.default": "reflect",
    "aten.replication_pad1d.default": "replicate",
    "aten.replication_pad2d.default": "replicate",
    "aten.replication_pad3d.default": "replicate",
}


def _pad_mode(call: Call) -> str:
    """The mode an overload implies (constant_pad_nd, reflection_padNd, ...), else aten.pad's `mode`."""
    return _MODE_OPS.get(call.target) or call.get("mode", "constant")


def _pad_list(call: Call) -> list[int]:
    """torch's flat pad list: `pad` of aten.pad/constant_pad_nd, `padding` of the per-mode overloads."""
    return call["pad"] if call.target in ("aten.pad.default", "aten.constant_pad_nd.default") else call["padding"]


def _check_pad(call: Call) -> str | None:
    x, mode = call.tensor("self"), _pad_mode(call)
    pairs = _pad_pairs(x.rank, _pad_list(call))
    if mode not in ("constant", "reflect", "replicate", "circular"):
        return f"pad mode {mode!r} is not supported"
    if mode == "constant":
        value = call.get("value", 0.0)
        if not math.isfinite(value) and x.dtype not in FLOAT_DTYPES:
            return f"non-finite pad value {value} on {x.dtype}"
        return None
    for axis, (lo, hi) in enumerate(pairs):
        if lo < 0 or hi < 0:
            return f"negative padding {_pad_list(call)} in mode {mode!r} is not supported"
        n = x.dims[axis]
        if (mode == "reflect" and max(lo, hi) >= n) or (mode == "circular" and max(lo, hi) > n):
            return f"pad {_pad_list(call)} is too large for axis {axis} of size {n} in mode {mode!r}"
    return None


def _constant_blocks(b: Builder, x: Value, pairs: list[tuple[int, int]], value: float) -> Value:
    """Pad with a (possibly non-finite) constant as Concat of broadcast constant blocks."""
    fill = b.const(value, x.dtype)
    for axis, (lo, hi) in enumerate(pairs):
        parts = []
        for size in (lo, hi):
            dims = list(x.dims)
            dims[axis] = size
            parts.append(b.expand(fill, tuple(dims)) if size > 0 else None)
        seq = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(seq) > 1:
            dims = list(x.dims)
            dims[axis] += lo + hi
            x = b.emit({"Concat": {"axis": axis}}, seq, dims, x.dtype)
    return x


@lowers("aten.pad.default", *_MODE_OPS, check=_check_pad)
def pad(b: Builder, call: Call) -> Value:
    """Crop negative pads (Narrow), then RLX Pad (constant/reflect/replicate/circular); ±inf/nan fills use Concat."""
    x, mode = call.tensor("self"), _pad_mode(call)
    pairs = _pad_pairs(x.rank, _pad_list(call))
    for axis, (lo, hi) in enumerate(pairs):  # negative pads crop (constant mode only)
        if lo < 0 or hi < 0:
            start, length = max(-lo, 0), x.dims[axis] - max(-lo, 0) - max(-hi, 0)
            dims = list(x.dims)
            dims[axis] = length
            x = b.emit({"Narrow": {"axis": axis, "start": start, "len": length}}, [x], dims, x.dtype)
    pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    if not any(lo or hi for lo, hi in pairs):
        return x
    if mode == "constant":
        value = float(call.get("value", 0.0))
        if not math.isfinite(value):
            return _constant_blocks(b, x, pairs, value)
        rlx_mode = {"Constant": value}
    else:
        rlx_mode = mode.capitalize()
    return b.emit({"Pad": {"pads": [list(p) for p in pairs], "mode": rlx_mode}}, [x], call.out_dims, x.dtype)


# ── masked_fill ──────────────────────────────────────────────────────────


@lowers("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(b: Builder, call: Call) -> Value:
    """mask ? value : x (value as a constant or rank-0 tensor, so ±inf is fine)."""
    x, mask, value = call.tensor("self"), call.tensor("mask"), call["value"]
    dims, dtype = call.out_dims, call.out_dtype
    fill = b.cast(value, dtype) if isinstance(value, Value) else b.const(value, dtype)
    return b.emit("Where", [b.expand(mask, dims), b.expand(fill, dims), b.expand(b.cast(x, dtype), dims)], dims, dtype)


# ── slice_scatter / copy / empty (what core emits for circular pad) ─────


@lowers("aten.slice_scatter.default")
def slice_scatter(b: Builder, call: Call) -> Value:
    """self with self[.., start:end:step, ..] = src: a Gather over Concat(self, src) with constant indices."""
    x, src = call.tensor("self"), b.cast(call.tensor("src"), call.out_dtype)
    axis = norm_axis(call.get("dim", 0), x.rank)
    size = x.dims[axis]
    start, end, step = call.get("start", 0), call.get("end", size), call.get("step", 1)
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    index = np.arange(size)
    targets = np.arange(start, end, step)[: src.dims[axis]]
    index[targets] = size + np.arange(len(targets))
    dims = list(x.dims)
    dims[axis] += src.dims[axis]
    both = b.emit({"Concat": {"axis": axis}}, [b.cast(x, call.out_dtype), src], dims, call.out_dtype)
    return gather_axis(b, both, axis, index)


@lowers("aten.copy.default")
def copy(b: Builder, call: Call) -> Value:
    """src broadcast to self's shape, in self's dtype (functional copy_)."""
    return b.expand(b.cast(call.tensor("src"), call.out_dtype), call.out_dims)


@lowers("aten.empty.memory_format")
def empty(b: Builder, call: Call) -> Value:
    """Uninitialized memory: zeros (any later read in torch would be undefined)."""
    return b.expand(b.const(0, call.out_dtype), call.out_dims)


# ── grid_sample ──────────────────────────────────────────────────────────

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _check_grid_sampler(call: Call) -> str | None:
    x = call.tensor("input")
    if x.rank != 4:
        return f"grid_sample on rank-{x.rank} input is not supported (4-D only)"
    if x.dtype not in FLOAT_DTYPES:
        return f"grid_sample on {x.dtype} is not supported (torch samples floating-point images only)"
    if x.dims[2] * x.dims[3] >= F32_EXACT:
        return f"grid_sample on a {x.dims[2]}x{x.dims[3]} image is not supported (float32 indices, < 2**24 pixels)"
    if call["interpolation_mode"] not in _MODES or call["padding_mode"] not in _PADDINGS:
        return f"interpolation_mode={call['interpolation_mode']} padding_mode={call['padding_mode']} unknown"
    return None


class _Ew:
    """Elementwise float helpers over one Builder (shorthand for the coordinate math)."""

    def __init__(self, b: Builder, dtype: str, rounding: str | None = None) -> None:
        self.b, self.dtype, self.rounding = b, dtype, rounding

    @property
    def exact(self) -> _Ew:
        """The same helpers without rounding (for integer index math, which torch does in int64)."""
        return _Ew(self.b, self.dtype)

    def _r(self, v: Value) -> Value:
        """Round to the half dtype torch's kernel computes in (each scalar_t op rounds there)."""
        return self.b.cast(self.b.round_to(v, self.rounding), self.dtype) if self.rounding else v

    def c(self, v: float) -> Value:
        return self.b.const(v, self.rounding or self.dtype) if self.rounding else self.b.const(v, self.dtype)

    def add(self, a: Value, v: Value | float) -> Value:
        return self._r(self.b.binary("Add", a, v if isinstance(v, Value) else self.c(v), self.dtype))

    def sub(self, a: Value, v: Value | float) -> Value:
        return self._r(self.b.binary("Sub", a, v if isinstance(v, Value) else self.c(v), self.dtype))

    def mul(self, a: Value, v: Value | float) -> Value:
        return self._r(self.b.binary("Mul", a, v if isinstance(v, Value) else self.c(v), self.dtype))

    def div(self, a: Value, v: float) -> Value:
        return self._r(self.b.binary("Div", a, self.c(v), self.dtype))

    def floor(self, a: Value) -> Value:
        return self.b.unary("Floor", a)

    def clip(self, a: Value, lo: float, hi: float) -> Value:
        return self.b.binary("Min", self.b.binary("Max", a, self.c(lo)), self.c(hi))

    def inside(self, a: Value, size: int) -> Value:
        """1.0 where 0 <= a <= size - 1 (a integer-valued), else 0.0."""
        ge = self.b.cast(self.b.compare("Ge", a, self.c(0.0)), self.dtype)
        le = self.b.cast(self.b.compare("Le", a, self.c(size - 1)), self.dtype)
        return self.mul(ge, le)


def _unnormalize(e: _Ew, g: Value, size: int, align: bool) -> Value:
    """[-1, 1] -> pixel coordinates (torch's grid_sampler_unnormalize)."""
    if align:
        return e.mul(e.div(e.add(g, 1.0), 2.0), float(size - 1))
    return e.div(e.sub(e.mul(e.add(g, 1.0), float(size)), 1.0), 2.0)


def _reflect(e: _Ew, v: Value, twice_low: int, twice_high: int) -> Value:
    """torch's reflect_coordinates: fold v into [low, high] by mirroring."""
    if twice_low == twice_high:
        return e.mul(v, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    v = e.b.unary("Abs", e.sub(v, low))
    flips = e.floor(e.div(v, span))
    extra = e.sub(v, e.mul(flips, span))
    odd = e.sub(flips, e.mul(e.floor(e.div(flips, 2.0)), 2.0))
    even = e.b.compare("Eq", odd, e.c(0.0))
    return e.b.emit("Where", [even, e.add(extra, low), e.add(e.sub(e.c(span), extra), low)], v.dims, v.dtype)


def _pad_coord(e: _Ew, v: Value, size: int, padding: str, align: bool) -> Value:
    """torch's compute_coordinates: border clips, reflection mirrors then clips, zeros leaves as is."""
    if padding == "reflection":
        v = _reflect(e, v, 0, 2 * (size - 1)) if align else _reflect(e, v, -1, 2 * size - 1)
    if padding in ("border", "reflection"):
        v = e.clip(v, 0.0, float(size - 1))
    return v


def _tap(e: _Ew, flat: Value, ix: Value, iy: Value, weight: Value, h: int, w: int) -> Value:
    """weight * x[n, c, iy, ix] with out-of-bounds taps reading 0 (ix, iy integer-valued [N, 1, P])."""
    b, ei = e.b, e.exact
    valid = ei.mul(ei.inside(ix, w), ei.inside(iy, h))
    lin = ei.add(ei.mul(ei.clip(iy, 0.0, float(h - 1)), float(w)), ei.clip(ix, 0.0, float(w - 1)))
    n, c, _ = flat.dims
    idx = b.expand(lin, (n, c, lin.dims[2]))  # float32 positions, exact below 2**24
    vals = b.emit({"GatherElements": {"axis": 2}}, [flat, idx], idx.dims, flat.dtype)
    return e.mul(vals, ei.mul(weight, valid))


def _cubic_weights(e: _Ew, t: Value) -> list[Value]:
    """Keys cubic convolution weights (A = -0.75) of the four taps around t in [0, 1)."""
    a = -0.75

    def conv1(x: Value) -> Value:  # ((A+2)x - (A+3)) x^2 + 1
        return e.add(e.mul(e.mul(e.sub(e.mul(x, a + 2), a + 3), x), x), 1.0)

    def conv2(x: Value) -> Value:  # ((A x - 5A) x + 8A) x - 4A
        return e.sub(e.mul(e.add(e.mul(e.sub(e.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)

    one_minus = e.sub(e.c(1.0), t)
    return [conv2(e.add(t, 1.0)), conv1(t), conv1(one_minus), conv2(e.add(one_minus, 1.0))]


@lowers("aten.grid_sampler.default", "aten.grid_sampler_2d.default", check=_check_grid_sampler)
def grid_sampler(b: Builder, call: Call) -> Value:
    """out[n,c,p] = sum over taps of w(grid[n,p]) * x[n,c,tap] (bilinear/nearest/bicubic; zeros/border/reflection)."""
    x, grid = call.tensor("input"), call.tensor("grid")
    half = x.dtype if x.dtype in HALF_DTYPES else None  # torch's kernel computes half in half: every op rounds
    x = b.cast(x, "float32") if half else x
    mode, padding = _MODES[call["interpolation_mode"]], _PADDINGS[call["padding_mode"]]
    align = bool(call["align_corners"])
    e = _Ew(b, x.dtype, half)
    n, c, h, w = x.dims
    _, ho, wo, _ = grid.dims
    p = ho * wo
    flat = b.reshape(x, (n, c, h * w))
    g = b.reshape(b.cast(grid, x.dtype), (n, 1, p, 2))
    gx = b.reshape(b.emit({"Narrow": {"axis": 3, "start": 0, "len": 1}}, [g], (n, 1, p, 1), x.dtype), (n, 1, p))
    gy = b.reshape(b.emit({"Narrow": {"axis": 3, "start": 1, "len": 1}}, [g], (n, 1, p, 1), x.dtype), (n, 1, p))
    ix, iy = _unnormalize(e, gx, w, align), _unnormalize(e, gy, h, align)
    one = e.c(1.0)
    if mode == "nearest":
        ix, iy = _pad_coord(e, ix, w, padding, align), _pad_coord(e, iy, h, padding, align)
        out = _tap(e, flat, b.unary("Round", ix), b.unary("Round", iy), one, h, w)
    elif mode == "bilinear":
        ix, iy = _pad_coord(e, ix, w, padding, align), _pad_coord(e, iy, h, padding, align)
        x0, y0 = e.floor(ix), e.floor(iy)
        x1, y1 = e.add(x0, 1.0), e.add(y0, 1.0)
        wx = [e.sub(x1, ix), e.sub(ix, x0)]
        wy = [e.sub(y1, iy), e.sub(iy, y0)]
        taps = [(xx, yy, e.mul(wx[i], wy[j])) for j, yy in enumerate((y0, y1)) for i, xx in enumerate((x0, x1))]
        out = _sum([_tap(e, flat, xx, yy, wt, h, w) for xx, yy, wt in taps], e)
    else:  # bicubic: coordinates unpadded; each integer tap is padded on its own
        x0, y0 = e.floor(ix), e.floor(iy)
        wx, wy = _cubic_weights(e, e.sub(ix, x0)), _cubic_weights(e, e.sub(iy, y0))
        xs = [_pad_coord(e, e.add(x0, float(k - 1)), w, padding, align) for k in range(4)]
        ys = [_pad_coord(e, e.add(y0, float(k - 1)), h, padding, align) for k in range(4)]
        xs, ys = [e.floor(v) for v in xs], [e.floor(v) for v in ys]
        parts = [_tap(e, flat, xs[i], ys[j], e.mul(wx[i], wy[j]), h, w) for j in range(4) for i in range(4)]
        out = _sum(parts, e)
    return b.cast(b.reshape(out, call.out_dims), call.out_dtype)


def _sum(parts: list[Value], e: _Ew) -> Value:
    """Left-to-right sum of same-shaped values."""
    total = parts[0]
    for part in parts[1:]:
        total = e.add(total, part)
    return total
