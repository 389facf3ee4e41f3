"""ONNX Round/Floor/Ceil through both routes (RLX's importer, the torch route) against ONNX Runtime, bit for
bit: ties to even, signed zeros, values past 2**22 and 2**23 (where every float32 is an integer), the
largest finite, ±inf, NaN and subnormals; on a graph input and on a constant (which RLX folds at compile
time, `round-fold`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import rlx_torch_import as rti
from onnx_models import make_model, tensor

F32 = np.finfo(np.float32)
_EDGES = [0.0, 0.5, 1.5, 2.5, 0.49999997, 0.7, 3.7, 2.0**22 + 0.5, 2.0**22 + 1.5, 2.0**23 - 0.5, 2.0**23 + 1]
_EDGES += [2.0**24 + 2, float(F32.max), np.inf, float(F32.smallest_subnormal), 1e-39, 123456.75]
X = np.array([*_EDGES, *(-v for v in _EDGES), np.nan], np.float32)
OPS = ("Round", "Floor", "Ceil")


def _model() -> onnx.ModelProto:
    """y_<op> = <op>(x) and c_<op> = <op>(constant copy of X) for each rounding op."""
    const = numpy_helper.from_array(X, "k")
    nodes = [helper.make_node("Constant", [], ["c"], name="consts", value=const)]
    outputs = []
    for op in OPS:
        nodes.append(helper.make_node(op, ["x"], [f"y_{op}"], name=f"{op.lower()}_x"))
        nodes.append(helper.make_node(op, ["c"], [f"c_{op}"], name=f"{op.lower()}_c"))
        outputs += [tensor(f"y_{op}", [len(X)]), tensor(f"c_{op}", [len(X)])]
    model = make_model(nodes, [tensor("x", [len(X)])], outputs)
    onnx.checker.check_model(model)
    return model


def _same_bits(got: np.ndarray, want: np.ndarray) -> list[int]:
    """Positions where `got` differs from `want` bit for bit (NaN matches NaN)."""
    both_nan = np.isnan(got) & np.isnan(want)
    return np.flatnonzero((got.view(np.uint32) != want.view(np.uint32)) & ~both_nan).tolist()


@pytest.mark.parametrize("route", ["importer", "torch"])
def test_onnx_rounding_is_bit_exact(route: str, tmp_path: Path) -> None:
    model = _model()
    path = tmp_path / "rounding.onnx"
    onnx.save(model, str(path))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = dict(zip(names, sess.run(None, {"x": X}), strict=True))
    assert np.signbit(want["y_Round"][X == -0.5]).all()  # ONNX Runtime: round(-0.5) = -0.0
    report = rti.from_onnx(path, tmp_path / "out", inputs={"x": X}, route=route)
    assert report.ok, report.summary()
    got = rti.BundleModel(tmp_path / "out" / "bundle").run({"x": X})
    for name in names:
        wrong = _same_bits(np.asarray(got[name], np.float32).reshape(-1), want[name])
        assert not wrong, f"{route} route, {name}: x {X[wrong]} -> ours {got[name][wrong]}, ORT {want[name][wrong]}"
