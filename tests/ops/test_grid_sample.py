"""Parity samples of grid_sample (lower/ops/grid_sample.py): every mode x padding mode x align_corners
with grid points inside and a little outside [-1, 1], nearest on exact .5 ties, and half precision.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import LEVELS, Sample, check_op_sample, of_inputs, r, sample_ids


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


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    # grid_sample: every mode x padding mode x align_corners
    ("grid_sample_bilinear", of_inputs(_grid_all("bilinear")), (r(2, 3, 5, 7), grid(2, 4, 6))),
    ("grid_sample_nearest", of_inputs(_grid_all("nearest")), (r(2, 3, 5, 7), grid(2, 4, 6))),
    (
        "grid_sample_nearest_ties",  # an identity grid at half size puts every coordinate on a .5 tie
        of_inputs(lambda a, g: F.grid_sample(a, g, mode="nearest", align_corners=False)),
        (r(1, 2, 8, 10), F.affine_grid(torch.eye(2, 3)[None], [1, 2, 4, 5], align_corners=False)),
    ),
    ("grid_sample_bicubic", of_inputs(_grid_all("bicubic")), (r(1, 2, 6, 5), grid(1, 3, 4, reach=2.5))),
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
