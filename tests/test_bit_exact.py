"""The bit-exact verdict (issue 38): a float value whose ops are value-exact on exactly known inputs
(rounding, sign, negation, data movement of inputs) is judged bit for bit, signed zeros included; a
value computed from an inexact one (a matmul) keeps the float budgets (docs/design.md, decision ao)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.conversion import Conversion
from rlx_torch_import.lower import REGISTRY
from rlx_torch_import.lower.registry import Lowering
from rlx_torch_import.verify.compare import compare_output
from rlx_torch_import.verify.exactness import exact_outputs
from rlx_torch_import.verify.metrics import cumulative_error, local_error, measure

ROUND = "aten.round.default"


def _plant_floor_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test-only registry override: round as floor(x + 0.5), the shortcut that is off by one past
    2**22 (x + 0.5 rounds) and gives +0.0 for round(-0.5) (PyTorch: -0.0)."""
    real = REGISTRY[ROUND]

    def floor_half(b, call):
        x = call.tensor("self")
        return b.unary("Floor", b.binary("Add", x, b.const(0.5, x.dtype)))

    monkeypatch.setitem(REGISTRY, ROUND, Lowering(ROUND, floor_half, real.check, real.family, kind=real.kind))


class Round(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x)


class Chains(nn.Module):
    """An exact chain (floor and neg of the input), an inexact one (round of a matmul), a comparison."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.neg(torch.floor(x)), torch.round(x @ self.w * 3.0), x > 0


# ── the criterion on hand-made arrays ──────────────────────────────────────────────────────────────


def test_one_ulp_at_two_to_the_23_is_inside_the_budget_but_fails_bit_exact() -> None:
    torch_value = np.array([-8388609.0, 2.0], dtype=np.float32)
    ours = np.array([-8388608.0, 2.0], dtype=np.float32)
    assert compare_output("y", ours, torch_value, "float32", "float32").ok  # the float32 budget: 1 in 8.4e6
    row = compare_output("y", ours, torch_value, "float32", "float32", bit_exact=True)
    assert not row.ok and row.criterion == "bit-exact" and row.mismatches == 1 and row.first_mismatch == [0]
    assert "differ in bits" in row.reasons[0]
    assert row.mismatch_text() == (
        "1 differ in bits, first at [0]: RLX -8388608.0 (0xcb000000) vs PyTorch -8388609.0 (0xcb000001)"
    )


def test_signed_zeros_differ_and_nans_are_equal_whatever_their_payload() -> None:
    torch_value = np.array([-0.0, 1.0, np.nan], dtype=np.float32)
    ours = np.array([0.0, 1.0, np.nan], dtype=np.float32)
    ours[2] = np.frombuffer(np.uint32(0xFFC00001).tobytes(), dtype=np.float32)[0]  # another NaN
    assert compare_output("y", ours, torch_value, "float32", "float32").ok
    row = compare_output("y", ours, torch_value, "float32", "float32", bit_exact=True)
    assert not row.ok and row.mismatches == 1
    assert "RLX 0.0 (0x00000000) vs PyTorch -0.0 (0x80000000)" in row.mismatch_text()
    ours[0] = -0.0
    same = compare_output("y", ours, torch_value, "float32", "float32", bit_exact=True)
    assert same.ok and same.mismatch_text() == "0 differ in bits"


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_bit_exact_in_other_float_dtypes(dtype: str) -> None:
    torch_value = np.array([-0.0, 2049.0], dtype=dtype)
    assert not compare_output("y", np.array([0.0, 2049.0], dtype=dtype), torch_value, dtype, dtype, bit_exact=True).ok
    assert compare_output("y", torch_value.copy(), torch_value, dtype, dtype, bit_exact=True).ok


def test_integer_outputs_stay_exact_and_are_not_relabelled() -> None:
    row = compare_output("y", np.array([1, 2]), np.array([1, 2]), "int64", "int64", bit_exact=True)
    assert row.ok and row.criterion == "exact"


def test_per_node_verdicts_are_bit_exact_for_value_exact_values() -> None:
    torch_value = np.array([-0.0, 3.0], dtype=np.float32)
    ours = np.array([0.0, 3.0], dtype=np.float32)
    m = measure(ours, torch_value, "float32", bits=True)
    assert m.bits_differ == 1 and m.max_abs == 0.0
    assert not local_error(m, "float32", "exact", 1, m.top).ok  # round, floor, neg...: fed PyTorch's inputs
    assert not local_error(m, "float32", "movement", 1, m.top).ok  # a copy keeps the sign of a zero
    assert local_error(m, "float32", "elementwise", 1, m.top).ok
    assert not cumulative_error(m, "float32", bit_exact=True).ok
    assert cumulative_error(m, "float32").ok
    with pytest.raises(ValueError, match="bits=True"):
        local_error(measure(ours, torch_value, "float32"), "float32", "exact", 1, 3.0)


# ── the planted wrong lowering, end to end ─────────────────────────────────────────────────────────


def test_planted_round_past_two_to_the_22_fails_verification(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """round(-8388609.) = -8388609 in PyTorch; floor(x + 0.5) gives -8388608: 1 in 8.4e6, inside the
    float32 budget, so only the bit-exact criterion sees it. The output, its per-node rows and the
    reports say so."""
    _plant_floor_half(monkeypatch)
    x = torch.tensor([[-8388609.0, 3.0, 1.25, -7.0]])
    report = rti.from_torch(Round(), (x,), tmp_path, per_node=True)
    assert not report.ok
    (row,) = report.outputs
    assert row.criterion == "bit-exact" and row.mismatches == 1 and row.first_mismatch == [0, 0]
    assert compare_output("y", np.array([[-8388608.0, 3, 1, -7]], "f4"), x.numpy(), "float32", "float32").ok
    text = "RLX -8388608.0 (0xcb000000) vs PyTorch -8388609.0 (0xcb000001)"
    assert text in report.summary() and text in (tmp_path / "report.md").read_text()
    doc = json.loads((tmp_path / "report.json").read_text())["outputs"][0]
    assert doc["criterion"] == "bit-exact" and doc["ok"] is False
    first = report.first_divergence
    assert first is not None and first.aten == ROUND
    assert first.local is not None and first.local.bit_exact and first.local.bits_differ == 1
    assert first.cumulative is not None and first.cumulative.bit_exact and not first.cumulative.ok
    assert "bit-exact (1 differ)" in (tmp_path / "report.md").read_text()


def test_planted_round_of_minus_one_half_loses_the_sign_of_zero(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _plant_floor_half(monkeypatch)
    x = torch.tensor([[-0.5, -0.25, 0.25, 2.0]])
    assert torch.round(x)[0, 0].item() == 0.0 and torch.round(x)[0, 0].signbit()
    report = rti.from_torch(Round(), (x,), tmp_path)
    (row,) = report.outputs
    assert not report.ok and row.max_abs_error == 0.0  # no budget sees a zero's sign
    assert row.mismatches == 2 and row.first_mismatch == [0, 0]
    assert "RLX 0.0 (0x00000000) vs PyTorch -0.0 (0x80000000)" in row.mismatch_text()
    from rlx_torch_import.verify.diagnose import diagnose

    found = diagnose(tmp_path)  # in this process: the planted lowering is in its registry
    assert found.node is not None and found.node.aten == ROUND and found.repro is not None
    assert "2 elements differ in bits" in (found.repro / "README.md").read_text()
    run = subprocess.run([sys.executable, "repro.py"], cwd=found.repro, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "2 elements differ in bits" in run.stdout, run.stdout + run.stderr


def test_exact_and_inexact_chains_are_judged_by_their_own_criterion(tmp_path: Path) -> None:
    """floor/neg of an input: bit-exact, and RLX gets every bit (signed zeros included); round of a
    matmul: the float budget (the matmul may differ by an ULP); a comparison: exact, as every bool."""
    x = torch.tensor([[-0.0, 0.0, -2.5, 7.75], [1e30, -1e-30, -8388607.5, 0.5]])
    report = rti.from_torch(Chains(), (x,), tmp_path, per_node=True)
    assert report.ok, report.summary()
    assert [o.criterion for o in report.outputs] == ["bit-exact", "budget", "exact"]
    assert exact_outputs(Conversion.load(tmp_path).ir) == {report.outputs[0].name}
    rows = {r.aten: r for r in report.nodes}
    assert rows["aten.floor.default"].local.bit_exact and rows["aten.floor.default"].cumulative.bit_exact
    assert rows["aten.neg.default"].cumulative.bit_exact
    rounded = rows[ROUND]
    assert rounded.local.bit_exact and not rounded.cumulative.bit_exact  # fed PyTorch's matmul: exact


# ── the ONNX importer route: the same criterion, from the ONNX graph's ops ────────────────────────


def _onnx_chains(tmp_path: Path) -> Path:
    """y = Neg(Floor(x)) (exact chain), z = Floor(MatMul(x, w)) (inexact chain), from a helper-built graph."""
    import onnx
    from onnx import helper, numpy_helper

    from onnx_models import make_model, tensor

    w = numpy_helper.from_array(np.eye(3, dtype=np.float32) * np.float32(1.5), "w")
    nodes = [
        helper.make_node("Floor", ["x"], ["f"], name="floor"),
        helper.make_node("Neg", ["f"], ["y"], name="neg"),
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node("Floor", ["m"], ["z"], name="floor_mm"),
    ]
    model = make_model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3]), tensor("z", [2, 3])])
    model.graph.initializer.append(w)
    path = tmp_path / "chains.onnx"
    onnx.save(model, str(path))
    return path


def test_onnx_importer_outputs_are_judged_by_their_value_criterion(tmp_path: Path) -> None:
    x = np.array([[8388607.5, 1e7, -0.5], [4194303.5, 0.25, -2.0]], dtype=np.float32)
    report = rti.from_onnx(_onnx_chains(tmp_path), tmp_path / "o", inputs={"x": x}, route="importer")
    assert report.ok, report.summary()
    assert {o.name: o.criterion for o in report.outputs} == {"y": "bit-exact", "z": "budget"}


def test_onnx_planted_floor_off_by_one_fails_only_bit_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The importer's Floor (round(x) - (round(x) > x)) planted with the wrong comparison: round(x)
    where it rounded up, off by one at 8388607.5 (1 in 8.4e6, inside the float32 budget); the exact
    chain fails bit-exact and per-node parity names the Floor."""
    from test_onnx_nodes import plant

    x = np.array([[8388607.5, 9999999.0, 4194303.5], [4194302.5, 8388606.5, 5000000.5]], dtype=np.float32)
    changed = plant(monkeypatch, "onnx::Floor", {"Compare": "Gt"}, {"Compare": "Lt"})
    report = rti.from_onnx(_onnx_chains(tmp_path), tmp_path / "o", inputs={"x": x}, route="importer")
    assert changed, "the planted lowering took effect"
    rows = {o.name: o for o in report.outputs}
    assert not report.ok and not rows["y"].ok and rows["y"].criterion == "bit-exact"
    assert rows["y"].max_abs_error == 1.0  # inside the float32 budget at 1e7 (1e-4 of it)
    assert rows["z"].ok and rows["z"].criterion == "budget"  # the same planted error, after an inexact MatMul
    first = report.first_divergence
    assert first is not None and first.node == "floor" and first.local is not None and first.local.bit_exact


