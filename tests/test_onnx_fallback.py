"""Importer-route failures that are no gap: fixed at their cause where the pre-pass can (a Resize's empty
`roi`, integer Mod), and any that remain fall back to the torch route with a note naming the final
folder, never a staging folder that is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rlx_torch_import as rti
from onnx_models import tensor
from rlx_torch_import.errors import BundleError
from rlx_torch_import.frontend.onnx import convert


def _save(path: Path, nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any], opset: int) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def test_a_resize_with_an_empty_roi_goes_through_the_importer(tmp_path: Path) -> None:
    """torch 1.x and paddle2onnx write `roi` as an empty constant at opsets 11-12; the importer re-encoded it as
    one element (its weights then failed the bundle): the pre-pass passes it as absent."""
    inits = [
        numpy_helper.from_array(np.array([], np.float32), "roi"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest")
    path = _save(tmp_path / "r.onnx", [node], [tensor("x", [1, 2, 3, 3])], [tensor("y", [1, 2, 6, 6])], inits, 11)
    report = rti.from_onnx(path, tmp_path / "o", route="importer", per_node=False)
    assert report.ok, report.summary()
    x = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3)
    got = rti.BundleModel(tmp_path / "o" / "bundle").run({"x": x})["y"]
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))


@pytest.mark.parametrize("elem", [TensorProto.INT32, TensorProto.INT64])
@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_goes_through_the_importer_with_onnx_signs(tmp_path: Path, elem: int, fmod: int) -> None:
    """int32 Mod panicked in the importer's kernel (float32 only) and int64 with fmod=0 took the dividend's
    sign: the pre-pass writes it as Div/Mul/Sub (and the divisor's sign for fmod=0), as ONNX Runtime computes."""
    dtype = np.int32 if elem == TensorProto.INT32 else np.int64
    a = np.array([5, -7, 9, 3, -8, 7], dtype)
    b = np.array([3, 3, -4, 2, -3, -7], dtype)
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)
    io = [tensor("a", [6], elem), tensor("b", [6], elem)]
    path = _save(tmp_path / "m.onnx", [node], io, [tensor("y", [6], elem)], [], 13)
    report = rti.from_onnx(path, tmp_path / "o", inputs={"a": a, "b": b}, route="importer", per_node=False)
    assert report.ok, report.summary()
    got = rti.BundleModel(tmp_path / "o" / "bundle").run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, np.fmod(a, b) if fmod else np.mod(a, b))


def test_a_fallback_note_names_the_output_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An importer-route failure that names its staging folder is reported under the folder the output lands in."""

    def failing(req: convert.Request, stage: Path) -> Any:
        raise BundleError(f"{stage / 'bundle'}: RLX failed while running: a panic")

    monkeypatch.setattr(convert, "_importer_route", failing)
    node = helper.make_node("Relu", ["x"], ["y"])
    path = _save(tmp_path / "m.onnx", [node], [tensor("x", [2, 3])], [tensor("y", [2, 3])], [], 13)
    out = tmp_path / "o"
    report = rti.from_onnx(path, out, per_node=False)
    assert report.ok, report.summary()
    note = next(n for n in report.notes if n.startswith("RLX's ONNX importer route:"))
    assert f"{out / 'bundle'}: RLX failed while running: a panic" in note and ".partial-" not in note, note
