"""The ONNX front end at the level of nodes: every gap of a model listed at once (exit 3), a planted
wrong lowering caught by parity and located by per-node parity, and ops and broadcasts the importer
must take as ONNX defines them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rlx_torch_import as rti
from onnx_models import export_conv_and_mlp, make_model, tensor
from rlx_torch_import import _core
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode, UnsupportedOpsError
from rlx_torch_import.frontend.onnx import driver, expand


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_conv_and_mlp(tmp_path_factory.mktemp("onnx") / "pair.onnx")


def save(model: Any, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


# A custom-domain op, and a standard op the importer does not lower that ONNX defines no function
# for (so the pre-pass cannot expand it either).
CUSTOM, MISSING = ("com.example", "MyOp"), "Det"
GAPS = {
    ("com.example.MyOp (opset 1)", "custom"),
    ("Det (ai.onnx opset 17)", "det"),
    ("<input dtype double>", "dd"),
    ("<input dtype string>", "s"),
    ("<output dtype double>", "dout"),
}


def every_gap_model() -> Any:
    """Five gaps: a custom-domain op, a standard op the importer lacks, a double input, a string
    input, a double output; the Relu, Cast and Identity next to them are supported."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node(CUSTOM[1], ["r"], ["m"], name="custom", domain=CUSTOM[0]),
        helper.make_node(MISSING, ["x"], ["d"], name="det"),
        helper.make_node("Cast", ["dd"], ["dc"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Identity", ["dd"], ["dout"], name="ident"),
    ]
    inputs = [tensor("x", [2, 3, 3]), tensor("dd", [2, 3], TensorProto.DOUBLE), tensor("s", [2], TensorProto.STRING)]
    outputs = [
        tensor("m", [2, 3, 3]),
        tensor("d", [2]),
        tensor("dc", [2, 3]),
        tensor("dout", [2, 3], TensorProto.DOUBLE),
    ]
    return make_model(nodes, inputs, outputs, opsets={CUSTOM[0]: 1})


def test_the_gap_model_has_ops_the_importer_lacks() -> None:
    known = set(_core.onnx_op_types())
    assert CUSTOM[1] not in known and MISSING not in known
    assert not expand.expandable(every_gap_model(), MISSING)
    assert {"Relu", "Cast", "Identity"} <= known


def test_every_gap_is_listed_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save(every_gap_model(), tmp_path / "gaps.onnx")
    out = tmp_path / "o"
    assert cli_main(["onnx", str(path), "-o", str(out), "-q"]) == ExitCode.UNSUPPORTED
    assert not out.exists(), "nothing is written for a model with gaps"
    err = capsys.readouterr().err
    with pytest.raises(UnsupportedOpsError) as raised:
        rti.from_onnx(path, out)
    found = {(i.target, i.node) for i in raised.value.items}
    assert found >= GAPS, GAPS - found
    assert not {i.node for i in raised.value.items} & {"relu", "cast", "ident"}, "supported nodes are no gaps"
    for target, node in GAPS:  # the CLI prints every one, with its node
        assert target in err and f"node {node}" in err, (target, node, err)
    assert all(word in err for word in ("double", "string", "com.example", "opset 17")), err


def test_each_gap_is_listed_once(tmp_path: Path) -> None:
    """A custom-domain node is one gap (not again as a node the importer stubbed)."""
    with pytest.raises(UnsupportedOpsError) as raised:
        rti.from_onnx(save(every_gap_model(), tmp_path / "gaps.onnx"), tmp_path / "o")
    found = [(i.target, i.node) for i in raised.value.items]
    assert sorted(found) == sorted(GAPS), found


def test_a_gap_inside_the_graph_is_a_gap_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The custom op's value feeds supported nodes: still exit 3 naming it, not an internal error."""
    nodes = [
        helper.make_node(CUSTOM[1], ["x"], ["m"], name="custom", domain=CUSTOM[0]),
        helper.make_node("Add", ["m", "x"], ["s"], name="plus"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    model = make_model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])], opsets={CUSTOM[0]: 1})
    path = save(model, tmp_path / "m.onnx")
    assert cli_main(["onnx", str(path), "-o", str(tmp_path / "o"), "-q"]) == ExitCode.UNSUPPORTED
    err = capsys.readouterr().err
    assert "com.example.MyOp (opset 1)" in err and "node custom" in err, err
    assert "Traceback" not in err and "internal error" not in err, err


def test_the_unsupported_hint_fits_the_onnx_command(tmp_path: Path) -> None:
    """`rlx-torch-import onnx` has no --decomposition: the hint must not suggest it."""
    nodes = [helper.make_node(MISSING, ["x"], ["y"], name="hswish")]
    path = save(make_model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])]), tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOpsError) as raised:
        rti.from_onnx(path, tmp_path / "o")
    assert "--decomposition" not in (raised.value.hint or ""), raised.value.hint


def plant(monkeypatch: pytest.MonkeyPatch, aten: str, old: Any, new: Any) -> list[int]:
    """Make every import (the conversion and per-node parity's) lower the ONNX op `aten` wrongly:
    its RLX node with op `old` gets op `new`. Returns a list counting the nodes changed."""
    real = driver.to_program
    changed: list[int] = []

    def wrong(*args: Any, **kwargs: Any) -> Any:
        program = real(*args, **kwargs)
        for k, node in enumerate(program.nodes):
            if node.provenance.aten == aten and node.op == old:
                program.nodes[k] = dataclasses.replace(node, op=new)
                changed.append(k)
        return program

    monkeypatch.setattr(driver, "to_program", wrong)
    return changed


