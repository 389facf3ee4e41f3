"""An ONNX graph input is never silently baked (docs/design.md (as)). RLX's importer picks an `If`'s
branch when it imports the graph (the `then` branch when it cannot tell), so a bundle that still took
the input the condition is computed from would ignore it (silero-vad's `sr == 16000`). The input is
baked in at the given value and other values are refused at run time, on both routes, with the error
the torch route's baked values give; a value the importer computes with at run time (Where) keeps
the input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rlx_torch_import as rti
from onnx_models import make_model, tensor
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.errors import ExitCode, InputError

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 4 - 1


def _ort(path: Path, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort  # type: ignore[import-untyped]

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed), strict=True))


def _branchy(path: Path) -> Path:
    """silero-vad's shape: y = If(Gather(Reshape(sr, [-1]), 0) == 16000, then: sigmoid(x @ w1) * 2,
    else: tanh(x + 1)), x float32[2, 4], sr int64[] (the branches differ for every x)."""
    then = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["t0"]),
            helper.make_node("Sigmoid", ["t0"], ["t1"]),
            helper.make_node("Mul", ["t1", "two"], ["then_y"]),
        ],
        "then",
        [],
        [tensor("then_y", [2, 4])],
    )
    other = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["e0"]), helper.make_node("Tanh", ["e0"], ["else_y"])],
        "else",
        [],
        [tensor("else_y", [2, 4])],
    )
    nodes = [
        helper.make_node("Reshape", ["sr", "flat"], ["sr1"], name="flatten_sr"),
        helper.make_node("Gather", ["sr1", "zero"], ["sr0"], axis=0, name="first"),
        helper.make_node("Equal", ["sr0", "rate"], ["is16k"], name="is16k"),
        helper.make_node("If", ["is16k"], ["y"], then_branch=then, else_branch=other, name="pick_model"),
    ]
    inits = {
        "flat": np.array([-1], np.int64),
        "zero": np.array(0, np.int64),
        "rate": np.array(16000, np.int64),
        "w1": np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4),
        "two": np.array(2, np.float32),
        "one": np.array(1, np.float32),
    }
    model = make_model(nodes, [tensor("x", [2, 4]), tensor("sr", [], TensorProto.INT64)], [tensor("y", [2, 4])], inits)
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("route", ["importer", "torch"])
def test_an_if_on_an_input_is_baked_and_other_values_are_refused(route: str, tmp_path: Path) -> None:
    model = _branchy(tmp_path / "branchy.onnx")
    at = {rate: _ort(model, {"x": X, "sr": np.array(rate, np.int64)})["y"] for rate in (16000, 8000)}
    assert not np.allclose(at[16000], at[8000])  # the branches differ: a bundle ignoring sr would be wrong
    for rate in (16000, 8000):  # each value converts to its own branch, verified against ONNX Runtime
        out = tmp_path / f"o{rate}-{route}"
        report = rti.from_onnx(model, out, inputs={"x": X, "sr": np.array(rate, np.int64)}, route=route, per_node=False)
        assert report.ok and report.verified, report.summary()
        meta = json.loads((out / "bundle" / "meta.json").read_text())
        assert [i["name"] for i in meta["inputs"]] == ["x"] and meta["constant_inputs"] == [
            {"path": "sr", "value": rate}
        ]
        bundle = BundleModel(out / "bundle")
        np.testing.assert_allclose(bundle.run({"x": X})["y"], at[rate], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(bundle.run({"x": X, "sr": rate})["y"], at[rate], rtol=1e-6, atol=1e-6)
        other = 8000 if rate == 16000 else 16000
        with pytest.raises(InputError, match=rf"input 'sr' was baked into the bundle as {rate} at conversion"):
            bundle.run({"x": X, "sr": np.array(other, np.int64)})
    if route == "importer":
        notes = json.loads((tmp_path / "o16000-importer" / "report.json").read_text())["notes"]
        assert any("sr (the condition of If node 'pick_model', computed from it) = [16000]" in n for n in notes), notes
        from rlx_torch_import.cli import main as cli_main

        np.savez(tmp_path / "in.npz", x=X, sr=np.array(8000, np.int64))
        bundle_dir = str(tmp_path / "o16000-importer" / "bundle")
        assert cli_main(["run", bundle_dir, "--inputs", str(tmp_path / "in.npz")]) == ExitCode.BAD_INPUT


def test_an_if_on_an_input_not_given_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _branchy(tmp_path / "branchy.onnx")
    with pytest.raises(InputError, match=r"'sr' \(the condition of If node 'pick_model', computed from it\)") as e:
        rti.from_onnx(model, tmp_path / "o", inputs={"x": X})
    assert e.value.exit_code == ExitCode.BAD_INPUT and "--inputs" in (e.value.hint or "")
    assert not (tmp_path / "o").exists()
    from rlx_torch_import.cli import main as cli_main

    assert cli_main(["onnx", str(model), "-o", str(tmp_path / "o"), "-q"]) == ExitCode.BAD_INPUT
    assert "If node 'pick_model'" in capsys.readouterr().err


def _computed_shape(path: Path) -> Path:
    """y = Reshape(x, Concat([-1], n)): the shape operand is computed from the int64[1] input n."""
    nodes = [
        helper.make_node("Concat", ["minus1", "n"], ["shape"], axis=0, name="target"),
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
    ]
    inputs = [tensor("x", [2, 4]), tensor("n", [1], TensorProto.INT64)]
    model = make_model(nodes, inputs, [tensor("y", [4, 2])], {"minus1": np.array([-1], np.int64)})
    onnx.save(model, str(path))
    return path


def test_a_shape_operand_computed_from_an_input_is_baked(tmp_path: Path) -> None:
    model = _computed_shape(tmp_path / "reshape.onnx")
    out = tmp_path / "o"
    report = rti.from_onnx(model, out, inputs={"x": X, "n": np.array([2], np.int64)}, per_node=False)
    assert report.ok, report.summary()
    bundle = BundleModel(out / "bundle")
    np.testing.assert_array_equal(bundle.run({"x": X})["y"], X.reshape(-1, 2))
    with pytest.raises(InputError, match=r"input 'n' was baked into the bundle as \[2\] at conversion"):
        bundle.run({"x": X, "n": np.array([4], np.int64)})
    with pytest.raises(InputError, match=r"'n' \(Reshape input 1 of node 'reshape', computed from it\)"):
        rti.from_onnx(model, tmp_path / "o2", inputs={"x": X})


def _where(path: Path) -> Path:
    """y = Where(sr == 16000, x * 2, x + 1): computed at run time, the input keeps its role."""
    nodes = [
        helper.make_node("Equal", ["sr", "rate"], ["is16k"]),
        helper.make_node("Mul", ["x", "two"], ["a"]),
        helper.make_node("Add", ["x", "one"], ["b"]),
        helper.make_node("Where", ["is16k", "a", "b"], ["y"]),
    ]
    inits: dict[str, Any] = {
        "rate": np.array([16000], np.int64),
        "two": np.array(2, np.float32),
        "one": np.array(1, np.float32),
    }
    inputs = [tensor("x", [2, 4]), tensor("sr", [1], TensorProto.INT64)]
    onnx.save(make_model(nodes, inputs, [tensor("y", [2, 4])], inits), str(path))
    return path


def test_a_where_on_an_input_keeps_the_input(tmp_path: Path) -> None:
    model = _where(tmp_path / "where.onnx")
    out = tmp_path / "o"
    report = rti.from_onnx(model, out, inputs={"x": X, "sr": np.array([16000], np.int64)}, per_node=False)
    assert report.ok, report.summary()
    bundle = BundleModel(out / "bundle")
    assert bundle.input_names == ["x", "sr"] and bundle.meta.get("constant_inputs", []) == []
    for rate in (16000, 8000):
        feed = {"x": X, "sr": np.array([rate], np.int64)}
        np.testing.assert_array_equal(bundle.run(feed)["y"], _ort(model, feed)["y"])
