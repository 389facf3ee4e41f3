"""Comparisons, logical and bitwise ops (with tensors and with scalars), shifts: bool and integer results."""

from __future__ import annotations

import numpy as np

from ...dtypes import FLOAT_DTYPES, INT_DTYPES
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ._common import floor_divide, operand, when


def _compare(op: str):  # noqa: ANN202 - factory returning a lowering
    def lower_compare(b: Builder, call: Call) -> Value:
        x = call.tensor("self")
        y = call["other"]
        y = y if isinstance(y, Value) else b.const(y, x.dtype if x.dtype != "bool" else "float32")
        return b.compare(op, b.as_float(x) if x.dtype == "bool" else x, b.as_float(y) if y.dtype == "bool" else y)

    lower_compare.__name__ = f"compare_{op.lower()}"
    lower_compare.__doc__ = f"Elementwise comparison {op} (bool result)."
    return lower_compare


lowers("aten.eq.Tensor", "aten.eq.Scalar")(_compare("Eq"))
lowers("aten.ne.Tensor", "aten.ne.Scalar")(_compare("Ne"))
lowers("aten.lt.Tensor", "aten.lt.Scalar")(_compare("Lt"))
lowers("aten.le.Tensor", "aten.le.Scalar")(_compare("Le"))
lowers("aten.gt.Tensor", "aten.gt.Scalar")(_compare("Gt"))
lowers("aten.ge.Tensor", "aten.ge.Scalar")(_compare("Ge"))


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
        x, y = operand(b, call, "self"), operand(b, call, "other")
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


lowers("aten.logical_and.default", "aten.bitwise_and.Tensor", "aten.__and__.Tensor")(_logical("and"))
lowers("aten.logical_or.default", "aten.bitwise_or.Tensor", "aten.__or__.Tensor")(_logical("or"))
lowers("aten.logical_xor.default", "aten.bitwise_xor.Tensor", "aten.__xor__.Tensor")(_logical("xor"))


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
    "aten.bitwise_and.Scalar",
    "aten.bitwise_and.Scalar_Tensor",
    "aten.__and__.Scalar",
    "aten.bitwise_or.Scalar",
    "aten.bitwise_or.Scalar_Tensor",
    "aten.__or__.Scalar",
    "aten.bitwise_xor.Scalar",
    "aten.bitwise_xor.Scalar_Tensor",
    "aten.__xor__.Scalar",
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
            return b.cast(when(b, inside, scaled, b.expand(zero, dims)), dtype)
        # arithmetic: floor(x / 2**s); a shift past the width gives the sign (-1 or 0), or 0 unsigned
        k = when(b, inside, s, b.expand(b.const(bits - 1, "int64"), dims))
        divisors = b.const(np.array([1 << j for j in range(63)], dtype=np.int64), "int64")
        low = b.binary("Min", k, b.const(62, "int64"))
        y = floor_divide(b, x, b.emit({"Gather": {"axis": 0}}, [divisors, low], dims, "int64"))
        if bits == 64:  # 2**63 does not fit: one more halving
            last = b.compare("Eq", k, b.const(63, "int64"))
            y = when(b, last, floor_divide(b, y, b.const(2, "int64")), y)
        if not signed:
            y = when(b, inside, y, b.expand(zero, dims))
        return b.cast(y, dtype)

    lower_shift.__name__ = "left_shift" if left else "right_shift"
    lower_shift.__doc__ = (
        "x << s: x * 2**s wrapping in the result dtype; 0 for s < 0 or s >= its width (torch's CPU rule)."
        if left
        else "x >> s: floor(x / 2**s) (arithmetic); for s < 0 or s >= the width, -1 or 0 by sign (0 for uint8)."
    )
    return lower_shift


lowers(
    "aten.bitwise_left_shift.Tensor",
    "aten.bitwise_left_shift.Tensor_Scalar",
    "aten.bitwise_left_shift.Scalar_Tensor",
    "aten.__lshift__.Tensor",
    "aten.__lshift__.Scalar",
    check=_check_shift,
)(_shift(left=True))
lowers(
    "aten.bitwise_right_shift.Tensor",
    "aten.bitwise_right_shift.Tensor_Scalar",
    "aten.bitwise_right_shift.Scalar_Tensor",
    "aten.__rshift__.Tensor",
    "aten.__rshift__.Scalar",
    check=_check_shift,
)(_shift(left=False))
