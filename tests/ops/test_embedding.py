"""Parity samples of embedding and embedding bags (lower/ops/embedding.py): sum/mean/max bags, empty
bags, include_last_offset, per-sample weights, padding_idx, offsets as a graph input (runtime bag bounds),
float64; and bags over a dynamic number of indices.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, A, Sample, check_op_sample, of_inputs, sample_ids

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _bag(mode: int, offsets: list[int], n: int, **kw: object) -> tuple:
    """_embedding_bag over a [10, 3] table with `n` indices; offsets is a graph input (runtime bag bounds)."""
    last, pad, weighted = bool(kw.get("last", False)), int(kw.get("pad", -1)), bool(kw.get("weighted", False))
    dtype = kw.get("dtype", torch.float32)

    def fn(w: torch.Tensor, i: torch.Tensor, o: torch.Tensor, *psw: torch.Tensor) -> torch.Tensor:
        return A._embedding_bag.default(w, i, o, False, mode, False, psw[0] if psw else None, last, pad)[0]

    idx = torch.randint(0, 10, (n,), generator=_GEN)
    if pad >= 0:
        idx[::3] = pad
    extra = (_r(n).to(dtype),) if weighted else ()
    return of_inputs(fn), (_r(10, 3).to(dtype), idx, torch.tensor(offsets), *extra)


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("embedding", nn.Embedding(10, 4), (torch.tensor([[1, 2, 9], [0, 0, 5]]),)),
    # embedding bags: sum/mean/max, empty bags, include_last_offset, per-sample weights, padding_idx
    ("embedding_bag_sum_empty_bag", *_bag(0, [0, 3, 3, 5], 8)),
    ("embedding_bag_sum_weighted_last", *_bag(0, [0, 2, 6, 7], 9, last=True, weighted=True)),
    ("embedding_bag_mean_padding", *_bag(1, [0, 1, 4, 4], 7, pad=2)),
    ("embedding_bag_max_padding_last", *_bag(2, [0, 3, 3, 6], 6, last=True, pad=5)),
    ("embedding_bag_max_empty_first", *_bag(2, [0, 0, 4], 7)),
    ("embedding_bag_mean_empty_float64", *_bag(1, [0, 0, 4], 7, dtype=torch.float64)),
    ("embedding_bag_sum_weighted_float64", *_bag(0, [0, 5], 7, weighted=True, dtype=torch.float64)),
    ("embedding_bag_module_2d", nn.EmbeddingBag(10, 4, mode="mean"), (torch.randint(0, 10, (3, 4), generator=_GEN),)),
    (
        "embedding_bag_functional_max_pad",
        of_inputs(lambda w, i, o: F.embedding_bag(i, w, o, mode="max", padding_idx=1)),
        (_r(6, 5), torch.tensor([1, 0, 1, 3, 5, 1]), torch.tensor([0, 2, 3])),
    ),
    (
        "float64_embedding_bag_max",
        of_inputs(lambda w, i: A._embedding_bag.default(w, i, torch.tensor([0, 3]), False, 2)[0]),
        (torch.randn(6, 3).double(), torch.tensor([0, 5, 2, 4, 1])),
    ),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_over_a_dynamic_index_count(tmp_path, mode: str) -> None:
    """The bag membership is the same RLX graph at every number of indices (no size-dependent constant)."""
    bag = nn.EmbeddingBag(10, 3, mode=mode)
    inputs = (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4]))
    dims = {"input": {0: torch.export.Dim("n", min=4, max=64)}}
    report = rti.from_torch(bag, inputs, tmp_path / "o", decomposition="core", dynamic_shapes=dims)
    assert report.ok and report.verified, report.summary()


def test_embedding_bag_docs_example_verifies(tmp_path) -> None:
    """torch.nn.functional.embedding_bag's documented example, every mode, per-sample weights, padding."""
    model = of_inputs(
        lambda w, i, o, p: (
            F.embedding_bag(i, w, o),
            F.embedding_bag(i, w, o, mode="max"),
            F.embedding_bag(i, w, o, mode="mean", padding_idx=2),
            F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
            F.embedding_bag(i, w, torch.cat([o, o.new_tensor([8])]), include_last_offset=True),
        )
    )
    inputs = (torch.rand(10, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4]), torch.rand(8))
    for level in ("aten", "core"):
        report = rti.from_torch(model, inputs, tmp_path / level, decomposition=level)
        assert report.ok and report.verified, report.summary()
