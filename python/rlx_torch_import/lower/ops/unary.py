"""Elementwise functions of one tensor: activations, exponentials and logarithms, trigonometry, rounding."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import FLOAT_DTYPES, HALF_DTYPES
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ..rlx import exact
from ._common import scaled, when


def _unary(activation: str):  # noqa: ANN202 - factory returning a lowering
    def lower_unary(b: Builder, call: Call) -> Value:
        return b.unary(activation, b.cast(call.tensor("self"), call.out_dtype))

    lower_unary.__name__ = f"unary_{activation.lower()}"
    lower_unary.__doc__ = f"Elementwise {activation}."
    return lower_unary


lowers("aten.relu.default", kind="movement")(_unary("Relu"))
lowers("aten.silu.default")(_unary("Silu"))
lowers("aten.sigmoid.default")(_unary("Sigmoid"))
lowers("aten.tanh.default")(_unary("Tanh"))
lowers("aten.exp.default")(_unary("Exp"))
lowers("aten.log.default")(_unary("Log"))
lowers("aten.sqrt.default")(_unary("Sqrt"))
lowers("aten.rsqrt.default")(_unary("Rsqrt"))
lowers("aten.neg.default", kind="exact")(_unary("Neg"))
lowers("aten.abs.default", kind="exact")(_unary("Abs"))
lowers("aten.sin.default")(_unary("Sin"))
lowers("aten.cos.default")(_unary("Cos"))
lowers("aten.erf.default")(_unary("Erf"))
lowers("aten.reciprocal.default")(_unary("Recip"))
lowers("aten.hardswish.default")(_unary("HardSwish"))
lowers("aten.hardsigmoid.default")(_unary("HardSigmoid"))
lowers("aten.mish.default")(_unary("Mish"))


def _check_gelu(call: Call) -> str | None:
    approx = call.get("approximate", "none")
    return None if approx in ("none", "tanh") else f"approximate={approx!r} is not supported"


@lowers("aten.gelu.default", check=_check_gelu)
def gelu(b: Builder, call: Call) -> Value:
    """Exact (erf) or tanh-approximated GELU."""
    kind = "GeluApprox" if call.get("approximate", "none") == "tanh" else "Gelu"
    return b.unary(kind, call.tensor("self"))


@lowers("aten.softplus.default")
def softplus(b: Builder, call: Call) -> Value:
    """x where beta * x > threshold, else log1p(exp(beta * x)) / beta (torch's definition)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    beta, threshold = float(call.get("beta", 1)), float(call.get("threshold", 20))
    bx = scaled(b, x, beta, opmath=True)
    soft = exact.log1p(b, b.unary("Exp", bx))
    soft = soft if beta == 1 else b.binary("Div", soft, b.opmath(beta, x.dtype))
    return when(b, b.compare("Gt", bx, b.opmath(threshold, x.dtype)), x, soft)


@lowers("aten.log1p.default")
def log1p(b: Builder, call: Call) -> Value:
    """log(1 + x), accurate for small x."""
    return exact.log1p(b, b.cast(call.tensor("self"), call.out_dtype))


@lowers("aten.expm1.default")
def expm1(b: Builder, call: Call) -> Value:
    """exp(x) - 1, accurate for small x."""
    return exact.expm1(b, b.cast(call.tensor("self"), call.out_dtype))


@lowers("aten.exp2.default")
def exp2(b: Builder, call: Call) -> Value:
    """2 ** x == exp(x * ln 2)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    return b.unary("Exp", b.binary("Mul", x, b.opmath(math.log(2.0), x.dtype)))


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


# ── rounding to integers, sign: value-exact, bit for bit over each dtype's whole range ──────────


def _as_held(b: Builder, call: Call) -> Value:
    """The input in the result dtype as torch holds it: a float16/bfloat16 value on its dtype's grid. The
    layer computes halves in float32 and rounds them at casts and outputs only, and a rounding op must
    see torch's value (round(2.5004) is 3, round of its float16 2.5 is 2). Inputs and weights are on it."""
    x = _float_in(b, call)
    if x.dtype not in HALF_DTYPES or any(v.name == x.id for v in (*b.program.inputs, *b.program.params)):
        return x
    return b.round_to(x, x.dtype)


def _rounding(activation: str):  # noqa: ANN202 - factory returning a lowering
    def lower_rounding(b: Builder, call: Call) -> Value:
        return b.unary(activation, _as_held(b, call))

    lower_rounding.__name__ = f"rounding_{activation.lower()}"
    lower_rounding.__doc__ = (
        f"Elementwise {activation}, bit for bit over the whole range (RLX's kernel and constant folding).\n"
        "Signed zeros, ±inf and NaN included; sign(±0) = +0 and sign(NaN) = 0, as torch."
    )
    return lower_rounding


lowers("aten.floor.default", kind="exact")(_rounding("Floor"))
lowers("aten.ceil.default", kind="exact")(_rounding("Ceil"))
lowers("aten.sign.default", "aten.sgn.default", kind="exact")(_rounding("Sign"))


@lowers("aten.trunc.default", "aten.fix.default", kind="exact")
def trunc(b: Builder, call: Call) -> Value:
    """Round toward zero (torch.trunc, torch.fix): ceil(x) for x < 0, else floor(x).

    trunc(-0.7) = -0.0; -0.0, ±inf and NaN pass through."""
    return b.trunc(_as_held(b, call))


@lowers("aten.frac.default", kind="exact")
def frac(b: Builder, call: Call) -> Value:
    """x - trunc(x), as torch's kernel computes it (exact in every float dtype).

    frac(±inf) = NaN, frac(-2.0) = +0.0."""
    x = _as_held(b, call)
    return b.binary("Sub", x, b.trunc(x))


@lowers("aten.round.default", "aten.round.decimals", "aten.special_round.default", kind="exact")
def round_(b: Builder, call: Call) -> Value:
    """Round half to even (torch's rule), bit for bit; `decimals` as torch's CPU kernel computes it.

    RLX's Round (the workaround layer rebuilds it where RLX would fold it, `round-fold`). With `decimals`
    d != 0, torch's `round_decimals_kernel` operation for operation in the op-math dtype (float32 for
    float16/bfloat16, the result rounded back): nearbyint(x * p) / p for d > 0, nearbyint(x / p) * p for
    d < 0, p = 10**|d| as C's pow gives it, converted to the op-math dtype (inf past its range: the result
    is then NaN or ±0, as torch's)."""
    x = _as_held(b, call)
    decimals = int(call.get("decimals", 0))
    if decimals == 0 or x.dtype not in FLOAT_DTYPES:  # torch rounds integer tensors to themselves
        return b.unary("Round", x)
    opmath = "float64" if x.dtype == "float64" else "float32"
    with np.errstate(over="ignore"):
        power = np.float64(10.0) ** abs(decimals)
        p = b.const(power if opmath == "float64" else np.float32(power), opmath)
    wide = b.cast(x, opmath)
    if decimals > 0:
        y = b.binary("Div", b.unary("Round", b.binary("Mul", wide, p)), p)
    else:
        y = b.binary("Mul", b.unary("Round", b.binary("Div", wide, p)), p)
    return b.cast(y, x.dtype)


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
    return b.binary("Add", pos, scaled(b, neg, call.get("negative_slope", 0.01), opmath=True))


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
    neg = scaled(b, b.unary("Elu", scaled(b, neg, input_scale, opmath=True)), alpha * scale, opmath=True)
    return b.binary("Add", scaled(b, pos, scale, opmath=True), neg)
