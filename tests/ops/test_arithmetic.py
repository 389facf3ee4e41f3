"""Parity samples of the arithmetic ops (lower/ops/arithmetic.py): add/sub/mul/div with broadcasting and
Python scalars, division and remainder modes at rounding boundaries (1.0 // 0.1 == 9, zero and infinite
divisors, int64 over its whole range) in every dtype, pow (float, and integer pow wrapping, where negative
exponents give 1, +-1 or 0 as torch's powi does), clamp/where/maximum/minimum, fmax/fmin/copysign in every
dtype, atan2, native dtypes at the graph boundary (no silent downcast), and Python-scalar operands of half
tensors (torch's half kernels read some in float32 and round others to the dtype first).

In-place calls (`x.pow_(e)`) stay in-place ops at the `aten` level, where the automatic decomposition
fallback functionalizes them into the functional ops lowered here; `core` functionalizes them at export.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import (
    FLOATS,
    INF,
    INTS,
    LEVELS,
    NAN,
    A,
    Fn,
    Sample,
    check_op_sample,
    check_op_sample_at_high,
    ints,
    of_inputs,
    r,
    ri,
    sample_ids,
)


def _div_family(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        torch.floor_divide(a, b),
        torch.div(a, b, rounding_mode="floor"),
        torch.div(a, b, rounding_mode="trunc"),
        torch.remainder(a, b),
        torch.fmod(a, b),
    )


# Rounding boundaries (1.0 // 0.1 == 9), negative operands, zero divisors (inf/nan), infinities.
_NUM = torch.tensor([1.0, -1.0, 1.0, -1.0, 5.5, -5.5, 0.0, 3.0, -3.0, INF, -7.0, 7.25, 0.3])

_DEN = torch.tensor([0.1, 0.1, -0.1, -0.1, 2.0, 2.0, 0.0, 0.0, 0.0, 2.0, INF, -0.5, 0.1])

_BIG = torch.tensor([2**53 + 1, -(2**53) - 3, 2**62 + 7, -7, 7, -7, 7, 0, -(2**63) + 5])

_BIG_DEN = torch.tensor([1, 2, 3, 2, -2, -2, 2, 5, 7])

_SMALL = torch.tensor([100, -100, 77, -77, 5, -5, 127, -128])

_SMALL_DEN = torch.tensor([7, 7, -7, -7, 3, 3, 2, 3])


def _half_scalars(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Python-scalar operands torch's half kernels read in float32 (mul, div, floor/trunc division, the
    parameters of leaky_relu/elu/softplus/lerp) and those it rounds to the dtype first (add, remainder)."""
    return (
        x // 0.1,
        x // 0.3,
        torch.div(x, 0.1, rounding_mode="trunc"),
        x * 0.1,
        x / 0.3,
        x + 0.1,
        x % 0.3,
        F.leaky_relu(-x, 0.1),
        F.elu(-x / 8, 0.3),
        F.softplus(x / 8, beta=0.7, threshold=1.1),
        torch.lerp(x, 2 * x + 1, 0.3),
    )


_HALF_X = torch.cat([torch.arange(1.0, 41.0), torch.arange(-40.0, 0.0) / 7])

# remainder by +-inf: x where the signs agree, +-inf where they differ (torch's fmod + b), NaN never.
_INF_DEN = torch.tensor([INF, INF, INF, -INF, 2.0, -INF, -INF, INF])

_INF_NUM = torch.tensor([1.0, -1.0, 0.0, 3.0, 5.0, -2.5, 0.0, INF])


