"""Elementwise ops: unary math, activations, binary arithmetic / comparison / logic / bit ops, Cast, Where.

Computations stay in the ONNX dtype. uint16 / uint32 (which torch has few kernels for) are computed in
int64 and cast back where that is exact (arithmetic wraps modulo 2**16 / 2**32, comparisons, bit ops)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles, torch_dtype

T = torch.Tensor
_NARROW_UNSIGNED = (torch.uint16, torch.uint32)


def _wide(t: T) -> T:
    return t.to(torch.int64) if t.dtype in _NARROW_UNSIGNED else t


def _keep(f: Callable[..., T]) -> Fn:
    """f over widened inputs, cast back to the first input's dtype (arithmetic that wraps)."""

    def fn(*xs: T | None) -> T:
        first = next(x for x in xs if x is not None)
        out = f(*[None if x is None else _wide(x) for x in xs])
        return out.to(first.dtype) if first.dtype in _NARROW_UNSIGNED else out

    return fn


_UNARY: dict[str, Callable[[T], T]] = {
    "Abs": torch.abs,
    "Neg": torch.neg,
    "Exp": torch.exp,
    "Log": torch.log,
    "Sqrt": torch.sqrt,
    "Reciprocal": torch.reciprocal,
    "Sin": torch.sin,
    "Cos": torch.cos,
    "Tan": torch.tan,
    "Asin": torch.asin,
    "Acos": torch.acos,
    "Atan": torch.atan,
    "Sinh": torch.sinh,
    "Cosh": torch.cosh,
    "Asinh": torch.asinh,
    "Acosh": torch.acosh,
    "Atanh": torch.atanh,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Erf": torch.erf,
    "Ceil": torch.ceil,
    "Floor": torch.floor,
    "Round": torch.round,  # half to even, as ONNX
    "Sign": torch.sign,
    "Not": torch.logical_not,
    "IsNaN": torch.isnan,
    "Relu": lambda x: torch.clamp(x, min=0),
    "Softsign": lambda x: x / (1 + torch.abs(x)),
    "Softplus": lambda x: torch.log1p(torch.exp(x)),
    "Mish": lambda x: x * torch.tanh(torch.log1p(torch.exp(x))),
    "HardSwish": lambda x: x * torch.clamp(x / 6 + 0.5, 0, 1),
    "Identity": lambda x: x,
    "BitwiseNot": torch.bitwise_not,
}


@handles(*_UNARY)
def unary(ctx: NodeCtx) -> Fn:
    """One-input elementwise ops, dtype preserved (bool for Not / IsNaN)."""
    f = _UNARY[ctx.op]
    return _keep(f) if ctx.op in ("Abs", "Neg", "Sign", "Relu", "BitwiseNot", "Identity") else f


@handles("Elu", "Selu", "Celu", "LeakyRelu", "HardSigmoid", "ThresholdedRelu", "Gelu", "Swish")
def activation(ctx: NodeCtx) -> Fn:
    """Activations with float attributes (ONNX defaults)."""
    op = ctx.op
    if op == "Elu":
        a = ctx.attr("alpha", 1.0)
        return lambda x: torch.where(x > 0, x, a * torch.expm1(x))
    if op == "Selu":
        a, g = ctx.attr("alpha", 1.67326319217681884765625), ctx.attr("gamma", 1.05070102214813232421875)
        return lambda x: g * torch.where(x > 0, x, a * torch.expm1(x))
    if op == "Celu":
        a = ctx.attr("alpha", 1.0)
        return lambda x: torch.clamp(x, min=0) + torch.clamp(a * torch.expm1(x / a), max=0)
    if op == "LeakyRelu":
        a = ctx.attr("alpha", 0.01)
        return lambda x: torch.where(x >= 0, x, a * x)
    if op == "HardSigmoid":
        a, b = ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5)
        return lambda x: torch.clamp(a * x + b, 0, 1)
    if op == "ThresholdedRelu":
        a = ctx.attr("alpha", 1.0)
        return lambda x: torch.where(x > a, x, torch.zeros_like(x))
    if op == "Gelu":
        approx = ctx.attr("approximate", "none")
        return lambda x: F.gelu(x, approximate=approx)
    a = ctx.attr("alpha", 1.0)
    return lambda x: x * torch.sigmoid(a * x)


@handles("Shrink")
def shrink(ctx: NodeCtx) -> Fn:
    """y = x - bias (x > lambd), x + bias (x < -lambd), else 0; in x's dtype."""
    bias, lambd = ctx.attr("bias", 0.0), ctx.attr("lambd", 0.5)

    def fn(x: T) -> T:
        xf = x.to(torch.float64) if not x.is_floating_point() else x
        y = torch.where(xf < -lambd, xf + bias, torch.where(xf > lambd, xf - bias, torch.zeros_like(xf)))
        return y.to(x.dtype)

    return fn


@handles("PRelu")
def prelu(ctx: NodeCtx) -> Fn:
    """y = slope * x where x < 0 (slope broadcast to x)."""
    return lambda x, s: torch.where(x < 0, x * s, x)


