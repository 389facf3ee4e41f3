"""Parity samples for numerics that must follow torch's CPU kernels exactly (issue 23): scans in torch's
accumulate dtype, ±inf and NaN through exp, log-sum-exp forms, softmax, max and norms, `arange` with
integer dtypes and fractional steps, fmax/fmin/copysign in every dtype torch has them for.

Each right value is eager PyTorch's; names in BIT_EXACT must match it bit for bit.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import of_inputs as Fn

INF, NAN = math.inf, math.nan
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)

# Rows of the kinds that broke log-sum-exp forms: all -inf, one +inf, a -inf among numbers, NaN, both
# infinities, and one ordinary row.
INF_ROWS = torch.tensor(
    [
        [-INF, -INF, -INF, -INF],
        [1.0, INF, 2.0, 0.5],
        [1.0, -INF, 2.0, 0.5],
        [NAN, 1.0, 2.0, 0.5],
        [INF, INF, 1.0, 0.5],
        [-INF, INF, 0.0, 0.5],
        [0.25, -1.5, 3.0, 0.5],
    ]
)
EXP_EDGES = torch.tensor(
    [-INF, -200.0, -104.0, -100.0, -90.0, -87.5, -87.0, 0.0, 88.0, 88.7, 88.72, 89.0, 100.0, INF, NAN]
)


def _walk(n: int) -> torch.Tensor:
    return torch.randn(2, n, generator=torch.Generator().manual_seed(5)) * 10


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


def _scan_rows(dtype: torch.dtype) -> torch.Tensor:
    """Rows with ties, a run of equal values, infinities and NaN (floats) for running max/min."""
    if dtype.is_floating_point:
        return torch.tensor([[1.0, NAN, 0.5, 3.0, NAN, 2.0], [2.0, 2.0, 1.0, 1.0, 5.0, -INF],
                             [INF, 1.0, INF, -1.0, 0.0, 0.0]]).to(dtype)  # fmt: skip
    if dtype == torch.bool:
        return torch.tensor([[True, False, True, False, False, True], [False, False, True, True, False, False]])
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, low + 6, (3, 6), generator=torch.Generator().manual_seed(4)).to(dtype)


def _arange_ints(dtype: torch.dtype) -> nn.Module:
    """Integer ranges with fractional starts and steps: torch truncates both to int64 first."""
    return Fn(
        lambda x: (
            torch.arange(1, 4, 0.5, dtype=dtype) + x[0],
            torch.arange(0.5, 4, 1, dtype=dtype) + x[0],
            torch.arange(-0.5 if dtype != torch.uint8 else 0.5, 3, 0.7, dtype=dtype) + x[0],
            torch.arange(2.9, 9, 1.9, dtype=dtype) + x[0],
        )
    )


def _spaces(dtype: torch.dtype) -> nn.Module:
    """Evenly spaced points with fractional ends, both directions; logspace in the dtypes it fits."""
    hi = 7.1 if dtype not in (torch.uint8, torch.int8) else 2.9
    lo = -3.3 if dtype != torch.uint8 else 0.3
    return Fn(
        lambda x: (
            torch.linspace(lo, hi, 37, dtype=dtype) + x,
            torch.linspace(hi, lo, 9, dtype=dtype) + x[0],
            torch.logspace(lo, 1.9 if dtype != torch.int8 else 1.5, 11, dtype=dtype) + x[0],
            torch.logspace(0, 4, 5, base=2.0, dtype=dtype) + x[0],
        )
    )


def _arange_floats(dtype: torch.dtype) -> nn.Module:
    """Fractional steps long enough for torch's vectorized loop (its values differ from start + i * step
    computed once and rounded by an ULP here and there)."""
    return Fn(
        lambda x: (
            torch.arange(0.1, 40, 0.3, dtype=dtype) + x,
            torch.arange(-2.3, 11, 0.1, dtype=dtype)[:133] + x,
            torch.arange(100.3, 200, 0.7, dtype=dtype)[:133] + x,
        )
    )


torch.manual_seed(0)
SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # scans in torch's CPU accumulate dtype: float32 in float64, halves in float32
    ("cumsum_float32_cancelling", Fn(lambda x: x.cumsum(-1)), (torch.tensor([[1e8, 1.0, -1e8, 0.5]]),)),
    ("cumsum_float32_walk_20000", Fn(lambda x: (x.cumsum(-1), x.cumsum(0))), (_walk(20000),)),
    ("cumprod_float32_long", Fn(lambda x: x.cumprod(-1)), (torch.rand(3, 400) + 0.5,)),
    ("logcumsumexp_float32_long", Fn(lambda x: torch.logcumsumexp(x, -1)), (torch.randn(2, 3000) * 10,)),
    *[
        (
            f"cumsum_cumprod_{str(dt)[6:]}_accumulate",
            Fn(lambda x: (x.cumsum(-1), x.cumprod(-1))),
            ((torch.rand(2, 300) + 0.5).to(dt),),
        )
        for dt in (torch.float16, torch.bfloat16, torch.float64)
    ],
    # ±inf and NaN through exp and log-sum-exp forms, softmax, max/min, sums and norms
    ("exp_full_range", Fn(lambda x: (x.exp(), torch.expm1(x), torch.exp2(x))), (EXP_EDGES,)),
    *[(f"exp_full_range_{str(dt)[6:]}", Fn(lambda x: x.exp()), (EXP_EDGES.to(dt),)) for dt in FLOATS[1:]],
    (
        "logsumexp_inf_rows",
        Fn(lambda x: (torch.logsumexp(x, -1), torch.logsumexp(x, 0), torch.logsumexp(x[:3, :2], (0, 1)))),
        (INF_ROWS,),
    ),
    *[
        (f"logsumexp_inf_rows_{str(dt)[6:]}", Fn(lambda x: torch.logsumexp(x, -1)), (INF_ROWS.to(dt),))
        for dt in FLOATS[1:]
    ],
    ("log_softmax_softmax_inf_rows", Fn(lambda x: (torch.log_softmax(x, -1), torch.softmax(x, -1))), (INF_ROWS,)),
    (
        "amax_amin_sum_inf_rows",
        Fn(lambda x: (x.amax(-1), x.amin(-1), x.max(-1).values, x.min(-1).values, x.sum(-1), x.mean(-1))),
        (INF_ROWS,),
    ),
    (
        "norms_inf_rows",
        Fn(
            lambda x: (
                torch.linalg.vector_norm(x, dim=-1),
                torch.linalg.vector_norm(x, ord=INF, dim=-1),
                torch.linalg.vector_norm(x, ord=1, dim=-1),
                torch.linalg.vector_norm(x, ord=3, dim=-1),
                torch.linalg.vector_norm(x, ord=-INF, dim=-1),
            )
        ),
        (INF_ROWS,),
    ),
    # cummax / cummin: NaN stays once seen, ties and NaNs take the latest index; every dtype
    *[
        (
            f"cummax_cummin_{str(dt)[6:]}",
            Fn(lambda x: (*torch.cummax(x, -1), *torch.cummin(x, 0), *torch.cummax(x[0], 0))),
            (_scan_rows(dt),),
        )
        for dt in (*FLOATS, *INTS, torch.bool)
    ],
    ("sigmoid_logsigmoid_tails", Fn(lambda x: (torch.sigmoid(x), F.logsigmoid(x))), (EXP_EDGES,)),
    # index_select of a 0-d tensor (found by the coverage run: RLX's Gather wants rank >= 1)
    *[
        (
            f"index_select_0d_{str(dt)[6:]}",
            Fn(lambda x, i: (torch.index_select(x, 0, i), torch.index_select(x, -1, i[:1]))),
            (torch.tensor(3.5).to(dt), torch.tensor([0])),
        )
        for dt in (torch.float32, torch.float64, torch.int64, torch.bool)
    ],
    ("min_dim_all_nan_row", Fn(lambda x: torch.min(x, dim=0)), (torch.tensor([[NAN, NAN], [1.0, 2.0]]),)),
    # arange: integer dtypes truncate start and step; float dtypes as torch's vectorized loop rounds
    *[(f"arange_fractional_{str(dt)[6:]}", _arange_ints(dt), (torch.zeros(6, dtype=dt),)) for dt in INTS],
    *[(f"arange_fractional_{str(dt)[6:]}", _arange_floats(dt), (torch.zeros(133, dtype=dt),)) for dt in FLOATS],
    # linspace / logspace: torch's kernel (integer dtypes truncate start and end first)
    *[(f"linspace_logspace_{str(dt)[6:]}", _spaces(dt), (torch.zeros(37, dtype=dt),)) for dt in (*FLOATS, *INTS)],
    # fmax / fmin: NaN on one side gives the other; every dtype torch has them for
    *[
        (
            f"fmax_fmin_{str(dt)[6:]}",
            Fn(lambda a, b: (torch.fmax(a, b), torch.fmin(a, b), torch.fmax(a, b[:1]))),
            _pairs(dt),
        )
        for dt in (*FLOATS, *INTS)
    ],
    (
        "fmax_fmin_bool",
        Fn(lambda a, b: (torch.fmax(a, b), torch.fmin(a, b))),
        (torch.tensor([True, False, False]), torch.tensor([False, False, True])),
    ),
    # copysign: -0.0 and infinities carry their sign; integers and bool compute in float32
    *[
        (
            f"copysign_{str(dt)[6:]}",
            Fn(lambda a, b: (torch.copysign(a, b), torch.copysign(a, -0.0), torch.copysign(a, 2))),
            _signs(dt),
        )
        for dt in (*FLOATS, *INTS, torch.bool)
    ],
]

# At `core`, torch's own decomposition of linspace/logspace computes other integers than its kernel (it
# interpolates first and truncates after): the core graph differs from eager, and verification must say so.
CORE_DIFFERS = {f"linspace_logspace_{str(dt)[6:]}" for dt in INTS}

# Bit for bit with eager PyTorch (every other sample: within the budget of its dtype).
BIT_EXACT = {
    "cumsum_float32_cancelling",
    "logsumexp_inf_rows",
    "amax_amin_sum_inf_rows",
    "min_dim_all_nan_row",
    *(f"cummax_cummin_{str(dt)[6:]}" for dt in (*FLOATS, *INTS, torch.bool)),
    *CORE_DIFFERS,
    *(f"arange_fractional_{str(dt)[6:]}" for dt in (*INTS, *FLOATS)),
    *(f"fmax_fmin_{str(dt)[6:]}" for dt in (*FLOATS, *INTS)),
    "fmax_fmin_bool",
    *(f"copysign_{str(dt)[6:]}" for dt in (*FLOATS, *INTS, torch.bool)),
}
