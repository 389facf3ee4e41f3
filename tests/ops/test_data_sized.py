"""Parity samples of the ops whose result size depends on tensor values (lower/ops/data_sized.py): nonzero
(1-d, 2-d, 3-d, bool and float inputs) and argwhere, masked_select (mask broadcast against self), unique
(sorted: ints and floats with repeats; with inverse and counts), bincount (with minlength and weights),
repeat_interleave with tensor repeats (zeros among them); and what is refused. Each runs as a size stage
plus the main graph (docs/design.md, decision ax); tests/test_stages.py runs them at several sizes, 0
included."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, Sample, check_op_sample, of_inputs, sample_ids

_GEN = torch.Generator().manual_seed(5)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


SAMPLES: list[Sample] = [
    ("nonzero_1d", of_inputs(lambda a: torch.nonzero(a > 0)), (_r(9),)),
    ("nonzero_2d_float", of_inputs(lambda a: torch.nonzero(torch.relu(a))), (_r(4, 5),)),
    ("nonzero_3d_bool", of_inputs(lambda a: torch.nonzero(a > 0.3)), (_r(2, 3, 4),)),
    ("argwhere_2d", of_inputs(lambda a: torch.argwhere(a > 0.2)), (_r(3, 4),)),
    ("masked_select_broadcast", of_inputs(lambda a, m: torch.masked_select(a, m)), (_r(3, 5), _r(5) > 0)),
    ("masked_select_same", of_inputs(lambda a: torch.masked_select(a, a < 0)), (_r(4, 4),)),
    ("unique_int", of_inputs(lambda a: torch.unique(a)), (torch.tensor([[3, 1, 3], [7, 1, -2]]),)),
    ("unique_float", of_inputs(lambda a: torch.unique(torch.round(a))), (_r(12),)),
    (
        "unique_inverse_counts",
        of_inputs(lambda a: torch.unique(a, return_inverse=True, return_counts=True)),
        (torch.tensor([[3, 1, 3], [7, 1, -2]]),),
    ),
    ("unique_inverse_float", of_inputs(lambda a: torch.unique(torch.round(a), return_inverse=True)), (_r(3, 4),)),
    ("unique_counts", of_inputs(lambda a: torch.unique(a, return_counts=True)), (torch.tensor([4, 4, 4, 0, 4]),)),
    ("bincount", of_inputs(lambda a: torch.bincount(a)), (torch.tensor([0, 4, 1, 1, 2, 4, 4]),)),
    ("bincount_minlength", of_inputs(lambda a: torch.bincount(a, minlength=9)), (torch.tensor([0, 4, 1, 1]),)),
    (
        "bincount_weights",
        of_inputs(lambda a, w: torch.bincount(a, weights=w)),
        (torch.tensor([2, 0, 2, 5]), torch.tensor([0.5, 1.5, -2.0, 4.0])),
    ),
    ("repeat_interleave_tensor", of_inputs(lambda r: torch.repeat_interleave(r)), (torch.tensor([2, 0, 3, 1]),)),
    (
        "repeat_interleave_rows",
        of_inputs(lambda a, r: torch.repeat_interleave(a, r, dim=0)),
        (_r(4, 3), torch.tensor([1, 0, 2, 3])),
    ),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


@pytest.mark.parametrize(
    ("model", "inputs", "why"),
    [
        (of_inputs(lambda a: torch.unique(a, return_inverse=True)), (torch.arange(5000),), "return_inverse"),
        (of_inputs(lambda a: torch.nonzero(a)), (torch.tensor(1.0),), "0-d"),
    ],
)
def test_refused(tmp_path, model: nn.Module, inputs: tuple[torch.Tensor, ...], why: str) -> None:
    with pytest.raises((rti.UnsupportedOpsError, rti.InputError)) as info:
        rti.from_torch(model, inputs, tmp_path / "o", decomposition="aten")
    assert why in str(info.value)


def test_a_size_no_stage_computes_is_refused_naming_op_and_node(tmp_path) -> None:
    """unique_consecutive's size has no size stage: the message names the op, node and what is supported."""
    model = of_inputs(lambda a: torch.unique_consecutive(a) * 2)
    with pytest.raises(rti.InputError) as info:
        rti.from_torch(model, (torch.tensor([1, 1, 2, 2, 2, 3, 1]),), tmp_path / "o")
    message = str(info.value)
    assert "aten.unique_consecutive.default (node unique_consecutive" in message, message
    assert "no size stage computes" in message and "aten.nonzero.default" in message