@handles("IsInf")
def isinf(ctx: NodeCtx) -> Fn:
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    if pos and neg:
        return torch.isinf
    if pos:
        return torch.isposinf
    if neg:
        return torch.isneginf
    return lambda x: torch.zeros_like(x, dtype=torch.bool)


def _div(a: T, b: T) -> T:
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")


_BINARY: dict[str, Callable[[T, T], T]] = {
    "Add": torch.add,
    "Sub": torch.sub,
    "Mul": torch.mul,
    "Div": _div,
    "BitwiseAnd": torch.bitwise_and,
    "BitwiseOr": torch.bitwise_or,
    "BitwiseXor": torch.bitwise_xor,
}
_COMPARE: dict[str, Callable[[T, T], T]] = {
    "Equal": torch.eq,
    "Greater": torch.gt,
    "Less": torch.lt,
    "GreaterOrEqual": torch.ge,
    "LessOrEqual": torch.le,
    "And": torch.logical_and,
    "Or": torch.logical_or,
    "Xor": torch.logical_xor,
}


@handles(*_BINARY)
def binary(ctx: NodeCtx) -> Fn:
    """Two-input arithmetic with numpy broadcasting, in the inputs' dtype (integer Div truncates)."""
    return _keep(_BINARY[ctx.op])


@handles(*_COMPARE)
def compare(ctx: NodeCtx) -> Fn:
    """Comparisons and logic, bool out."""
    f = _COMPARE[ctx.op]
    return lambda a, b: f(_wide(a), _wide(b))


@handles("Mod")
def mod(ctx: NodeCtx) -> Fn:
    """fmod=1: C fmod (sign of the dividend); fmod=0: sign of the divisor (Python / numpy mod)."""
    f = torch.fmod if ctx.attr("fmod", 0) else torch.remainder
    return _keep(f)


@handles("Pow")
def power(ctx: NodeCtx) -> Fn:
    """X ** Y in X's dtype (Y may be of another type)."""

    def fn(x: T, y: T) -> T:
        if x.is_floating_point():
            return torch.pow(x, y.to(x.dtype))
        if y.is_floating_point():
            return torch.pow(x.to(torch.float64), y.to(torch.float64)).to(x.dtype)
        return torch.pow(_wide(x), _wide(y)).to(x.dtype)

    return fn


@handles("BitShift")
def bitshift(ctx: NodeCtx) -> Fn:
    """Unsigned shifts; uint16 / uint32 shifted in int64 and wrapped back."""
    left = ctx.attr("direction", "") == "LEFT"
    if ctx.dtype(0) == torch.uint64:
        raise ctx.fail("BitShift on uint64: torch has no exact uint64 shift")
    f = torch.bitwise_left_shift if left else torch.bitwise_right_shift
    return _keep(f)


@handles("Max", "Min", "Sum", "Mean")
def variadic(ctx: NodeCtx) -> Fn:
    """Elementwise over any number of broadcast inputs (NaN propagates in Max / Min)."""
    op = ctx.op
    pair = {"Max": torch.maximum, "Min": torch.minimum}.get(op, torch.add)

    def fn(*xs: T) -> T:
        out = xs[0]
        for x in xs[1:]:
            out = pair(out, x)
        if len(xs) == 1:
            out = out.expand(xs[0].shape).clone()
        return out / len(xs) if op == "Mean" else out

    return _keep(fn)


@handles("Clip")
def clip(ctx: NodeCtx) -> Fn:
    """Clamp to [min, max] (attributes before opset 11, optional inputs from 11)."""
    if ctx.opset < 11:
        lo, hi = ctx.attr("min", -math.inf), ctx.attr("max", math.inf)
        return lambda x: torch.clamp(x, lo, hi)

    def fn(x: T, lo: T | None = None, hi: T | None = None) -> T:
        y = _wide(x)
        if lo is not None:
            y = torch.maximum(y, _wide(lo).reshape(()))
        if hi is not None:
            y = torch.minimum(y, _wide(hi).reshape(()))
        return y.to(x.dtype)

    return fn


@handles("Where")
def where(ctx: NodeCtx) -> Fn:
    return _keep(lambda c, a, b: torch.where(c, a, b)) if ctx.dtype(1) in _NARROW_UNSIGNED else torch.where


@handles("Cast", "CastLike")
def cast(ctx: NodeCtx) -> Fn:
    """Cast to `to` (CastLike: input 1's dtype); float -> int truncates, as torch does."""
    if ctx.op == "CastLike":
        dt = ctx.dtype(1)
        ctx.unused(1)
    else:
        dt = torch_dtype(ctx.attr("to"), "Cast target ")
    src = ctx.dtype(0)
    if dt in (torch.uint64,) and src.is_floating_point:
        raise ctx.fail("Cast float -> uint64: torch's conversion is not exact above 2**63")
    return lambda x, *_: x.to(dt)
