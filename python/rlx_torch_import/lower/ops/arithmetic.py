"""Elementwise arithmetic: broadcasting and dtype promotion, division and remainders, powers, bounds, select."""

from __future__ import annotations

from ...dtypes import FLOAT_DTYPES, HALF_DTYPES, INT_DTYPES
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ..rlx import exact
from ._common import fix_sign, floor_divide, operand, operands, scaled, when


@lowers("aten.add.Tensor", "aten.add.Scalar")
def add(b: Builder, call: Call) -> Value:
    """self + alpha * other."""
    x, y = operands(b, call)
    return b.binary("Add", x, scaled(b, y, call.get("alpha", 1)), call.out_dtype)


@lowers("aten.sub.Tensor", "aten.sub.Scalar")
def sub(b: Builder, call: Call) -> Value:
    """self - alpha * other."""
    x, y = operands(b, call)
    return b.binary("Sub", x, scaled(b, y, call.get("alpha", 1)), call.out_dtype)


@lowers("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(b: Builder, call: Call) -> Value:
    """other - alpha * self."""
    x, y = operands(b, call)
    return b.binary("Sub", y, scaled(b, x, call.get("alpha", 1)), call.out_dtype)


@lowers("aten.mul.Tensor", "aten.mul.Scalar")
def mul(b: Builder, call: Call) -> Value:
    """self * other (a scalar `other` of a float16/bfloat16 product in float32, as torch reads it)."""
    x, y = operands(b, call, opmath=True)
    return b.binary("Mul", x, y, call.out_dtype)


def _remainder(b: Builder, x: Value, y: Value, dtype: str, floor: bool) -> Value:
    """C fmod (sign of x), or Python's % (sign of y: fmod + y where the signs differ), exact in every dtype."""
    wide = "int64" if dtype not in FLOAT_DTYPES else dtype
    a, c = b.cast(x, wide), b.cast(y, wide)
    mod = b.binary("Mod", a, c)  # int64 Mod is a - trunc(a / b) * b in the workaround layer
    if floor:  # mod + b where the signs differ, selected (not mod + fix * b: 0 * inf is NaN for b = +-inf)
        differ = b.compare("Ne", fix_sign(b, a, c, mod), b.const(0.0, "float32"))
        mod = when(b, differ, b.binary("Add", mod, c), mod)
    return b.cast(mod, dtype)


def _check_div(call: Call) -> str | None:
    mode = call.get("rounding_mode")
    if mode not in (None, "floor", "trunc"):
        return f"rounding_mode={mode!r} is not supported"
    return None


@lowers(
    "aten.div.Tensor",
    "aten.div.Scalar",
    "aten.div.Tensor_mode",
    "aten.div.Scalar_mode",
    "aten.floor_divide.default",
    check=_check_div,
)
def div(b: Builder, call: Call) -> Value:
    """self / other; rounding_mode='floor' (and floor_divide) and 'trunc' follow torch's c10 kernels exactly
    (a scalar divisor of a float16/bfloat16 quotient in float32, as torch reads it)."""
    x, y, dtype = operand(b, call, "self"), operand(b, call, "other", opmath=True), call.out_dtype
    mode = "floor" if call.target == "aten.floor_divide.default" else call.get("rounding_mode")
    if mode == "floor":
        return b.cast(floor_divide(b, x, y), dtype)
    if mode == "trunc" and dtype not in FLOAT_DTYPES:  # integer division truncates: int64 Div is exact
        return b.cast(b.binary("Div", b.cast(x, "int64"), b.cast(y, "int64")), dtype)
    q = b.binary("Div", b.cast(x, dtype), b.cast(y, dtype), dtype)
    if mode == "trunc" and dtype in HALF_DTYPES:  # torch truncates the quotient after rounding it to the dtype
        q = b.round_to(q, dtype)
    return b.trunc(q) if mode == "trunc" else q


def _check_pow(call: Call) -> str | None:
    if call.out_dtype not in FLOAT_DTYPES and call.out_dtype not in INT_DTYPES:
        return f"pow on {call.out_dtype} is not supported (torch has no {call.out_dtype} pow either)"
    return None


@lowers("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar", check=_check_pow)
def pow_(b: Builder, call: Call) -> Value:
    """self ** exponent; small constant exponents become multiplies or sqrt (exact and fast); integers
    exactly, by square-and-multiply wrapping like torch (a negative exponent gives 1, ±1 or 0 as torch's powi)."""
    dtype = call.out_dtype
    x = b.cast(operand(b, call, "self"), dtype)
    e = call["exponent"]
    if dtype not in FLOAT_DTYPES:
        return _int_pow(b, x, e if isinstance(e, Value) else int(e), dtype, call.out_dims)
    if not isinstance(e, Value):
        if e == 1:
            return x
        if e == 2:
            return b.binary("Mul", x, x)
        if e == 0.5:
            return b.unary("Sqrt", x)
        if e == -1:
            return b.unary("Recip", x)
    return b.binary("Pow", x, operand(b, call, "exponent"), dtype)


# Bits of a non-negative exponent in each integer dtype (torch's powi loops over them).
_EXPONENT_BITS = {"int8": 7, "uint8": 8, "int16": 15, "int32": 31, "int64": 63}


def _int_pow(b: Builder, x: Value, e: Value | int, dtype: str, dims: tuple[int, ...]) -> Value:
    """x ** e on integers as torch's powi: square-and-multiply in int64 (products wrap; the narrower
    dtypes wrap alike when cast back); for e < 0, 1 if x == 1, (-1) ** e if x == -1, else 0."""
    one = b.const(1, "int64")
    a = b.cast(x, "int64")
    if not isinstance(e, Value):  # a constant exponent (torch rejects a negative one): its bits, unrolled
        result = None
        while e:
            if e & 1:
                result = a if result is None else b.binary("Mul", result, a)
            e >>= 1
            if e:
                a = b.binary("Mul", a, a)
        return b.expand(b.cast(one if result is None else result, dtype), dims)
    a = b.expand(a, dims)
    exponent = b.expand(b.cast(b.cast(e, dtype), "int64"), dims)
    zero = b.const(0, "int64")
    negative = b.compare("Lt", exponent, zero)
    rest = when(b, negative, zero, exponent)
    result = b.expand(one, dims)
    for i in range(_EXPONENT_BITS[dtype]):
        bit = b.compare("Ne", b.binary("BitAnd", rest, one), zero)
        result = when(b, bit, b.binary("Mul", result, a), result)
        if i + 1 < _EXPONENT_BITS[dtype]:
            rest = b.binary("Div", rest, b.const(2, "int64"))
            a = b.binary("Mul", a, a)
    base = b.cast(x, "int64")
    odd = b.compare("Ne", b.binary("BitAnd", exponent, one), zero)
    minus_one = when(b, odd, b.const(-1, "int64"), one)
    inverse = when(b, b.compare("Eq", base, one), one, b.const(0, "int64"))
    inverse = when(b, b.compare("Eq", base, b.const(-1, "int64")), minus_one, inverse)
    return b.cast(when(b, negative, inverse, result), dtype)


@lowers("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar", kind="movement")
def where(b: Builder, call: Call) -> Value:
    """condition ? self : other, broadcast to the result shape (scalars become constants)."""
    cond, x, y = call.tensor("condition"), operand(b, call, "self"), operand(b, call, "other")
    dtype, dims = call.out_dtype, call.out_dims
    x, y = b.expand(b.cast(x, dtype), dims), b.expand(b.cast(y, dtype), dims)
    return b.emit("Where", [b.expand(cond, dims), x, y], dims, dtype)


@lowers("aten.clamp.default", "aten.clamp.Tensor", "aten.clamp_min.default", "aten.clamp_max.default")
def clamp(b: Builder, call: Call) -> Value:
    """min(max(x, lo), hi) with scalar or tensor bounds (bounds as constants, so ±inf is fine)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    lo = None if call.target == "aten.clamp_max.default" else call.get("min")
    hi = None if call.target == "aten.clamp_min.default" else call.get("max")
    if lo is not None:
        x = b.binary("Max", x, lo if isinstance(lo, Value) else b.const(lo, x.dtype), call.out_dtype)
    if hi is not None:
        x = b.binary("Min", x, hi if isinstance(hi, Value) else b.const(hi, x.dtype), call.out_dtype)
    return b.expand(x, call.out_dims)


@lowers("aten.maximum.default", "aten.minimum.default")
def maximum_minimum(b: Builder, call: Call) -> Value:
    """Elementwise max/min of two tensors, broadcast and promoted."""
    x, y = operands(b, call)
    return b.binary("Max" if "maximum" in call.target else "Min", x, y, call.out_dtype)


@lowers("aten.fmax.default", "aten.fmin.default")
def fmax_fmin(b: Builder, call: Call) -> Value:
    """Elementwise max/min ignoring NaN: the other operand where one is NaN, NaN only where both are
    (torch.fmax/fmin, C's fmax/fmin); integers as maximum/minimum."""
    x, y = operands(b, call)
    both = b.binary("Max" if "fmax" in call.target else "Min", x, y, call.out_dtype)
    if call.out_dtype not in FLOAT_DTYPES:
        return both
    dims = both.dims
    x, y = b.expand(x, dims), b.expand(y, dims)
    both = b.emit("Where", [exact.is_nan(b, y), x, both], dims, both.dtype)  # y NaN: x (NaN if x is too)
    return b.emit("Where", [exact.is_nan(b, x), y, both], dims, both.dtype)  # x NaN: y


@lowers("aten.copysign.Tensor", "aten.copysign.Scalar")
def copysign(b: Builder, call: Call) -> Value:
    """|self| with the sign of `other`, -0.0 included (torch.copysign; integers and bool compute in
    float32). The sign bit of a NaN `other` is not visible to RLX's ops: it reads as positive."""
    x, y = (b.cast(v, call.out_dtype) for v in operands(b, call))
    zero = b.const(0.0, call.out_dtype)
    negative_zero = b.compare("Lt", b.binary("Div", b.const(1.0, call.out_dtype), y), zero)  # 1 / -0.0 = -inf
    negative = b.binary("Max", exact.flag(b, b.compare("Lt", y, zero)), exact.flag(b, negative_zero))  # or
    magnitude = b.expand(b.unary("Abs", x), call.out_dims)
    flip = b.compare("Ne", b.expand(negative, call.out_dims), b.const(0.0, "float32"))
    return b.emit("Where", [flip, b.unary("Neg", magnitude), magnitude], call.out_dims, call.out_dtype)


def _mod(trunc: bool):  # noqa: ANN202 - factory returning a lowering
    def lower_mod(b: Builder, call: Call) -> Value:
        x, y = operand(b, call, "self"), operand(b, call, "other")
        return _remainder(b, x, y, call.out_dtype, floor=not trunc)

    lower_mod.__name__ = "fmod" if trunc else "remainder"
    lower_mod.__doc__ = (
        "C fmod: x - trunc(x / y) * y, computed exactly (sign of x)."
        if trunc
        else "Python %: fmod(x, y) + y where the signs differ, computed exactly (sign of y)."
    )
    return lower_mod


lowers("aten.remainder.Scalar", "aten.remainder.Tensor")(_mod(trunc=False))
lowers("aten.fmod.Scalar", "aten.fmod.Tensor")(_mod(trunc=True))


@lowers("aten.atan2.default")
def atan2(b: Builder, call: Call) -> Value:
    """atan2(self, other), the angle of (other, self)."""
    x, y = operands(b, call)
    return b.binary("Atan2", x, y, call.out_dtype)
