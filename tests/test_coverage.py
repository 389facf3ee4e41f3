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
