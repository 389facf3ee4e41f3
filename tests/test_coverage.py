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
    assert "| `aten.add.Tensor` | verified | core |" in md and "Core ATen ops: **" in md


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
    assert doc["core_ops"]["aten.neg.default"] == {
        "status": "verified",
        "reason": "",
        "via": "extra:neg[0]",
        "level": "core",
    }
    assert "plus 1 project samples" in (out / "coverage.md").read_text()
    neg = [r for r in doc["samples"] if r["opinfo"] == "extra:neg"]
    assert [r["level"] for r in neg] == ["core"], "no aten-level run when the core graph has every Core ATen op"


def _run_extra(tmp_path, source: str) -> dict:
    samples = tmp_path / "samples.py"
    samples.write_text("import torch\nA = torch.ops.aten\n" + source)
    out = tmp_path / "out"
    argv = ["--out", str(out), "--ops", "neg", "--samples-per-op", "1", "--extra-samples", str(samples)]
    assert coverage.main(argv) == 0
    return json.loads((out / "coverage.json").read_text())


def test_ops_the_core_table_decomposes_are_judged_at_aten_level(tmp_path) -> None:
    """squeeze.dim and fill.Scalar are tagged core, yet torch's core table decomposes them."""
    doc = _run_extra(
        tmp_path,
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return A.fill.Scalar(x, 2.0) + x.squeeze(1)\n"
        "SAMPLES = [('squeeze_fill', M(), (torch.randn(3, 1),))]\n",
    )
    table = doc["core_ops"]
    assert table["aten.squeeze.dim"] == {
        "status": "verified",
        "reason": "",
        "via": "extra:squeeze_fill[0]",
        "level": "aten",
    }
    assert table["aten.fill.Scalar"]["level"] == "aten" and table["aten.fill.Scalar"]["status"] == "verified"
    assert table["aten.add.Tensor"]["level"] == "core", "an equal verdict keeps the core run"
    runs = [r["level"] for r in doc["samples"] if r["opinfo"] == "extra:squeeze_fill"]
    assert runs == ["core", "aten"] and doc["meta"]["aten_runs"] >= 1


def test_ops_that_cannot_verify_say_why(tmp_path) -> None:
    doc = _run_extra(
        tmp_path,
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + torch.rand(3)\n"
        "SAMPLES = [('rand', M(), (torch.randn(3),))]\n",
    )
    table = doc["core_ops"]
    assert table["aten.rand.default"]["status"] == "unsupported"
    assert table["aten.rand.default"]["reason"] == coverage.NOT_NATIVE["aten.rand.default"]
    assert table["aten.nonzero.default"]["reason"] == coverage.NOT_NATIVE["aten.nonzero.default"]
    assert "random output" in (tmp_path / "out" / "coverage.md").read_text()
