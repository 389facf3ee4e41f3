"""Weight-only quantization never silently destroys a weight (issue 38): a weight with a block whose float16
scale would be subnormal or 0 stays float with the reason (the boundary, 2**-14, tested on both sides), and
the accuracy table flags any output feature whose error against the float model is large for its own
magnitude, which cosine over the whole output hides. Also: the PT2E note counts every linear and
convolution form (transposed convolutions included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.frontend.torch import quantize as front_quantize
from rlx_torch_import.lower.ops.quantized import pt2e_note
from rlx_torch_import.quant.report import FEATURE_LIMIT, feature_errors, feature_magnitude
from rlx_torch_import.quant.schemes import BLOCK, F16_MIN_NORMAL, SCHEMES, dequantize, pack, scale_fault
from rlx_torch_import.torchir import Node, TensorSpec

DIVISOR = {"int8": 127, "int4": 8}  # a block's scale is its largest |w| over this


def _block_with_peak(peak: float, name: str) -> np.ndarray:
    """A [1, 64] weight: one ordinary block, then a block whose largest |w| is `peak` (its other elements
    smaller)."""
    rng = np.random.default_rng(1)
    w = rng.uniform(-0.5, 0.5, (1, 2 * BLOCK)).astype(np.float32)
    w[0, BLOCK:] = np.float32(peak) * rng.uniform(-0.9, 0.9, BLOCK).astype(np.float32)
    w[0, BLOCK + 5] = np.float32(-peak if name == "int4" else peak)
    return w


@pytest.mark.parametrize("name", ["int8", "int4"])
def test_the_f16_scale_boundary_both_sides(name: str) -> None:
    """A block whose float16 scale is the smallest normal, 2**-14, packs: each element within the scheme's own
    step bound and packing again gives the same bytes. The next float16 below (the largest subnormal) keeps
    the weight float, and so does a block whose scale underflows to 0, with the reason."""
    scheme, divisor = SCHEMES[name], DIVISOR[name]
    normal = _block_with_peak(divisor * F16_MIN_NORMAL, name)
    assert scale_fault(normal, scheme) == ""
    deq = dequantize(normal, scheme)
    bound = F16_MIN_NORMAL * (0.5 if name == "int8" else 1.0) * (1 + 2**-10)  # the step is 2**-14
    assert np.all(np.abs(normal - deq)[0, BLOCK:] <= bound)
    assert np.array_equal(pack(deq, scheme), pack(normal, scheme))

    subnormal = _block_with_peak(divisor * (F16_MIN_NORMAL - 2.0**-24), name)
    reason = scale_fault(subnormal, scheme)
    assert "1 of 2 blocks" in reason and "2**-14" in reason and "subnormal" in reason, reason
    assert "row 0, elements 32..63" in reason, reason

    underflow = _block_with_peak(1e-6 * divisor / 127, name)  # the row: a scale below 2**-25
    reason = scale_fault(underflow, scheme)
    assert "1 of them 0, which dequantizes the block to 0" in reason, reason
    assert not dequantize(underflow, scheme)[0, BLOCK:].any()  # what packing it would have done


@pytest.mark.parametrize("name", ["int8", "int4"])
def test_normal_scales_keep_the_bound_and_subnormal_ones_break_it(name: str) -> None:
    """Why the rule sits at 2**-14: over block magnitudes from the boundary up, every element stays within the
    scheme's bound and repacking is exact; just below it (subnormal scales) some block breaks one or the other."""
    scheme, divisor = SCHEMES[name], DIVISOR[name]
    rng = np.random.default_rng(0)

    def faults(peaks: np.ndarray) -> int:
        w = rng.standard_normal((peaks.size, BLOCK)).astype(np.float32)
        w *= (peaks / np.abs(w).max(-1))[:, None].astype(np.float32)
        deq = dequantize(w, scheme)
        step = np.abs(w).max(-1, keepdims=True).astype(np.float64) / divisor
        over = np.abs(w.astype(np.float64) - deq) > step * (0.5 if name == "int8" else 1.0) * (1 + 2**-10)
        return int(over.any(-1).sum()) + int(not np.array_equal(pack(deq, scheme), pack(w, scheme)))

    low = divisor * F16_MIN_NORMAL
    normal = np.exp(rng.uniform(np.log(low), np.log(low * 1e4), 4000)).astype(np.float32)
    assert faults(normal[normal >= np.float32(low)]) == 0
    subnormal = np.exp(rng.uniform(np.log(low * 2**-10), np.log(low * 0.999), 4000)).astype(np.float32)
    assert faults(subnormal) > 0


