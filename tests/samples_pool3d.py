"""Parity samples for 3-D convolution, transposed convolution, pooling and batch norm (video models),
the legacy `_convolution` overloads, float64 transposed convolution and integer average pooling;
tests/test_ops.py runs them at the `aten` and `core` levels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import Fn
from sample_utils import of_inputs as _Fn

_GEN = torch.Generator().manual_seed(13)
A = torch.ops.aten


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _ri(*shape: int, lo: int = -50, hi: int = 50) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=_GEN)


def _ties(*shape: int) -> torch.Tensor:
    """Small integer values as floats: many equal maxima, so the first-index rule matters."""
    return torch.randint(0, 3, shape, generator=_GEN).float()


def _with_nan(*shape: int) -> torch.Tensor:
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


def _seeded(make, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A module built under a fixed seed (deterministic weights), in `dtype`, eval mode."""
    torch.manual_seed(13)
    return make().to(dtype).eval()


def _bn3d(c: int, dtype: torch.dtype = torch.float32) -> nn.Module:
    """Eval BatchNorm3d with non-trivial running statistics and affine parameters."""
    bn = nn.BatchNorm3d(c)
    with torch.no_grad():
        bn.running_mean.copy_(_r(c) * 0.5)
        bn.running_var.copy_(torch.rand(c, generator=_GEN) + 0.5)
        bn.weight.copy_(torch.rand(c, generator=_GEN) + 0.5)
        bn.bias.copy_(_r(c) * 0.2)
    return bn.to(dtype).eval()


def _legacy(w: torch.Tensor, transposed: bool, stride, padding, dilation, output_padding, groups, bias=None):
    """aten._convolution.default (the legacy overload with benchmark/deterministic/cudnn/tf32 flags)."""
    params = {"w": w} if bias is None else {"w": w, "b": bias}
    return Fn(
        lambda m, x: A._convolution.default(
            x, m.w, getattr(m, "b", None), stride, padding, dilation, transposed, output_padding, groups,
            False, False, True, True,
        ),
        **params,
    )  # fmt: skip


SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # 3-D convolution
    ("conv3d_plain", _seeded(lambda: nn.Conv3d(3, 4, 3)), (_r(2, 3, 5, 6, 7),)),
    (
        "conv3d_stride_pad_dilation",
        _seeded(lambda: nn.Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 2), padding=(1, 0, 2), dilation=(2, 1, 1))),
        (_r(1, 4, 6, 7, 8),),
    ),
    (
        "conv3d_groups_no_bias",
        _seeded(lambda: nn.Conv3d(4, 6, 3, padding=1, groups=2, bias=False)),
        (_r(1, 4, 4, 5, 6),),
    ),
    ("conv3d_depthwise_stride", _seeded(lambda: nn.Conv3d(4, 8, 3, stride=2, groups=4)), (_r(2, 4, 5, 7, 7),)),
    (
        "conv3d_same_even_kernel",
        _seeded(lambda: nn.Conv3d(2, 3, (2, 4, 3), padding="same", dilation=(1, 1, 2))),
        (_r(1, 2, 4, 6, 7),),
    ),
    ("conv3d_valid", _Fn(lambda x, w: F.conv3d(x, w, padding="valid")), (_r(1, 2, 4, 5, 6), _r(3, 2, 2, 3, 2))),
    ("conv3d_unbatched", _Fn(lambda x, w, b: F.conv3d(x, w, b, padding=1)), (_r(2, 3, 4, 5), _r(3, 2, 3, 3, 3), _r(3))),
    (
        "conv3d_float64",
        _seeded(lambda: nn.Conv3d(4, 6, (3, 2, 3), stride=(2, 1, 1), padding=(1, 1, 0), groups=2), torch.float64),
        (_r(1, 4, 5, 4, 6).double(),),
    ),
    (
        "conv3d_same_float64",
        _seeded(lambda: nn.Conv3d(2, 2, 2, padding="same", bias=False), torch.float64),
        (_r(1, 2, 3, 4, 5).double(),),
    ),
    (
        "conv3d_padding_mode_circular",
        _seeded(lambda: nn.Conv3d(2, 3, 3, padding=1, padding_mode="circular")),
        (_r(1, 2, 4, 5, 6),),
    ),
    # integer (exact in float64 while |sums| < 2**53) and half-precision 3-D convolution
    (
        "conv3d_int64",
        _Fn(lambda x, w: F.conv3d(x, w, stride=(1, 2, 1), padding=1, groups=2)),
        (_ri(1, 4, 3, 5, 4), _ri(4, 2, 2, 3, 2, lo=-5, hi=5)),
    ),
    (
        "conv3d_bfloat16",
        _Fn(lambda x, w, b: F.conv3d(x, w, b, padding=(0, 1, 1))),
        (_r(1, 3, 3, 5, 4).bfloat16(), _r(4, 3, 2, 3, 3).bfloat16(), _r(4).bfloat16()),
    ),
    # same padding with an even kernel and unbatched input, 1-D and 2-D (the generalized path)
    ("conv2d_same_even_kernel", _seeded(lambda: nn.Conv2d(3, 4, (4, 3), padding="same")), (_r(2, 3, 7, 6),)),
    ("conv1d_unbatched_same", _Fn(lambda x, w: F.conv1d(x, w, padding="same")), (_r(3, 9), _r(2, 3, 4))),
    # 3-D transposed convolution
    ("conv_transpose3d_plain", _seeded(lambda: nn.ConvTranspose3d(3, 4, 3)), (_r(1, 3, 3, 4, 5),)),
    (
        "conv_transpose3d_stride_outpad_groups_dilation",
        _seeded(
            lambda: nn.ConvTranspose3d(
                4,
                6,
                (2, 3, 3),
                stride=(2, 3, 2),
                padding=(1, 0, 1),
                output_padding=(1, 2, 0),
                groups=2,
                dilation=(1, 1, 2),
            )
        ),
        (_r(2, 4, 3, 4, 3),),
    ),
    (
        "conv_transpose3d_unbatched_no_bias",
        _Fn(lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1)),
        (_r(2, 3, 2, 4), _r(2, 3, 3, 3, 3)),
    ),
    (
        "conv_transpose3d_float64",
        _seeded(
            lambda: nn.ConvTranspose3d(
                4, 2, 3, stride=(1, 2, 2), padding=(0, 1, 2), output_padding=(0, 1, 0), groups=2
            ),
            torch.float64,
        ),
        (_r(1, 4, 3, 3, 4).double(),),
    ),
    (
        "conv_transpose3d_int64",
        _Fn(lambda x, w: F.conv_transpose3d(x, w, stride=(2, 1, 2), padding=(1, 0, 0), output_padding=(1, 0, 1))),
        (_ri(1, 2, 3, 3, 4), _ri(2, 3, 3, 2, 2, lo=-5, hi=5)),
    ),
    (
        "conv_transpose3d_float16",
        _Fn(lambda x, w: F.conv_transpose3d(x, w, stride=2, groups=2)),
        (_r(1, 4, 2, 3, 3).half(), _r(4, 1, 2, 2, 3).half()),
    ),
    (
        "conv_transpose2d_int64",
        _Fn(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, dilation=2)),
        (_ri(2, 3, 4, 5), _ri(3, 2, 3, 3, lo=-5, hi=5)),
    ),
    # float64 transposed convolution in 1-D and 2-D, and col2im (fold) built on it
    (
        "conv_transpose2d_float64",
        _seeded(
            lambda: nn.ConvTranspose2d(
                4, 6, (3, 4), stride=(2, 3), padding=(1, 2), output_padding=(1, 0), groups=2, dilation=(2, 1)
            ),
            torch.float64,
        ),
        (_r(2, 4, 4, 5).double(),),
    ),
    (
        "conv_transpose1d_float64",
        _seeded(lambda: nn.ConvTranspose1d(3, 2, 4, stride=3, padding=2, output_padding=1, bias=False), torch.float64),
        (_r(2, 3, 6).double(),),
    ),
    ("fold_float64", nn.Fold((5, 6), 3, padding=1, stride=(1, 2)), (_r(2, 18, 15).double(),)),
    # the legacy aten._convolution overloads, 1-D to 3-D, plain and transposed
    ("legacy_convolution_1d", _legacy(_r(4, 3, 3), False, [2], [1], [1], [0], 1, _r(4)), (_r(2, 3, 9),)),
    (
        "legacy_convolution_2d_groups",
        _legacy(_r(4, 2, 3, 2), False, [1, 2], [1, 0], [2, 1], [0, 0], 2),
        (_r(1, 4, 7, 6),),
    ),
    (
        "legacy_convolution_3d",
        _legacy(_r(4, 3, 2, 3, 2), False, [1, 2, 1], [1, 1, 0], [1, 1, 2], [0, 0, 0], 1, _r(4)),
        (_r(1, 3, 4, 6, 5),),
    ),
    (
        "legacy_convolution_transposed_3d",
        _legacy(_r(4, 3, 2, 2, 3), True, [2, 1, 2], [0, 1, 1], [1, 1, 1], [1, 0, 1], 2, _r(6)),
        (_r(1, 4, 2, 3, 3),),
    ),
    (
        "legacy_convolution_transposed_2d",
        _legacy(_r(3, 2, 3, 3), True, [2, 2], [1, 1], [1, 1], [1, 1], 1),
        (_r(2, 3, 4, 4),),
    ),
    (
        "legacy_convolution_deprecated",
        Fn(
            lambda m, x: A._convolution.deprecated(
                x, m.w, None, [1, 1, 1], [1, 0, 1], [1, 1, 1], False, [0, 0, 0], 1, False, False, True
            ),
            w=_r(2, 3, 3, 2, 3),
        ),
        (_r(1, 3, 4, 4, 5),),
    ),
    # 3-D batch norm (eval)
    ("batch_norm3d", _bn3d(4), (_r(2, 4, 3, 4, 5),)),
    ("batch_norm3d_float64", _bn3d(3, torch.float64), (_r(1, 3, 2, 4, 3).double(),)),
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
        _Fn(lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True)),
        (_ties(1, 2, 5, 7, 6),),
    ),
    (
        "adaptive_max_pool3d_indices_float64_unbatched",
        _Fn(lambda x: F.adaptive_max_pool3d(x, (3, 1, 2), return_indices=True)),
        (_r(2, 4, 5, 5).double(),),
    ),
    (
        "adaptive_max_pool2d_indices_nan",
        _Fn(lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True)),
        (_with_nan(1, 2, 7, 9),),
    ),
    (
        "adaptive_max_pool_indices_two_nans_all_neg_inf",
        _Fn(
            lambda x: (
                F.adaptive_max_pool2d(x[0, :, 0], (1, 2), return_indices=True),
                F.adaptive_max_pool3d(x, 1, True),
            )
        ),
        (_two_nans(),),
    ),
    (
        "adaptive_max_pool1d_indices_unbatched",
        _Fn(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True)),
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
        _Fn(lambda x: (F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, (2, 3), 1, (1, 0), divisor_override=4))),
        (_ri(2, 3, 7, 8),),
    ),
    ("avg_pool1d_int64_exclude_pad", nn.AvgPool1d(4, stride=3, padding=2, count_include_pad=False), (_ri(2, 3, 11),)),
]
