"""Per-node parity and `diagnose`: the first node whose own error is over its budget, named exactly,
with a repro folder that runs on its own (issue 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import rlx_torch_import as rti
from models import make
from rlx_torch_import.lower import REGISTRY
from rlx_torch_import.lower.registry import Lowering

PLANTED = "aten.silu.default"


def _plant(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """A test-only registry override: silu's lowering scaled by `factor` (-1: a sign error)."""
    real = REGISTRY[PLANTED]

    def wrong(b, call):
        value = real.fn(b, call)
        return b.binary("Mul", value, b.const(factor, value.dtype))

    monkeypatch.setitem(REGISTRY, PLANTED, Lowering(PLANTED, wrong, real.check, real.family, kind=real.kind))


def _silu_node(report: rti.ParityReport) -> str:
    (name,) = {r.node for r in report.nodes if r.aten == PLANTED}
    return name


def test_a_correct_conversion_has_no_divergence(tmp_path: Path) -> None:
    model, inputs = make("transformer_block")
    report = rti.from_torch(model, inputs, tmp_path)
    assert report.ok and report.first_divergence is None and not report.drift
    assert len(report.nodes) > 10
    assert all(r.note or (r.local is not None and r.local.ok and r.cumulative is not None) for r in report.nodes)
    done = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", "diagnose", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "no divergence" in done.stdout, done.stdout + done.stderr


def test_a_sign_error_is_the_first_divergence_and_its_repro_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _plant(monkeypatch, -1.0)
    model, inputs = make("transformer_block")
    report = rti.from_torch(model, inputs, tmp_path)
    assert not report.ok  # the output is wrong
    first = report.first_divergence
    assert first is not None and first.aten == PLANTED and first.node == _silu_node(report)
    assert all(r.local is None or r.local.ok for r in report.nodes if r.index < first.index)  # nothing earlier
    from rlx_torch_import.verify.diagnose import diagnose

    found = diagnose(tmp_path)
    assert found.node is not None and found.node.node == first.node and found.repro is not None
    for f in ("repro.py", "inputs.safetensors", "outputs.safetensors", "node.json", "rlx.hir.json", "README.md"):
        assert (found.repro / f).is_file(), f
    # The folder runs on its own, from anywhere: it shows the mismatch and exits 1.
    run = subprocess.run([sys.executable, "repro.py"], cwd=found.repro, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "aten.silu.default" in run.stdout and "max abs difference" in run.stdout


def test_a_small_scale_error_passes_at_the_output_but_not_locally(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(monkeypatch, 1.0 + 3e-5)
    model, inputs = make("transformer_block")
    report = rti.from_torch(model, inputs, tmp_path)
    assert report.ok, report.summary()  # inside the output budget
    first = report.first_divergence
    assert first is not None and first.node == _silu_node(report) and first.local is not None
    assert first.local.max_abs > first.local.allowed_abs
    from rlx_torch_import.cli import main

    code = main(["diagnose", str(tmp_path)])  # in this process: the planted lowering is in its registry
    printed = capsys.readouterr().out
    assert code == 1 and f"first divergence: {first.node} (aten.silu.default" in printed, printed