def test_the_rule_covers_linears_and_embedding_tables() -> None:
    """`choose` keeps float every Linear weight and Embedding table with a tiny block, naming it, and packs
    the rest."""

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.fc, self.head = nn.Embedding(16, 32), nn.Linear(32, 64), nn.Linear(64, 4)

    model = Model()
    with torch.no_grad():
        model.emb.weight[3] *= 1e-7
        model.head.weight[1] *= 1e-5
    for name in ("int8", "int4"):
        chosen, kept = front_quantize.choose(model, SCHEMES[name])
        assert set(chosen) == {"fc.weight"}
        reasons = {k["weight"]: k["reason"] for k in kept}
        assert set(reasons) == {"emb.weight", "head.weight"}
        assert "row 3" in reasons["emb.weight"] and "row 1" in reasons["head.weight"]
        assert all("float16 block scale below float16's smallest normal" in r for r in reasons.values())


def test_feature_errors() -> None:
    """Each last-axis element against its own magnitude; non-finite disagreements are infinite errors."""
    f = np.array([[1.0, 0.1, 0.0, 5.0], [-2.0, -0.1, 0.0, 5.0]], np.float32)
    q = np.array([[1.1, 0.0, 0.0, 5.0], [-2.1, 0.0, 0.0, 5.0]], np.float32)
    found = feature_errors(f, q)
    assert found["features"] == 4 and found["flagged_features"] == 1
    worst = found["worst_feature"]
    assert worst["index"] == 1 and worst["relative_error"] == pytest.approx(1.0)
    assert worst["magnitude"] == pytest.approx(0.1) and worst["max_abs_error"] == pytest.approx(0.1)
    assert feature_errors(f, f)["flagged_features"] == 0
    assert feature_errors(f, f)["worst_feature"]["relative_error"] == 0.0  # 0 / 0 on the zero feature
    q2 = f.copy()
    q2[1, 2] = 1e-3  # an error on a feature that is 0 throughout
    q2[0, 3] = np.inf  # a finite value quantized to inf
    found = feature_errors(f, q2)
    assert found["flagged_features"] == 2 and found["worst_feature"]["relative_error"] == np.inf
    nan = np.array([np.nan, 1.0], np.float32)
    assert feature_errors(nan, nan)["flagged_features"] == 0  # NaN where the float model has NaN
    assert feature_errors(np.float32(2.0), np.float32(0.5))["flagged_features"] == 1  # a scalar: one feature
    for empty in (np.zeros((0, 3), np.float32), np.zeros((3, 0), np.float32)):
        assert feature_errors(empty, empty) == {"features": empty.shape[1], "flagged_features": 0}
    with pytest.raises(ValueError, match="shape"):
        feature_errors(f, q[:, :2])
    # a magnitude over several inputs (`feature_magnitude`, pooled by `accuracy_cost`): feature 1 is 1.0 elsewhere
    pooled = np.maximum(feature_magnitude(f), np.array([0.0, 1.0, 0.0, 0.0]))
    assert feature_errors(f, q, pooled)["flagged_features"] == 0
    with pytest.raises(ValueError, match="magnitudes"):
        feature_errors(f, q, pooled[:3])
    assert FEATURE_LIMIT == 0.5


