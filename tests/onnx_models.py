"""ONNX models for the ONNX front end's tests (tests/test_onnx*.py), built at test time into a
folder the test owns: one exported by torch (`torch.onnx.export`), the rest made node by node with
`onnx.helper`. No model file is committed."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

OPSET = 17


class ConvAndMlp(nn.Module):
    """Two outputs: `feat` [N, 4] (conv, relu, spatial mean of an image [N, 3, 8, 8]) and `logits`
    [N, 5] (linear, sigmoid, linear of x [N, 16])."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc1 = nn.Linear(16, 8)
        self.fc2 = nn.Linear(8, 5)

    def forward(self, img: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feat = torch.relu(self.conv(img)).mean(dim=(2, 3))
        logits = self.fc2(torch.sigmoid(self.fc1(x)))
        return feat, logits


def export_conv_and_mlp(path: Path) -> Path:
    """`ConvAndMlp` (seeded weights) exported by torch's TorchScript ONNX exporter (deterministic: the dynamo
    exporter's graph follows global decomposition state other tests may change) to `path` at batch 2, inputs
    `img` and `x`, outputs `feat` and `logits`."""
    torch.manual_seed(0)
    model = ConvAndMlp().eval()
    args = (torch.randn(2, 3, 8, 8), torch.randn(2, 16))
    with contextlib.redirect_stdout(io.StringIO()):  # the exporter prints its steps
        torch.onnx.export(
            model, args, str(path), input_names=["img", "x"], output_names=["feat", "logits"], dynamo=False
        )
    return path


def make_model(
    nodes: list[Any],
    inputs: list[Any],
    outputs: list[Any],
    initializers: dict[str, np.ndarray] | None = None,
    opsets: dict[str, int] | None = None,
) -> Any:
    """An onnx.ModelProto of one graph; `opsets`: domain -> version ("" is ai.onnx, OPSET by default)."""
    inits = [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    versions = {"": OPSET, **(opsets or {})}
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in versions.items()])


def tensor(name: str, shape: list[int | str] | None, elem: int = TensorProto.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def symbolic_mlp() -> Any:
    """x float32[batch, 4] -> MatMul w[4, 5] -> Add b[5] -> Sigmoid -> y float32[batch, 5]; `batch`
    is a dim_param. (5 outputs, so no batch size tried here equals the bias length.)"""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b"], ["h2"], name="bias"),
        helper.make_node("Sigmoid", ["h2"], ["y"], name="act"),
    ]
    weights = {"w": rng.standard_normal((4, 5)).astype(np.float32), "b": rng.standard_normal(5).astype(np.float32)}
    model = make_model(nodes, [tensor("x", ["batch", 4])], [tensor("y", ["batch", 5])], weights)
    onnx.checker.check_model(model)
    return model


def static_mlp() -> Any:
    """x float32[2, 6] -> Gemm (w1 [8, 6] transposed, b1) -> Relu -> MatMul w2 [8, 3] -> Tanh ->
    y float32[2, 3]."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["m"], name="fc2"),
        helper.make_node("Tanh", ["m"], ["y"], name="tanh"),
    ]
    weights = {
        "w1": rng.standard_normal((8, 6)).astype(np.float32),
        "b1": rng.standard_normal(8).astype(np.float32),
        "w2": rng.standard_normal((8, 3)).astype(np.float32),
    }
    model = make_model(nodes, [tensor("x", [2, 6])], [tensor("y", [2, 3])], weights)
    onnx.checker.check_model(model)
    return model


def initializers(path: Path) -> dict[str, np.ndarray]:
    """The float initializers of the ONNX file at `path` (external data read), by name."""
    model = onnx.load(str(path))
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {k: v for k, v in arrays.items() if v.dtype == np.float32}


def save_gather(path: Path) -> Path:
    """Rows of a [10, 4] table (0..39) gathered by ids int64[3] (ONNX Gather, axis 0, opset 17), saved at `path`."""
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)],
        "g",
        [tensor("ids", [3], TensorProto.INT64)],
        [tensor("y", [3, 4])],
        [numpy_helper.from_array(table, "table")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path
