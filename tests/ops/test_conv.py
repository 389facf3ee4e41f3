"""Parity samples of convolution (lower/ops/conv.py): 1-D to 3-D, stride/padding/dilation/groups, `same`
padding with even kernels and unbatched inputs (the generalized path), padding modes, transposed convolution,
the legacy `_convolution` overloads (benchmark/deterministic/cudnn/tf32 flags), and float64, half and integer
convolution (integers exact in float64 while |sums| < 2**53).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import LEVELS, A, Fn, Sample, check_op_sample, of_inputs, r, sample_ids

_GEN = torch.Generator().manual_seed(3)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _ri(*shape: int, lo: int = -50, hi: int = 50) -> torch.Tensor:
    return torch.randint(lo, hi, shape, generator=_GEN)


def _seeded(make, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A module built under a fixed seed (deterministic weights), in `dtype`, eval mode."""
    torch.manual_seed(13)
    return make().to(dtype).eval()


def _legacy(w: torch.Tensor, transposed: bool, stride, padding, dilation, output_padding, groups, bias=None):
    """aten._convolution.default (the legacy overload with benchmark/deterministic/cudnn/tf32 flags)."""
    params = {"w": w} if bias is None else {"w": w, "b": bias}
    return Fn(
        lambda m, x: A._convolution.default(
            x,
            m.w,
            getattr(m, "b", None),
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            False,
            False,
            True,
            True,
        ),
        **params,
    )


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("conv1d_same", nn.Conv1d(3, 4, 5, padding="same", dilation=2), (r(2, 3, 20),)),
    ("conv2d_stride_groups_dilation", nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2), (r(1, 4, 11, 9),)),
    ("conv2d_rect_kernel_nobias", nn.Conv2d(3, 5, (3, 1), padding=(1, 0), bias=False), (r(2, 3, 6, 6),)),
    (
        "conv2d_same_squeeze_dim",
        Fn(lambda m, a: F.conv2d(a, m.w, padding="same").squeeze(0).unsqueeze(1).squeeze(1), w=r(4, 3, 3, 3)),
        (r(1, 3, 6, 6),),
    ),
    ("conv1d_numeric_padding", nn.Conv1d(2, 3, 3, padding=1, stride=2), (r(1, 2, 9),)),
    # transposed convolution
    ("conv_transpose_stride2", nn.ConvTranspose2d(3, 4, 3, stride=2), (_r(1, 3, 5, 4),)),
    (
        "conv_transpose_pad_outpad",
        nn.ConvTranspose2d(4, 6, (3, 4), stride=(2, 3), padding=(1, 2), output_padding=(1, 2), bias=False),
        (_r(2, 4, 5, 4),),
    ),
    (
        "conv_transpose_groups_dilation",
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2, dilation=2),
        (_r(1, 4, 4, 5),),
    ),
    ("conv_transpose_1d", nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1), (_r(2, 3, 7),)),
    (
        "conv_integer",
        of_inputs(lambda x, w: (F.conv2d(x, w, padding=1), F.conv1d(x[:, :, 0], w[:, :, 0], stride=2))),
        (torch.randint(-50, 50, (1, 2, 5, 6)), torch.randint(-9, 9, (3, 2, 3, 3))),
    ),
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
    ("conv3d_valid", of_inputs(lambda x, w: F.conv3d(x, w, padding="valid")), (_r(1, 2, 4, 5, 6), _r(3, 2, 2, 3, 2))),
    (
        "conv3d_unbatched",
        of_inputs(lambda x, w, b: F.conv3d(x, w, b, padding=1)),
        (_r(2, 3, 4, 5), _r(3, 2, 3, 3, 3), _r(3)),
    ),
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
        of_inputs(lambda x, w: F.conv3d(x, w, stride=(1, 2, 1), padding=1, groups=2)),
        (_ri(1, 4, 3, 5, 4), _ri(4, 2, 2, 3, 2, lo=-5, hi=5)),
    ),
    (
        "conv3d_bfloat16",
        of_inputs(lambda x, w, b: F.conv3d(x, w, b, padding=(0, 1, 1))),
        (_r(1, 3, 3, 5, 4).bfloat16(), _r(4, 3, 2, 3, 3).bfloat16(), _r(4).bfloat16()),
    ),
    # same padding with an even kernel and unbatched input, 1-D and 2-D (the generalized path)
    ("conv2d_same_even_kernel", _seeded(lambda: nn.Conv2d(3, 4, (4, 3), padding="same")), (_r(2, 3, 7, 6),)),
    ("conv1d_unbatched_same", of_inputs(lambda x, w: F.conv1d(x, w, padding="same")), (_r(3, 9), _r(2, 3, 4))),
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
        of_inputs(lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1)),
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
        of_inputs(lambda x, w: F.conv_transpose3d(x, w, stride=(2, 1, 2), padding=(1, 0, 0), output_padding=(1, 0, 1))),
        (_ri(1, 2, 3, 3, 4), _ri(2, 3, 3, 2, 2, lo=-5, hi=5)),
    ),
    (
        "conv_transpose3d_float16",
        of_inputs(lambda x, w: F.conv_transpose3d(x, w, stride=2, groups=2)),
        (_r(1, 4, 2, 3, 3).half(), _r(4, 1, 2, 2, 3).half()),
    ),
    (
        "conv_transpose2d_int64",
        of_inputs(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, dilation=2)),
        (_ri(2, 3, 4, 5), _ri(3, 2, 3, 3, lo=-5, hi=5)),
    ),
    # float64 transposed convolution in 1-D and 2-D (col2im in float64: test_pool.py)
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
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
