"""Elementwise math: arithmetic with broadcasting and dtype promotion, activations, comparisons."""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import FLOAT_DTYPES, HALF_DTYPES, INT_DTYPES, promote
from . import exact
from .context import Builder, Call, Value
from .registry import lowers


def _operand(b: Builder, call: Call, name: str, opmath: bool = False) -> Value:
    """A tensor argument, or a Python scalar as a rank-0 constant of the result dtype.

    `opmath`: the op reads a scalar `other` as torch's CPU mul/div kernels do for float16/bfloat16
    results: a Python scalar or a rank-0 float32/float64 tensor in float32, unrounded (`Builder.opmath`)."""
    value, dtype = call[name], call.out_dtype
    half_scalar = opmath and dtype in HALF_DTYPES
    if isinstance(value, Value):
        if half_scalar and name == "other" and value.rank == 0 and value.dtype in ("float32", "float64"):
            wide = b.cast(value, "float32")
            return Value(wide.id, wide.dims, dtype)
        return value
    if half_scalar:
        return b.opmath(value, dtype)
    return b.const(value, dtype if dtype != "bool" else "float32")


def _operands(b: Builder, call: Call, opmath: bool = False) -> tuple[Value, Value]:
    """(self, other) in the result dtype; either may be a Python scalar in Core ATen graphs."""
    dtype = call.out_dtype
    return b.cast(_operand(b, call, "self"), dtype), b.cast(_operand(b, call, "other", opmath), dtype)


def _scaled(b: Builder, x: Value, alpha: float | int, opmath: bool = False) -> Value:
    """alpha * x; `opmath`: alpha as torch's half kernels read it (`Builder.opmath`), else in x's dtype."""
    return x if alpha == 1 else b.binary("Mul", x, b.opmath(alpha, x.dtype) if opmath else b.const(alpha, x.dtype))


@lowers("aten.add.Tensor", "aten.add.Scalar")
def add(b: Builder, call: Call) -> Value:
    """self + alpha * other."""
    x, y = _operands(b, call)
    return b.binary("Add", x, _scaled(b, y, call.get("alpha", 1)), call.out_dtype)


@lowers("aten.sub.Tensor", "aten.sub.Scalar")
def sub(b: Builder, call: Call) -> Value:
    """self - alpha * other."""
    x, y = _operands(b, call)
    return b.binary("Sub", x, _scaled(b, y, call.get("alpha", 1)), call.out_dtype)


