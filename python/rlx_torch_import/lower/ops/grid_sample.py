"""grid_sample: a runtime grid, so its coordinates, taps and weights are elementwise ops and
GatherElements on the flattened image."""

from __future__ import annotations

from ...dtypes import F32_EXACT, FLOAT_DTYPES, HALF_DTYPES
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers

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


@lowers("aten.grid_sampler.default", check=_check_grid_sampler)
@lowers("aten.grid_sampler_2d.default", check=_check_grid_sampler, kind="reduction")
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
