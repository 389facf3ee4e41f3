"""Parity samples of reductions and scans (lower/ops/reduce.py): sum/mean/amax/amin/prod/any/all, max/min
with indices, var/std and var_mean/std_mean in every overload and correction, softmax/log_softmax, logsumexp
and norms over rows holding ±inf and NaN, cumsum/cumprod in torch's CPU accumulate dtype (float32 in
float64, halves in float32, integers in int64), logcumsumexp, and cummax/cummin (NaN stays once seen; ties
and NaNs take the latest index) in every dtype. Names in BIT_EXACT must match eager PyTorch bit for bit.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import FLOATS, INF, INTS, LEVELS, NAN, A, Fn, Sample, check_op_sample, of_inputs, r, ri, sample_ids
from _ties import REDUCE_TIES, TIE_BIT_EXACT

EDGE = torch.tensor(
    [
        [100.0, -100.0, -INF, 3.0, INF, 1.0, -INF],
        [-INF, -INF, -INF, -100.0, 100.0, 2.0, 88.0],
        [-100.0, 100.0, -100.0, 100.0, -1e30, 1e-30, 0.0],
    ]
)

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


def _walk(n: int) -> torch.Tensor:
    return torch.randn(2, n, generator=torch.Generator().manual_seed(5)) * 10


def _scan_rows(dtype: torch.dtype) -> torch.Tensor:
    """Rows with ties, a run of equal values, infinities and NaN (floats) for running max/min."""
    if dtype.is_floating_point:
        return torch.tensor(
            [[1.0, NAN, 0.5, 3.0, NAN, 2.0], [2.0, 2.0, 1.0, 1.0, 5.0, -INF], [INF, 1.0, INF, -1.0, 0.0, 0.0]]
        ).to(dtype)
    if dtype == torch.bool:
        return torch.tensor([[True, False, True, False, False, True], [False, False, True, True, False, False]])
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, low + 6, (3, 6), generator=torch.Generator().manual_seed(4)).to(dtype)


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("softmax_neg_dim", Fn(lambda m, a: torch.softmax(a, dim=-2)), (r(2, 5, 3),)),
    (
        "mean_sum_amax",
        Fn(lambda m, a: a.mean(dim=(0, 2), keepdim=True) + a.sum(-1, keepdim=True) + a.amax(1, keepdim=True)),
        (r(2, 3, 4),),
    ),
    ("mean_all", Fn(lambda m, a: a.mean() + a.sum()), (r(3, 4),)),
    ("log_softmax", Fn(lambda m, a: F.log_softmax(a * 10, dim=-1)), (r(3, 7),)),
    (
        # integers above 2**24 and float64 values 1e-12 apart: exact extreme/arg paths
        "extremes_int64_float64",
        Fn(
            lambda m, i, f: (
                i.amax(1),
                i.amin((0, 2)),
                *i.max(1),
                i.argmin(-1),
                i.argmax(),
                f.amax(0),
                *f.min(-1, keepdim=True),
                f.argmax(1),
                f.max(),
            )
        ),
        (
            torch.tensor([[[2**40 + 3, -5], [2**40 + 1, 7]], [[-(2**33), 9], [-(2**33) + 1, 9]]]),
            torch.tensor(
                [[1.0 + 1e-12, -3.0, 1e30], [1.0, -3.0 - 1e-12, -1e30 - 1e16], [float("-inf"), 2.5, 1e30 + 1e15]],
                dtype=torch.float64,
            ),
        ),
    ),
    (
        "prod_int_float64",
        Fn(lambda m, i, f: (i.prod(1), i.int().prod(), f.prod(-1), (i > 0).prod(0))),
        (torch.tensor([[3, -2, 5, 7, 1], [2**20, 2**20, 3, 1, -1]]), torch.randn(3, 7).double()),
    ),
    ("min_any", Fn(lambda m, a: (a.amin(-1), (a > 1).any(), (a > 1).any(dim=(0, 1)), (a > 1).any(-1))), (r(3, 4, 2),)),
    (
        "prod_all_max_min",
        Fn(
            lambda m, a: (
                a.prod(1),
                a.prod(),
                (a > -1).all(),
                (a > -1).all(dim=1),
                (a > -1).all(dim=(0, 1)),
                a.max(),
                a.min(),
                a.max(dim=1),
                a.min(dim=-1, keepdim=True),
            )
        ),
        (r(3, 4),),
    ),
    ("cumsum_cumprod", Fn(lambda m, a: torch.cumsum(a, 1) + torch.cumprod(a * 0.5 + 1, dim=-2)), (r(3, 5),)),
    ("int_cumsum", Fn(lambda m, a: torch.cumsum(a, 0)), (ri(torch.int64),)),
    # var.dim called explicitly: torch's Core ATen table decomposes it, so only `aten` reaches it
    (
        "var_dim",
        of_inputs(
            lambda a: (
                torch.var(a, 1),
                A.var.dim(a, [0, 2], False, True),
                A.var.dim(a, None, True, False),
                a.var(-1, keepdim=True),
            )
        ),
        (r(3, 4, 5),),
    ),
    # Integer scans accumulate in int64 as torch does (int8 overflows in int8, not in the int64 result).
    *[
        (
            f"cumsum_cumprod_{dt}",
            of_inputs(lambda x: (torch.cumsum(x, 0), torch.cumprod(x, -1), torch.cumsum(x, 1, dtype=torch.int32))),
            (torch.tensor([[100, 27, -3], [90, 5, 7]]).to(getattr(torch, dt)),),
        )
        for dt in ("int8", "int32", "int64")
    ],
    (
        "cumsum_cumprod_uint8",
        of_inputs(lambda x: (torch.cumsum(x, 0), torch.cumprod(x, 1))),
        (torch.tensor([[200, 3], [100, 7]], dtype=torch.uint8),),
    ),
    (
        "cumsum_cumprod_bool",
        of_inputs(lambda x: (torch.cumsum(x, 1), torch.cumprod(x, 0))),
        (torch.tensor([[True, False, True], [True, True, True]]),),
    ),
    (
        "cumsum_cumprod_int64_wide",
        of_inputs(lambda x: (torch.cumsum(x, 0), torch.cumprod(x, 0))),
        (torch.tensor([2**53 + 1, 3, 2**40, -(2**20), 5]),),
    ),
    (
        "cumsum_cumprod_float64",
        of_inputs(lambda x: (torch.cumsum(x, 1), torch.cumprod(x, 0))),
        (torch.randn(3, 33).double(),),
    ),
    # float64 reductions with a float64 judge: one dim and several, keepdim both ways.
    (
        "float64_reductions",
        of_inputs(
            lambda x: (
                x.sum((0, 2)),
                x.mean(1, keepdim=True),
                x.var(dim=1),
                x.var(dim=(0, 2)),
                x.std(dim=(0, 2), keepdim=True),
                *torch.var_mean(x, dim=2),
                *torch.std_mean(x, dim=(0, 1), keepdim=True),
                torch.linalg.vector_norm(x, dim=(1, 2)),
                x.norm(dim=1),
                torch.logsumexp(x, dim=(0, 2)),
                x.prod(1),
                x.amax((0, 1)),
                x.amin(2, keepdim=True),
                *x.max(0),
                x.argmin(2),
            )
        ),
        (torch.randn(3, 4, 5).double() * 10,),
    ),
    (
        "nan_propagating_extremes",
        of_inputs(
            lambda x, y: (
                torch.maximum(x, y),
                torch.minimum(x, y),
                x.clamp(-0.5, 0.5),
                x.amax(1),
                x.amin(0),
                x.argmax(1),
                *x.max(1),
            )
        ),
        (torch.tensor([[1.0, NAN, 3.0], [-1.0, 2.0, 0.25]]), torch.tensor([[NAN, 2.0, 1.0], [0.5, NAN, 1.0]])),
    ),
    (
        "rank0_reductions_and_args",
        of_inputs(lambda x: (x.sum(0), x.amax(0), x.argmax(0), x.max(0), x.mean(-1), torch.logsumexp(x, 0))),
        (torch.tensor(2.5),),
    ),
    # logcumsumexp: large magnitudes of both signs, infinities (a leading -inf run), tiny steps, NaN
    ("logcumsumexp_edges", of_inputs(lambda a: (torch.logcumsumexp(a, 1), torch.logcumsumexp(a, 0))), (EDGE,)),
    ("logcumsumexp_long_axis", of_inputs(lambda a: torch.logcumsumexp(a * 50, 2)), (r(2, 3, 100),)),
    (
        "logcumsumexp_float64",
        of_inputs(lambda a: (torch.logcumsumexp(a, -1), torch.logcumsumexp(a * 300, 0))),
        (r(4, 37).double(),),
    ),
    (
        "logcumsumexp_half_rank0_nan",
        of_inputs(
            lambda h, b, s, n: (
                torch.logcumsumexp(h, 0),
                torch.logcumsumexp(b, 1),
                s.logcumsumexp(0),
                n.logcumsumexp(0),
            )
        ),
        (r(9, 3).half(), r(2, 10).bfloat16(), torch.tensor(3.0), torch.tensor([1.0, NAN, 2.0, -INF])),
    ),
    # var_mean / std_mean (and var/std): every overload, correction (incl. float and >= N), keepdim
    (
        "var_std_mean_overloads",
        of_inputs(
            lambda a: (
                *torch.var_mean(a),
                *torch.std_mean(a),
                *torch.var_mean(a, unbiased=False),
                *torch.std_mean(a, False),
                *torch.var_mean(a, 1, True, True),
                *torch.std_mean(a, [0, 2], unbiased=False),
                torch.var(a),
                torch.var(a, False),
                torch.std(a, False),
                torch.std(a, 1, correction=0),
            )
        ),
        (r(3, 4, 5),),
    ),
    (
        "var_std_mean_correction",
        of_inputs(
            lambda a: (
                *torch.var_mean(a, (0, 2), correction=2, keepdim=True),
                *torch.std_mean(a, -1, correction=0),
                *torch.var_mean(a, None, correction=0.5),
                *torch.std_mean(a, 1, correction=4, keepdim=True),
                *torch.var_mean(a, 1, correction=5),
            )
        ),
        (r(3, 4, 5),),
    ),
    (
        "var_std_mean_float64_half",
        of_inputs(lambda a, h: (*torch.var_mean(a, 1), *torch.std_mean(a, correction=0), *torch.var_mean(h, 1))),
        (r(3, 40).double() * 1e3 + 1e6, r(3, 8).half()),
    ),
    (  # one element per reduction: the unbiased variance is 0/0 (NaN), next to finite values
        "var_std_mean_single_element",
        of_inputs(
            lambda a, b: (torch.cat([torch.var_mean(a, 0)[0], torch.var(b, 0)]), *torch.std_mean(a, 0, correction=0))
        ),
        (r(1, 4), r(3, 4)),
    ),
    # scans in torch's CPU accumulate dtype: float32 in float64, halves in float32
    ("cumsum_float32_cancelling", of_inputs(lambda x: x.cumsum(-1)), (torch.tensor([[1e8, 1.0, -1e8, 0.5]]),)),
    ("cumsum_float32_walk_20000", of_inputs(lambda x: (x.cumsum(-1), x.cumsum(0))), (_walk(20000),)),
    ("cumprod_float32_long", of_inputs(lambda x: x.cumprod(-1)), (torch.rand(3, 400) + 0.5,)),
    ("logcumsumexp_float32_long", of_inputs(lambda x: torch.logcumsumexp(x, -1)), (torch.randn(2, 3000) * 10,)),
    *[
        (
            f"cumsum_cumprod_{str(dt)[6:]}_accumulate",
            of_inputs(lambda x: (x.cumsum(-1), x.cumprod(-1))),
            ((torch.rand(2, 300) + 0.5).to(dt),),
        )
        for dt in (torch.float16, torch.bfloat16, torch.float64)
    ],
    (
        "logsumexp_inf_rows",
        of_inputs(lambda x: (torch.logsumexp(x, -1), torch.logsumexp(x, 0), torch.logsumexp(x[:3, :2], (0, 1)))),
        (INF_ROWS,),
    ),
    *[
        (f"logsumexp_inf_rows_{str(dt)[6:]}", of_inputs(lambda x: torch.logsumexp(x, -1)), (INF_ROWS.to(dt),))
        for dt in FLOATS[1:]
    ],
    (
        "log_softmax_softmax_inf_rows",
        of_inputs(lambda x: (torch.log_softmax(x, -1), torch.softmax(x, -1))),
        (INF_ROWS,),
    ),
    (
        "amax_amin_sum_inf_rows",
        of_inputs(lambda x: (x.amax(-1), x.amin(-1), x.max(-1).values, x.min(-1).values, x.sum(-1), x.mean(-1))),
        (INF_ROWS,),
    ),
    (
        "norms_inf_rows",
        of_inputs(
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
            of_inputs(lambda x: (*torch.cummax(x, -1), *torch.cummin(x, 0), *torch.cummax(x[0], 0))),
            (_scan_rows(dt),),
        )
        for dt in (*FLOATS, *INTS, torch.bool)
    ],
    ("min_dim_all_nan_row", of_inputs(lambda x: torch.min(x, dim=0)), (torch.tensor([[NAN, NAN], [1.0, 2.0]]),)),
    *REDUCE_TIES,  # argmax/max.dim, kthvalue, median on tied values in every dtype (tests/ops/_ties.py)
]

# Samples whose every output must equal eager PyTorch bit for bit (every other sample: within the budget of its dtype).
BIT_EXACT = {
    "cumsum_float32_cancelling",
    "logsumexp_inf_rows",
    "amax_amin_sum_inf_rows",
    "min_dim_all_nan_row",
    *(name for name, _, _ in SAMPLES if name.startswith("cummax_cummin_")),
    *(name for name, _, _ in REDUCE_TIES if name in TIE_BIT_EXACT),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=BIT_EXACT)
