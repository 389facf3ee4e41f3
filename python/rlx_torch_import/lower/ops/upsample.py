"""Resampling: nearest, (bi/tri)linear, bicubic and antialiased upsampling.

Shapes are static, so resampling along an axis is a constant operator: nearest is a Gather
with constant indices (exact copy), linear/cubic/antialiased is a matmul with a constant
interpolation matrix whose rows hold torch's own weights (computed here in float64).
On an output axis that is a dynamic dim (a dynamic program), nearest and linear compute their source
indices when the bundle runs instead, so the RLX graph is the same at every size (docs/design.md, aw).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...dtypes import FLOAT_DTYPES
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ._common import contract_axis, gather_axis, iota


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


def _nearest_step(in_size: int, out_size: int, scale: float | None) -> np.float32:
    """torch's nearest step in float32: 1/scale when the user gave a scale, else in/out."""
    return np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(in_size) / np.float32(out_size)


def _nearest_index(in_size: int, out_size: int, step: np.float32, exact: bool) -> np.ndarray:
    """floor(dst * s) (nearest) or floor((dst + 0.5) * s) (nearest-exact), in float32 like torch,
    clamped to in_size - 1."""
    dst = np.arange(out_size, dtype=np.float64)
    if exact:
        src = np.floor(((dst + 0.5) * np.float64(step)).astype(np.float32))
    else:
        src = np.floor(dst.astype(np.float32) * step)
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


def _dynamic_out_axes(b: Builder, call: Call) -> tuple[int, ...]:
    """The output's axes whose size is a dynamic dim's expression (none in a static program)."""
    if b.provenance.node not in b.program.size_dependent:
        return ()
    return b.program.dynamic_axes.get(call.node.outputs[0].name, ())


_NEAREST_EXACT = (
    "aten._upsample_nearest_exact1d.vec",
    "aten._upsample_nearest_exact2d.vec",
    "aten._upsample_nearest_exact3d.vec",
)


@lowers(
    "aten.upsample_nearest1d.vec",
    "aten.upsample_nearest2d.vec",
    "aten.upsample_nearest3d.vec",
    "aten._upsample_nearest_exact1d.vec",
    "aten._upsample_nearest_exact2d.vec",
    "aten._upsample_nearest_exact3d.vec",
)
def upsample_nearest(b: Builder, call: Call) -> Value:
    """out[.., o] = x[.., min(floor(o * s), in - 1)] per spatial axis (nearest-exact: (o + 0.5) * s)."""
    x = _image(call)
    k = x.rank - 2
    exact = call.target in _NEAREST_EXACT
    dynamic = _dynamic_out_axes(b, call)
    for d, scale in enumerate(_spatial_scales(call, k)):
        axis = 2 + d
        step = _nearest_step(x.dims[axis], call.out_dims[axis], scale)
        index = _nearest_index(x.dims[axis], call.out_dims[axis], step, exact)
        dyn = axis in dynamic and not (step == 1.0 and len(index) == x.dims[axis])  # a copy at every size: no node
        x = _gather_dynamic(b, x, axis, index, (step, exact)) if dyn else gather_axis(b, x, axis, index)
    return x


def _gather_dynamic(b: Builder, x: Value, axis: int, index: np.ndarray, rule: tuple[np.float32, bool]) -> Value:
    """Nearest along a dynamic axis as one graph for every size (docs/design.md, decision aw): the index
    is computed when the bundle runs, floor(float32(o) * step) (nearest-exact: floor(float32(2o + 1) *
    (step / 2)), the same float32 product torch rounds its double one to, as both factors are exact
    in float32) over o = 0..n-1 from `iota`, so no constant depends on the size (a constant index
    gather's length and values change with it, and its identity is no node at all). The clamp to
    in - 1 is emitted only where this size needs it: with a fixed step (a user scale, or an output
    that is a fixed multiple of the input) it never does; a step that changes with the size is a
    one-element constant that changes, which generalization reports naming the node."""
    step, exact = rule
    n = len(index)
    if exact:
        odd = b.binary("Add", b.binary("Mul", iota(b, n), b.const(2, "int64")), b.const(1, "int64"))
        scaled = b.binary("Mul", b.cast(odd, "float32"), b.const(float(step) / 2, "float32"))
    else:
        scaled = b.binary("Mul", b.cast(iota(b, n), "float32"), b.const(float(step), "float32"))
    where = b.cast(b.unary("Floor", scaled), "int64")
    if int(index.max(initial=0)) < int(_nearest_index(2**62, n, step, exact).max(initial=0)):
        where = b.binary("Min", where, b.const(x.dims[axis] - 1, "int64"))
    dims = list(x.dims)
    dims[axis] = n
    return b.emit({"Gather": {"axis": axis}}, [x, where], dims, x.dtype)