@pytest.mark.parametrize("route", ["importer", "torch"])
def test_onnx_exactness_is_read_from_the_file_onnx_runtime_runs(tmp_path: Path, route: str) -> None:
    """Both routes judge by the ONNX file's ops (ONNX Runtime computes the reference from them): the exact
    chain is bit-exact on either route, and an output the pre-pass or torch.export folds to a constant
    (Floor(Cos(constant)): RLX holds the folder's cos, ONNX Runtime computes its own) keeps the float
    budget though no op of the folded graph is left to compute it."""
    import onnx
    from onnx import helper, numpy_helper

    from onnx_models import make_model, tensor

    model = onnx.load(str(_onnx_chains(tmp_path)))
    k = numpy_helper.from_array(np.array([0.3, 1.7, -2.5, 100.1, 7.77, 3.0], np.float32).reshape(2, 3), "k")
    nodes = [*model.graph.node, helper.make_node("Cos", ["k"], ["c"]), helper.make_node("Mul", ["c", "c"], ["cc"])]
    outputs = [tensor("y", [2, 3]), tensor("z", [2, 3]), tensor("cc", [2, 3])]
    folded = make_model(nodes, [tensor("x", [2, 3])], outputs)
    folded.graph.initializer.extend([*model.graph.initializer, k])
    path = tmp_path / "folded.onnx"
    onnx.save(folded, str(path))
    x = np.array([[8388607.5, 1e7, -0.5], [4194303.5, 0.25, -2.0]], dtype=np.float32)
    report = rti.from_onnx(path, tmp_path / route, inputs={"x": x}, route=route)
    assert report.ok, report.summary()
    assert {o.name: o.criterion for o in report.outputs} == {"y": "bit-exact", "z": "budget", "cc": "budget"}
