"""The ONNX front end end to end (`rlx-torch-import onnx`, `from_onnx`): a torch export with two
outputs, the conversion folder, given inputs, `build` and `verify` of the folder, external data,
symbolic dims, and the exit codes and messages for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

import rlx_torch_import as rti
from onnx_models import export_conv_and_mlp, initializers, static_mlp, symbolic_mlp
from rlx_torch_import import safetensors_io
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode
from rlx_torch_import.verify.compare import compare_output

LAYOUT = (
    "bundle/model.hir.json",
    "bundle/weights.safetensors",
    "bundle/meta.json",
    "report.json",
    "report.md",
    "report.html",
    "torch-ir.json",
    "weights.safetensors",
    "reference.safetensors",
    "source.onnx",
)
ELEM = {1: "float32", 7: "int64"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The conv + MLP model with two outputs, exported by torch."""
    return export_conv_and_mlp(tmp_path_factory.mktemp("onnx") / "pair.onnx")


def graph_io(path: Path, which: str) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, static shape) of the ONNX file's graph inputs (not initializers) or outputs."""
    graph = onnx.load(str(path), load_external_data=False).graph
    inits = {t.name for t in graph.initializer}
    values = [v for v in graph.input if v.name not in inits] if which == "inputs" else list(graph.output)
    return [
        (v.name, ELEM[v.type.tensor_type.elem_type], [d.dim_value for d in v.type.tensor_type.shape.dim])
        for v in values
    ]


def meta_io(out: Path, which: str) -> list[tuple[str, str, list[int]]]:
    meta = json.loads((out / "bundle" / "meta.json").read_text())
    return [(s["name"], s["dtype"], s["shape"]) for s in meta[which]]


