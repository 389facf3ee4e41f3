"""Parity samples of the prims that torch._refs decompositions leave behind (lower/ops/prims.py): iota,
collapse, convert_element_type, div.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _samples import LEVELS, P, Sample, check_op_sample, of_inputs, r, sample_ids


def _prims(a: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    n = P.iota(4, start=2, step=3, dtype=torch.int64, device=a.device, requires_grad=False)
    m = P.iota(4, start=-1, step=1, dtype=torch.int32, device=a.device, requires_grad=False)
    w = P.iota(4, start=2**40, step=-(2**35), dtype=torch.int64, device=a.device, requires_grad=False)
    return (
        i + n,
        i.int() * m,
        i * 0 + w,
        P.collapse(a, 1, 2),
        P.collapse(a, 0, 2),
        P.convert_element_type(a * 3, torch.int32),
        P.convert_element_type(a, torch.bool),
        P.convert_element_type(i, torch.float64),
        P.convert_element_type(a, torch.float16),
    )


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    # prims that torch._refs decompositions leave behind
    ("prims_iota_collapse_convert", of_inputs(_prims), (r(3, 4, 5), torch.tensor([5, -1, 0, 7]))),
    (
        "prims_div",
        of_inputs(lambda a, b, i, j: (P.div(a, b), P.div(i, j))),
        (r(3, 4), r(3, 4), torch.tensor([7, -7, 9, -9]), torch.tensor([2, 2, -4, -4])),
    ),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
