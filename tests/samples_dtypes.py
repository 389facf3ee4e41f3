"""Parity samples for torch's exact semantics across dtypes: floor division and remainders at rounding
boundaries, int64 division over the whole range, attention with fully masked rows, integer scans,
scatter_reduce without self, int32 index tensors, float64 reductions/norms/convolution, and the RLX
kernels the workaround layer routes around. Each right value is what eager PyTorch gives."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sample_utils import of_inputs

A = torch.ops.aten
INF, NAN = float("inf"), float("nan")
torch.manual_seed(5)


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

SAMPLES: list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]] = [
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
    # Attention: a query row whose every key is masked gives zeros (torch >= 2.5), bool and -inf masks, GQA.
    (
        "sdpa_fully_masked_row_smallest",
        of_inputs(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
        (torch.randn(1, 1, 1, 4), torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4), torch.zeros(1, 1, 1, 2) > 0),
    ),
    (
        "sdpa_fully_masked_rows_bool_and_float",
        of_inputs(
            lambda q, k, v, m: (
                F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                F.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(m.shape).masked_fill(~m, -INF)),
            )
        ),
        (
            torch.randn(2, 2, 3, 8),
            torch.randn(2, 2, 4, 8),
            torch.randn(2, 2, 4, 8),
            torch.tensor([[1, 0, 1, 0]] * 2 + [[0] * 4]) > 0,
        ),
    ),
    (
        "sdpa_fully_masked_row_gqa",
        of_inputs(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)),
        (
            torch.randn(1, 4, 2, 8),
            torch.randn(1, 2, 3, 8),
            torch.randn(1, 2, 3, 8),
            torch.tensor([[0, 0, 0], [1, 0, 1]]) > 0,
        ),
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
    # scatter_reduce: every reduce, with and without self, positions that receive nothing keep self.
    *[
        (
            f"scatter_reduce_{reduce}_{'self' if include_self else 'noself'}",
            of_inputs(lambda x, i, s, r=reduce, inc=include_self: x.scatter_reduce(1, i, s, r, include_self=inc)),
            (torch.randn(3, 6), torch.tensor([[0, 2, 0, 5], [1, 1, 1, 1], [4, 0, 4, 0]]), torch.randn(3, 4)),
        )
        for reduce in ("sum", "prod", "mean", "amax", "amin")
        for include_self in (False, True)
    ],
    (
        "scatter_reduce_mean_int64_float64",
        of_inputs(
            lambda x, i, s, d: (
                x.scatter_reduce(0, i, s, "mean", include_self=False),
                x.scatter_reduce(0, i, s, "sum"),
                d.scatter_reduce(0, i, d[:4] * 3, "mean"),
            )
        ),
        (
            torch.tensor([10, -7, 3, 8, 1]),
            torch.tensor([0, 0, 3, 0]),
            torch.tensor([5, -6, 2**40, 4]),
            torch.randn(5).double(),
        ),
    ),
    # int32 index tensors (torch accepts int32 and int64 indices for these ops).
    (
        "index_ops_int32_indices",
        of_inputs(
            lambda w, x, i: (
                F.embedding(i, w),
                x.index_select(1, i),
                x[:, i],
                torch.gather(x, 1, i.reshape(1, 3).expand(3, 3)),
                x.scatter(1, i.reshape(1, 3), 2.5),
                x.scatter_add(1, i.reshape(1, 3), torch.ones(1, 3)),
                F.embedding_bag(i, w, torch.tensor([0, 2], dtype=torch.int32)),
            )
        ),
        (torch.randn(10, 4), torch.randn(3, 5), torch.tensor([1, 4, 2], dtype=torch.int32)),
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
        "float64_norms_conv_pool",
        of_inputs(
            lambda x, w, g, b, m, v: (
                F.conv2d(x, w, padding=1, stride=(1, 2)),
                F.conv2d(x, w[:2].reshape(4, 2, 3, 3), groups=2, padding=2, dilation=2),
                F.batch_norm(x, m, v, g, b, eps=1e-3),
                F.group_norm(x, 2, g, b),
                F.max_pool2d(x, 2),
                F.avg_pool2d(x, 3, stride=2, padding=1),
                F.layer_norm(x, (7,)),
            )
        ),
        (
            torch.randn(2, 4, 6, 7).double(),
            torch.randn(3, 4, 3, 3).double(),
            torch.rand(4).double() + 0.5,
            torch.randn(4).double(),
            torch.randn(4).double(),
            torch.rand(4).double() + 0.5,
        ),
    ),
    (
        "float64_sort_topk_gather_scatter",
        of_inputs(
            lambda x, i: (
                *torch.sort(x, 1),
                *torch.topk(x, 3, dim=1),
                torch.gather(x, 1, i),
                x.scatter(1, i, x[:, :2] * 2),
                x.scatter_add(1, i, x[:, :2]),
                torch.tril(x),
                torch.argmax(x, 0),
            )
        ),
        (torch.randn(3, 6).double(), torch.tensor([[0, 5], [2, 2], [4, 1]])),
    ),
    (
        "int64_wide_moves_and_matmul",
        of_inputs(
            lambda x, y: (
                torch.tril(x),
                x.flip(0),
                x.abs() + x.neg() * 3,
                x.sign(),
                torch.sort(x, 1, descending=True),
                x.amax(1),
                x.sum(0),
                x @ y,
                torch.gather(x, 1, torch.tensor([[2, 0], [1, 1]])),
            )
        ),
        (torch.tensor([[2**53 + 1, -(2**55) - 3, 7], [2**40 + 5, -9, 0]]), torch.tensor([[3, -1], [2, 5], [-4, 7]])),
    ),
    (
        "int32_wide_data_paths",
        of_inputs(lambda x, m: (torch.where(m, x, -x), x.flip(1), torch.tril(x), x.abs(), x * 3 + 1, x > 2**24)),
        (
            torch.tensor([[2**30 + 1, -(2**29) - 3, 7], [2**24 + 1, -9, 0]], dtype=torch.int32),
            torch.tensor([[True, False, True]] * 2),
        ),
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
        "float64_max_pool_backward",
        of_inputs(
            lambda g, x: A.max_pool2d_with_indices_backward.default(
                g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, A.max_pool2d_with_indices.default(x, [2, 2], [2, 2])[1]
            )
        ),
        (torch.randn(1, 2, 2, 2).double(), torch.randn(1, 2, 4, 4).double()),
    ),
    (
        "float64_embedding_bag_max",
        of_inputs(lambda w, i: A._embedding_bag.default(w, i, torch.tensor([0, 3]), False, 2)[0]),
        (torch.randn(6, 3).double(), torch.tensor([0, 5, 2, 4, 1])),
    ),
]

SAMPLES += [
    (
        "bitwise_ops_integers",
        of_inputs(lambda a, b, c: (a & b, a | b, a ^ b, ~a, torch.bitwise_xor(c, c.flip(0)), ~c, a.any(), c.all(0))),
        (
            torch.tensor([2**40 + 5, -7, 12, 0]),
            torch.tensor([3, 2**33 - 1, -12, 9]),
            torch.tensor([200, 7, 0], dtype=torch.uint8),
        ),
    ),
    (
        "conv_integer",
        of_inputs(lambda x, w: (F.conv2d(x, w, padding=1), F.conv1d(x[:, :, 0], w[:, :, 0], stride=2))),
        (torch.randint(-50, 50, (1, 2, 5, 6)), torch.randint(-9, 9, (3, 2, 3, 3))),
    ),
    (
        "log1p_expm1_softplus_edges",
        of_inputs(lambda x: (torch.log1p(x), torch.expm1(x), F.softplus(x, beta=3, threshold=0.2), F.softplus(x * 30))),
        (torch.tensor([1e-10, -1e-8, 0.0, 1e-3, 5.0, -0.999, 100.0, -100.0, INF, -INF, NAN, -1.0, 2e-30]),),
    ),
    (
        "scatter_reduce_extremes_int64_float64",
        of_inputs(
            lambda x, i, s, d: (
                x.scatter_reduce(0, i, s, "amax", include_self=False),
                x.scatter_reduce(0, i, s, "prod"),
                d.scatter_reduce(0, i, d[:4] * 3, "amin", include_self=False),
                d.scatter_reduce(0, i, d[:4] - 1, "amax"),
            )
        ),
        (
            torch.tensor([10, -7, 3, 8, 1]),
            torch.tensor([0, 0, 3, 0]),
            torch.tensor([5, -6, 2**40, 4]),
            torch.randn(5).double(),
        ),
    ),
    (
        "rank0_reductions_and_args",
        of_inputs(lambda x: (x.sum(0), x.amax(0), x.argmax(0), x.max(0), x.mean(-1), torch.logsumexp(x, 0))),
        (torch.tensor(2.5),),
    ),
    (
        "index_add_uint8_wraps",
        of_inputs(lambda x, s: x.index_add(0, torch.tensor([1, 1]), s)),
        (torch.tensor([5, 200, 7], dtype=torch.uint8), torch.tensor([100, 30], dtype=torch.uint8)),
    ),
    (
        "grid_sample_half",
        of_inputs(lambda x, g: F.grid_sample(x, g, align_corners=False)),
        (torch.randn(1, 2, 5, 7).half(), (torch.rand(1, 4, 3, 2) * 2.4 - 1.2).half()),
    ),
    (
        "half_cast_and_trunc_division",
        of_inputs(
            lambda x, y: ((x * 3).half().float() * 7, torch.div(x.bfloat16(), y.bfloat16(), rounding_mode="trunc"))
        ),
        (torch.tensor([0.1, 1.0, 2.0 / 3, 70000.0, -1e-8]), torch.tensor([0.1, 0.1, 0.2, 3.0, 1.0])),
    ),
]

SAMPLES.append(
    (
        "avg_pool_integers_truncate",
        of_inputs(lambda x: (F.avg_pool2d(x, 2, ceil_mode=True), F.avg_pool1d(x[0], 3, stride=1, padding=1))),
        (torch.tensor([[[-3, 0, 5, 2, -7], [-8, 1, 1, 4, 9], [2**40, 3, -1, 0, 6]]]),),
    )
)


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
for _dt in ("float16", "bfloat16"):
    SAMPLES.append((f"half_scalar_operands_{_dt}", of_inputs(_half_scalars), (_HALF_X.to(getattr(torch, _dt)),)))
    # 0.7 / x is reciprocal(x) * 0.7: torch rounds the reciprocal to the dtype, RLX keeps it in float32
    SAMPLES.append((f"reflected_scalar_div_{_dt}", of_inputs(lambda x: 0.7 / x), (_HALF_X.to(getattr(torch, _dt)),)))
SAMPLES.append(
    (
        "half_scalar_tensor_operands",  # a rank-0 float32 `other` is read in float32 too
        of_inputs(lambda x, s: (x * s, x / s, torch.floor_divide(x, s))),
        (_HALF_X.half(), torch.tensor(0.1)),
    )
)

# remainder by +-inf: x where the signs agree, +-inf where they differ (torch's fmod + b), NaN never.
_INF_DEN = torch.tensor([INF, INF, INF, -INF, 2.0, -INF, -INF, INF])
_INF_NUM = torch.tensor([1.0, -1.0, 0.0, 3.0, 5.0, -2.5, 0.0, INF])
for _dt in ("float32", "float64", "float16", "bfloat16"):
    _t = getattr(torch, _dt)
    SAMPLES.append(
        (
            f"remainder_infinite_divisor_{_dt}",
            of_inputs(lambda a, d: (*_div_family(a, d), torch.remainder(a, INF), torch.remainder(a, -INF))),
            (_INF_NUM.to(_t), _INF_DEN.to(_t)),
        )
    )

# Casts to bfloat16 keep float32's subnormals (rounded to multiples of 2**-133, ties to even), overflow to inf.
SAMPLES.append(
    (
        "half_subnormal_casts",
        of_inputs(lambda x: (x.to(torch.bfloat16), x.to(torch.float16), (x * 2).to(torch.bfloat16))),
        (
            torch.tensor(
                [1e-39, -3e-40, 2.0**-133, 3 * 2.0**-134, 2.0**-134, 1e-45, 1.17e-38, 1.2e-38, 1.0, 3.4e38, 70000.0]
            ),
        ),
    )
)

# elu/selu/celu of tiny negatives: torch's kernel uses expm1 (exp(x) - 1 gives 0 for -1e-8).
_TINY_NEG = -torch.logspace(-8, 0, 40)
SAMPLES.append(
    (
        "elu_family_tiny_negatives",
        of_inputs(lambda y: (F.elu(y), F.elu(y, 0.3), F.selu(y), F.celu(y, 0.7), F.elu(y.half(), 0.3))),
        (_TINY_NEG,),
    )
)

# Samples whose semantics differ between decomposition levels: also run at `high`.
ALL_LEVELS = {name for name, _, _ in SAMPLES if name.startswith(("sdpa_", "half_scalar_"))}
# Samples whose every element must be within 1e-6 of eager PyTorch relative to itself (tests/test_ops.py).
RELATIVE = {"elu_family_tiny_negatives"}
# Samples whose every output must equal eager PyTorch bit for bit (tests/test_ops.py).
BIT_EXACT = {
    name for name, _, _ in SAMPLES if name.startswith(("half_scalar_", "remainder_infinite_", "half_subnormal_"))
}
