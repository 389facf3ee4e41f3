"""Parity samples of the logical ops (lower/ops/logical.py): comparisons in every dtype (float64 NaN,
equal and opposite infinities and 1e-300 gaps; int32/int16), logical and/or/xor/not, bitwise
and/or/xor/not in every integer dtype at its extremes (tensor, scalar and scalar-tensor forms), shifts by
torch's CPU rule (0 or the sign past the width or for negative amounts; arithmetic right shift), and the
in-place forms.

In-place calls (`x &= y`) stay in-place ops at the `aten` level, where the automatic decomposition fallback
functionalizes them (writes through views included) into the functional ops lowered here; `core`
functionalizes them at export.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _samples import INTS, LEVELS, M34, Fn, Sample, check_op_sample, i8, ints, of_inputs, r, sample_ids, wide


def full_int32(n: int) -> torch.Tensor:
    return torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32)


def _bitwise(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (torch.bitwise_and(a, 0x5A), torch.bitwise_or(a, 6), torch.bitwise_xor(a, -3), torch.bitwise_and(a, -8))


def extremes(dtype: torch.dtype) -> torch.Tensor:
    """The dtype's min and max, small values of both signs and zero."""
    if dtype == torch.bool:
        return torch.tensor([[True, False, True], [False, False, True]])
    info = torch.iinfo(dtype)
    small = (-3, -1) if info.min < 0 else (3, 1)
    return torch.tensor([[info.min, *small], [0, 5, info.max]], dtype=torch.int64).to(dtype)


