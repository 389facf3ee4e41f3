"""Complex numbers: views between complex and float pairs, construction, parts, conjugation, and the complex
forms of elementwise ops whose registered lowerings are real-only.

A complex tensor of torch shape S is carried as a float tensor of shape S + [2] (`lower/complexes.py`), so
the lowerings here read and return carried values; semantics are torch's (`c10/util/complex.h` and the
`aten/src/ATen/native` kernels for complex dtypes). docs/design.md (az).
"""

from __future__ import annotations

import math

from ..builder import Builder
from ..call import Call, Value
from ..complexes import ByParts, ComplexValue, lowers_complex, pair, parts
from ..registry import lowers


def _complex(v: Value) -> ComplexValue:
    if not isinstance(v, ComplexValue):
        raise TypeError(f"expected a complex value, got {v.dtype}{list(v.dims)}")
    return v


@lowers("aten.view_as_real.default", kind="movement")
def view_as_real(b: Builder, call: Call) -> Value:
    """The float pairs of a complex tensor, shape S + [2] (free: that is how complex values are carried)."""
    x = _complex(call.tensor("self"))
    return Value(x.id, x.dims, x.dtype)


@lowers("aten.view_as_complex.default", kind="movement")
def view_as_complex(b: Builder, call: Call) -> Value:
    """The complex tensor whose float pairs are the last axis (size 2) of a float tensor (free)."""
    x = call.tensor("self")
    return Value(x.id, x.dims, x.dtype)


@lowers("aten.real.default", "aten.imag.default", kind="movement")
def real_imag(b: Builder, call: Call) -> Value:
    """Real or imaginary part of a complex tensor (`real` of a real tensor is the tensor)."""
    x = call.tensor("self")
    re, im = parts(b, x)
    if call.target == "aten.real.default":
        return re
    if im is None:
        raise TypeError("imag is not implemented for real tensors")  # torch raises too
    return im


@lowers("aten.complex.default", kind="movement")
def complex_(b: Builder, call: Call) -> Value:
    """real + i*imag, broadcast to one shape."""
    shape = call.out_dims
    re, im = b.expand(call.tensor("real"), shape), b.expand(call.tensor("imag"), shape)
    return pair(b, re, im, call.out_dtype)


@lowers("aten.polar.default")
def polar(b: Builder, call: Call) -> Value:
    """abs * (cos(angle) + i*sin(angle)), broadcast to one shape."""
    r, theta = call.tensor("abs"), call.tensor("angle")
    re = b.binary("Mul", r, b.unary("Cos", theta))
    im = b.binary("Mul", r, b.unary("Sin", theta))
    shape = call.out_dims
    return pair(b, b.expand(re, shape), b.expand(im, shape), call.out_dtype)


@lowers(
    "aten._conj.default",
    "aten.conj_physical.default",
    "aten._conj_physical.default",
    "aten._neg_view.default",
    kind="exact",
)
def conj_neg(b: Builder, call: Call) -> Value:
    """Conjugate (re - i*im) or negation (`_neg_view`) of a complex tensor; of a real tensor `_conj` and
    `conj_physical` are the tensor, `_neg_view` its negation. The conj/neg bits torch's views set are
    applied here, so `resolve_conj` / `resolve_neg` have nothing left to do."""
    x = call.tensor("self")
    re, im = parts(b, x)
    neg = call.target == "aten._neg_view.default"
    if im is None:
        return b.unary("Neg", re) if neg else re
    return pair(b, b.unary("Neg", re) if neg else re, b.unary("Neg", im), _complex(x).complex)


@lowers("aten.resolve_conj.default", "aten.resolve_neg.default", kind="movement")
def resolve(b: Builder, call: Call) -> Value:
    """The tensor itself: conjugation and negation were already applied by `_conj` / `_neg_view`."""
    return call.tensor("self")


@lowers("aten.angle.default")
def angle(b: Builder, call: Call) -> Value:
    """atan2(im, re) of a complex tensor; of a real tensor pi where x < 0, else 0 (NaN stays NaN), in its
    float dtype (integers: float32), as torch's `angle` kernel."""
    x = call.tensor("self")
    re, im = parts(b, x)
    dtype = call.out_dtype
    if im is not None:
        return b.binary("Atan2", im, re, dtype)
    xf = b.cast(re, dtype)
    negative = b.compare("Lt", xf, b.scalar_like(0, xf))
    pi = b.emit("Where", [negative, b.const(math.pi, dtype), b.const(0, dtype)], xf.dims, dtype)
    return b.emit("Where", [b.compare("Ne", xf, xf), xf, pi], xf.dims, dtype)  # NaN stays NaN


def _mul_parts(b: Builder, x: tuple[Value, Value], y: tuple[Value, Value]) -> tuple[Value, Value]:
    (a, c), (bb, d) = (x[0], y[0]), (x[1], y[1])
    re = b.binary("Sub", b.binary("Mul", a, c), b.binary("Mul", bb, d))
    im = b.binary("Add", b.binary("Mul", a, d), b.binary("Mul", bb, c))
    return re, im


