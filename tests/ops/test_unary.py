"""Parity samples of the unary ops (lower/ops/unary.py): activations with every scalar argument (the elu
family, hardtanh/relu6, leaky_relu, gelu, silu, the hard activations, softplus), transcendental functions
at the edges of their range (exp through ±inf and NaN, log1p/expm1/softplus, the elu family on tiny
negatives, where torch's kernel uses expm1, the sigmoids' tails), trigonometric and hyperbolic functions
and their inverses, rounding, abs/neg/sign, and isnan/isinf.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import FLOATS, INF, LEVELS, NAN, A, Fn, Sample, check_op_sample, of_inputs, r, ri, sample_ids

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


# elu/selu/celu of tiny negatives: torch's kernel uses expm1 (exp(x) - 1 gives 0 for -1e-8).
_TINY_NEG = -torch.logspace(-8, 0, 40)

EXP_EDGES = torch.tensor(
    [-INF, -200.0, -104.0, -100.0, -90.0, -87.5, -87.0, 0.0, 88.0, 88.7, 88.72, 89.0, 100.0, INF, NAN]
)


def _rounding_edges(dtype: torch.dtype) -> torch.Tensor:
    """Every place a rounding op can go wrong in `dtype`: signed zeros and ties, the magnitude from which
    every value is an integer (2**p, p = 52/23/10/7) and around it, the largest finite, ±inf, NaN, the
    smallest subnormal."""
    info = torch.finfo(dtype)
    p = round(-math.log2(info.eps))  # float64 52, float32 23, float16 10, bfloat16 7
    big = 2.0**p
    values = [0.0, 0.5, 1.5, 2.5, 0.49999997, 0.7, 3.7, 1.0 - info.eps / 2, big / 2 + 0.5, big / 2 + 1.5]
    values += [big - 0.5, big - 1, big, big + 1, big + 2, 2 * big + 2, 2 * big + 4, 8388609.0, info.max]
    values += [INF, info.smallest_normal, info.smallest_normal * info.eps, 1e-30, 123456.75]
    column = torch.tensor(values, dtype=torch.float64).to(dtype)
    return torch.cat([column, -column, torch.tensor([NAN], dtype=dtype)])


def _roundings(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        torch.round(x),
        torch.floor(x),
        torch.ceil(x),
        torch.trunc(x),
        torch.frac(x),
        torch.fix(x),
        torch.special.round(x),
        torch.sign(x),
        torch.sgn(x),
        torch.div(x, 3.0, rounding_mode="trunc"),
    )


_ROUNDINGS = of_inputs(_roundings)


def _decimal_values(dtype: torch.dtype) -> torch.Tensor:
    """Values for round(decimals=d): ties after scaling, signed zeros, values whose x * 10**d overflows."""
    values = [1.2345, 2.675, 0.125, 0.0, -0.0, 1234.5, 1250.0, 8388609.0, 3e38, 1e-40, 0.004, INF, NAN]
    return torch.tensor(values, dtype=torch.float64).to(dtype) * torch.tensor([1, -1] * 6 + [1]).to(dtype)


def _round_decimals(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    rounded = [torch.round(x, decimals=d) for d in (2, 1, 3, -1, -2, 5, 40, -40, 400)]
    return (*rounded, torch.special.round(x, decimals=2))


_ROUND_DECIMALS = of_inputs(_round_decimals)


def _constant_roundings() -> tuple[torch.Tensor, ...]:
    """Roundings of values made of constants only (RLX folds them at compile time: `round-fold`)."""
    ties = torch.arange(-14, 15, dtype=torch.float32) * 0.25  # -3.5 ... 3.5: every tie, -0.25 -> -0.0
    big = torch.arange(-8388620, -8388600, dtype=torch.float32) * 1.0  # past 2**23: integers already
    halves = (ties.half(), ties.bfloat16(), (torch.arange(1020, 1030, dtype=torch.float16) + 0.5))
    return (
        torch.round(ties),
        torch.round(big),
        torch.round(big * 0.5),
        torch.trunc(ties),
        torch.round(ties * 1e-3),
        *(torch.round(h) for h in halves),
    )


_FLOOR_DIVISIONS = of_inputs(
    lambda a, b: (
        torch.floor_divide(a, b),
        torch.div(a, b, rounding_mode="floor"),
        torch.div(a, b, rounding_mode="trunc"),
    )
)
# torch's div_floor: a zero quotient takes the sign of a / b (floor_divide(-0.0, 1) = -0.0)
_DIVIDENDS = torch.tensor([-0.0, 0.0, -0.5, 0.5, 5.0, -5.0, 0.0, -0.0, 1e-30, -1e-30, 7.0, -7.0, 3.0, -3.0, 0.5])
_DIVISORS = torch.tensor([1.0, -1.0, 2.0, -2.0, INF, INF, -1.0, -1.0, 5.0, 5.0, -7.0, 7.0, -INF, INF, 0.0])

# Outputs compared with eager PyTorch bit for bit, signed zeros included (NaN positions only).
SAME_BITS = {name for name in ("rounding_of_constants", "rounding_of_float16_results")} | {
    f"{kind}_{str(dt)[6:]}"
    for kind in ("rounding_edges", "round_decimals", "floor_divide_signed_zeros")
    for dt in FLOATS
}


def _assert_same_bits(module: nn.Module, inputs: tuple[torch.Tensor, ...], bundle: Path) -> None:
    """The bundle's outputs, run on `inputs`, have eager PyTorch's bits (NaN where torch's are NaN)."""
    model = rti.BundleModel(bundle)
    feed = [t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy() for t in inputs]
    got = torch.utils._pytree.tree_leaves(model.call(*feed))
    with torch.no_grad():
        want = torch.utils._pytree.tree_leaves(module(*inputs))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        w = w.float() if w.dtype == torch.bfloat16 else w
        wn, gn = w.numpy(), np.asarray(g).astype(w.numpy().dtype)
        nan = np.isnan(wn) if wn.dtype.kind == "f" else np.zeros(wn.shape, bool)
        assert np.array_equal(nan, np.isnan(gn) if gn.dtype.kind == "f" else nan), f"output {i}: NaN positions"
        bits = f"u{wn.dtype.itemsize}"
        differ = (wn.view(bits) != gn.view(bits)) & ~nan
        assert not differ.any(), (
            f"output {i}: at {np.argwhere(differ)[:5].tolist()} torch {wn[differ][:5]} RLX {gn[differ][:5]}"
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
    # rounding over each float dtype's whole range, bit for bit (signed zeros too: `_assert_same_bits`)
    *[(f"rounding_edges_{str(dt)[6:]}", _ROUNDINGS, (_rounding_edges(dt),)) for dt in FLOATS],
    *[(f"round_decimals_{str(dt)[6:]}", _ROUND_DECIMALS, (_decimal_values(dt),)) for dt in FLOATS],
    ("rounding_of_constants", Fn(lambda m, a: (*_constant_roundings(), torch.round(a))), (torch.tensor([2.5]),)),
    *[
        (f"floor_divide_signed_zeros_{str(dt)[6:]}", _FLOOR_DIVISIONS, (_DIVIDENDS.to(dt), _DIVISORS.to(dt)))
        for dt in (torch.float32, torch.float64)
    ],
    (
        "rounding_of_float16_results",
        of_inputs(lambda x: (torch.round(x * 3), torch.floor(x / 3), torch.round(x * 3, decimals=1))),
        (torch.tensor([0.8335, -0.8335, 0.1667, 2.5, 1000.1], dtype=torch.float16),),
    ),
]

# Samples whose every element must be within 1e-6 of eager PyTorch relative to itself.
RELATIVE = {"elu_family_tiny_negatives"}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, relative=RELATIVE, bit_exact=SAME_BITS)
    if name in SAME_BITS:
        _assert_same_bits(module, inputs, tmp_path / name / "bundle")


class _SizeRounding(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ties = torch.arange(x.shape[0], dtype=torch.float32) * -0.5  # -0.0, -0.5, -1.0, ...: made of a size
        return torch.round(x), torch.round(ties), torch.trunc(x)


def test_rounding_under_dynamic_shapes_is_bit_exact(tmp_path: Path) -> None:
    """A size-dependent constant is computed per binding (RLX folds it at compile time: `round-fold`)."""
    from torch.export import Dim

    x = torch.tensor([-8388609.0, -0.5, -0.0, 2.5, 0.45, -1.55, 8388609.5, -3.5])
    report = rti.from_torch(_SizeRounding(), (x,), tmp_path / "m", dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}})
    assert report.ok, report.summary()
    for n in (3, 8, 13):
        xi = torch.cat([x, -x])[:n]
        _assert_same_bits(_SizeRounding(), (xi,), tmp_path / "m" / "bundle")
