"""Parity samples of the image ops (lower/image.py): upsampling (nearest and nearest-exact at integer
and fractional scales, the linear family with align_corners both ways, bicubic, antialias), pixel
(un)shuffle, padding (constant with ±inf, reflect, replicate, circular; the explicit reflection/replication
overloads, which torch's core table decomposes, so only the `aten` level reaches them), masked_fill with
±inf and a tensor value, and grid_sample in every mode x padding mode x align_corners.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import INF, LEVELS, A, Sample, check_op_sample, of_inputs, r, sample_ids

_GEN = torch.Generator().manual_seed(11)


def grid(n: int, h: int, w: int, reach: float = 1.25) -> torch.Tensor:
    """Sampling grid with points inside and a little outside [-1, 1]."""
    return (torch.rand(n, h, w, 2) * 2 - 1) * reach


def _grid_all(mode: str) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]:
    """One grid_sample per padding mode and align_corners value."""
    return lambda a, g: tuple(
        F.grid_sample(a, g, mode=mode, padding_mode=p, align_corners=ac)
        for p in ("zeros", "border", "reflection")
        for ac in (False, True)
    )


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


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
    # pixel (un)shuffle
    ("pixel_shuffle", nn.PixelShuffle(2), (r(2, 12, 3, 4),)),
    ("pixel_unshuffle_3d_input", nn.PixelUnshuffle(3), (r(2, 6, 9),)),
    # padding
    (
        "pad_constant_neg_inf",
        of_inputs(
            lambda a: (F.pad(a, (1, 2, 0, 3), value=-INF), F.pad(a, (2, 0), value=INF), F.pad(a, (-1, 2, 1, -2)))
        ),
        (r(2, 3, 5, 6),),
    ),
    ("pad_constant_value", nn.ConstantPad2d((1, 2, 3, 0), 2.5), (r(1, 2, 4, 4),)),
    (
        "pad_reflect",
        of_inputs(lambda a, v: (F.pad(a, (1, 3, 2, 1), mode="reflect"), F.pad(v, (2, 1), mode="reflect"))),
        (r(1, 2, 5, 6), r(2, 3, 5)),
    ),
    (
        "pad_replicate",
        of_inputs(
            lambda a, v: (F.pad(a, (2, 0, 1, 3), mode="replicate"), F.pad(v, (1, 1, 0, 2, 1, 0), mode="replicate"))
        ),
        (r(1, 2, 4, 5), r(1, 2, 3, 4, 2)),
    ),
    (
        "pad_circular",
        of_inputs(lambda a, v: (F.pad(a, (1, 2, 3, 1), mode="circular"), F.pad(v, (2, 3), mode="circular"))),
        (r(1, 2, 4, 5), r(2, 1, 3)),
    ),
    # masked_fill with ±inf and with a tensor value
    (
        "masked_fill_inf_tensor",
        of_inputs(lambda a, m, v: (a.masked_fill(m > 0, -INF), a.masked_fill(m < -1, INF), a.masked_fill(m > 0.5, v))),
        (r(2, 3, 4), r(3, 4), torch.tensor(7.5)),
    ),
    # grid_sample: every mode x padding mode x align_corners
    ("grid_sample_bilinear", of_inputs(_grid_all("bilinear")), (r(2, 3, 5, 7), grid(2, 4, 6))),
    ("grid_sample_nearest", of_inputs(_grid_all("nearest")), (r(2, 3, 5, 7), grid(2, 4, 6))),
    (
        "grid_sample_nearest_ties",  # an identity grid at half size puts every coordinate on a .5 tie
        of_inputs(lambda a, g: F.grid_sample(a, g, mode="nearest", align_corners=False)),
        (r(1, 2, 8, 10), F.affine_grid(torch.eye(2, 3)[None], [1, 2, 4, 5], align_corners=False)),
    ),
    ("grid_sample_bicubic", of_inputs(_grid_all("bicubic")), (r(1, 2, 6, 5), grid(1, 3, 4, reach=2.5))),
    # reflection / replication padding, per overload
    ("reflection_pad1d", of_inputs(lambda x: A.reflection_pad1d.default(x, [2, 1])), (_r(2, 3, 9),)),
    ("reflection_pad2d", of_inputs(lambda x: A.reflection_pad2d.default(x, [1, 2, 3, 0])), (_r(1, 2, 6, 7),)),
    ("reflection_pad3d", of_inputs(lambda x: A.reflection_pad3d.default(x, [1, 1, 2, 0, 1, 2])), (_r(1, 2, 4, 5, 6),)),
    ("replication_pad1d", of_inputs(lambda x: A.replication_pad1d.default(x, [3, 1])), (_r(2, 3, 7),)),
    ("replication_pad2d", of_inputs(lambda x: A.replication_pad2d.default(x, [2, 1, 0, 3])), (_r(1, 2, 5, 6),)),
    (
        "replication_pad3d",
        of_inputs(lambda x: A.replication_pad3d.default(x, [2, 1, 0, 1, 3, 2])),
        (_r(1, 2, 3, 4, 5),),
    ),
    (
        "grid_sample_half",
        of_inputs(lambda x, g: F.grid_sample(x, g, align_corners=False)),
        (torch.randn(1, 2, 5, 7).half(), (torch.rand(1, 4, 3, 2) * 2.4 - 1.2).half()),
    ),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
