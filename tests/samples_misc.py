"""Parity samples for miscellaneous ops (distances, strided views, masked_scatter, bitwise scalars, ...).

Several call an ATen overload explicitly: torch's Core ATen table decomposes them, so only
the `aten` level reaches them (fill.Scalar, select_scatter, squeeze.dim, var.dim).
"""

from __future__ import annotations

import torch
from torch import nn

from sample_utils import of_inputs as Fn

A = torch.ops.aten
INF = float("inf")
MM = "use_mm_for_euclid_dist"
NO_MM = "donot_use_mm_for_euclid_dist"


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def grid(*shape: int) -> torch.Tensor:
    """Small integer-valued floats: coordinates repeat, so some differences are exactly 0."""
    return torch.randint(-2, 3, shape).float()


def ints(*shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(-100, 100, shape, dtype=dtype)


def _cdist_all_p(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(torch.cdist(a, b, p=p) for p in (0.0, 1.0, 2.0, INF, 1.5, 3.0))


def _pdist_all_p(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(torch.pdist(a, p=p) for p in (0.0, 1.0, 2.0, INF, 0.5, 3.0))


def wide(*shape: int) -> torch.Tensor:
    """int64 values far beyond float32-exact integers (|x| < 2**40): data movement must stay exact."""
    return torch.randint(-(2**40), 2**40, shape)


def full_int32(n: int) -> torch.Tensor:
    return torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32)


def _bitwise(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (torch.bitwise_and(a, 0x5A), torch.bitwise_or(a, 6), torch.bitwise_xor(a, -3), torch.bitwise_and(a, -8))


torch.manual_seed(0)
SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # cdist: every p on the direct path; p = 2 by matmul when torch's compute_mode picks it
    ("cdist_p_direct", Fn(_cdist_all_p), (grid(2, 5, 3), grid(2, 4, 3))),
    ("cdist_batch_broadcast", Fn(lambda a, b: torch.cdist(a, b, p=1.0)), (r(3, 1, 4, 5), r(2, 6, 5))),
    ("cdist_p2_mm_over_25_rows", Fn(lambda a, b: torch.cdist(a, b)), (r(30, 4), r(7, 4))),
    (
        "cdist_compute_modes",
        Fn(lambda a, b: (torch.cdist(a, b, compute_mode=MM), torch.cdist(a, b, compute_mode=NO_MM))),
        (r(2, 27, 3), r(2, 5, 3)),
    ),
    (  # compute_mode: None/0 uses matmul above 25 rows, 1 always, 2 never
        "cdist_op_compute_mode",
        Fn(
            lambda a, b, c: (
                A._cdist_forward.default(a, b, 2.0, 1),
                A._cdist_forward.default(c, b, 2.0, None),
                A._cdist_forward.default(c, b, 2.0, 0),
                A._cdist_forward.default(c, b, 2.0, 2),
                A._cdist_forward.default(a, b, 2.0, 0),
            )
        ),
        (r(4, 3), r(5, 3), r(26, 3)),
    ),
    ("pdist_p", Fn(_pdist_all_p), (grid(6, 3),)),
    ("pdist_float64", Fn(lambda a: torch.pdist(a)), (r(5, 4).double(),)),
    # as_strided on a contiguous input: overlapping windows, offsets, broadcast (stride 0), ints
    (
        "as_strided_windows",
        Fn(
            lambda a: (
                torch.as_strided(a, (3, 4), (2, 1)),
                torch.as_strided(a, (2, 3, 2), (4, 1, 3), 2),
                torch.as_strided(a, (4, 3), (0, 4), 1),
                torch.as_strided(a, (), (), 7),
            )
        ),
        (r(3, 4),),
    ),
    ("as_strided_int64", Fn(lambda a: torch.as_strided(a + 1, (2, 2), (1, 3), 4)), (wide(12),)),
    # diagonal: positive/negative offsets, any pair of dims, either order
    (
        "diagonal_offsets_dims",
        Fn(
            lambda a: (
                torch.diagonal(a),
                torch.diagonal(a, 1, 0, 2),
                torch.diagonal(a, -2, 2, 0),
                torch.diagonal(a, 2, -1, -2),
                torch.diagonal(a, -1, 1, 2),
            )
        ),
        (r(3, 4, 5),),
    ),
    ("diagonal_matrix_int", Fn(lambda a: (torch.diag(a), a.diagonal(-1))), (ints(4, 4),)),
    # masked_scatter: the mask broadcasts; source is consumed in row-major order of True positions
    (
        "masked_scatter_broadcast",
        Fn(lambda a, m, s: a.masked_scatter(m, s)),
        (r(3, 4), torch.tensor([True, False, True, True]), r(13)),
    ),
    (
        "masked_scatter_expand_self",
        Fn(lambda a, m, s: a.masked_scatter(m, s)),
        (r(2, 4), torch.rand(3, 1, 4) > 0.5, r(3, 8)),
    ),
    (
        "masked_scatter_int_bool",
        Fn(lambda a, m, s, t: (a.masked_scatter(m, s), (a > 0).masked_scatter(m, t))),
        (wide(3, 5), torch.rand(3, 5) > 0.4, wide(20), torch.rand(15) > 0.5),
    ),
    # bitwise and/or/xor with a scalar
    ("bitwise_scalar_int64", Fn(lambda a: (*_bitwise(a), torch.bitwise_xor(a, 0x5A5A5A5A5A))), (wide(4, 5),)),
    (
        "bitwise_scalar_int32_int8",
        Fn(lambda a, b: (*_bitwise(a), *_bitwise(b))),
        (
            full_int32(6),
            ints(6, dtype=torch.int8),
        ),
    ),
    ("bitwise_scalar_uint8", Fn(_bitwise), (torch.randint(0, 256, (7,), dtype=torch.uint8),)),
    (
        "bitwise_scalar_bool",
        Fn(
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
    # div.Scalar_mode, fill.Scalar, select_scatter, squeeze.dim, var.dim: explicit overloads
    (
        "div_scalar_mode",
        Fn(
            lambda a, i: (
                A.div.Scalar_mode(a, 0.7, rounding_mode="floor"),
                A.div.Scalar_mode(a, -0.7, rounding_mode="trunc"),
                A.div.Scalar_mode(i, 7, rounding_mode="floor"),
                A.div.Scalar_mode(i, -7, rounding_mode="trunc"),
            )
        ),
        (r(3, 4) * 5, ints(3, 4)),
    ),
    (
        "fill_scalar",
        Fn(lambda a, i, m: (A.fill.Scalar(a, 2.5), A.fill.Scalar(i, -3), A.fill.Scalar(m, True) | m)),
        (r(2, 3), ints(4), torch.rand(3) > 0.5),
    ),
    (
        "select_scatter",
        Fn(
            lambda a, s, t, i, u: (
                torch.select_scatter(a, s, 1, -1),
                torch.select_scatter(a, t, 0, 0),
                torch.select_scatter(i, u, 2, 1),
            )
        ),
        (r(3, 4, 2), r(3, 2), r(4, 2), ints(2, 2, 3), ints(2, 2)),
    ),
    ("squeeze_dim", Fn(lambda a: (a.squeeze(1), a.squeeze(-1), a.squeeze(0))), (r(3, 1, 4, 1),)),
    (
        "var_dim",
        Fn(
            lambda a: (
                torch.var(a, 1),
                A.var.dim(a, [0, 2], False, True),
                A.var.dim(a, None, True, False),
                a.var(-1, keepdim=True),
            )
        ),
        (r(3, 4, 5),),
    ),
    (  # out= variant: at `aten` level only the decomposition fallback (which functionalizes) lowers it
        "atan2_out",
        Fn(lambda a, b: torch.atan2(a, b, out=torch.empty(3, 4)) * 2),
        (r(3, 4), r(3, 4)),
    ),
    (
        "empty_strided_then_filled",
        Fn(lambda a: A.fill.Scalar(A.empty_strided.default([2, 3], [1, 2]), 1.5) + a),
        (r(2, 3),),
    ),
]