@lowers("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(b: Builder, call: Call) -> Value:
    """other - alpha * self."""
    x, y = _operands(b, call)
    return b.binary("Sub", y, _scaled(b, x, call.get("alpha", 1)), call.out_dtype)


@lowers("aten.mul.Tensor", "aten.mul.Scalar")
def mul(b: Builder, call: Call) -> Value:
    """self * other (a scalar `other` of a float16/bfloat16 product in float32, as torch reads it)."""
    x, y = _operands(b, call, opmath=True)
    return b.binary("Mul", x, y, call.out_dtype)


def _signs_differ(b: Builder, x: Value, y: Value) -> Value:
    """(x < 0) != (y < 0), as float32 0/1."""
    zero = b.const(0, x.dtype)
    return b.cast(b.compare("Ne", b.compare("Lt", x, zero), b.compare("Lt", y, zero)), "float32")


def _when(b: Builder, cond: Value, x: Value, y: Value) -> Value:
    """cond (bool) ? x : y, broadcast."""
    dims = tuple(np.broadcast_shapes(cond.dims, x.dims, y.dims))
    return b.emit("Where", [b.expand(cond, dims), b.expand(x, dims), b.expand(y, dims)], dims, x.dtype)


def _fix_sign(b: Builder, x: Value, y: Value, mod: Value) -> Value:
    """1 where the C remainder `mod` is nonzero and its sign differs from the divisor's (floor moves by one)."""
    nonzero = b.cast(b.compare("Ne", mod, b.const(0, mod.dtype)), "float32")
    return b.binary("Mul", nonzero, _signs_differ(b, y, mod))


def floor_divide(b: Builder, x: Value, y: Value) -> Value:
    """torch's floor division (c10 div_floor_*), exact: integers through int64 Div/Sub (truncating,
    exact over the whole range); floats from fmod, so rounding boundaries match torch
    (floor_divide(1.0, 0.1) == 9), with a / b for a zero divisor."""
    dtype = promote(x.dtype, y.dtype)
    if dtype not in FLOAT_DTYPES:
        a, c = b.cast(x, "int64"), b.cast(y, "int64")
        quot = b.binary("Div", a, c)
        rem = b.binary("Sub", a, b.binary("Mul", quot, c))
        return b.cast(b.binary("Sub", quot, b.cast(_fix_sign(b, a, c, rem), "int64")), dtype)
    a, c = b.cast(x, dtype), b.cast(y, dtype)
    mod = b.binary("Mod", a, c)
    div = b.binary("Div", b.binary("Sub", a, mod), c)
    div = b.binary("Sub", div, b.cast(_fix_sign(b, a, c, mod), dtype))
    floor = b.unary("Floor", div)
    bump = b.cast(b.compare("Gt", b.binary("Sub", div, floor), b.const(0.5, dtype)), dtype)
    result = b.binary("Add", floor, bump)
    return _when(b, b.compare("Eq", c, b.const(0.0, dtype)), b.binary("Div", a, c), result)


def _remainder(b: Builder, x: Value, y: Value, dtype: str, floor: bool) -> Value:
    """C fmod (sign of x), or Python's % (sign of y: fmod + y where the signs differ), exact in every dtype."""
    wide = "int64" if dtype not in FLOAT_DTYPES else dtype
    a, c = b.cast(x, wide), b.cast(y, wide)
    mod = b.binary("Mod", a, c)  # int64 Mod is a - trunc(a / b) * b in the workaround layer
    if floor:  # mod + b where the signs differ, selected (not mod + fix * b: 0 * inf is NaN for b = +-inf)
        differ = b.compare("Ne", _fix_sign(b, a, c, mod), b.const(0.0, "float32"))
        mod = _when(b, differ, b.binary("Add", mod, c), mod)
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
    x, y, dtype = _operand(b, call, "self"), _operand(b, call, "other", opmath=True), call.out_dtype
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
    x = b.cast(_operand(b, call, "self"), dtype)
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
    return b.binary("Pow", x, _operand(b, call, "exponent"), dtype)


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
    rest = _when(b, negative, zero, exponent)
    result = b.expand(one, dims)
    for i in range(_EXPONENT_BITS[dtype]):
        bit = b.compare("Ne", b.binary("BitAnd", rest, one), zero)
        result = _when(b, bit, b.binary("Mul", result, a), result)
        if i + 1 < _EXPONENT_BITS[dtype]:
            rest = b.binary("Div", rest, b.const(2, "int64"))
            a = b.binary("Mul", a, a)
    base = b.cast(x, "int64")
    odd = b.compare("Ne", b.binary("BitAnd", exponent, one), zero)
    minus_one = _when(b, odd, b.const(-1, "int64"), one)
    inverse = _when(b, b.compare("Eq", base, one), one, b.const(0, "int64"))
    inverse = _when(b, b.compare("Eq", base, b.const(-1, "int64")), minus_one, inverse)
    return b.cast(_when(b, negative, inverse, result), dtype)


def _unary(activation: str):  # noqa: ANN202 - factory returning a lowering
    def lower_unary(b: Builder, call: Call) -> Value:
        return b.unary(activation, b.cast(call.tensor("self"), call.out_dtype))

    lower_unary.__name__ = f"unary_{activation.lower()}"
    lower_unary.__doc__ = f"Elementwise {activation}."
    return lower_unary


for _target, _act in {
    "aten.relu.default": "Relu",
    "aten.silu.default": "Silu",
    "aten.sigmoid.default": "Sigmoid",
    "aten.tanh.default": "Tanh",
    "aten.exp.default": "Exp",
    "aten.log.default": "Log",
    "aten.sqrt.default": "Sqrt",
    "aten.rsqrt.default": "Rsqrt",
    "aten.neg.default": "Neg",
    "aten.abs.default": "Abs",
    "aten.sin.default": "Sin",
    "aten.cos.default": "Cos",
    "aten.erf.default": "Erf",
    "aten.reciprocal.default": "Recip",
    "aten.floor.default": "Floor",
    "aten.ceil.default": "Ceil",
    "aten.sign.default": "Sign",
    "aten.hardswish.default": "HardSwish",
    "aten.hardsigmoid.default": "HardSigmoid",
    "aten.mish.default": "Mish",
}.items():
    lowers(_target)(_unary(_act))


def _check_gelu(call: Call) -> str | None:
    approx = call.get("approximate", "none")
    return None if approx in ("none", "tanh") else f"approximate={approx!r} is not supported"


@lowers("aten.gelu.default", check=_check_gelu)
def gelu(b: Builder, call: Call) -> Value:
    """Exact (erf) or tanh-approximated GELU."""
    kind = "GeluApprox" if call.get("approximate", "none") == "tanh" else "Gelu"
    return b.unary(kind, call.tensor("self"))


def _compare(op: str):  # noqa: ANN202 - factory returning a lowering
    def lower_compare(b: Builder, call: Call) -> Value:
        x = call.tensor("self")
        y = call["other"]
        y = y if isinstance(y, Value) else b.const(y, x.dtype if x.dtype != "bool" else "float32")
        return b.compare(op, b.as_float(x) if x.dtype == "bool" else x, b.as_float(y) if y.dtype == "bool" else y)

    lower_compare.__name__ = f"compare_{op.lower()}"
    lower_compare.__doc__ = f"Elementwise comparison {op} (bool result)."
    return lower_compare


for _name, _op in {"eq": "Eq", "ne": "Ne", "lt": "Lt", "le": "Le", "gt": "Gt", "ge": "Ge"}.items():
    lowers(f"aten.{_name}.Tensor", f"aten.{_name}.Scalar")(_compare(_op))


def _truth(b: Builder, x: Value) -> Value:
    """x != 0 as float32 0/1."""
    return b.cast(b.compare("Ne", b.as_float(x), b.const(0.0, "float32")), "float32")


@lowers("aten.logical_not.default", "aten.bitwise_not.default")
def logical_not(b: Builder, call: Call) -> Value:
    """not x == (x == 0) for logical_not and bool; ~x == -x - 1 for integers (two's complement, exact in int64)."""
    x = call.tensor("self")
    if call.target.startswith("aten.bitwise_not") and call.out_dtype != "bool":
        wide = b.cast(x, "int64")
        return b.cast(b.binary("Sub", b.binary("Sub", b.const(0, "int64"), wide), b.const(1, "int64")), call.out_dtype)
    x = b.as_float(x)
    return b.cast(b.compare("Eq", x, b.const(0.0, x.dtype)), call.out_dtype)


def _logical(kind: str):  # noqa: ANN202 - factory returning a lowering
    """and/or/xor of truth values for bool results; RLX's exact int64 BitAnd/BitOr/BitXor for integers."""

    def lower_logical(b: Builder, call: Call) -> Value:
        x, y = _operand(b, call, "self"), _operand(b, call, "other")
        if call.out_dtype != "bool":
            bits = b.binary(f"Bit{kind.capitalize()}", b.cast(x, "int64"), b.cast(y, "int64"))
            return b.cast(bits, call.out_dtype)
        p, q = _truth(b, x), _truth(b, y)
        if kind == "xor":
            return b.compare("Ne", p, q)
        both = b.binary("Mul" if kind == "and" else "Max", p, q)
        return b.compare("Ne", both, b.const(0.0, "float32"))

    lower_logical.__name__ = f"logical_{kind}"
    lower_logical.__doc__ = {
        "and": "x and y: (x != 0) * (y != 0) != 0; bitwise on integers.",
        "or": "x or y: max(x != 0, y != 0) != 0; bitwise on integers.",
        "xor": "x xor y: (x != 0) != (y != 0); bitwise on integers.",
    }[kind]
    return lower_logical


for _kind in ("and", "or", "xor"):
    lowers(f"aten.logical_{_kind}.default", f"aten.bitwise_{_kind}.Tensor", f"aten.__{_kind}__.Tensor")(_logical(_kind))


@lowers("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar")
def where(b: Builder, call: Call) -> Value:
    """condition ? self : other, broadcast to the result shape (scalars become constants)."""
    cond, x, y = call.tensor("condition"), _operand(b, call, "self"), _operand(b, call, "other")
    dtype, dims = call.out_dtype, call.out_dims
    x, y = b.expand(b.cast(x, dtype), dims), b.expand(b.cast(y, dtype), dims)
    return b.emit("Where", [b.expand(cond, dims), x, y], dims, dtype)


@lowers("aten.softplus.default")
def softplus(b: Builder, call: Call) -> Value:
    """x where beta * x > threshold, else log1p(exp(beta * x)) / beta (torch's definition)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    beta, threshold = float(call.get("beta", 1)), float(call.get("threshold", 20))
    bx = _scaled(b, x, beta, opmath=True)
    soft = exact.log1p(b, b.unary("Exp", bx))
    soft = soft if beta == 1 else b.binary("Div", soft, b.opmath(beta, x.dtype))
    return _when(b, b.compare("Gt", bx, b.opmath(threshold, x.dtype)), x, soft)


@lowers("aten.log1p.default")
def log1p(b: Builder, call: Call) -> Value:
    """log(1 + x), accurate for small x."""
    return exact.log1p(b, b.cast(call.tensor("self"), call.out_dtype))


@lowers("aten.expm1.default")
def expm1(b: Builder, call: Call) -> Value:
    """exp(x) - 1, accurate for small x."""
    return exact.expm1(b, b.cast(call.tensor("self"), call.out_dtype))


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
    x, y = _operands(b, call)
    return b.binary("Max" if "maximum" in call.target else "Min", x, y, call.out_dtype)


@lowers("aten.fmax.default", "aten.fmin.default")
def fmax_fmin(b: Builder, call: Call) -> Value:
    """Elementwise max/min ignoring NaN: the other operand where one is NaN, NaN only where both are
    (torch.fmax/fmin, C's fmax/fmin); integers as maximum/minimum."""
    x, y = _operands(b, call)
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
    x, y = (b.cast(v, call.out_dtype) for v in _operands(b, call))
    zero = b.const(0.0, call.out_dtype)
    negative_zero = b.compare("Lt", b.binary("Div", b.const(1.0, call.out_dtype), y), zero)  # 1 / -0.0 = -inf
    negative = b.binary("Max", exact.flag(b, b.compare("Lt", y, zero)), exact.flag(b, negative_zero))  # or
    magnitude = b.expand(b.unary("Abs", x), call.out_dims)
    flip = b.compare("Ne", b.expand(negative, call.out_dims), b.const(0.0, "float32"))
    return b.emit("Where", [flip, b.unary("Neg", magnitude), magnitude], call.out_dims, call.out_dtype)


@lowers("aten.exp2.default")
def exp2(b: Builder, call: Call) -> Value:
    """2 ** x == exp(x * ln 2)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    return b.unary("Exp", b.binary("Mul", x, b.opmath(math.log(2.0), x.dtype)))


def _mod(trunc: bool):  # noqa: ANN202 - factory returning a lowering
    def lower_mod(b: Builder, call: Call) -> Value:
        x, y = _operand(b, call, "self"), _operand(b, call, "other")
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


def _float_in(b: Builder, call: Call) -> Value:
    return b.cast(call.tensor("self"), call.out_dtype)


@lowers("aten.tan.default")
def tan(b: Builder, call: Call) -> Value:
    """tan(x)."""
    return b.unary("Tan", _float_in(b, call))


@lowers("aten.atan.default")
def atan(b: Builder, call: Call) -> Value:
    """atan(x)."""
    return b.unary("Atan", _float_in(b, call))


@lowers("aten.asin.default")
def asin(b: Builder, call: Call) -> Value:
    """asin(x) == atan(x / sqrt(1 - x^2))."""
    x = _float_in(b, call)
    root = b.unary("Sqrt", b.binary("Sub", b.const(1.0, x.dtype), b.binary("Mul", x, x)))
    return b.unary("Atan", b.binary("Div", x, root))


@lowers("aten.acos.default")
def acos(b: Builder, call: Call) -> Value:
    """acos(x) == 2 atan(sqrt(1 - x) / sqrt(1 + x)) (finite at x = ±1)."""
    x = _float_in(b, call)
    one = b.const(1.0, x.dtype)
    ratio = b.binary("Div", b.unary("Sqrt", b.binary("Sub", one, x)), b.unary("Sqrt", b.binary("Add", one, x)))
    return b.binary("Mul", b.unary("Atan", ratio), b.const(2.0, x.dtype))


@lowers("aten.atan2.default")
def atan2(b: Builder, call: Call) -> Value:
    """atan2(self, other), the angle of (other, self)."""
    x, y = _operands(b, call)
    return b.binary("Atan2", x, y, call.out_dtype)


def _exp_pair(b: Builder, x: Value, op: str) -> Value:
    """(e^x op e^-x) / 2."""
    return b.binary("Mul", b.binary(op, b.unary("Exp", x), b.unary("Exp", b.unary("Neg", x))), b.const(0.5, x.dtype))


@lowers("aten.sinh.default")
def sinh(b: Builder, call: Call) -> Value:
    """(e^x - e^-x) / 2."""
    return _exp_pair(b, _float_in(b, call), "Sub")


@lowers("aten.cosh.default")
def cosh(b: Builder, call: Call) -> Value:
    """(e^x + e^-x) / 2."""
    return _exp_pair(b, _float_in(b, call), "Add")


@lowers("aten.log2.default", "aten.log10.default")
def log_base(b: Builder, call: Call) -> Value:
    """log(x) / log(base)."""
    x = _float_in(b, call)
    base = 2.0 if "log2" in call.target else 10.0
    return b.binary("Div", b.unary("Log", x), b.opmath(math.log(base), x.dtype))


@lowers("aten.trunc.default")
def trunc(b: Builder, call: Call) -> Value:
    """Round toward zero: sign(x) * floor(|x|)."""
    return b.trunc(_float_in(b, call))


def _check_round(call: Call) -> str | None:
    return None if call.get("decimals", 0) == 0 else f"round with decimals={call.get('decimals')} is not supported"


@lowers("aten.round.default", check=_check_round)
def round_(b: Builder, call: Call) -> Value:
    """Round half to even (torch's rule)."""
    return b.unary("Round", _float_in(b, call))


@lowers("aten.isnan.default")
def isnan(b: Builder, call: Call) -> Value:
    """x != x."""
    x = b.as_float(call.tensor("self"))
    return b.compare("Ne", x, x)


@lowers("aten.isinf.default")
def isinf(b: Builder, call: Call) -> Value:
    """|x| == inf (the infinity is a constant tensor, never an op field)."""
    x = b.as_float(call.tensor("self"))
    return b.compare("Eq", b.unary("Abs", x), b.const(float("inf"), x.dtype))


@lowers("aten.asinh.default")
def asinh(b: Builder, call: Call) -> Value:
    """log(x + sqrt(x^2 + 1))."""
    x = _float_in(b, call)
    root = b.unary("Sqrt", b.binary("Add", b.binary("Mul", x, x), b.const(1.0, x.dtype)))
    return b.unary("Log", b.binary("Add", x, root))


@lowers("aten.acosh.default")
def acosh(b: Builder, call: Call) -> Value:
    """log(x + sqrt(x^2 - 1))."""
    x = _float_in(b, call)
    root = b.unary("Sqrt", b.binary("Sub", b.binary("Mul", x, x), b.const(1.0, x.dtype)))
    return b.unary("Log", b.binary("Add", x, root))


@lowers("aten.atanh.default")
def atanh(b: Builder, call: Call) -> Value:
    """0.5 * log((1 + x) / (1 - x))."""
    x = _float_in(b, call)
    one = b.const(1.0, x.dtype)
    ratio = b.binary("Div", b.binary("Add", one, x), b.binary("Sub", one, x))
    return b.binary("Mul", b.unary("Log", ratio), b.const(0.5, x.dtype))


def _pos_neg(b: Builder, x: Value) -> tuple[Value, Value]:
    """(max(x, 0), min(x, 0)): one of them is exactly 0, so no compare/select is needed."""
    zero = b.const(0.0, x.dtype)
    return b.binary("Max", x, zero), b.binary("Min", x, zero)


@lowers("aten.leaky_relu.default")
def leaky_relu(b: Builder, call: Call) -> Value:
    """max(x, 0) + negative_slope * min(x, 0)."""
    pos, neg = _pos_neg(b, _float_in(b, call))
    return b.binary("Add", pos, _scaled(b, neg, call.get("negative_slope", 0.01), opmath=True))


@lowers("aten.hardtanh.default")
def hardtanh(b: Builder, call: Call) -> Value:
    """min(max(x, min_val), max_val)."""
    x = _float_in(b, call)
    x = b.binary("Max", x, b.const(call.get("min_val", -1.0), x.dtype))
    return b.binary("Min", x, b.const(call.get("max_val", 1.0), x.dtype))


@lowers("aten.elu.default")
def elu(b: Builder, call: Call) -> Value:
    """x * scale if x > 0 else expm1(x * input_scale) * (alpha * scale), as torch's CPU kernel computes it:
    RLX's Elu (x if x > 0 else expm1(x)) of min(x, 0) * input_scale for the negative part."""
    x = _float_in(b, call)
    alpha, scale, input_scale = (float(call.get(k, 1)) for k in ("alpha", "scale", "input_scale"))
    pos, neg = _pos_neg(b, x)
    neg = _scaled(b, b.unary("Elu", _scaled(b, neg, input_scale, opmath=True)), alpha * scale, opmath=True)
    return b.binary("Add", _scaled(b, pos, scale, opmath=True), neg)


# ── bitwise and/or/xor with a scalar, shifts (integers and bool) ───────

_BIT_OPS = {"and": "BitAnd", "or": "BitOr", "xor": "BitXor"}


def _bit_kind(target: str) -> str:
    """'and' for aten.bitwise_and.Scalar, aten.bitwise_and.Scalar_Tensor and aten.__and__.Scalar."""
    return target.split(".")[1].strip("_").removeprefix("bitwise_")


def _wrap(value: int, dtype: str) -> int:
    """A Python integer converted to integer dtype `dtype` as two's complement (uint8: -3 -> 253)."""
    if dtype == "bool":
        return int(bool(value))
    info = np.iinfo(np.dtype(dtype))
    value %= 1 << info.bits
    return value - (1 << info.bits) if value > info.max else value


def _int_operand(b: Builder, call: Call, name: str, dtype: str) -> Value:
    """An operand of an integer op as int64 holding its value in the result `dtype` (a tensor cast to
    `dtype`, a Python scalar converted to it first, as torch does)."""
    value = call[name]
    if isinstance(value, Value):
        return b.cast(b.cast(value, dtype), "int64")
    return b.const(_wrap(int(value), dtype), "int64")


def _check_bitwise_scalar(call: Call) -> str | None:
    scalars = [call[n] for n in ("self", "other") if not isinstance(call[n], Value)]
    if call.out_dtype in FLOAT_DTYPES or any(isinstance(v, float) for v in scalars):
        return f"{call.target} on floating point is not defined (torch rejects it too)"
    return None


@lowers(
    *(f"aten.{o}" for k in _BIT_OPS for o in (f"bitwise_{k}.Scalar", f"bitwise_{k}.Scalar_Tensor", f"__{k}__.Scalar")),
    check=_check_bitwise_scalar,
)
def bitwise_scalar(b: Builder, call: Call) -> Value:
    """Bitwise and/or/xor of a tensor and an integer or bool scalar (the scalar converted to the result dtype
    first, as torch does; RLX's int64 BitAnd/BitOr/BitXor, exact)."""
    dtype = call.out_dtype
    x, y = _int_operand(b, call, "self", dtype), _int_operand(b, call, "other", dtype)
    z = b.binary(_BIT_OPS[_bit_kind(call.target)], x, y)
    if dtype == "bool":
        return b.compare("Ne", z, b.const(0, "int64"))
    return b.cast(z, dtype)


def _check_shift(call: Call) -> str | None:
    if call.out_dtype not in INT_DTYPES:
        return f"{call.target} on {call.out_dtype} is not defined (torch rejects it too)"
    return None


def _shift(left: bool):  # noqa: ANN202 - factory returning a lowering
    def lower_shift(b: Builder, call: Call) -> Value:
        dtype, dims = call.out_dtype, call.out_dims
        bits = np.iinfo(np.dtype(dtype)).bits
        signed = dtype != "uint8"
        x = b.expand(_int_operand(b, call, "self", dtype), dims)
        s = b.expand(_int_operand(b, call, "other", dtype), dims)
        zero = b.const(0, "int64")
        inside = b.compare(
            "Ne",
            b.binary(
                "Mul",
                b.cast(b.compare("Ge", s, zero), "float32"),
                b.cast(b.compare("Lt", s, b.const(bits, "int64")), "float32"),
            ),
            b.const(0.0, "float32"),
        )
        if left:  # x * 2**s, wrapping; 2**s read from a table (2**63 is -2**63 in int64, the same bits)
            powers = b.const(np.array([_wrap(1 << k, "int64") for k in range(64)], dtype=np.int64), "int64")
            k = b.binary("Min", b.binary("Max", s, zero), b.const(bits - 1, "int64"))
            scaled = b.binary("Mul", x, b.emit({"Gather": {"axis": 0}}, [powers, k], dims, "int64"))
            return b.cast(_when(b, inside, scaled, b.expand(zero, dims)), dtype)
        # arithmetic: floor(x / 2**s); a shift past the width gives the sign (-1 or 0), or 0 unsigned
        k = _when(b, inside, s, b.expand(b.const(bits - 1, "int64"), dims))
        divisors = b.const(np.array([1 << j for j in range(63)], dtype=np.int64), "int64")
        low = b.binary("Min", k, b.const(62, "int64"))
        y = floor_divide(b, x, b.emit({"Gather": {"axis": 0}}, [divisors, low], dims, "int64"))
        if bits == 64:  # 2**63 does not fit: one more halving
            last = b.compare("Eq", k, b.const(63, "int64"))
            y = _when(b, last, floor_divide(b, y, b.const(2, "int64")), y)
        if not signed:
            y = _when(b, inside, y, b.expand(zero, dims))
        return b.cast(y, dtype)

    lower_shift.__name__ = "left_shift" if left else "right_shift"
    lower_shift.__doc__ = (
        "x << s: x * 2**s wrapping in the result dtype; 0 for s < 0 or s >= its width (torch's CPU rule)."
        if left
        else "x >> s: floor(x / 2**s) (arithmetic); for s < 0 or s >= the width, -1 or 0 by sign (0 for uint8)."
    )
    return lower_shift


for _left, _dir, _dunder in ((True, "left", "lshift"), (False, "right", "rshift")):
    _overloads = (
        f"aten.bitwise_{_dir}_shift.Tensor",
        f"aten.bitwise_{_dir}_shift.Tensor_Scalar",
        f"aten.bitwise_{_dir}_shift.Scalar_Tensor",
        f"aten.__{_dunder}__.Tensor",
        f"aten.__{_dunder}__.Scalar",
    )
    lowers(*_overloads, check=_check_shift)(_shift(_left))
