"""The coverage command: OpInfo samples -> per-Core-ATen-op status, written as Markdown and JSON."""

from __future__ import annotations

import json

import pytest

from rlx_torch_import import coverage

pytest.importorskip("expecttest")


def test_core_aten_op_list() -> None:
    ops = coverage.core_aten_ops()
    assert len(ops) > 150 and "aten.add.Tensor" in ops and "aten.convolution.default" in ops


def test_coverage_run_on_a_few_ops(tmp_path, monkeypatch) -> None:
    from rlx_torch_import.lower import REGISTRY

    monkeypatch.delitem(REGISTRY, "aten.sub.Tensor")  # make one op a known gap
    assert coverage.main(["--out", str(tmp_path), "--ops", "add,sub", "--samples-per-op", "1"]) == 0
    doc = json.loads((tmp_path / "coverage.json").read_text())
    table = doc["core_ops"]
    assert table["aten.add.Tensor"]["status"] == "verified"
    assert table["aten.sub.Tensor"]["status"] == "unsupported"
    assert "no lowering for this op overload" in table["aten.sub.Tensor"]["reason"]
    md = (tmp_path / "coverage.md").read_text()
    assert "| `aten.add.Tensor` | verified |" in md and "Core ATen ops: **" in md


def test_extra_project_samples_count(tmp_path) -> None:
    samples = tmp_path / "samples.py"
    samples.write_text(
        "import torch\n"
        "class Neg(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return -x\n"
        "SAMPLES = [('neg', Neg(), (torch.randn(3),))]\n"
    )
    out = tmp_path / "out"
    assert (
        coverage.main(["--out", str(out), "--ops", "add", "--samples-per-op", "1", "--extra-samples", str(samples)])
        == 0
    )
    doc = json.loads((out / "coverage.json").read_text())
    assert doc["meta"]["extra_samples"] == 1
    assert doc["core_ops"]["aten.neg.default"] == {"status": "verified", "reason": "", "via": "extra:neg[0]"}
    assert "plus 1 project samples" in (out / "coverage.md").read_text()
