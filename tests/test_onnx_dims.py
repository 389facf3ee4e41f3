"""Dims an ONNX file leaves unnamed (no `dim_param`, or a negative `dim_value`, as exporters and packages
ship them: a VAD model's `[?, ?]`, an OCR classifier's `[?, 3, ?, ?]`): each is a symbol of its own, sized
by the input given for it or by `--dim INPUT:AXIS=SIZE`, and messages show it as the file has it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

import rlx_torch_import as rti
from onnx_models import make_model, symbolic_mlp, tensor
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode, InputError


def _unnamed(path: Path) -> Path:
    """x float32[?, 3] (no dim_param) -> Relu -> y; z float32[-1, 4] (a negative dim_value) -> Sigmoid -> w."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Sigmoid", ["z"], ["w"], name="sig")]
    model = make_model(
        nodes, [tensor("x", [None, 3]), tensor("z", [-1, 4])], [tensor("y", [None, 3]), tensor("w", [None, 4])], {}
    )
    assert model.graph.input[1].type.tensor_type.shape.dim[0].dim_value == -1
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("route", ["importer", "torch"])
def test_each_unnamed_dim_is_sized_by_its_own_input(tmp_path: Path, route: str) -> None:
    """Two unnamed dims at two sizes (they used to share the one name "?" and the first size seen)."""
    x, z = np.linspace(-1, 1, 18, dtype=np.float32).reshape(6, 3), np.ones((2, 4), np.float32)
    out = tmp_path / "o"
    report = rti.from_onnx(_unnamed(tmp_path / "m.onnx"), out, inputs={"x": x, "z": z}, route=route, per_node=False)
    assert report.ok, report.summary()
    got = rti.BundleModel(out / "bundle").run({"x": x, "z": z})
    np.testing.assert_array_equal(got["y"], np.maximum(x, 0))
    assert got["w"].shape == (2, 4)


def test_unnamed_dims_are_sized_by_input_and_axis(tmp_path: Path) -> None:
    report = rti.from_onnx(_unnamed(tmp_path / "m.onnx"), tmp_path / "o", dims={"x:0": 5, "z:0": 7}, per_node=False)
    assert report.ok, report.summary()
    shapes = {s["name"]: s["shape"] for s in rti.BundleModel(tmp_path / "o" / "bundle").meta["inputs"]}
    assert shapes == {"x": [5, 3], "z": [7, 4]}
    assert any("x:0=5" in n and "z:0=7" in n for n in report.notes), report.notes


def test_a_named_dim_may_be_sized_by_input_and_axis(tmp_path: Path) -> None:
    path = tmp_path / "s.onnx"
    onnx.save(symbolic_mlp(), str(path))
    report = rti.from_onnx(path, tmp_path / "o", dims={"x:0": 3}, per_node=False)
    assert report.ok and any("batch=3" in n for n in report.notes), report.notes
    with pytest.raises(InputError, match=r"--dim x:0=2: 'batch' is given 3 already"):
        rti.from_onnx(path, tmp_path / "p", dims={"batch": 3, "x:0": 2}, per_node=False)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], ["an unnamed dim ? (x[0]) sizes x[0]", "an unnamed dim ? (z[0]) sizes z[0]", "--dim x:0=1"]),
        (["--dim", "x:1=3"], ["--dim x:1=3: that axis is static (size 3)"]),
        (["--dim", "x:2=3"], ["--dim x:2: no input of the model has such a dim", "an unnamed dim ? (x[0])"]),
        (["--dim", "x=3"], ["--dim x: no input of the model has such a dim"]),
        (["--dim", "x:0"], ["expected NAME=SIZE or INPUT:AXIS=SIZE"]),
    ],
)
def test_bad_unnamed_dims_name_them_as_the_file_has_them(
    args: list[str], words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    code = cli_main(["onnx", str(_unnamed(tmp_path / "m.onnx")), "-o", str(out), "-q", *args])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT and err.startswith("error: ") and all(w in err for w in words), err
    assert not out.exists()


def test_a_wrong_input_is_named_before_the_sizes_it_leaves_out(tmp_path: Path) -> None:
    """An input the model lacks, or one of another rank, is the error (not the dims it then leaves unsized);
    inputs are described as the file declares them."""
    path = _unnamed(tmp_path / "m.onnx")
    with pytest.raises(
        InputError, match=r"'q' the model does not take; its inputs: x: float\[\?, 3\], z: float\[\?, 4\]"
    ):
        rti.from_onnx(path, tmp_path / "o", inputs={"q": np.ones(3, np.float32)})
    with pytest.raises(InputError, match=r"input 'x' has shape \[1, 6, 3\], the model takes x: float\[\?, 3\]"):
        rti.from_onnx(path, tmp_path / "o", inputs={"x": np.ones((1, 6, 3), np.float32)})
