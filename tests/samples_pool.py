"""Parity samples for pooling, padding, fold and their backward ops; tests/test_ops.py runs them.

Ops torch's core table decomposes (reflection/replication pads, avg_pool1d,
adaptive_avg_pool1d, col2im) are called explicitly, so the `aten` level reaches them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import of_inputs as _Fn

_GEN = torch.Generator().manual_seed(11)
A = torch.ops.aten


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

    return _Fn(fn)


def _max3d_backward(k: int, s: int, p: int) -> nn.Module:
    def fn(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        _, idx = A.max_pool3d_with_indices.default(x, [k] * 3, [s] * 3, [p] * 3)
        return A.max_pool3d_with_indices_backward.default(g, x, [k] * 3, [s] * 3, [p] * 3, [1] * 3, False, idx)

    return _Fn(fn)


SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # reflection / replication padding, per overload
    ("reflection_pad1d", _Fn(lambda x: A.reflection_pad1d.default(x, [2, 1])), (_r(2, 3, 9),)),
    ("reflection_pad2d", _Fn(lambda x: A.reflection_pad2d.default(x, [1, 2, 3, 0])), (_r(1, 2, 6, 7),)),
    ("reflection_pad3d", _Fn(lambda x: A.reflection_pad3d.default(x, [1, 1, 2, 0, 1, 2])), (_r(1, 2, 4, 5, 6),)),
    ("replication_pad1d", _Fn(lambda x: A.replication_pad1d.default(x, [3, 1])), (_r(2, 3, 7),)),
    ("replication_pad2d", _Fn(lambda x: A.replication_pad2d.default(x, [2, 1, 0, 3])), (_r(1, 2, 5, 6),)),
    ("replication_pad3d", _Fn(lambda x: A.replication_pad3d.default(x, [2, 1, 0, 1, 3, 2])), (_r(1, 2, 3, 4, 5),)),
    # 1-D pooling
    ("avg_pool1d_plain", _Fn(lambda x: A.avg_pool1d.default(x, [2])), (_r(2, 3, 8),)),
    (
        "avg_pool1d_pad_ceil_exclude",
        _Fn(lambda x: A.avg_pool1d.default(x, [3], [2], [1], True, False)),
        (_r(2, 3, 10),),
    ),
    ("adaptive_avg_pool1d_nonuniform", _Fn(lambda x: A.adaptive_avg_pool1d.default(x, [4])), (_r(2, 3, 10),)),
    ("adaptive_avg_pool1d_unbatched", _Fn(lambda x: A.adaptive_avg_pool1d.default(x, [3])), (_r(3, 9),)),
    ("max_pool1d_dilation", nn.MaxPool1d(3, stride=2, padding=1, dilation=2), (_r(2, 3, 11),)),
    ("max_pool1d_indices", _Fn(lambda x: F.max_pool1d(x, 3, 2, 1, return_indices=True)), (_ties(2, 3, 10),)),
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
    ("max_pool3d_indices", _Fn(lambda x: F.max_pool3d(x, 2, return_indices=True)), (_r(1, 2, 4, 6, 6),)),
    (
        "max_pool3d_indices_pad_ceil",
        _Fn(lambda x: F.max_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)),
        (_ties(2, 2, 5, 6, 7),),
    ),
    (
        "max_pool3d_indices_dilation",
        _Fn(lambda x: F.max_pool3d(x, (2, 3, 2), stride=(1, 2, 2), dilation=(2, 1, 2), return_indices=True)),
        (_r(1, 2, 6, 7, 7),),
    ),
    ("max_pool3d_indices_unbatched", _Fn(lambda x: F.max_pool3d(x, 2, return_indices=True)), (_r(2, 4, 4, 5),)),
    # integer max pooling (computed in float64)
    (
        "max_pool2d_uint8",
        nn.MaxPool2d(3, stride=2, padding=1),
        (torch.randint(0, 255, (1, 3, 7, 8), generator=_GEN).to(torch.uint8),),
    ),
    (
        "max_pool3d_indices_int64",
        _Fn(lambda x: F.max_pool3d(x, 2, stride=1, return_indices=True)),
        (torch.randint(-5, 5, (1, 2, 3, 4, 4), generator=_GEN),),
    ),
    # 2-D max pooling indices
    ("max_pool2d_indices", _Fn(lambda x: F.max_pool2d(x, 2, return_indices=True)), (_r(2, 3, 6, 8),)),
    (
        "max_pool2d_indices_ties_pad_ceil",
        _Fn(lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)),
        (_ties(1, 3, 8, 9),),
    ),
    (
        "max_pool2d_indices_dilation",
        _Fn(lambda x: F.max_pool2d(x, 3, stride=1, padding=1, dilation=2, return_indices=True)),
        (_r(1, 2, 7, 8),),
    ),
    ("max_pool2d_indices_nan", _Fn(lambda x: F.max_pool2d(x, 2, return_indices=True)), (_with_nan(1, 2, 6, 6),)),
    (
        "max_pool2d_indices_float64",
        _Fn(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)),
        (_r(1, 2, 7, 6).double(),),
    ),
    # backward ops
    ("max_pool2d_backward_overlap", _max2d_backward(3, 1, 1, 1, False), (_r(2, 3, 6, 7), _ties(2, 3, 6, 7))),
    ("max_pool2d_backward_dilation_ceil", _max2d_backward(2, 2, 1, 2, True), (_r(1, 2, 4, 5), _r(1, 2, 7, 8))),
    ("max_pool3d_backward", _max3d_backward(3, 2, 1), (_r(1, 2, 3, 3, 4), _r(1, 2, 5, 6, 7))),
    (
        "avg_pool2d_backward_pad_ceil_exclude",
        _Fn(lambda g, x: A.avg_pool2d_backward.default(g, x, [3, 3], [2, 2], [1, 1], True, False, None)),
        (_r(2, 3, 5, 5), _r(2, 3, 8, 9)),
    ),
    (
        "avg_pool2d_backward_divisor_override",
        _Fn(lambda g, x: A.avg_pool2d_backward.default(g, x, [2, 3], [1, 2], [1, 1], False, True, 4)),
        (_r(1, 2, 8, 4), _r(1, 2, 7, 8)),
    ),
    (
        "avg_pool3d_backward",
        _Fn(lambda g, x: A.avg_pool3d_backward.default(g, x, [2, 2, 2], [2, 2, 2], [1, 0, 1], False, True, None)),
        (_r(1, 2, 3, 3, 4), _r(1, 2, 4, 6, 6)),
    ),
    (
        "adaptive_avg_pool2d_backward",
        _Fn(lambda g, x: A._adaptive_avg_pool2d_backward.default(g, x)),
        (_r(2, 3, 3, 4), _r(2, 3, 7, 10)),
    ),
    (
        "adaptive_avg_pool3d_backward",
        _Fn(lambda g, x: A._adaptive_avg_pool3d_backward.default(g, x)),
        (_r(1, 2, 2, 3, 4), _r(1, 2, 5, 6, 7)),
    ),
    # col2im (fold)
    ("fold_plain", nn.Fold((6, 8), 2, stride=2), (_r(2, 12, 12),)),
    ("fold_overlap_pad", nn.Fold((5, 6), 3, padding=1), (_r(1, 18, 30),)),
    ("fold_dilation_stride", nn.Fold((7, 8), (2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)), (_r(2, 6, 21),)),
    ("fold_unbatched_uncovered", nn.Fold((7, 7), 2, stride=3), (_r(8, 4),)),
    # index_put after full slices (what core decomposes col2im into)
    (
        "index_put_middle_axes_accumulate",
        _Fn(lambda x, v, i, j: A.index_put.default(x, [None, i, j], v, True)),
        (_r(2, 5, 6, 3), _r(2, 4, 3), torch.tensor([0, 4, 0, 2]), torch.tensor([1, 5, 1, 0])),
    ),
    (
        "index_put_non_adjacent",
        _Fn(lambda x, v, i, j: A.index_put.default(x, [i, None, j], v)),
        (_r(4, 3, 5), _r(3, 3), torch.tensor([3, 0, 1]), torch.tensor([4, 2, 0])),
    ),
]
