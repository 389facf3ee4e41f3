"""Parity samples of pooling and fold (lower/ops/pool.py): max, average and adaptive pooling in 1-D to 3-D
(ceil_mode, padding, dilation, count_include_pad, divisor_override, unbatched), indices (ties take the first
index; NaN windows), integer pooling (max in float64; average as float64 sums truncated toward zero, int64
only: eager CPU has no other integer avg_pool kernel), the backward ops, and col2im (fold); and argument
values the capability pass refuses. Ops torch's core table decomposes (avg_pool1d, adaptive_avg_pool1d) are
called explicitly, so the `aten` level reaches them.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, A, Sample, check_op_sample, of_inputs, r, sample_ids

_GEN = torch.Generator().manual_seed(3)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _ties(*shape: int) -> torch.Tensor:
    """Small integer values as floats: many equal maxima, so the first-index rule matters."""
    return torch.randint(0, 3, shape, generator=_GEN).float()


def _with_nan(*shape: int) -> torch.Tensor:
    x = _r(*shape)
    x.view(-1)[:: max(1, x.numel() // 5)] = float("nan")
    return x


def _max2d_backward(k: int, s: int, p: int, d: int, ceil: bool) -> nn.Module:
    """grad_input of max_pool2d via the explicit backward op, fed the forward's own indices."""

    def fn(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        _, idx = A.max_pool2d_with_indices.default(x, [k, k], [s, s], [p, p], [d, d], ceil)
        return A.max_pool2d_with_indices_backward.default(g, x, [k, k], [s, s], [p, p], [d, d], ceil, idx)

    return of_inputs(fn)


def _max3d_backward(k: int, s: int, p: int) -> nn.Module:
    def fn(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        _, idx = A.max_pool3d_with_indices.default(x, [k] * 3, [s] * 3, [p] * 3)
        return A.max_pool3d_with_indices_backward.default(g, x, [k] * 3, [s] * 3, [p] * 3, [1] * 3, False, idx)

    return of_inputs(fn)


def _ri(*shape: int, lo: int = -50, hi: int = 50) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=_GEN)


def _with_sparse_nan(*shape: int) -> torch.Tensor:
    x = _r(*shape)
    x.view(-1)[:: max(1, x.numel() // 7)] = float("nan")
    return x


def _two_nans() -> torch.Tensor:
    """[1, 2, 3, 4, 5]: channel 0 holds NaNs, several in one window (torch's index is the last one); channel 1
    is all -inf (the index is the window's first element)."""
    x = _r(1, 2, 3, 4, 5)
    x[0, 0, 0, 1, 1] = x[0, 0, 0, 3, 1] = x[0, 0, 2, 3, 0] = float("nan")
    x[0, 1] = float("-inf")
    return x


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("max_pool_stride_pad", nn.MaxPool2d(3, stride=2, padding=1), (r(1, 2, 9, 9),)),
    ("max_pool_ceil_noop", nn.MaxPool2d(2, ceil_mode=True), (r(1, 2, 8, 8),)),
    ("adaptive_avg_2x2", nn.AdaptiveAvgPool2d((2, 3)), (r(2, 3, 8, 9),)),
    # max pooling: ceil_mode that changes the size, dilation (with padding and ceil)
    ("max_pool_ceil", nn.MaxPool2d(3, stride=2, ceil_mode=True), (_r(1, 2, 8, 10),)),
    ("max_pool_ceil_pad", nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (_r(2, 3, 8, 7),)),
    ("max_pool_dilation", nn.MaxPool2d(3, stride=1, padding=1, dilation=2), (_r(1, 2, 9, 8),)),
    ("max_pool_dilation_ceil", nn.MaxPool2d(2, stride=2, dilation=(2, 1), ceil_mode=True), (_r(1, 2, 10, 9),)),
    # average pooling: count_include_pad, ceil_mode, divisor_override
    ("avg_pool_plain", nn.AvgPool2d(2), (_r(1, 3, 8, 8),)),
    ("avg_pool_pad_include", nn.AvgPool2d(3, stride=2, padding=1), (_r(1, 2, 9, 8),)),
    ("avg_pool_pad_exclude", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (_r(1, 2, 9, 8),)),
    ("avg_pool_ceil_include", nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (_r(2, 2, 8, 8),)),
    (
        "avg_pool_ceil_exclude",
        nn.AvgPool2d((2, 3), stride=(2, 2), ceil_mode=True, count_include_pad=False),
        (_r(1, 2, 7, 8),),
    ),
    ("avg_pool_divisor_override", nn.AvgPool2d(2, padding=1, divisor_override=3), (_r(1, 2, 6, 6),)),
    # adaptive pooling: non-uniform windows, 3-D input, max
    ("adaptive_avg_nonuniform", nn.AdaptiveAvgPool2d((3, 4)), (_r(2, 3, 7, 10),)),
    ("adaptive_avg_mixed_3d", nn.AdaptiveAvgPool2d((2, 3)), (_r(3, 8, 7),)),
    ("adaptive_avg_global", nn.AdaptiveAvgPool2d(1), (_r(2, 4, 5, 3),)),
    ("adaptive_max_nonuniform", nn.AdaptiveMaxPool2d((3, 2)), (_r(1, 3, 7, 5),)),
    ("adaptive_max_uniform_global", of_inputs(lambda a: F.adaptive_max_pool2d(a, (2, 1))), (_r(1, 2, 6, 5),)),
    # 1-D pooling
    ("avg_pool1d_plain", of_inputs(lambda x: A.avg_pool1d.default(x, [2])), (_r(2, 3, 8),)),
    (
        "avg_pool1d_pad_ceil_exclude",
        of_inputs(lambda x: A.avg_pool1d.default(x, [3], [2], [1], True, False)),
        (_r(2, 3, 10),),
    ),
    ("adaptive_avg_pool1d_nonuniform", of_inputs(lambda x: A.adaptive_avg_pool1d.default(x, [4])), (_r(2, 3, 10),)),
    ("adaptive_avg_pool1d_unbatched", of_inputs(lambda x: A.adaptive_avg_pool1d.default(x, [3])), (_r(3, 9),)),
    ("max_pool1d_dilation", nn.MaxPool1d(3, stride=2, padding=1, dilation=2), (_r(2, 3, 11),)),
    ("max_pool1d_indices", of_inputs(lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True)), (_ties(2, 3, 10),)),
    # 3-D pooling
    ("avg_pool3d_plain", nn.AvgPool3d(2), (_r(1, 2, 4, 6, 6),)),
    (
        "avg_pool3d_pad_ceil_exclude",
        nn.AvgPool3d((3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1), ceil_mode=True, count_include_pad=False),
        (_r(2, 2, 5, 4, 6),),
    ),
    ("avg_pool3d_pad_include", nn.AvgPool3d(3, stride=2, padding=1), (_r(1, 2, 5, 6, 7),)),
    ("avg_pool3d_divisor_override", nn.AvgPool3d(2, padding=1, divisor_override=5), (_r(1, 2, 4, 5, 4),)),
    ("avg_pool3d_unbatched_float64", nn.AvgPool3d(2, stride=1, padding=1), (_r(2, 4, 5, 3).double(),)),
    ("adaptive_avg_pool3d_nonuniform", nn.AdaptiveAvgPool3d((2, 3, 4)), (_r(1, 2, 5, 6, 7),)),
    ("adaptive_avg_pool3d_uniform_unbatched", nn.AdaptiveAvgPool3d((2, 1, 3)), (_r(3, 4, 5, 6),)),
    ("adaptive_avg_pool3d_global", nn.AdaptiveAvgPool3d(1), (_r(2, 3, 4, 4, 5),)),
    ("max_pool3d_plain", nn.MaxPool3d(2), (_r(1, 2, 4, 6, 6),)),
    ("max_pool3d_dilation", nn.MaxPool3d(2, stride=1, padding=1, dilation=2), (_r(1, 2, 5, 6, 5),)),
    ("max_pool3d_indices", of_inputs(lambda x: F.max_pool3d(x, 2, return_indices=True)), (_r(1, 2, 4, 6, 6),)),
    (
        "max_pool3d_indices_pad_ceil",
        of_inputs(lambda x: F.max_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)),
        (_ties(2, 2, 5, 6, 7),),
    ),
    (
        "max_pool3d_indices_dilation",
        of_inputs(lambda x: F.max_pool3d(x, (2, 3, 2), stride=(1, 2, 2), dilation=(2, 1, 2), return_indices=True)),
        (_r(1, 2, 6, 7, 7),),
    ),
    ("max_pool3d_indices_unbatched", of_inputs(lambda x: F.max_pool3d(x, 2, return_indices=True)), (_r(2, 4, 4, 5),)),
    # integer max pooling (computed in float64)
    (
        "max_pool2d_uint8",
        nn.MaxPool2d(3, stride=2, padding=1),
        (torch.randint(0, 255, (1, 3, 7, 8), generator=_GEN).to(torch.uint8),),
    ),
    (
        "max_pool3d_indices_int64",
        of_inputs(lambda x: F.max_pool3d(x, 2, stride=1, return_indices=True)),
        (torch.randint(-5, 5, (1, 2, 3, 4, 4), generator=_GEN),),
    ),
    # 2-D max pooling indices
    ("max_pool2d_indices", of_inputs(lambda x: F.max_pool2d(x, 2, return_indices=True)), (_r(2, 3, 6, 8),)),
    (
        "max_pool2d_indices_ties_pad_ceil",
        of_inputs(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)),
        (_ties(1, 3, 8, 9),),
    ),
    (
        "max_pool2d_indices_dilation",
        of_inputs(lambda x: F.max_pool2d(x, 3, stride=1, padding=1, dilation=2, return_indices=True)),
        (_r(1, 2, 7, 8),),
    ),
    ("max_pool2d_indices_nan", of_inputs(lambda x: F.max_pool2d(x, 2, return_indices=True)), (_with_nan(1, 2, 6, 6),)),
    (
        "max_pool2d_indices_float64",
        of_inputs(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)),
        (_r(1, 2, 7, 6).double(),),
    ),
    # backward ops
    ("max_pool2d_backward_overlap", _max2d_backward(3, 1, 1, 1, False), (_r(2, 3, 6, 7), _ties(2, 3, 6, 7))),
    ("max_pool2d_backward_dilation_ceil", _max2d_backward(2, 2, 1, 2, True), (_r(1, 2, 4, 5), _r(1, 2, 7, 8))),
    ("max_pool3d_backward", _max3d_backward(3, 2, 1), (_r(1, 2, 3, 3, 4), _r(1, 2, 5, 6, 7))),
    (
        "avg_pool2d_backward_pad_ceil_exclude",
        of_inputs(lambda g, x: A.avg_pool2d_backward.default(g, x, [3, 3], [2, 2], [1, 1], True, False, None)),
        (_r(2, 3, 5, 5), _r(2, 3, 8, 9)),
    ),
    (
        "avg_pool2d_backward_divisor_override",
        of_inputs(lambda g, x: A.avg_pool2d_backward.default(g, x, [2, 3], [1, 2], [1, 1], False, True, 4)),
        (_r(1, 2, 8, 4), _r(1, 2, 7, 8)),
    ),
    (
        "avg_pool3d_backward",
        of_inputs(lambda g, x: A.avg_pool3d_backward.default(g, x, [2, 2, 2], [2, 2, 2], [1, 0, 1], False, True, None)),
        (_r(1, 2, 3, 3, 4), _r(1, 2, 4, 6, 6)),
    ),
    (
        "adaptive_avg_pool2d_backward",
        of_inputs(lambda g, x: A._adaptive_avg_pool2d_backward.default(g, x)),
        (_r(2, 3, 3, 4), _r(2, 3, 7, 10)),
    ),
    (
        "adaptive_avg_pool3d_backward",
        of_inputs(lambda g, x: A._adaptive_avg_pool3d_backward.default(g, x)),
        (_r(1, 2, 2, 3, 4), _r(1, 2, 5, 6, 7)),
    ),
    # col2im (fold)
    ("fold_plain", nn.Fold((6, 8), 2, stride=2), (_r(2, 12, 12),)),
    ("fold_overlap_pad", nn.Fold((5, 6), 3, padding=1), (_r(1, 18, 30),)),
    ("fold_dilation_stride", nn.Fold((7, 8), (2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)), (_r(2, 6, 21),)),
    ("fold_unbatched_uncovered", nn.Fold((7, 7), 2, stride=3), (_r(8, 4),)),
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
        "avg_pool_integers_truncate",
        of_inputs(lambda x: (F.avg_pool2d(x, 2, ceil_mode=True), F.avg_pool1d(x[0], 3, stride=1, padding=1))),
        (torch.tensor([[[-3, 0, 5, 2, -7], [-8, 1, 1, 4, 9], [2**40, 3, -1, 0, 6]]]),),
    ),
    # col2im of im2col (F.fold of F.unfold), and in float64
    (
        "fold_of_unfold",
        of_inputs(lambda a: F.fold(F.unfold(a, 3, padding=1, stride=2), (7, 8), 3, padding=1, stride=2)),
        (r(2, 3, 7, 8),),
    ),
    ("fold_float64", nn.Fold((5, 6), 3, padding=1, stride=(1, 2)), (_r(2, 18, 15).double(),)),
    # 3-D max pooling on the fused path and float64
    ("max_pool3d_pad_ceil", nn.MaxPool3d(3, stride=2, padding=1, ceil_mode=True), (_r(1, 2, 5, 6, 7),)),
    ("max_pool3d_float64", nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)), (_r(1, 2, 4, 6, 5).double(),)),
    # adaptive max pooling, 1-D to 3-D, values and indices
    ("adaptive_max_pool3d_nonuniform", nn.AdaptiveMaxPool3d((2, 3, 4)), (_r(1, 2, 5, 7, 6),)),
    ("adaptive_max_pool3d_global", nn.AdaptiveMaxPool3d(1), (_r(2, 3, 3, 4, 5),)),
    ("adaptive_max_pool3d_unbatched_float64", nn.AdaptiveMaxPool3d((1, 2, 3)), (_r(2, 3, 4, 7).double(),)),
    ("adaptive_max_pool1d", nn.AdaptiveMaxPool1d(4), (_r(2, 3, 10),)),
    (
        "adaptive_max_pool3d_indices_ties",
        of_inputs(lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True)),
        (_ties(1, 2, 5, 7, 6),),
    ),
    (
        "adaptive_max_pool3d_indices_float64_unbatched",
        of_inputs(lambda x: F.adaptive_max_pool3d(x, (3, 1, 2), return_indices=True)),
        (_r(2, 4, 5, 5).double(),),
    ),
    (
        "adaptive_max_pool2d_indices_nan",
        of_inputs(lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True)),
        (_with_sparse_nan(1, 2, 7, 9),),
    ),
    (
        "adaptive_max_pool_indices_two_nans_all_neg_inf",
        of_inputs(
            lambda x: (
                F.adaptive_max_pool2d(x[0, :, 0], (1, 2), return_indices=True),
                F.adaptive_max_pool3d(x, 1, True),
            )
        ),
        (_two_nans(),),
    ),
    (
        "adaptive_max_pool1d_indices_unbatched",
        of_inputs(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True)),
        (_ties(3, 10),),
    ),
    ("adaptive_avg_pool3d_float64", nn.AdaptiveAvgPool3d((2, 3, 2)), (_r(1, 2, 5, 7, 4).double(),)),
    # integer average pooling: float64 sums divided by torch's divisor, truncated toward zero (int64 only:
    # eager CPU has no other integer avg_pool kernel)
    ("avg_pool3d_int64", nn.AvgPool3d(2), (_ri(1, 2, 4, 4, 6),)),
    (
        "avg_pool3d_int64_pad_ceil_exclude",
        nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        (_ri(2, 2, 5, 6, 5),),
    ),
    ("avg_pool3d_int64_divisor_override", nn.AvgPool3d(2, padding=1, divisor_override=3), (_ri(1, 2, 3, 4, 5),)),
    (
        "avg_pool2d_int64_pad_include_divisor",
        of_inputs(lambda x: (F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, (2, 3), 1, (1, 0), divisor_override=4))),
        (_ri(2, 3, 7, 8),),
    ),
    ("avg_pool1d_int64_exclude_pad", nn.AvgPool1d(4, stride=3, padding=2, count_include_pad=False), (_ri(2, 3, 11),)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


# Pooling/fold argument values RLX cannot compute are refused by the capability pass, naming the overload.
REFUSED = [
    (
        "aten.adaptive_avg_pool3d.default",
        lambda x: A.adaptive_avg_pool3d.default(x, [2, 0, 3]),
        (torch.randn(1, 2, 4, 5, 6),),
        "output_size with None/0 entries is not supported",
    ),
]


@pytest.mark.parametrize(("target", "fn", "inputs", "reason"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused(target: str, fn, inputs: tuple[torch.Tensor, ...], reason: str, tmp_path) -> None:
    with pytest.raises(rti.UnsupportedOpsError) as err:
        rti.from_torch(of_inputs(fn), inputs, tmp_path / "o", decomposition="aten", auto_decompose=False)
    assert target in err.value.targets
    assert reason in str(err.value)
