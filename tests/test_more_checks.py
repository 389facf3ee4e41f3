"""Refusals of the ops samples_more.py covers (each names the op and node and says why), data-dependent
sizes, and embedding bags over a dynamic number of indices."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from sample_utils import of_inputs


def _mask_and_index(a: torch.Tensor, m: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[m, i] = v
    return c


@pytest.mark.parametrize("level", ["aten", "core"])
def test_boolean_mask_with_another_index_is_refused(tmp_path, level: str) -> None:
    model = of_inputs(_mask_and_index)
    inputs = (torch.randn(3, 4), torch.tensor([True, False, True]), torch.tensor([1, 3]), torch.randn(2))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, inputs, tmp_path / "o", decomposition=level)
    assert {"aten.index_put.default", "aten.index_put_.default"} & set(info.value.targets)
    assert "a boolean mask together with other index tensors is not supported" in info.value.explain()


def test_det_of_a_large_matrix_is_refused(tmp_path) -> None:
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(of_inputs(torch.linalg.det), (torch.randn(65, 65),), tmp_path / "o", decomposition="core")
    assert "aten._linalg_det.default" in info.value.targets
    assert "det of a 65x65 matrix is not supported" in info.value.explain()


def test_nonzero_static_beyond_the_dense_limit_is_refused(tmp_path) -> None:
    model = of_inputs(lambda a: torch.nonzero_static(a, size=5000))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(64, 64),), tmp_path / "o", decomposition="aten")
    assert "aten.nonzero_static.default" in info.value.targets


class _Inner(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a.masked_select(a > 0)


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pick = _Inner()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.pick(a) * 2


@pytest.mark.parametrize(
    ("model", "op", "node"),
    [
        (_Outer(), "aten.masked_select.default", "masked_select"),
        (of_inputs(lambda a: a.nonzero()), "aten.nonzero.default", "nonzero"),
        (of_inputs(lambda a: a[a > 0]), "aten.index.Tensor", "index"),
    ],
)
def test_data_dependent_size_is_refused_naming_op_and_node(tmp_path, model: nn.Module, op: str, node: str) -> None:
    with pytest.raises(rti.InputError) as info:
        rti.from_torch(model, (torch.randn(3, 4),), tmp_path / "o", decomposition="core")
    message = str(info.value)
    assert op in message and f"node {node}" in message
    assert "depends on tensor values" in message
    if isinstance(model, _Outer):
        assert "pick" in message  # the module path


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
