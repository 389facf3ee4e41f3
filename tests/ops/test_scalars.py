"""Parity samples: values read from tensors (`.item()`) and the Python arithmetic on them (lower/ops/scalars.py)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from _samples import LEVELS, Sample, check_op_sample, of_inputs, r, sample_ids


def _float_ops(x: torch.Tensor) -> torch.Tensor:
    s = x.abs().mean().item()  # SymFloat
    t = x.max().item()
    return x * (s + t) - (s - t) * x + (s * t) / (1.5 + s) + (s // 0.3) + s % 0.7 + s**1.5 - (-t)


def _int_ops(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    n = k.sum().item()  # SymInt
    m = (x > 0).sum().item()
    v = (n + m) * 3 - n // 2 + m % 5 + (n & 6) - (m | 1) + torch.sym_max(n, m) - torch.sym_min(n, 4) + n**2
    return x + v + torch.sym_float(n) / 4


def _compare_ops(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    n = k.sum().item()
    s = x.mean().item()
    out = x
    for flag in (n > 3, n >= 3, n < 3, n <= 3, n == 3, n != 3, s > 0.0, (n > 1) & (s < 0.5), (n > 7) | (s < 0.0)):
        out = out + torch.sym_ite(flag, 1, -1)
    return out + torch.sym_ite(torch.sym_not(n > 5), 2, 0)


def _rounding(x: torch.Tensor) -> torch.Tensor:
    s = x.sum().item()
    return x + math.floor(s) - math.ceil(s * 0.5) + math.trunc(-s) + torch.sym_int(s * 2)


def _bool_item(x: torch.Tensor) -> torch.Tensor:
    flag = (x > 0).all().item()
    return x + torch.sym_ite(flag, 1.0, 0.0)


def _indexing(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A value read from a tensor as an index or a slice start (the slice's length stays known)."""
    n = i.item()
    torch._check(n >= -2)
    torch._check(n <= 1)
    return x[n] * 2, x.select(1, n), x.narrow(0, n + 2, 2), x[n + 2 : n + 4, ::2]


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("item_float_arithmetic", of_inputs(_float_ops), (r(3, 4),)),
    ("item_int_arithmetic", of_inputs(_int_ops), (r(3, 4), torch.tensor([2, 5, -1]))),
    ("item_comparisons", of_inputs(_compare_ops), (r(3, 4), torch.tensor([1, 2]))),
    ("item_rounding", of_inputs(_rounding), (r(3, 4) * 3,)),
    ("item_bool", of_inputs(_bool_item), (r(2, 3).abs() + 0.1,)),
    ("item_index_positive", of_inputs(_indexing), (r(5, 4), torch.tensor(1))),
    ("item_index_negative", of_inputs(_indexing), (r(5, 4), torch.tensor(-2))),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