class _Tiny(nn.Module):
    """The issue's case: features of very different sizes; row 1 of `head` has weights ~1e-6 (its float16
    block scale underflows to 0 when packed), so its output feature is ~1e-5 of the others'."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.head = nn.Linear(64, 64), nn.Linear(64, 4, bias=False)
        with torch.no_grad():
            self.head.weight[1] = torch.randn(64) * 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x))) * 1e4


def _convert(out: Path) -> tuple[rti.ParityReport, dict[str, Any]]:
    torch.manual_seed(0)
    model = _Tiny().eval()
    report = rti.from_torch(model, (torch.randn(6, 64),), out, quantize="int8")
    assert report.ok, report.summary()
    (row,) = [c for c in report.quantization["accuracy_cost"] if c["point"] == "example"]
    return report, row


def test_a_tiny_row_stays_float_and_matches_the_float_model(tmp_path: Path) -> None:
    report, row = _convert(tmp_path / "o")
    q = report.quantization
    kept = {k["weight"]: k["reason"] for k in q["kept_float"]}
    assert "of them 0, which dequantizes the block to 0" in kept["head.weight"], kept
    assert "row 1, elements" in kept["head.weight"], kept
    assert [r["weight"] for r in q["quantized"]] == ["body.weight"]
    assert row["features"] == 4 and row["flagged_features"] == 0, row
    assert row["worst_feature"]["relative_error"] < 0.05, row
    assert "WARNING" not in report.summary()
    ir = json.loads((tmp_path / "o" / "torch-ir.json").read_text())
    assert ir["quantize"]["weights"] == ["body.weight"] and ir["quantize"]["kept_float"][0]["weight"] == "head.weight"
    again = rti.build(tmp_path / "o")  # the kept weight stays float when re-lowered from torch-ir
    assert again.ok and again.quantization["quantized"] == q["quantized"]


def test_a_destroyed_feature_is_flagged_though_cosine_is_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the rule disabled the row packs, its scale 0: the model still verifies (against its dequantized
    weights), cosine against the float model is above 0.9999, and the accuracy table flags the feature."""
    monkeypatch.setattr(front_quantize, "scale_fault", lambda w, scheme: "")
    report, row = _convert(tmp_path / "o")
    assert {r["weight"] for r in report.quantization["quantized"]} == {"body.weight", "head.weight"}
    assert row["cosine"] > 0.9999, row  # cosine over the output says all is well
    assert row["flagged_features"] == 1, row
    worst = row["worst_feature"]
    assert worst["index"] == 1 and worst["relative_error"] == pytest.approx(1.0), worst
    summary = report.summary()
    assert "WARNING: 1 output feature(s)" in summary and "feature 1 on example" in summary, summary
    md = (tmp_path / "o" / "report.md").read_text()
    assert "| **1** / 4 | 1: " in md and "exceeds 0.5 of its own largest magnitude" in md
    html = (tmp_path / "o" / "report.html").read_text()
    assert '<tr class="bad"><td>example</td>' in html
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    assert doc["quantization"]["feature_limit"] == 0.5
    assert [c["flagged_features"] for c in doc["quantization"]["accuracy_cost"]] == [1]


def _node(name: str, target: str, *args: Any) -> Node:
    return Node(name=name, target=target, args=list(args), kwargs={}, outputs=[TensorSpec(name, [1], "float32")])


def _t(name: str) -> dict[str, str]:
    return {"tensor": name}


def test_pt2e_note_counts_every_convolution_and_linear_form() -> None:
    """Each conv form (conv1d..3d, transposed, aten.convolution) and linear form (linear, addmm with the
    weight third, matmul through a transpose) reading dequantized values is counted; one reading only float
    values is not."""
    dq = "quantized_decomposed.dequantize_per_tensor.default"
    nodes = [
        _node("x_dq", dq, _t("x_q"), 0.1, 0),
        _node("w_dq", "quantized_decomposed.dequantize_per_channel.default", _t("w_q"), _t("s"), None, 0),
        _node("c1", "aten.conv2d.default", _t("x_dq"), _t("w_dq")),
        _node("c2", "aten.conv_transpose2d.input", _t("x_dq"), _t("w_dq")),
        _node("c3", "aten.conv_transpose1d.default", _t("x_dq"), _t("w_dq")),
        _node("c4", "aten.convolution.default", _t("x_dq"), _t("w_dq"), None, [{"int": 1}]),
        _node("c5", "aten.conv3d.padding", _t("x_dq"), _t("w_dq")),
        _node("l1", "aten.linear.default", _t("x_dq"), _t("w_dq")),
        _node("wt", "aten.t.default", _t("w_dq")),
        _node("l2", "aten.addmm.default", _t("bias"), _t("float_in"), _t("wt")),
        _node("l3", "aten.matmul.default", _t("float_in"), _t("float_w")),  # no dequantized input
        _node("c6", "aten.conv2d.default", _t("float_in"), _t("float_w")),
        _node("q", "quantized_decomposed.quantize_per_tensor.default", _t("l1"), 0.1, 0),
    ]
    note = pt2e_note(nodes)
    assert note is not None and "3 quantize/dequantize op(s)" in note
    assert "2 linear/matmul(s) and 5 convolution(s)" in note, note
    assert pt2e_note(nodes[2:-1]) is None


def test_pt2e_model_with_a_transposed_convolution_counts_both(tmp_path: Path) -> None:
    """A PT2E graph with a convolution and a transposed one (XNNPACK quantizer) reports two convolutions."""
    quantize_pt2e = pytest.importorskip("test_quantized_pt2e").quantize_pt2e

    class UpDown(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down, self.up = nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ConvTranspose2d(8, 4, 2, stride=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.up(torch.relu(self.down(x)))

    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    report = rti.from_torch(quantize_pt2e(UpDown(), x, "xnnpack_static"), (x,), tmp_path / "o")
    assert report.ok, report.summary()
    (note,) = [n for n in report.notes if n.startswith("PT2E quantized graph:")]
    assert "0 linear/matmul(s) and 2 convolution(s)" in note, note