def test_a_wrong_lowering_is_caught_and_located(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = plant(monkeypatch, "onnx::Sigmoid", {"Activation": "Sigmoid"}, {"Activation": "Tanh"})
    report = rti.from_onnx(exported, tmp_path / "o", route="importer")
    assert changed, "the planted lowering took effect"
    assert not report.ok
    assert {o.name: o.ok for o in report.outputs} == {"feat": True, "logits": False}, report.summary()
    graph = onnx.load(str(exported)).graph
    at = next(i for i, n in enumerate(graph.node) if n.op_type == "Sigmoid")
    sigmoid = graph.node[at]
    first = report.first_divergence
    assert first is not None, report.nodes
    assert (first.node, first.aten) == (sigmoid.name, "onnx::Sigmoid")
    assert first.local is not None and not first.local.ok
    rows = {n.node: n for n in report.nodes}
    before = [rows[n.name] for n in graph.node[:at] if n.op_type != "Constant"]  # Constants are folded
    assert {n.aten for n in before} >= {"onnx::Conv", "onnx::Gemm"}, before
    for row in before:
        assert row.local is not None and row.local.ok, row
        assert row.cumulative is not None and row.cumulative.ok, row
    # The Gemm reading the Sigmoid's value: right alone, wrong downstream of the planted node.
    after = rows[next(n.name for n in graph.node if sigmoid.output[0] in n.input)]
    assert after.aten == "onnx::Gemm" and after.local is not None and after.local.ok, after
    assert after.cumulative is not None and not after.cumulative.ok, after


def test_auto_route_replaces_a_wrong_importer_bundle(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default route: the importer's bundle fails parity, so the torch route converts the model;
    the report says so and names the ONNX node the importer route first diverged at."""
    changed = plant(monkeypatch, "onnx::Sigmoid", {"Activation": "Sigmoid"}, {"Activation": "Tanh"})
    report = rti.from_onnx(exported, tmp_path / "o")
    assert changed
    assert report.ok, report.summary()
    sigmoid = next(n for n in onnx.load(str(exported)).graph.node if n.op_type == "Sigmoid")
    assert any(n.startswith("route: the torch route") for n in report.notes), report.notes
    failed = next(n for n in report.notes if "failed parity" in n)
    assert "logits" in failed and f"{sigmoid.name} (onnx::Sigmoid)" in failed, failed
    meta = json.loads((tmp_path / "o" / "bundle" / "meta.json").read_text())
    assert [i["name"] for i in meta["inputs"]] == [i.name for i in onnx.load(str(exported)).graph.input]
    assert [o["name"] for o in meta["outputs"]] == ["feat", "logits"]


def test_a_wrong_binary_op_is_located_at_its_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Add lowered as Sub in a helper-built graph: per-node parity names the Add, not its neighbours
    (one of which reads the same value twice, as `x * x` does)."""
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
        helper.make_node("Add", ["sq", "x"], ["s"], name="plus"),
        helper.make_node("Exp", ["s"], ["y"], name="exp"),
    ]
    path = save(make_model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 4])]), tmp_path / "m.onnx")
    changed = plant(monkeypatch, "onnx::Add", {"Binary": "Add"}, {"Binary": "Sub"})
    report = rti.from_onnx(path, tmp_path / "o", route="importer")
    assert changed and not report.ok
    assert report.first_divergence is not None and report.first_divergence.node == "plus"
    assert report.first_divergence.aten == "onnx::Add"
    square, _, exp = report.nodes
    assert square.node == "square" and square.local is not None and square.local.ok
    assert exp.node == "exp" and exp.local is not None and exp.local.ok


def test_constant_nodes_and_lowered_ops_are_not_gaps(tmp_path: Path) -> None:
    """RLX's importer folds `Constant` nodes (torch's TorchScript exporter emits them) and lowers
    `Log`; neither is a gap (an input keeps Log's argument positive)."""
    const = onnx.numpy_helper.from_array(np.full(3, 2.0, np.float32))
    nodes = [
        helper.make_node("Constant", [], ["c"], name="two", value=const),
        helper.make_node("Add", ["x", "c"], ["s"], name="plus"),
        helper.make_node("Log", ["s"], ["y"], name="log"),
    ]
    path = save(make_model(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 3])]), tmp_path / "m.onnx")
    x = np.abs(np.random.default_rng(4).standard_normal((2, 3))).astype(np.float32)
    report = rti.from_onnx(path, tmp_path / "o", inputs={"x": x}, route="importer")
    assert report.ok, report.summary()


def test_a_vector_broadcasts_over_the_last_axis(tmp_path: Path) -> None:
    """ONNX broadcasting aligns shapes on the right: [3, 3] + [3] adds the vector to every row,
    also when the first axis has the vector's length."""
    rng = np.random.default_rng(5)
    weights = {"b": rng.standard_normal(3).astype(np.float32), "c": rng.standard_normal(3).astype(np.float32)}
    nodes = [
        helper.make_node("Add", ["x", "b"], ["s"], name="plus"),
        helper.make_node("Mul", ["s", "c"], ["y"], name="times"),
    ]
    model = make_model(nodes, [tensor("x", [3, 3])], [tensor("y", [3, 3])], weights)
    report = rti.from_onnx(save(model, tmp_path / "m.onnx"), tmp_path / "o", route="importer")
    assert report.ok, report.summary()