def shift_amounts(dtype: torch.dtype) -> torch.Tensor:
    """0, in-range and out-of-range shifts (past the width; 255 is -1 converted to uint8)."""
    top = 255 if dtype == torch.uint8 else 63
    return torch.tensor([[0, 1, 3], [7, 8, top]]).to(dtype)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _bitwise_tensors(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return a & b, a | b, a ^ b, ~a, torch.bitwise_and(a, b.flip(0)), torch.bitwise_xor(b, a)


def _bitwise_scalars(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Tensor-scalar (`__and__.Scalar` at aten, `bitwise_and.Scalar` at core) and scalar-tensor forms."""
    signed = a.dtype not in (torch.uint8, torch.bool)
    return (
        a & 5,
        a | 6,
        a ^ 3,
        torch.bitwise_and(3, a),
        torch.bitwise_or(-2 if signed else 2, a),
        torch.bitwise_xor(1, a),
    )


def _shifts(a: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        a << s,
        a >> s,
        a << 2,
        a >> 1,
        torch.bitwise_left_shift(a, s.flip(0)),
        torch.bitwise_right_shift(a, s.flip(1)),
        torch.bitwise_left_shift(a, 7),
        torch.bitwise_right_shift(a, 7),
    )


def _bitwise_in_place(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c = a.clone()
    c &= b
    c |= 12
    c ^= b
    c |= b
    c &= -5
    c ^= 9
    c.bitwise_and_(b)
    c.bitwise_or_(3)
    c.bitwise_xor_(b)
    d = a.clone()
    d.bitwise_and_(-4)
    d.bitwise_or_(b)
    d.bitwise_xor_(6)
    d.bitwise_not_()
    return c, d


def _shifts_in_place(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c <<= s
    c >>= 1
    c <<= 3
    c >>= s
    c.bitwise_left_shift_(2)
    c.bitwise_right_shift_(s)
    c.bitwise_left_shift_(s)
    c.bitwise_right_shift_(1)
    return c


def _logical_in_place(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    c = p.clone()
    c.logical_and_(q)
    c.logical_or_(p)
    c.logical_xor_(q)
    c.logical_not_()
    return c


def _in_place_through_views(a: torch.Tensor, f: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """In-place writes into a view (`c[0] ^= 5`) change the base tensor."""
    c, d = a.clone(), f.clone()
    c[0].bitwise_xor_(5)
    c[1:] <<= 2
    d[0].masked_fill_(m[0], 1.0)
    return c, d


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    (
        "logical_and_or",
        Fn(lambda m, a, b: ((a > 0) & (b > 0)).float() + ((a > 0) | (b < 0)).float()),
        (r(4, 4), r(4, 4)),
    ),
    (
        "compare_all",
        Fn(lambda m, a, b: torch.stack([a >= b, a <= b, a < b, a != b, a >= 0.5, a != 0.5]).float()),
        (r(3, 4), r(4)),
    ),
    (
        # float64 compares through the sign of a - b; NaN, equal and opposite infinities, 1e-300 gaps
        "compare_float64_nan_inf",
        Fn(lambda m, a, b: torch.stack([a > b, a == b, a <= b, a != b, a < b, a >= b])),
        (
            torch.tensor([1.0, 2.0, 1e-300, float("nan"), float("inf"), float("inf"), -1.0, 5.0], dtype=torch.float64),
            torch.tensor(
                [1.0, 2.5, 0.0, 1.0, float("inf"), float("-inf"), float("nan"), 5.0 + 1e-12], dtype=torch.float64
            ),
        ),
    ),
    (
        "compare_int32_int16",
        Fn(lambda m, a, b, c: torch.stack([a > b, a == b, a <= b, c != 3, c >= c.flip(0)])),
        (
            torch.tensor([1, 2, -7, 100000, 5, 0], dtype=torch.int32),
            torch.tensor([1, 3, -7, 99999, -5, 0], dtype=torch.int32),
            torch.tensor([3, -2, 7, 3, 0, 300], dtype=torch.int16),
        ),
    ),
    # bitwise and/or/xor with a scalar
    ("bitwise_scalar_int64", of_inputs(lambda a: (*_bitwise(a), torch.bitwise_xor(a, 0x5A5A5A5A5A))), (wide(4, 5),)),
    (
        "bitwise_scalar_int32_int8",
        of_inputs(lambda a, b: (*_bitwise(a), *_bitwise(b))),
        (
            full_int32(6),
            ints(6, dtype=torch.int8),
        ),
    ),
    ("bitwise_scalar_uint8", of_inputs(_bitwise), (torch.randint(0, 256, (7,), dtype=torch.uint8),)),
    (
        "bitwise_scalar_bool",
        of_inputs(
            lambda a: (
                torch.bitwise_and(a, True),
                torch.bitwise_or(a, False),
                torch.bitwise_xor(a, True),
                torch.bitwise_and(a, False),
                torch.bitwise_or(a, 2),
            )
        ),
        (torch.rand(2, 3) > 0.5,),
    ),
    (
        "bitwise_ops_integers",
        of_inputs(lambda a, b, c: (a & b, a | b, a ^ b, ~a, torch.bitwise_xor(c, c.flip(0)), ~c, a.any(), c.all(0))),
        (
            torch.tensor([2**40 + 5, -7, 12, 0]),
            torch.tensor([3, 2**33 - 1, -12, 9]),
            torch.tensor([200, 7, 0], dtype=torch.uint8),
        ),
    ),
    # integer/bool bitwise ops: every dtype, its extremes, tensor/scalar/scalar-tensor forms
    *(
        (f"bitwise_tensors_{_name(dt)}", of_inputs(_bitwise_tensors), (extremes(dt), extremes(dt).flip(1)))
        for dt in (*INTS, torch.bool)
    ),
    *((f"bitwise_scalars_{_name(dt)}", of_inputs(_bitwise_scalars), (extremes(dt),)) for dt in (*INTS, torch.bool)),
    # shifts: torch's CPU rule (0 / sign past the width or for negative shifts; arithmetic right shift)
    *((f"shifts_{_name(dt)}", of_inputs(_shifts), (extremes(dt), shift_amounts(dt))) for dt in INTS),
    (
        "shifts_int64_wide_and_negative",
        of_inputs(
            lambda a, s: (
                a << s,
                a >> s,
                torch.bitwise_left_shift(3, s),
                torch.bitwise_right_shift(-100, s),
                torch.bitwise_right_shift(a, 63),
            )
        ),
        (
            torch.tensor([-100, -1, 0, 1, 7, 100, -(2**62), 2**62, -(2**63), 5]),
            torch.tensor([0, 1, 3, 62, 63, 64, 65, 100, -1, -3]),
        ),
    ),
    (
        "shifts_mixed_dtypes",
        of_inputs(lambda a, s: (a << s, a >> s)),
        (torch.tensor([-100, 7, 127], dtype=torch.int8), torch.tensor([1, 9, 3])),
    ),
    # in-place forms (functionalized by the aten-level fallback), also through a view
    (
        "bitwise_in_place_int64",
        of_inputs(_bitwise_in_place),
        (torch.randint(-100, 100, (3, 4)), torch.randint(-100, 100, (3, 4))),
    ),
    ("bitwise_in_place_int8", of_inputs(_bitwise_in_place), (i8(3, 4), i8(3, 4))),
    (
        "shifts_in_place_int32",
        of_inputs(_shifts_in_place),
        (torch.randint(-100, 100, (3, 4), dtype=torch.int32), torch.randint(0, 9, (3, 4), dtype=torch.int32)),
    ),
    ("logical_in_place", of_inputs(_logical_in_place), (r(3, 4) > 0, r(3, 4) > 0)),
    ("in_place_through_a_view", of_inputs(_in_place_through_views), (torch.randint(0, 9, (3, 4)), r(3, 4), M34)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
