"""Parity samples of the unary ops (lower/ops/unary.py): activations with every scalar argument (the elu
family, hardtanh/relu6, leaky_relu, gelu, silu, the hard activations, softplus), transcendental functions
at the edges of their range (exp through ±inf and NaN, log1p/expm1/softplus, the elu family on tiny
negatives, where torch's kernel uses expm1, the sigmoids' tails), trigonometric and hyperbolic functions
and their inverses, rounding, abs/neg/sign, and isnan/isinf.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import FLOATS, INF, LEVELS, NAN, A, Fn, Sample, check_op_sample, of_inputs, r, ri, sample_ids

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


# elu/selu/celu of tiny negatives: torch's kernel uses expm1 (exp(x) - 1 gives 0 for -1e-8).
_TINY_NEG = -torch.logspace(-8, 0, 40)

EXP_EDGES = torch.tensor(
    [-INF, -200.0, -104.0, -100.0, -90.0, -87.5, -87.0, 0.0, 88.0, 88.7, 88.72, 89.0, 100.0, INF, NAN]
)


torch.manual_seed(0)
SAMPLES: list[Sample] = [
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
    ("multi_output", Fn(lambda m, a: (a.relu(), {"neg": -a, "sum": a.sum(0)})), (r(2, 3),)),
    (
        "hard_activations",
        Fn(lambda m, a: F.hardswish(a) + F.hardsigmoid(a) + F.mish(a) + F.softplus(a)),
        (r(4, 8) * 4,),
    ),
    ("log1p_expm1", Fn(lambda m, a: torch.log1p(a.abs()) + torch.expm1(a)), (r(3, 4),)),
    (
        "trig_family",
        Fn(lambda m, a: torch.tan(a) + torch.atan(a) + torch.asin(a) + torch.acos(a) + torch.sinh(a) + torch.cosh(a)),
        (torch.rand(3, 5) * 1.8 - 0.9,),
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
    (
        "log1p_expm1_softplus_edges",
        of_inputs(lambda x: (torch.log1p(x), torch.expm1(x), F.softplus(x, beta=3, threshold=0.2), F.softplus(x * 30))),
        (torch.tensor([1e-10, -1e-8, 0.0, 1e-3, 5.0, -0.999, 100.0, -100.0, INF, -INF, NAN, -1.0, 2e-30]),),
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
]

# Samples whose every element must be within 1e-6 of eager PyTorch relative to itself.
RELATIVE = {"elu_family_tiny_negatives"}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, relative=RELATIVE)
