"""The tie-fed verdict (verify/ties.py): topk/sort indices that differ from PyTorch's CPU order only among
tied values pass, judged against PyTorch's graph with RLX's tie choice; any other difference fails."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.lower import REGISTRY
from rlx_torch_import.torchir import Node, TensorSpec
from rlx_torch_import.verify.ties import reorders, tie_choice, tie_ordered


class Detector(nn.Module):
    """Scores with ties (rows masked invalid score their bias alone) -> topk -> gather boxes, as DETR-style
    heads pick their queries."""

    def __init__(self) -> None:
        super().__init__()
        self.score = nn.Linear(4, 3)
        self.box = nn.Linear(4, 4)

    def forward(self, feats: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, ...]:
        scores = self.score(feats * valid).amax(-1)
        values, idx = torch.topk(scores, 6, dim=1)
        boxes = torch.gather(self.box(feats), 1, idx[..., None].expand(-1, -1, 4))
        return values, boxes.sigmoid(), idx


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(2, 40, 4), (torch.rand(2, 40, 1) > 0.92).float()


def test_detector_with_tied_scores_verifies_as_a_tie_choice(tmp_path: Path) -> None:
    feats, valid = _inputs()
    model = Detector().eval()
    with torch.no_grad():
        _, _, idx = model(feats, valid)
    report = rti.from_torch(model, (feats, valid), tmp_path / "o", per_node=True)
    assert report.ok and report.first_divergence is None, report.summary()
    (row,) = [r for r in report.nodes if r.node == "topk" and r.dtype == "int64"]
    assert row.local is not None and row.local.ok and "RLX's tie choice" in row.note
    boxes, indices = report.outputs[1], report.outputs[2]
    assert boxes.judged_by == indices.judged_by == "tie choice", report.summary()
    note = indices.notes[-1]
    assert "node(s) topk" in note and "holds for the tie choice RLX made" in note
    ours = rti.BundleModel(tmp_path / "o" / "bundle").run({"feats": feats.numpy(), "valid": valid.numpy()})
    assert not np.array_equal(ours["output_2"], idx.numpy())  # the sample does exercise ties


def test_indices_that_are_not_ties_still_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A topk lowering that picks the smallest values: indices differ in value, never excused as ties."""
    real = REGISTRY["aten.topk.default"]

    def smallest(b, call):
        call._args["largest"] = False
        return real.fn(b, call)

    monkeypatch.setitem(REGISTRY, "aten.topk.default", replace(real, fn=smallest))
    feats, valid = _inputs()
    report = rti.from_torch(Detector().eval(), (feats, valid), tmp_path / "o", per_node=False)
    assert not report.ok
    indices = report.outputs[2]
    assert not indices.ok and indices.judged_by != "tie choice"
    assert any("select other values than PyTorch's, not a tie" in n for n in indices.notes), indices.notes


def _topk_node() -> Node:
    return Node(
        name="topk",
        target="aten.topk.default",
        args=[{"tensor": "x"}, {"int": 2}, {"int": -1}],
        kwargs={},
        outputs=[TensorSpec("values", [1, 4], "float32"), TensorSpec("indices", [1, 2], "int64")],
    )


def test_tie_choice_accepts_equal_values_only() -> None:
    node = _topk_node()
    x = torch.tensor([[1.0, 3.0, -0.0, 3.0, 0.0]])
    env = {"x": x, "values": torch.tensor([[3.0, 3.0]]), "indices": torch.tensor([[3, 1]])}
    assert tie_choice(node, env, np.array([[3, 1]]))[:2] == (0, "")
    count, why, picked = tie_choice(node, env, np.array([[1, 3]]))
    assert (count, why) == (2, "") and picked.tolist() == [[3.0, 3.0]]
    assert "repeat a position" in tie_choice(node, env, np.array([[1, 1]]))[1]
    assert "not a tie" in tie_choice(node, env, np.array([[1, 0]]))[1]
    assert "range" in tie_choice(node, env, np.array([[1, 5]]))[1]
    zeros = {"x": x, "values": torch.tensor([[0.0]]), "indices": torch.tensor([[4]])}  # -0.0 ties with 0.0
    assert tie_choice(replace(node, args=[{"tensor": "x"}, {"int": 1}]), zeros, np.array([[2]]))[1] == ""


def test_the_first_nan_of_a_median_row_is_a_rule_not_a_tie() -> None:
    nan = float("nan")
    node = Node(
        name="median",
        target="aten.median.dim",
        args=[{"tensor": "x"}, {"int": 1}],
        kwargs={},
        outputs=[TensorSpec("values", [1], "float32"), TensorSpec("indices", [1], "int64")],
    )
    env = {"x": torch.tensor([[1.0, nan, 2.0, nan]]), "values": torch.tensor([nan]), "indices": torch.tensor([1])}
    assert "not a tie" in tie_choice(node, env, np.array([3]))[1]
    kth = replace(node, target="aten.kthvalue.default", args=[{"tensor": "x"}, {"int": 4}, {"int": 1}])
    assert tie_choice(kth, env, np.array([3]))[:2] == (1, "")  # kthvalue's NaNs tie (quick-select's choice)


def test_only_unspecified_orders_are_tie_choices() -> None:
    sort = Node(
        name="s", target="aten.sort.stable", args=[{"tensor": "x"}], kwargs={"stable": {"bool": True}}, outputs=[]
    )
    assert not tie_ordered(sort)
    assert tie_ordered(replace(sort, kwargs={"stable": {"bool": False}}))
    assert tie_ordered(replace(sort, target="aten.sort.default", kwargs={}))
    assert tie_ordered(_topk_node())
    assert not tie_ordered(replace(sort, target="aten.argmax.default", kwargs={}))


def test_a_reference_with_a_specified_tie_order_judges_no_tie_choice() -> None:
    """A front end whose reference fixes the tie order (ONNX Runtime) records it; no tie choice is judged."""
    ir = SimpleNamespace(producer={}, nodes=[_topk_node()])
    assert reorders(ir)  # type: ignore[arg-type]
    ir.producer = {"tie_order": "specified"}
    assert not reorders(ir)  # type: ignore[arg-type]