def _pairs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two operands with ties, signed zeros (floats), NaN on either side and both (floats)."""
    if dtype.is_floating_point:
        a = torch.tensor([[1.0, NAN, NAN, -0.0, 0.0, -INF, 3.5], [2.0, -1.0, INF, 0.0, -0.0, 1.0, -2.0]])
        b = torch.tensor([[1.0, 2.0, NAN, 0.0, -0.0, -1.0, NAN], [-3.0, NAN, 1.0, -0.0, 0.0, INF, -2.0]])
        return a.to(dtype), b.to(dtype)
    if dtype == torch.uint8:
        return torch.tensor([[0, 7, 200, 3], [255, 1, 9, 9]], dtype=dtype), torch.tensor(
            [[5, 7, 100, 0], [2, 1, 250, 8]], dtype=dtype
        )
    gen = torch.Generator().manual_seed(2)
    return torch.randint(-100, 100, (2, 5), dtype=dtype, generator=gen), torch.randint(
        -100, 100, (2, 5), dtype=dtype, generator=gen
    )


def _signs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """copysign operands: magnitudes of both signs and zeros; signs from negatives, -0.0, +0.0, infinities."""
    if dtype.is_floating_point:
        a = torch.tensor([1.5, -2.0, 0.0, -0.0, INF, -INF, 3.0, NAN])
        b = torch.tensor([-1.0, 2.0, -0.0, 0.0, -5.0, 0.0, -INF, -1.0])
        return a.to(dtype), b.to(dtype)
    if dtype == torch.bool:
        return torch.tensor([True, False, True]), torch.tensor([True, True, False])
    lo = 0 if dtype == torch.uint8 else -9
    return torch.arange(lo, lo + 8).to(dtype), torch.tensor([-1, 2, 0, -3, 4, 0, -5, 6]).to(dtype).flip(0)


def _pow_in_place(a: torch.Tensor, e: torch.Tensor, f: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c = a.clone()
    c.pow_(2)
    c.pow_(e)
    g = f.clone()
    g.pow_(f)
    g.pow_(0.5)
    return c, g


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("add_broadcast_alpha", Fn(lambda m, a, b: torch.add(a, b, alpha=0.5)), (r(2, 3, 4), r(3, 1))),
    ("add_scalar", Fn(lambda m, a: a + 1.5), (r(2, 3),)),
    ("sub_tensor", Fn(lambda m, a, b: a - b), (r(2, 3), r(3))),
    ("rsub_scalar", Fn(lambda m, a: 2 - a), (r(4),)),
    ("mul_div", Fn(lambda m, a, b: a * b / (b.abs() + 1)), (r(3, 3), r(3, 3))),
    (
        "div_floor_trunc",
        Fn(lambda m, a: torch.div(a * 4, 3, rounding_mode="floor") + torch.div(a * 4, -3, rounding_mode="trunc")),
        (r(3, 5),),
    ),
    ("pow_square_sqrt", Fn(lambda m, a: a.pow(2) + a.abs().pow(0.5) + a.abs().add(1).pow(1.7)), (r(6),)),
    (
        "where_compare",
        Fn(lambda m, a, b: torch.where(a > b, a, b * 2) + (a <= 0).float() + (a == a).float()),
        (r(3, 4), r(4)),
    ),
    (
        "clamp_scalar_tensor_inf",
        Fn(lambda m, a, lo: a.clamp(-0.5, 0.5) + a.clamp(min=lo) + a.clamp(max=float("inf")) + torch.clamp_min(a, 0.1)),
        (r(3, 4), r(4)),
    ),
    ("div_scalar_modes", Fn(lambda m, a: a / 4 + torch.div(a, 3, rounding_mode="floor")), (r(3, 4) * 5,)),
    ("pow_tensor_rsub_tensor", Fn(lambda m, a, b: torch.pow(a.abs() + 0.5, b) + torch.rsub(a, b)), (r(3), r(3))),
    (
        "clamp_max_logical_or",
        Fn(lambda m, a: torch.clamp_max(a, 0.2) + torch.logical_or(a > 1, a < -1).float()),
        (r(3, 4),),
    ),
    ("maximum_minimum", Fn(lambda m, a, b: torch.maximum(a, b) + torch.minimum(a, b * 2)), (r(4, 6), r(6))),
    # Native dtypes at the boundary and inside the graph (no silent downcast).
    (
        "int64_math",
        Fn(lambda m, a: (a * 3 + a * a - a // 7, a.sum(-1), a > 3, torch.div(a, 7, rounding_mode="trunc"))),
        (ri(torch.int64),),
    ),
    (
        "pow_scalar_base_exp2_remainder_fmod",
        Fn(
            lambda m, a, b: (
                torch.pow(2.0, a)
                + torch.exp2(a)
                + a % 0.7
                + torch.remainder(a, b.abs() + 0.5)
                + torch.fmod(a, 0.4)
                + torch.fmod(a, b.abs() + 0.5)
            )
        ),
        (r(3, 4), r(3, 4)),
    ),
    ("int_remainder", Fn(lambda m, a: (a % 7, torch.fmod(a, 5))), (ri(torch.int64),)),
    (
        "where_scalar_operands",
        Fn(lambda m, a: torch.where(a > 0, a, 0.0) + torch.where(a > 0, 1.0, a) + torch.where(a > 0.5, 2.0, -1.0)),
        (r(3, 4),),
    ),
    (
        "atan2_log2_log10",
        Fn(lambda m, a, b: torch.atan2(a, b) + torch.log2(a.abs() + 1) + torch.log10(b.abs() + 1)),
        (r(3, 4), r(3, 4)),
    ),
    ("int32_math", Fn(lambda m, a: a + a * 2), (ri(torch.int32),)),
    ("bool_input_output", Fn(lambda m, a, mask: (torch.where(mask, a, -a), ~mask)), (r(2, 3), r(2, 3) > 0)),
    ("float16", Fn(lambda m, a: a * 2 + 1), (r(2, 3).half(),)),
    # div.Scalar_mode called explicitly: torch's Core ATen table decomposes it, so only `aten` reaches it
    (
        "div_scalar_mode",
        of_inputs(
            lambda a, i: (
                A.div.Scalar_mode(a, 0.7, rounding_mode="floor"),
                A.div.Scalar_mode(a, -0.7, rounding_mode="trunc"),
                A.div.Scalar_mode(i, 7, rounding_mode="floor"),
                A.div.Scalar_mode(i, -7, rounding_mode="trunc"),
            )
        ),
        (r(3, 4) * 5, ints(3, 4)),
    ),
    (  # out= variant: at `aten` level only the decomposition fallback (which functionalizes) lowers it
        "atan2_out",
        of_inputs(lambda a, b: torch.atan2(a, b, out=torch.empty(3, 4)) * 2),
        (r(3, 4), r(3, 4)),
    ),
    ("div_family_float32_boundaries", of_inputs(_div_family), (_NUM, _DEN)),
    ("div_family_float64_boundaries", of_inputs(_div_family), (_NUM.double(), _DEN.double())),
    ("div_family_float16", of_inputs(_div_family), (_NUM.half(), _DEN.half())),
    ("div_family_bfloat16", of_inputs(_div_family), (_NUM.bfloat16(), _DEN.bfloat16())),
    (
        "div_scalar_boundaries",
        of_inputs(lambda a: (a // 0.1, a % 0.1, torch.fmod(a, -0.1), torch.div(a, 0.1, rounding_mode="trunc"))),
        (_NUM[:9],),
    ),
    ("div_family_int64_full_range", of_inputs(_div_family), (_BIG, _BIG_DEN)),
    ("int64_floor_divide_by_one", of_inputs(lambda a: (torch.floor_divide(a, 1), torch.remainder(a, 2))), (_BIG,)),
    *[
        (f"div_family_{dt}", of_inputs(_div_family), (_SMALL.to(getattr(torch, dt)), _SMALL_DEN.to(getattr(torch, dt))))
        for dt in ("int32", "int16", "int8")
    ],
    ("div_family_uint8", of_inputs(_div_family), (torch.tensor([200, 255, 7, 0, 13]), torch.tensor([7, 16, 2, 3, 13]))),
    (
        "int32_wide_data_paths",
        of_inputs(lambda x, m: (torch.where(m, x, -x), x.flip(1), torch.tril(x), x.abs(), x * 3 + 1, x > 2**24)),
        (
            torch.tensor([[2**30 + 1, -(2**29) - 3, 7], [2**24 + 1, -9, 0]], dtype=torch.int32),
            torch.tensor([[True, False, True]] * 2),
        ),
    ),
    (
        "half_scalar_tensor_operands",  # a rank-0 float32 `other` is read in float32 too
        of_inputs(lambda x, s: (x * s, x / s, torch.floor_divide(x, s))),
        (_HALF_X.half(), torch.tensor(0.1)),
    ),
    # fmax / fmin: NaN on one side gives the other; every dtype torch has them for
    *[
        (
            f"fmax_fmin_{str(dt)[6:]}",
            of_inputs(lambda a, b: (torch.fmax(a, b), torch.fmin(a, b), torch.fmax(a, b[:1]))),
            _pairs(dt),
        )
        for dt in (*FLOATS, *INTS)
    ],
    (
        "fmax_fmin_bool",
        of_inputs(lambda a, b: (torch.fmax(a, b), torch.fmin(a, b))),
        (torch.tensor([True, False, False]), torch.tensor([False, False, True])),
    ),
    # copysign: -0.0 and infinities carry their sign; integers and bool compute in float32
    *[
        (
            f"copysign_{str(dt)[6:]}",
            of_inputs(lambda a, b: (torch.copysign(a, b), torch.copysign(a, -0.0), torch.copysign(a, 2))),
            _signs(dt),
        )
        for dt in (*FLOATS, *INTS, torch.bool)
    ],
    # integer pow: wrapping, negative exponents (torch's powi: 1, +-1 or 0), every integer dtype
    (
        "pow_int64",
        of_inputs(lambda a, e: (a**e, a**3, a**0, 2**e, (-1) ** e, a**63, torch.pow(a, e.flip(0)))),
        (
            torch.tensor([-3, -2, -1, 0, 1, 2, 3, 7, 2**31, -(2**40) + 1]).view(-1, 1),
            torch.tensor([-2, -1, 0, 1, 2, 3, 5, 63, 64, 100]),
        ),
    ),
    (
        "pow_int8_uint8",
        of_inputs(lambda a, e, u, f: (a**3, a**e, u**3, u**f, torch.pow(3, e))),
        (
            torch.tensor([-3, -2, 2, 3, 5, 127, -128], dtype=torch.int8),
            torch.tensor([9, 9, -1, 0, 9, 7, 2], dtype=torch.int8),
            torch.tensor([0, 1, 2, 3, 255], dtype=torch.uint8),
            torch.tensor([0, 200, 9, 2, 2], dtype=torch.uint8),
        ),
    ),
    (
        "pow_int16_int32",
        of_inputs(lambda a, e, s: (a**e, a.pow(5), s ** e.to(torch.int16), s**4)),
        (
            torch.tensor([3, -7, 100, 46341, -2], dtype=torch.int32),
            torch.tensor([20, 11, 5, 2, 31], dtype=torch.int32),
            torch.tensor([3, -7, 100, 181, -2], dtype=torch.int16),
        ),
    ),
    (
        "pow_in_place",
        of_inputs(_pow_in_place),
        (torch.randint(-4, 4, (3, 4)), torch.randint(0, 4, (3, 4)), torch.rand(3, 4) + 0.5),
    ),
]

for _dt in ("float16", "bfloat16"):
    SAMPLES.append((f"half_scalar_operands_{_dt}", of_inputs(_half_scalars), (_HALF_X.to(getattr(torch, _dt)),)))
    # 0.7 / x is reciprocal(x) * 0.7: torch rounds the reciprocal to the dtype, RLX keeps it in float32
    SAMPLES.append((f"reflected_scalar_div_{_dt}", of_inputs(lambda x: 0.7 / x), (_HALF_X.to(getattr(torch, _dt)),)))

for _dt in ("float32", "float64", "float16", "bfloat16"):
    _t = getattr(torch, _dt)
    SAMPLES.append(
        (
            f"remainder_infinite_divisor_{_dt}",
            of_inputs(lambda a, d: (*_div_family(a, d), torch.remainder(a, INF), torch.remainder(a, -INF))),
            (_INF_NUM.to(_t), _INF_DEN.to(_t)),
        )
    )

# Samples whose every output must equal eager PyTorch bit for bit (every other sample: within the budget of its dtype).
BIT_EXACT = {
    name
    for name, _, _ in SAMPLES
    if name.startswith(("half_scalar_", "remainder_infinite_", "fmax_fmin_", "copysign_"))
}
# Python-scalar operands of half tensors lower differently at the default `high` level: run there too.
HIGH_TOO = [s for s in SAMPLES if s[0].startswith("half_scalar_")]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=BIT_EXACT)


@pytest.mark.parametrize(("name", "module", "inputs"), HIGH_TOO, ids=sample_ids(HIGH_TOO))
def test_op_sample_at_high(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path) -> None:
    """Samples whose lowering differs at the default `high` level run there too."""
    check_op_sample_at_high(name, module, inputs, tmp_path, bit_exact=BIT_EXACT)
