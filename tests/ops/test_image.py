"""Parity samples of the image ops (lower/ops/image.py): pixel (un)shuffle, padding (constant with ±inf,
reflect, replicate, circular; the explicit reflection/replication overloads, which torch's core table
decomposes, so only the `aten` level reaches them), and masked_fill with ±inf and a tensor value.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import INF, LEVELS, A, Sample, check_op_sample, of_inputs, r, sample_ids

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


torch.manual_seed(0)
SAMPLES: list[Sample] = [
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
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
