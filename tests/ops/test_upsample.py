"""Parity samples of the upsampling ops (lower/ops/upsample.py): nearest and nearest-exact at integer and
fractional scales and explicit sizes in 1-D/2-D/3-D, the linear family (linear, bilinear, trilinear) with
align_corners both ways, bicubic, and antialiased bilinear/bicubic (downscale and upscale).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import LEVELS, Sample, check_op_sample, of_inputs, r, sample_ids

torch.manual_seed(0)
SAMPLES: list[Sample] = [
    # nearest: integer and fractional scales, explicit sizes, 1-D/3-D, nearest-exact
    ("upsample_nearest2d_module", nn.Upsample(scale_factor=2), (r(1, 3, 4, 5),)),
    (
        "upsample_nearest2d_sizes_scales",
        of_inputs(
            lambda a: (
                F.interpolate(a, scale_factor=3, mode="nearest"),
                F.interpolate(a, size=(7, 3), mode="nearest"),
                F.interpolate(a, scale_factor=(1.5, 0.6), mode="nearest"),
            )
        ),
        (r(2, 2, 5, 6),),
    ),
    (
        "upsample_nearest_1d_3d",
        of_inputs(lambda a, v: (F.interpolate(a, scale_factor=2.5), F.interpolate(v, size=(3, 5, 2)))),
        (r(1, 2, 6), r(1, 2, 2, 3, 4)),
    ),
    (
        "upsample_nearest_exact_1d_2d_3d",
        of_inputs(
            lambda a, v, t: (
                F.interpolate(a, size=7, mode="nearest-exact"),
                F.interpolate(v, scale_factor=1.7, mode="nearest-exact"),
                F.interpolate(t, size=(3, 2, 5), mode="nearest-exact"),
            )
        ),
        (r(1, 2, 5), r(1, 3, 4, 5), r(1, 2, 2, 3, 4)),
    ),
    # linear family: align_corners both ways, up and down
    (
        "upsample_bilinear2d",
        of_inputs(
            lambda a: (
                F.interpolate(a, scale_factor=2, mode="bilinear"),
                F.interpolate(a, size=(3, 11), mode="bilinear", align_corners=True),
                F.interpolate(a, scale_factor=0.7, mode="bilinear"),
            )
        ),
        (r(2, 3, 6, 7),),
    ),
    ("upsample_bilinear2d_module_align", nn.UpsamplingBilinear2d(scale_factor=3), (r(1, 2, 4, 3),)),
    (
        "upsample_linear1d_trilinear3d",
        of_inputs(
            lambda a, v: (
                F.interpolate(a, scale_factor=1.5, mode="linear"),
                F.interpolate(a, size=4, mode="linear", align_corners=True),
                F.interpolate(v, size=(3, 6, 5), mode="trilinear"),
            )
        ),
        (r(1, 2, 6), r(1, 2, 2, 3, 4)),
    ),
    (
        "upsample_bicubic2d",
        of_inputs(
            lambda a: (
                F.interpolate(a, scale_factor=2, mode="bicubic"),
                F.interpolate(a, size=(4, 9), mode="bicubic", align_corners=True),
            )
        ),
        (r(1, 2, 5, 6),),
    ),
    # antialias: downscale (filter widened) and upscale
    (
        "upsample_bilinear2d_antialias",
        of_inputs(
            lambda a: (
                F.interpolate(a, size=(5, 4), mode="bilinear", antialias=True),
                F.interpolate(a, size=(20, 3), mode="bilinear", antialias=True, align_corners=True),
            )
        ),
        (r(1, 3, 12, 10),),
    ),
    (
        "upsample_bicubic2d_antialias",
        of_inputs(
            lambda a: (
                F.interpolate(a, scale_factor=0.4, mode="bicubic", antialias=True),
                F.interpolate(a, size=(15, 7), mode="bicubic", antialias=True, align_corners=True),
            )
        ),
        (r(1, 2, 12, 10),),
    ),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
