"""Parity samples of the random ops (lower/ops/random.py): each draws on RLX's generator, and each sample's
outputs are what eager PyTorch gives whatever the draws (bounds that always hold, probabilities 0 and 1, a
zero std, dropout's two possible values), so they verify value for value. The draws' distributions and the
"random" verdict for outputs that do depend on them are tests/test_random_ops.py's.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import LEVELS, A, Sample, check_op_sample, of_inputs, r, sample_ids


def _in(v: torch.Tensor, low: float, high: float) -> torch.Tensor:
    return (v >= low) & (v < high)


def _uniform_and_normal(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """rand/rand_like in [0, 1) for float32/64/16, randn/normal finite (a zero std gives the mean), uniform_
    in [from, to), exponential_ >= 0."""
    e = torch.empty_like(x)
    return (
        _in(torch.rand(3, 4), 0, 1) & _in(torch.rand_like(x, dtype=torch.float64), 0, 1),
        _in(torch.rand(5, dtype=torch.float16), 0, 1),
        x + torch.randn(3, 4) * 0 + torch.randn_like(x) * 0,
        torch.normal(x, 0.0) + torch.normal(2.0, torch.zeros_like(x)) + torch.normal(x, torch.zeros_like(x)),
        torch.normal(1.0, 0.0, (3, 4)) + e.normal_(3.0, 0.0),
        _in(torch.empty_like(x).uniform_(-1.0, 2.0), -1, 2),
        torch.empty_like(x).exponential_() >= 0,
    )


def _randint(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """randint's four overloads inside their bounds, in their dtypes."""
    return (
        _in(torch.randint(3, 7, (3, 4)), 3, 7) & _in(torch.randint(5, (3, 4)), 0, 5),
        _in(torch.randint_like(x, -2, 2), -2, 2) & _in(torch.randint_like(x, 9), 0, 9),
        torch.randint(0, 4, (6,), dtype=torch.int32) < 4,
    )


def _bernoulli(p01: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """bernoulli's three overloads at probabilities 0 and 1 (their draws cannot matter)."""
    return (
        torch.bernoulli(p01),
        p01.bernoulli(0.0) + p01.bernoulli(1.0),
        torch.empty_like(p01).bernoulli_(p01),
        torch.empty_like(p01).bernoulli_(1.0) + torch.empty_like(p01).bernoulli_(0.0),
    )


def _dropout(x: torch.Tensor, x4: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Training-mode dropout (p = 0.5): every element 0 or 2x; feature dropout zeroes whole channels."""
    out, mask = A.native_dropout.default(x, 0.5, True)
    d = F.dropout(x, 0.5, training=True)
    f = F.dropout2d(x4, 0.5, training=True).flatten(2)
    whole = (f == 0).all(-1) | (f == 2 * x4.flatten(2)).all(-1)
    return ((out == 0) | (out == 2 * x)) & (mask == (out != 0)), (d == 0) | (d == 2 * x), whole


def _multinomial(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """multinomial with one certain category, and without replacement as many draws as nonzero weights."""
    certain = torch.multinomial(torch.tensor([[0.0, 2.0, 0.0], [0.0, 0.0, 1.0]]), 5, replacement=True)
    every = torch.multinomial(torch.tensor([0.5, 0.0, 0.25, 0.25]), 3).sort().values
    return certain + x.shape[0] * 0, every


SAMPLES: list[Sample] = [
    # dropout that draws nothing: eval (train=False), p = 0 and p = 1 in training (train=None means training)
    ("native_dropout_eval", of_inputs(lambda x: A.native_dropout.default(x, 0.5, False)), (r(3, 4),)),
    ("native_dropout_p0_train", of_inputs(lambda x: A.native_dropout.default(x * 2, 0.0, True)), (r(2, 3, 4),)),
    ("native_dropout_p1_train", of_inputs(lambda x: A.native_dropout.default(x, 1.0, None)), (r(5, 2),)),
    ("dropout_p0_train", of_inputs(lambda x: F.dropout(x, 0.0, training=True) + 1), (r(4, 3),)),
    ("rand_randn_normal_uniform", of_inputs(_uniform_and_normal), (r(3, 4),)),
    ("randint_bounds", of_inputs(_randint), (r(3, 4),)),
    ("bernoulli_certain", of_inputs(_bernoulli), ((torch.rand(3, 4) > 0.5).float(),)),
    ("dropout_training", of_inputs(_dropout), (r(3, 4) + 10, r(2, 3, 4, 5) + 10)),
    ("multinomial_certain", of_inputs(_multinomial), (r(3),)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