@lowers_complex("aten.mul.Tensor", "aten.mul.Scalar")
def complex_mul(b: Builder, call: Call, by_parts: ByParts) -> Value | list[Value | None]:
    """(a + bi)(c + di) = (ac - bd) + (ad + bc)i; by a real factor, each part scaled."""
    x, y = call["self"], call["other"]
    if not (isinstance(x, ComplexValue) and isinstance(y, ComplexValue)):
        return by_parts(b, True)
    re, im = _mul_parts(b, parts(b, x), parts(b, y))  # type: ignore[arg-type]
    return pair(b, b.expand(re, call.out_dims), b.expand(im, call.out_dims), call.out_dtype)


def _check_div(call: Call) -> str | None:
    mode = call.get("rounding_mode")
    return None if mode is None else f"rounding_mode={mode!r} is not defined for complex division"


@lowers_complex("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", check=_check_div)
def complex_div(b: Builder, call: Call, by_parts: ByParts) -> Value | list[Value | None]:
    """(a + bi) / (c + di) by Smith's scaling, as `c10::complex` divides: with |c| >= |d|, r = d/c,
    s = 1/(c + d r), result ((a + b r) s) + ((b - a r) s)i, else the mirror; by a real divisor, each part."""
    x, y = call["self"], call["other"]
    if not isinstance(y, ComplexValue):
        return by_parts(b, True)
    a, bi = parts(b, x)
    c, d = parts(b, y)
    assert d is not None
    if bi is None:  # a real dividend: zero imaginary part
        bi = b.expand(b.const(0, a.dtype), a.dims)
    one = b.scalar_like(1, c)
    c_big = b.compare("Ge", b.unary("Abs", c), b.unary("Abs", d))
    p, q = (b.emit("Where", [c_big, u, v], c.dims, c.dtype) for u, v in ((c, d), (d, c)))  # |p| >= |q|
    rat = b.binary("Div", q, p)
    scl = b.binary("Div", one, b.binary("Add", p, b.binary("Mul", q, rat)))
    re_big = b.binary("Mul", b.binary("Add", a, b.binary("Mul", bi, rat)), scl)
    im_big = b.binary("Mul", b.binary("Sub", bi, b.binary("Mul", a, rat)), scl)
    re_small = b.binary("Mul", b.binary("Add", b.binary("Mul", a, rat), bi), scl)
    im_small = b.binary("Mul", b.binary("Sub", b.binary("Mul", bi, rat), a), scl)
    shape = call.out_dims
    re = b.emit("Where", [b.expand(c_big, shape), b.expand(re_big, shape), b.expand(re_small, shape)], shape, c.dtype)
    im = b.emit("Where", [b.expand(c_big, shape), b.expand(im_big, shape), b.expand(im_small, shape)], shape, c.dtype)
    return pair(b, re, im, call.out_dtype)


@lowers_complex("aten.exp.default")
def complex_exp(b: Builder, call: Call, by_parts: ByParts) -> Value:
    """exp(a + bi) = e^a cos b + i e^a sin b."""
    a, bi = parts(b, call.tensor("self"))
    assert bi is not None
    mag = b.unary("Exp", a)
    return pair(b, b.binary("Mul", mag, b.unary("Cos", bi)), b.binary("Mul", mag, b.unary("Sin", bi)), call.out_dtype)


@lowers_complex("aten.abs.default")
def complex_abs(b: Builder, call: Call, by_parts: ByParts) -> Value:
    """|a + bi| = hypot(a, b), computed as m * sqrt(1 + (n/m)^2) with m = max(|a|, |b|), n = min (no
    overflow or underflow of the squares, as `std::hypot`); 0 where both parts are 0."""
    a, bi = parts(b, call.tensor("self"))
    assert bi is not None
    aa, ab = b.unary("Abs", a), b.unary("Abs", bi)
    m, n = b.binary("Max", aa, ab), b.binary("Min", aa, ab)
    zero = b.compare("Eq", m, b.scalar_like(0, m))
    safe = b.emit("Where", [zero, b.scalar_like(1, m), m], m.dims, m.dtype)
    ratio = b.binary("Div", n, safe)
    root = b.unary("Sqrt", b.binary("Add", b.scalar_like(1, m), b.binary("Mul", ratio, ratio)))
    return b.binary("Mul", m, root)


@lowers_complex("aten._to_copy.default", "aten.clone.default", kind="exact")
def complex_copy(b: Builder, call: Call, by_parts: ByParts) -> Value | list[Value | None]:
    """A copy, converted to the result dtype: a real tensor made complex gets a zero imaginary part; a
    complex one made real keeps its real part (torch warns that it discards the imaginary part)."""
    x = call.tensor("self")
    out = call.out_dtype
    re, im = parts(b, x)
    if out.startswith("complex"):
        if im is None:  # a zero imaginary part (0, not re * 0: that is NaN where re is infinite)
            return pair(b, re, b.expand(b.const(0, re.dtype), re.dims), out)
        return pair(b, re, im, out)
    return b.cast(re, out)
