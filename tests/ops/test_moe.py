"""Parity samples of the ops lower/ops/moe.py registers: histc, and Hugging Face's grouped-mm experts op
when transformers is installed.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _samples import LEVELS, Fn, Sample, check_op_sample, r, sample_ids

torch.manual_seed(0)
SAMPLES: list[Sample] = [
    (
        "histc_empty_like",
        Fn(lambda m, a: (torch.histc(a, 4, 0, 3), torch.empty_like(a).zero_() + 1)),
        (torch.tensor([3.0, 1, 2, 1, 0, 3, 2.5, 0, 3, -1, 4]),),
    ),
]

try:  # Hugging Face's grouped-mm experts op exists once transformers' MoE integration is imported
    import transformers.integrations.moe  # noqa: F401

    SAMPLES.append(
        (
            "transformers_grouped_mm",
            Fn(lambda m, x, w, o: torch.ops.transformers.grouped_mm_fallback(x, w, o)),
            (r(16, 8), r(4, 8, 6), torch.tensor([3, 7, 7, 16], dtype=torch.int32)),
        )
    )
except ImportError:
    pass


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
