"""Workaround rules for elementwise ops (Compare, Binary, Clamp, Activation, Where) and the
rounding of float32 results to half precision (`round_to`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...dtypes import HALF_DTYPES, NARROW_DTYPES, NARROWER_INTS, compute_rlx, promote
from . import exact, hits
from .routing import rlx_of, via

if TYPE_CHECKING:
    from ..builder import Builder
    from ..call import Value

Rule = Callable[["Builder", Any, list["Value"], tuple[int, ...], str], "Value"]


def _compare(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, y = inputs
    common = promote(x.dtype, y.dtype)
    if common in NARROWER_INTS:  # compare-narrow-int
        common = "int64"
    x, y = b.cast(x, common), b.cast(y, common)
    if compute_rlx(common) == "F64":  # compare-f64
        return exact.compare_f64(b, op["Compare"], x, y)
    return b.raw(op, [x, y], dims, dtype)


def _nan_of(b: Builder, v: Value) -> Value | None:
    """v != v, or None when v cannot hold NaN (a NaN-free constant, a cast from integers or bool)."""
    if b.nan_free(v):
        return None
    return exact.is_nan(b, v)


def _keep_nan(b: Builder, result: Value, operands: list[Value]) -> Value:
    """NaN wherever an operand is NaN (torch's maximum/minimum/clamp/amax propagate NaN)."""
    for v in operands:
        nan = _nan_of(b, v)
        if nan is not None:
            result = b.emit(
                "Where", [b.expand(nan, result.dims), b.expand(v, result.dims), result], result.dims, result.dtype
            )
    return result


def _binary(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    name = op["Binary"]
    rlx = compute_rlx(dtype)
    if rlx in ("I32", "I16", "I8", "U8", "Bool"):  # binary-narrow-int
        return via(b, op, inputs, (0, 1), dims, dtype, "int64")
    if name == "Mod" and rlx == "I64":  # the kernel panics on a zero divisor: a - trunc(a / b) * b
        x, y = inputs
        return b.binary("Sub", x, b.binary("Mul", b.binary("Div", x, y), y))
    if name in ("Max", "Min") and rlx in ("F32", "F64"):  # binary-nan
        return _keep_nan(b, b.raw(op, inputs, dims, dtype, compensated="binary-nan"), inputs)
    return b.raw(op, inputs, dims, dtype)


def _clamp(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """Clamp as Max/Min against constants (so NaN propagates, and bounds may be infinite)."""
    (x,) = inputs
    y = b.binary("Max", x, b.const(op["Clamp"]["min"], x.dtype))
    return b.binary("Min", y, b.const(op["Clamp"]["max"], x.dtype))


_EXACT_INT_ACTIVATIONS = ("Abs", "Neg", "Sign", "Relu", "Floor", "Ceil", "Round", "Trunc")


def _activation(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    name = op["Activation"]
    if rlx_of(x) in (*hits.INTS, "Bool"):  # activation-int
        if name not in _EXACT_INT_ACTIVATIONS:
            return b.cast(b.emit(op, [b.cast(x, "float64")], dims, "float64"), dtype)
        wide = b.cast(x, "int64")
        zero = b.const(0, "int64")
        if name == "Neg":
            wide = b.binary("Sub", zero, wide)
        elif name == "Abs":
            wide = b.emit("Where", [b.compare("Lt", wide, zero), b.binary("Sub", zero, wide), wide], dims, "int64")
        elif name == "Sign":
            pos, neg = (b.cast(b.compare(c, wide, zero), "int64") for c in ("Gt", "Lt"))
            wide = b.binary("Sub", pos, neg)
        elif name == "Relu":
            wide = b.binary("Max", wide, zero)
        return b.cast(wide, dtype)
    if name == "Round":  # round-fold: RLX's kernels round half to even, its constant folding away from zero
        if rlx_of(x) == "F32" and constant_only(b, x):  # only float32 constants fold
            return exact.round_half_even(b, x)
        return b.raw(op, inputs, dims, dtype, compensated="round-fold")
    if name == "Exp" and rlx_of(x) == "F32":  # exp-range
        return _exp_full_range(b, op, x, dims, dtype)
    if name == "Elu":  # elu-expm1: RLX's Elu computes exp(x) - 1
        return b.emit("Where", [b.compare("Gt", x, b.const(0.0, x.dtype)), x, exact.expm1(b, x)], dims, dtype)
    return b.raw(op, inputs, dims, dtype)


# |x| up to which RLX's vector exp is right: it clamps x to [-87.3, 88.7] before its polynomial.
_EXP_SAFE = 87.0


def _exp_full_range(b: Builder, op: Any, x: Value, dims: tuple[int, ...], dtype: str) -> Value:
    """exp(x) on all of float32: RLX's kernel inside |x| <= 87, exp(x / 2) ** 2 outside it (IEEE gradual
    underflow to subnormals and 0, overflow to inf, as torch's exp), NaN kept (RLX's AVX exp maps NaN to
    ~1e-38)."""
    inside = b.compare("Le", b.unary("Abs", x), b.const(_EXP_SAFE, x.dtype))
    half = b.raw(op, [b.binary("Mul", x, b.const(0.5, x.dtype))], dims, dtype, compensated="exp-range")
    y = b.emit(
        "Where",
        [inside, b.raw(op, [x], dims, dtype, compensated="exp-range"), b.binary("Mul", half, half)],
        dims,
        dtype,
    )
    nan = _nan_of(b, x)
    return y if nan is None else b.emit("Where", [nan, x, y], dims, dtype)


def constant_only(b: Builder, x: Value) -> bool:
    """Whether x depends on constants only (no graph input, no parameter): a value RLX's constant folding
    may compute at compile time (`passes.constants.constant_ids`; a node without inputs counts too).
    Kept up to date as nodes are appended, so each node is looked at once per program."""
    state = b.memo(("constant-only",), lambda: {"seen": 0, "ids": set()})
    nodes = b.program.nodes
    if state["seen"] > len(nodes):  # the program was rewritten: start over
        state["seen"], state["ids"] = 0, set()
    found: set[str] = state["ids"]
    for node in nodes[state["seen"] :]:
        if all(i in found for i in node.inputs):
            found.add(node.id)
    state["seen"] = len(nodes)
    return x.id in found


def _where(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    if dtype in NARROW_DTYPES:  # where-narrow
        return via(b, op, inputs, (1, 2), dims, dtype, "float32")
    if dtype == "int32":
        return via(b, op, inputs, (1, 2), dims, dtype, "int64")
    return b.raw(op, inputs, dims, dtype)


# ── rounding to half precision ───────────────────────────────────────────────────────────────

# RLX number formats of the half dtypes, and the magnitude at which IEEE rounding overflows to inf
# (the largest finite value plus half an ulp: a tie there rounds to the even neighbour, infinity).
_HALF_FORMATS = {
    "float16": ({"exp_bits": 5, "man_bits": 10, "bias": 15, "max_normal": 65504.0}, 65520.0),
    "bfloat16": ({"exp_bits": 8, "man_bits": 7, "bias": 127, "max_normal": 3.3895313892515355e38}, 3.3961514e38),
}


def round_to(b: Builder, x: Value, dtype: str) -> Value:
    """x (computed as float32) rounded to `dtype`'s grid, nearest even, as torch stores a half tensor.

    RLX's RoundToFormat saturates at the format's largest value where IEEE rounding overflows to
    ±inf (round-to-format), so magnitudes at or past the overflow threshold become x * inf; and it
    flushes float32 subnormals to zero, so bfloat16's subnormals (|x| < 2**-126, multiples of
    2**-133) are rounded as |x| * 2**133 to an integer, half to even, scaled back (both exact) and
    given x's sign (a negative zero included)."""
    fmt, overflow = _HALF_FORMATS[dtype]
    x = b.cast(x, "float32") if x.dtype not in HALF_DTYPES else replace(x, dtype="float32")
    op = {"RoundToFormat": {"format": fmt, "scaling": "None"}}
    rounded = b.raw(op, [x], x.dims, "float32", compensated="round-to-format")
    magnitude = b.unary("Abs", x)
    big = b.compare("Ge", magnitude, b.const(overflow, "float32"))
    out = b.emit("Where", [big, b.binary("Mul", x, b.const(math.inf, "float32")), rounded], x.dims, "float32")
    if dtype == "bfloat16":
        scales = (2.0**66, 2.0**67)  # 2**133 in two exact steps: it is past float32's range
        # |x| * 2**133 < 2**7 here: round_small is exact, and the sign is applied below
        steps = exact.round_small(
            b, b.binary("Mul", b.binary("Mul", magnitude, b.const(scales[0], "float32")), b.const(scales[1], "float32"))
        )
        for scale in scales:
            steps = b.binary("Mul", steps, b.const(1.0 / scale, "float32"))
        negative = b.compare("Lt", b.unary("Recip", x), b.const(0.0, "float32"))  # -0.0 too (1 / -0 = -inf)
        steps = b.emit("Where", [negative, b.unary("Neg", steps), steps], x.dims, "float32")
        tiny = b.compare("Lt", magnitude, b.const(2.0**-126, "float32"))
        out = b.emit("Where", [tiny, steps, out], x.dims, "float32")
    return replace(out, dtype=dtype)


RULES: dict[str, Rule] = {
    "Compare": _compare,
    "Binary": _binary,
    "Clamp": _clamp,
    "Activation": _activation,
    "Where": _where,
}