def ort_outputs(path: Path, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """ONNX Runtime's outputs for `feed` (CPU, graph optimizations off), by output name."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feed), strict=True))


def check_weights(out: Path, model: Path) -> None:
    """weights.safetensors (folder and bundle) hold the ONNX file's float initializers, by name."""
    expected = initializers(model)
    for rel in ("weights.safetensors", "bundle/weights.safetensors"):
        stored = safetensors_io.read(out / rel)
        assert set(stored) == set(expected), f"{rel}: {sorted(stored)} != {sorted(expected)}"
        for name, arr in expected.items():
            np.testing.assert_array_equal(stored[name].to_numpy(), arr, err_msg=f"{rel}: {name}")


def test_cli_converts_a_torch_export_then_builds_and_verifies(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    assert cli_main(["onnx", str(exported), "-o", str(out), "-q"]) == ExitCode.OK, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("PASS pair"), "the verdict names the model (the file's stem)"
    for rel in LAYOUT:
        assert (out / rel).is_file(), rel
    assert meta_io(out, "inputs") == graph_io(exported, "inputs")
    assert meta_io(out, "inputs") == [("img", "float32", [2, 3, 8, 8]), ("x", "float32", [2, 16])]
    assert meta_io(out, "outputs") == graph_io(exported, "outputs")
    assert [name for name, _, _ in meta_io(out, "outputs")] == ["feat", "logits"]
    check_weights(out, exported)
    reference = safetensors_io.read(out / "reference.safetensors")
    assert set(reference) == {"input.img", "input.x", "output.feat", "output.logits"}
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] and report["decomposition"] == "onnx"
    doc = json.loads((out / "torch-ir.json").read_text())  # version 4: no decomposition, the ONNX front end's program
    assert (doc["version"], doc["decomposition"], doc["producer"]["frontend"]) == (4, "", "onnx")
    onnx.checker.check_model(onnx.load(str(out / "source.onnx")))  # the static model the importer read

    hir = (out / "bundle" / "model.hir.json").read_bytes()
    assert cli_main(["build", str(out), "-q"]) == ExitCode.OK, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("PASS pair")
    assert (out / "bundle" / "model.hir.json").read_bytes() == hir, "build imports source.onnx to the same program"
    assert cli_main(["verify", str(out), "-q"]) == ExitCode.OK, capsys.readouterr().err
    assert json.loads((out / "report-cpu.json").read_text())["ok"]


def test_from_onnx_matches_onnx_runtime_at_every_node(exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    report = rti.from_onnx(exported, out, name="pair")
    assert report.ok and report.verified, report.summary()
    assert [(o.name, o.ok) for o in report.outputs] == [("feat", True), ("logits", True)]
    # one row per node computing a float value, in order (the Constant feeding ReduceMean's axes is folded)
    computing = [n for n in onnx.load(str(exported)).graph.node if n.op_type != "Constant"]
    assert [n.node for n in report.nodes] == [n.name for n in computing], "one row per ONNX node, in order"
    assert [n.aten for n in report.nodes] == [f"onnx::{n.op_type}" for n in computing]
    assert all(n.local is not None and n.local.ok for n in report.nodes), report.nodes
    assert all(n.cumulative is not None and n.cumulative.ok for n in report.nodes), report.nodes
    assert report.first_divergence is None
    # The bundle against ONNX Runtime directly, at inputs of our own.
    rng = np.random.default_rng(7)
    feed = {"img": rng.standard_normal((2, 3, 8, 8), np.float32), "x": rng.standard_normal((2, 16), np.float32)}
    got = BundleModel(out / "bundle").run(feed)
    for name, expected in ort_outputs(exported, feed).items():
        parity = compare_output(name, got[name], expected, "float32", "float32")
        assert parity.ok, parity


def check_inputs_used(out: Path, model: Path, given: dict[str, np.ndarray]) -> None:
    """The conversion ran on `given`: the reference holds them and ONNX Runtime's outputs for them."""
    reference = safetensors_io.read(out / "reference.safetensors")
    for name, arr in given.items():
        np.testing.assert_array_equal(reference[f"input.{name}"].to_numpy(), arr)
    for name, expected in ort_outputs(model, given).items():
        np.testing.assert_allclose(reference[f"output.{name}"].to_numpy(), expected, rtol=1e-6, atol=1e-6)
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert not any("random inputs" in n for n in notes), notes


def pair_inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"img": rng.standard_normal((2, 3, 8, 8), np.float32), "x": rng.standard_normal((2, 16), np.float32)}


def test_inputs_from_safetensors_are_used_as_given(exported: Path, tmp_path: Path) -> None:
    given = pair_inputs(11)
    path = tmp_path / "in.safetensors"
    safetensors_io.write(path, {k: ("float32", v.shape, v.tobytes()) for k, v in given.items()})
    out = tmp_path / "o"
    assert cli_main(["onnx", str(exported), "-o", str(out), "-q", "--inputs", str(path), "--no-per-node"]) == 0
    check_inputs_used(out, exported, given)


def test_console_script_with_npz_inputs(exported: Path, tmp_path: Path) -> None:
    """The CLI in its own process (as tests/test_cli.py runs it), inputs from a .npz file."""
    given = pair_inputs(12)
    np.savez(tmp_path / "in.npz", img=given["img"], x=given["x"])
    out = tmp_path / "o"
    args = ["onnx", str(exported), "-o", str(out), "--inputs", str(tmp_path / "in.npz"), "--no-per-node"]
    done = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == ExitCode.OK, done.stderr
    assert done.stdout.startswith("PASS pair"), done.stdout
    assert "[rlx-torch-import]" in done.stderr, "progress is shown without -q"
    check_inputs_used(out, exported, given)


def test_external_data_converts_and_the_folder_does_not_need_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ext.onnx"
    onnx.save(
        static_mlp(), str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
        size_threshold=0,
    )  # fmt: skip
    assert (tmp_path / "w.bin").stat().st_size == (8 * 6 + 8 + 8 * 3) * 4
    out = tmp_path / "o"
    report = rti.from_onnx(path, out)
    assert report.ok, report.summary()
    check_weights(out, path)
    (tmp_path / "w.bin").unlink()
    assert cli_main(["build", str(out), "-q"]) == ExitCode.OK, "the folder's source.onnx holds the weights"
    capsys.readouterr()

    missing = tmp_path / "o2"
    assert cli_main(["onnx", str(path), "-o", str(missing), "-q"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "w.bin" in err and "missing" in err, err
    assert not missing.exists()


def test_a_model_past_protobufs_limit_keeps_its_weights_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model over 2 GB is not refused for its size: the pre-passed copy the importer reads keeps its
    weights in a data file beside it (the limit lowered here so a small model takes that path)."""
    from rlx_torch_import.frontend.onnx import prepass

    monkeypatch.setattr(prepass, "PROTO_LIMIT", 64)
    out, path = tmp_path / "o", tmp_path / "m.onnx"
    onnx.save(static_mlp(), str(path))
    report = rti.from_onnx(path, out)
    assert report.ok, report.summary()
    assert (out / "source.onnx.data").stat().st_size >= (8 * 6 + 8 + 8 * 3) * 4
    check_weights(out, path)


@pytest.fixture
def symbolic(tmp_path: Path) -> Path:
    path = tmp_path / "sym.onnx"
    onnx.save(symbolic_mlp(), str(path))
    return path


def test_symbolic_dim_given_on_the_command_line(symbolic: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert cli_main(["onnx", str(symbolic), "-o", str(out), "-q", "--dim", "batch=3"]) == ExitCode.OK
    assert meta_io(out, "inputs") == [("x", "float32", [3, 4])]
    assert meta_io(out, "outputs") == [("y", "float32", [3, 5])]
    report = json.loads((out / "report.json").read_text())
    assert report["ok"]
    assert any("specialized" in n and "batch=3" in n for n in report["notes"]), report["notes"]


def test_symbolic_dim_sized_by_the_inputs(symbolic: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(3).standard_normal((2, 4), np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "o"
    assert cli_main(["onnx", str(symbolic), "-o", str(out), "-q", "--inputs", str(tmp_path / "in.npz")]) == 0
    assert meta_io(out, "inputs") == [("x", "float32", [2, 4])]
    check_inputs_used(out, symbolic, {"x": x})
    report = rti.reverify(out)
    assert report.ok, report.summary()


def test_build_keeps_the_specialization_note(symbolic: Path, tmp_path: Path) -> None:
    """The bundle is static at the sizes given; the report `build` writes still says so."""
    out = tmp_path / "o"
    assert rti.from_onnx(symbolic, out, dims={"batch": 2}, per_node=False).ok
    report = rti.build(out, per_node=False)
    assert report.ok, report.summary()
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert any("specialized" in n and "batch=2" in n for n in notes), notes


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], ["'batch'", "x[0]", "--dim"]),  # no size: names the dim, the input axis it sizes, the option
        (["--dim", "batch=3", "--dim", "seq=2"], ["seq", "batch"]),  # a dim no input has
        (["--dim", "batch"], ["NAME=SIZE"]),
        (["--dim", "batch=0"], ["batch", ">= 1"]),
    ],
)
def test_bad_symbolic_dims(
    args: list[str], words: list[str], symbolic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    assert cli_main(["onnx", str(symbolic), "-o", str(out), "-q", *args]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and all(w in err for w in words), err
    assert not out.exists()


def _not_onnx(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    path.write_text("import torch\nprint('a Python file, not an ONNX model')\n")
    return path


def _static(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(static_mlp(), str(path))
    return path


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize(
    ("make", "extra", "words"),
    [
        (_not_onnx, [], ["model.onnx", "not a readable ONNX model"]),
        (_empty, [], ["model.onnx"]),
        (lambda p: p / "absent.onnx", [], ["absent.onnx", "no such"]),
        (_static, ["--emit", "bundle,crate", "--emit-style", "flow"], ["flow", "graph or tensor"]),
    ],
    ids=["not-onnx", "empty-file", "missing-file", "flow-crate"],
)
def test_clear_errors(
    make: Callable[[Path], Path], extra: list[str], words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make(tmp_path)
    out = tmp_path / "o"
    assert cli_main(["onnx", str(path), "-o", str(out), "-q", *extra]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and all(w in err for w in words), err
    assert "Traceback" not in err
    assert not out.exists()


def test_the_no_verify_hint_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file ONNX Runtime cannot load: with --no-verify, the error does not advise --no-verify."""
    path = _empty(tmp_path)
    assert cli_main(["onnx", str(path), "-o", str(tmp_path / "o"), "-q", "--no-verify"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "model.onnx" in err and "pass --no-verify" not in err, err
