"""Parity samples of `scaled_dot_product_attention` (lower/ops/attention.py): causal (also with more keys
than queries), an explicit scale, bool and float masks, cross attention, GQA, and query rows whose every key
is masked (zeros, as torch >= 2.5 gives). The fully masked samples also run at the default `high` level,
where the lowering differs.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from _samples import INF, LEVELS, Fn, Sample, check_op_sample, check_op_sample_at_high, of_inputs, r, sample_ids

torch.manual_seed(0)
SAMPLES: list[Sample] = [
    (
        "sdpa_causal",
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        (r(1, 2, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)),
    ),
    (
        "sdpa_seq_equals_heads",
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3)),
        (r(2, 4, 4, 8), r(2, 4, 4, 8), r(2, 4, 4, 8)),
    ),
    (
        "sdpa_cross_bool_mask",
        Fn(lambda m, q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask > 0)),
        (r(1, 2, 3, 8), r(1, 2, 6, 8), r(1, 2, 6, 8), torch.rand(3, 6) + 0.2),
    ),
    (
        "sdpa_float_mask",
        Fn(lambda m, q, k, v, mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)),
        (r(1, 2, 4, 8), r(1, 2, 4, 8), r(1, 2, 4, 8), r(1, 1, 4, 4)),
    ),
    (
        "sdpa_gqa",
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
        (r(1, 4, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)),
    ),
    (
        "sdpa_causal_rect",
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        (r(1, 2, 3, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)),
    ),
    # Attention: a query row whose every key is masked gives zeros (torch >= 2.5), bool and -inf masks, GQA.
    (
        "sdpa_fully_masked_row_smallest",
        of_inputs(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
        (torch.randn(1, 1, 1, 4), torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4), torch.zeros(1, 1, 1, 2) > 0),
    ),
    (
        "sdpa_fully_masked_rows_bool_and_float",
        of_inputs(
            lambda q, k, v, m: (
                F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                F.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(m.shape).masked_fill(~m, -INF)),
            )
        ),
        (
            torch.randn(2, 2, 3, 8),
            torch.randn(2, 2, 4, 8),
            torch.randn(2, 2, 4, 8),
            torch.tensor([[1, 0, 1, 0]] * 2 + [[0] * 4]) > 0,
        ),
    ),
    (
        "sdpa_fully_masked_row_gqa",
        of_inputs(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)),
        (
            torch.randn(1, 4, 2, 8),
            torch.randn(1, 2, 3, 8),
            torch.randn(1, 2, 3, 8),
            torch.tensor([[0, 0, 0], [1, 0, 1]]) > 0,
        ),
    ),
]

# A query row whose every key is masked lowers differently at the default `high` level: run there too.
HIGH_TOO = [s for s in SAMPLES if s[0].startswith("sdpa_fully_masked_")]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


@pytest.mark.parametrize(("name", "module", "inputs"), HIGH_TOO, ids=sample_ids(HIGH_TOO))
def test_op_sample_at_high(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path) -> None:
    """Samples whose lowering differs at the default `high` level run there too."""
    check_op_sample_at_high(name, module, inputs, tmp_path)
