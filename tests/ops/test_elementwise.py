"""Parity samples of the elementwise ops (lower/elementwise.py) on floating and mixed inputs:
arithmetic with broadcasting and Python scalars, division and remainder modes at rounding boundaries
(1.0 // 0.1 == 9, zero and infinite divisors, int64 over its whole range) in every dtype, activations and
every scalar argument, transcendental functions at the edges of their range (exp through ±inf and NaN,
log1p/expm1/softplus, the elu family on tiny negatives, where torch's kernel uses expm1), comparisons and
logical ops, clamp/where/maximum/minimum, fmax/fmin/copysign in every dtype, native dtypes at the graph
boundary (no silent downcast), and Python-scalar operands of half tensors (torch's half kernels read some in
float32 and round others to the dtype first). Integer bitwise ops, shifts and integer pow are in
test_elementwise_int.py.
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

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


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

# elu/selu/celu of tiny negatives: torch's kernel uses expm1 (exp(x) - 1 gives 0 for -1e-8).
_TINY_NEG = -torch.logspace(-8, 0, 40)

EXP_EDGES = torch.tensor(
    [-INF, -200.0, -104.0, -100.0, -90.0, -87.5, -87.0, 0.0, 88.0, 88.7, 88.72, 89.0, 100.0, INF, NAN]
)


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
        "unary_chain",
        Fn(
            lambda m, a: (
                torch.tanh(a)
                + torch.sigmoid(a)
                + torch.exp(a * 0.1)
                + torch.erf(a)
                + torch.sin(a) * torch.cos(a)
                - torch.neg(a)
            )
        ),
        (r(2, 8),),
    ),
    (
        "log_sqrt_rsqrt_recip",
        Fn(
            lambda m, a: (
                torch.log(a.abs() + 1) + torch.sqrt(a.abs()) + torch.rsqrt(a.abs() + 1) + torch.reciprocal(a.abs() + 1)
            )
        ),
        (r(10),),
    ),
    ("floor_ceil", Fn(lambda m, a: torch.floor(a * 3) + torch.ceil(a * 3)), (r(3, 4),)),
    ("gelu_tanh", Fn(lambda m, a: F.gelu(a, approximate="tanh")), (r(4, 8),)),
    ("relu_silu", Fn(lambda m, a: F.relu(a) + F.silu(a)), (r(4, 8),)),
    (
        "where_compare",
        Fn(lambda m, a, b: torch.where(a > b, a, b * 2) + (a <= 0).float() + (a == a).float()),
        (r(3, 4), r(4)),
    ),
    (
        "logical_and_or",
        Fn(lambda m, a, b: ((a > 0) & (b > 0)).float() + ((a > 0) | (b < 0)).float()),
        (r(4, 4), r(4, 4)),
    ),
    ("multi_output", Fn(lambda m, a: (a.relu(), {"neg": -a, "sum": a.sum(0)})), (r(2, 3),)),
    (
        "hard_activations",
        Fn(lambda m, a: F.hardswish(a) + F.hardsigmoid(a) + F.mish(a) + F.softplus(a)),
        (r(4, 8) * 4,),
    ),
    (
        "clamp_scalar_tensor_inf",
        Fn(lambda m, a, lo: a.clamp(-0.5, 0.5) + a.clamp(min=lo) + a.clamp(max=float("inf")) + torch.clamp_min(a, 0.1)),
        (r(3, 4), r(4)),
    ),
    ("log1p_expm1", Fn(lambda m, a: torch.log1p(a.abs()) + torch.expm1(a)), (r(3, 4),)),
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
        "trig_family",
        Fn(lambda m, a: torch.tan(a) + torch.atan(a) + torch.asin(a) + torch.acos(a) + torch.sinh(a) + torch.cosh(a)),
        (torch.rand(3, 5) * 1.8 - 0.9,),
    ),
    (
        "atan2_log2_log10",
        Fn(lambda m, a, b: torch.atan2(a, b) + torch.log2(a.abs() + 1) + torch.log10(b.abs() + 1)),
        (r(3, 4), r(3, 4)),
    ),
    (
        "round_half_even_trunc",
        Fn(lambda m, a: (torch.round(a), torch.trunc(a))),
        (torch.tensor([[-2.5, -1.5, -0.5, 0.5, 1.5], [2.5, 0.49, -0.51, 3.7, -3.2]]),),
    ),
    (
        "isnan_isinf_xor",
        Fn(lambda m, a: (torch.isnan(a / a), torch.isinf(1 / (a * 0)), torch.logical_xor(a > 0, a < 1))),
        (torch.tensor([[-2.5, 0.0, 1.0], [0.0, 3.0, -1.0]]),),
    ),
    (
        "hyperbolic_inverse_var_xor",
        Fn(
            lambda m, a, b: (
                torch.asinh(a) + torch.acosh(a.abs() + 1.5) + torch.atanh(a.clamp(-0.9, 0.9)),
                a.var(dim=1),
                a.var(dim=(0, 1), correction=0, keepdim=True),
                (a > 0) ^ (b > 0),
            )
        ),
        (r(3, 4), r(3, 4)),
    ),
    ("int64_unary_abs_neg_sign", Fn(lambda m, a: a.abs() * 3 - a.neg() + torch.sign(a)), (ri(torch.int64),)),
    ("int32_math", Fn(lambda m, a: a + a * 2), (ri(torch.int32),)),
    ("bool_input_output", Fn(lambda m, a, mask: (torch.where(mask, a, -a), ~mask)), (r(2, 3), r(2, 3) > 0)),
    ("float16", Fn(lambda m, a: a * 2 + 1), (r(2, 3).half(),)),
    # activations: defaults (RLX Elu) and every scalar argument
    ("elu_default", nn.ELU(), (_r(3, 8) * 3,)),
    ("elu_alpha_scale_input_scale", of_inputs(lambda x: A.elu.default(x, 0.5, 1.2, 0.8)), (_r(3, 8) * 3,)),
    ("selu", nn.SELU(), (_r(4, 6) * 3,)),
    ("hardtanh_default", nn.Hardtanh(), (_r(3, 8) * 2,)),
    ("hardtanh_bounds", of_inputs(lambda x: F.hardtanh(x, -0.5, 1.5)), (_r(3, 8) * 2,)),
    ("relu6", nn.ReLU6(), (_r(3, 8) * 5,)),
    ("leaky_relu_default", nn.LeakyReLU(), (_r(3, 8),)),
    ("leaky_relu_slope", of_inputs(lambda x: F.leaky_relu(x, 0.3)), (_r(2, 3, 4),)),
    ("elu_leaky_float64", of_inputs(lambda x: F.elu(x, 0.7) + F.leaky_relu(x, 0.1)), (_r(3, 5).double() * 3,)),
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
        "log1p_expm1_softplus_edges",
        of_inputs(lambda x: (torch.log1p(x), torch.expm1(x), F.softplus(x, beta=3, threshold=0.2), F.softplus(x * 30))),
        (torch.tensor([1e-10, -1e-8, 0.0, 1e-3, 5.0, -0.999, 100.0, -100.0, INF, -INF, NAN, -1.0, 2e-30]),),
    ),
    (
        "half_scalar_tensor_operands",  # a rank-0 float32 `other` is read in float32 too
        of_inputs(lambda x, s: (x * s, x / s, torch.floor_divide(x, s))),
        (_HALF_X.half(), torch.tensor(0.1)),
    ),
    (
        "elu_family_tiny_negatives",
        of_inputs(lambda y: (F.elu(y), F.elu(y, 0.3), F.selu(y), F.celu(y, 0.7), F.elu(y.half(), 0.3))),
        (_TINY_NEG,),
    ),
    # ±inf and NaN through exp and the sigmoids
    ("exp_full_range", of_inputs(lambda x: (x.exp(), torch.expm1(x), torch.exp2(x))), (EXP_EDGES,)),
    *[(f"exp_full_range_{str(dt)[6:]}", of_inputs(lambda x: x.exp()), (EXP_EDGES.to(dt),)) for dt in FLOATS[1:]],
    ("sigmoid_logsigmoid_tails", of_inputs(lambda x: (torch.sigmoid(x), F.logsigmoid(x))), (EXP_EDGES,)),
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
# Samples whose every element must be within 1e-6 of eager PyTorch relative to itself.
RELATIVE = {"elu_family_tiny_negatives"}
# Python-scalar operands of half tensors lower differently at the default `high` level: run there too.
HIGH_TOO = [s for s in SAMPLES if s[0].startswith("half_scalar_")]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=BIT_EXACT, relative=RELATIVE)


@pytest.mark.parametrize(("name", "module", "inputs"), HIGH_TOO, ids=sample_ids(HIGH_TOO))
def test_op_sample_at_high(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path) -> None:
    """Samples whose lowering differs at the default `high` level run there too."""
    check_op_sample_at_high(name, module, inputs, tmp_path, bit_exact=BIT_EXACT)