def _check_float_input(call: Call) -> str | None:
    x = _image(call)
    if x.dtype not in FLOAT_DTYPES:
        return f"interpolation of {x.dtype} tensors is not supported (float only)"
    return None


def _linear_dynamic(b: Builder, x: Value, axis: int, n: int, step: float, align: bool) -> Value:
    """Two-tap linear interpolation along a dynamic axis as one graph for every size (decision aw):
    torch's source index in its opmath type (step * (o + 0.5) - 0.5 clamped at 0, or step * o with align_corners)
    is computed when the bundle runs over o from `iota`, then out = x[i0] * (1 - l) + x[i1] * l with
    i0 = floor(src), l = clamp(src - i0, 0, 1), i1 = min(i0 + 1, in - 1) (in - 1 a size scalar). A step
    that changes with the size (align_corners, an output of a fixed size) is a one-element constant
    that changes, which generalization reports naming the node."""
    ft = "float64" if x.dtype == "float64" else "float32"  # torch's opmath type: float for halves
    o = b.cast(iota(b, n), ft)
    if align:
        src = b.binary("Mul", o, b.const(step, ft))
    else:
        half = b.const(0.5, ft)
        src = b.binary(
            "Max", b.binary("Sub", b.binary("Mul", b.binary("Add", o, half), b.const(step, ft)), half), b.const(0.0, ft)
        )
    last = b.const(x.dims[axis] - 1, "int64")
    i0 = b.binary("Min", b.cast(b.unary("Floor", src), "int64"), last)
    lam = b.binary("Min", b.binary("Max", b.binary("Sub", src, b.cast(i0, ft)), b.const(0.0, ft)), b.const(1.0, ft))
    i1 = b.binary("Min", b.binary("Add", i0, b.const(1, "int64")), last)
    dims = list(x.dims)
    dims[axis] = n
    x0 = b.emit({"Gather": {"axis": axis}}, [x, i0], dims, x.dtype)
    x1 = b.emit({"Gather": {"axis": axis}}, [x, i1], dims, x.dtype)
    lam = b.cast(b.reshape(lam, (n,) + (1,) * (x.rank - 1 - axis)), x.dtype)
    return b.binary("Add", x0, b.binary("Mul", b.binary("Sub", x1, x0), lam))


def _matrix_upsample(matrix_fn: Callable[[int, int, bool, float | None], np.ndarray], name: str):  # noqa: ANN202
    def lower_upsample(b: Builder, call: Call) -> Value:
        x = _image(call)
        align = bool(call.get("align_corners", False))
        dynamic = _dynamic_out_axes(b, call) if matrix_fn is _linear_matrix else ()
        for d, scale in enumerate(_spatial_scales(call, x.rank - 2)):
            axis, n = 2 + d, call.out_dims[2 + d]
            if axis in dynamic:
                x = _linear_dynamic(b, x, axis, n, _area_scale(x.dims[axis], n, align, scale), align)
            elif x.dims[axis] != n or align or scale not in (None, 1.0):
                x = contract_axis(b, x, axis, matrix_fn(x.dims[axis], n, align, scale))
        return x

    lower_upsample.__name__ = name
    return lower_upsample


_linear = _matrix_upsample(_linear_matrix, "upsample_linear")
_linear.__doc__ = "out = A_d @ x along each spatial axis, A_d holding torch's two-tap linear weights."
lowers("aten.upsample_linear1d.vec", "aten.upsample_trilinear3d.vec", check=_check_float_input)(_linear)
lowers("aten.upsample_bilinear2d.vec", check=_check_float_input, kind="reduction")(_linear)

_cubic = _matrix_upsample(_cubic_matrix, "upsample_bicubic")
_cubic.__doc__ = "out = A_h @ x @ A_w^T, A holding torch's four-tap cubic weights (A = -0.75, clamped taps)."
lowers("aten.upsample_bicubic2d.vec", check=_check_float_input, kind="reduction")(_cubic)

_aa_bilinear = _matrix_upsample(lambda i, o, ac, s: _aa_matrix(i, o, ac, s, cubic=False), "upsample_bilinear_antialias")
_aa_bilinear.__doc__ = "out = A_h @ x @ A_w^T, A the normalized triangle filter widened by the downscale."
lowers("aten._upsample_bilinear2d_aa.vec", "aten._upsample_bilinear2d_aa.default", check=_check_float_input)(
    _aa_bilinear
)

_aa_bicubic = _matrix_upsample(lambda i, o, ac, s: _aa_matrix(i, o, ac, s, cubic=True), "upsample_bicubic_antialias")
_aa_bicubic.__doc__ = "out = A_h @ x @ A_w^T, A the normalized cubic filter (a = -0.5) widened by the downscale."
lowers("aten._upsample_bicubic2d_aa.vec", "aten._upsample_bicubic2d_aa.default", check=_check_float_input)(_aa_bicubic)
