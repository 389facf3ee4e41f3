"""Idefics3-style position ids (modeling_idefics3.py, the vision embeddings): rows kept by a boolean mask
(a size a stage computes, at most the mask's length: a narrow range the symbolic lowering probes past its
max), an integer `arange` over that size, and `bucketize` of per-row fractional coordinates. Converts,
verifies at 1 and 2 kept rows and agrees with eager PyTorch; `bucketize` alone also at 0 rows. (0 rows
through the `clamp` is not run: RLX's CPU Where panics on a tensor of 0 elements, found here, not fixed.)"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import rlx_torch_import as rti


class Positions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(16, 4)

    def forward(self, patches: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        kept = patches[keep]  # [n, 4, 4] bool, n = keep.sum() in [0, 2]
        boundaries = torch.arange(0.25, 1.0, 0.25)
        steps = 1.0 / kept[:, :, 0].sum(dim=1).clamp(min=1)
        coords = (torch.arange(4, dtype=torch.float32)[None, :] * steps[:, None]).clamp(max=1.0 - 1e-6)
        buckets = torch.bucketize(coords, boundaries, right=True)
        ids = buckets[:, :, None] * 4 + buckets[:, None, :]
        rows = torch.arange(kept.shape[0])  # an integer range over the kept-row count
        return self.table(ids.reshape(-1, 16)) + rows[:, None, None].float()


def _patches(rows: list[int]) -> torch.Tensor:
    out = torch.zeros(2, 4, 4, dtype=torch.bool)
    for i, r in enumerate(rows):
        out[i, :r] = True
    return out


def test_idefics3_like_position_ids_at_every_kept_count(tmp_path: Path) -> None:
    torch.manual_seed(0)
    example = (_patches([3, 4]), torch.tensor([True, False]))
    others = [
        (_patches([2, 4]), torch.tensor([True, True])),
        (_patches([4, 1]), torch.tensor([False, True])),
    ]
    report = rti.from_torch(Positions().eval(), example, tmp_path / "p", verify_inputs=others)
    assert report.ok and all(r.ok for r in report.input_sets), report.summary()
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "only one value" not in note, note


class BucketKept(nn.Module):
    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        kept = x[keep]
        return torch.bucketize(kept, torch.tensor([0.2, 0.5, 0.5, 0.9]), right=True).float() * 2


def test_bucketize_over_a_computed_size_runs_at_zero_elements(tmp_path: Path) -> None:
    """The binary search is integer arithmetic (no Where): it runs at 0 rows, as torch does."""
    x = torch.tensor([[0.1, 0.5, 0.95], [0.5, 0.2, 0.7]])
    others = [(x, torch.tensor([False, False])), (x, torch.tensor([True, True]))]
    report = rti.from_torch(BucketKept(), (x, torch.tensor([False, True])), tmp_path / "b", verify_inputs=others)
    assert report.ok and all(r.ok for r in report.input_sets), report.summary()
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "[0, 1, 2]" in note, note
