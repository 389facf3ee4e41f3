"""torch-ir nodes checked against torch itself before lowering (`torchir/check.py`): a hand-edited
file whose nodes disagree with what the ATen op computes is a TorchIRError (exit 2) naming the
file, node, field and value; anything rlx-torch-import writes still builds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import.errors import ExitCode, TorchIRError, UnsupportedOpsError
from test_control_flow import Branchy

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    """Linear(8, 4) then ReLU at a (2, 8) input: nodes[0] linear, nodes[1] relu."""
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("mlp") / "out"
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
    assert rti.from_torch(model, (torch.randn(2, 8),), out, per_node=False).ok
    return out


def edited(converted: Path, tmp_path: Path, edit: Edit) -> Path:
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    path = out / "torch-ir.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return out


def _set(path: str, value: Any) -> Edit:
    """An edit setting `doc` at a dotted path of keys and list indices (`nodes.0.target`)."""

    def edit(doc: dict[str, Any]) -> None:
        *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        for key in parents:
            doc = doc[key]
        doc[last] = value

    return edit


REFUSED = [
    # P1: targets torch does not know
    (
        "nodes.0.target",
        "aten.frobnicate.default",
        "nodes[0] (linear).target: 'aten.frobnicate.default' is not an op torch knows",
    ),
    (
        "nodes.0.target",
        "aten.linear",
        "nodes[0] (linear).target: 'aten.linear' names no overload; torch has aten.linear.default",
    ),
    (
        "nodes.0.target",
        "aten.linear.nope",
        "nodes[0] (linear).target: 'aten.linear.nope' is not an overload torch knows; torch has aten.linear.default",
    ),
    ("nodes.0.target", "prims.nope.default", "nodes[0] (linear).target: 'prims.nope.default' is not an op torch knows"),
    ("nodes.0.target", "linear", "nodes[0] (linear).target: 'linear' is not an op torch knows"),
    # P2: outputs and arguments inconsistent with the op
    (
        "nodes.0.outputs.0.dtype",
        "int8",
        "nodes[0] (linear): outputs[0] declares int8[2, 4]; aten.linear.default gives float32[2, 4] for these inputs",
    ),
    (
        "nodes.0.outputs.0.shape",
        [2, 5],
        "nodes[0] (linear): outputs[0] declares float32[2, 5]; aten.linear.default gives float32[2, 4] "
        "for these inputs",
    ),
    (
        "nodes.1.args",
        [{"int": 3}],
        "nodes[1] (relu).args[0]: {'int': 3} is not a tensor, as aten.relu.default's argument 'self' (Tensor) takes",
    ),
    (
        "nodes.0.args.1",
        {"tensor": "input"},
        "nodes[0] (linear): aten.linear.default refuses the declared inputs (input: float32[2, 8], weight: "
        "float32[2, 8], bias: float32[4]): RuntimeError",
    ),
    ("nodes.0.args", [{"tensor": "input"}], "nodes[0] (linear): aten.linear.default needs argument(s) weight"),
    # P13: calls torch would not accept, and top-level values nothing writes
    (
        "nodes.1.args",
        [{"tensor": "linear"}] * 3,
        "nodes[1] (relu).args: 3 positional argument(s); aten.relu.default takes at most 1 (self)",
    ),
    (
        "nodes.0.kwargs",
        {"bogus": {"int": 1}},
        "nodes[0] (linear).kwargs: 'bogus' is not an argument of aten.linear.default (input, weight, bias)",
    ),
    (
        "nodes.0.kwargs",
        {"weight": {"tensor": "p_0_weight"}},
        "nodes[0] (linear).kwargs['weight']: argument 'weight' of aten.linear.default is also given positionally",
    ),
    ("decomposition", "weird", "decomposition: 'weird' is not one of aten, high, core"),
    ("weights.0.kind", "alien", "weights[0].kind: 'alien' is not one of parameter, buffer, constant"),
]


@pytest.mark.parametrize(("path", "value", "message"), REFUSED, ids=[f"{p}={v}" for p, v, _ in REFUSED])
def test_inconsistent_node_is_a_torch_ir_error(converted, tmp_path, path: str, value: Any, message: str) -> None:
    out = edited(converted, tmp_path, _set(path, value))
    with pytest.raises(TorchIRError) as info:
        rti.build(out)
    assert info.value.message.startswith(f"{out / 'torch-ir.json'}: {message}"), info.value.message


def test_unlowered_real_or_library_op_stays_unsupported(converted, tmp_path) -> None:
    """An op torch knows that has no lowering, and an op of a namespace not loaded here (a
    library's custom op), are unsupported (exit 3), not malformed."""
    for target in ("aten.lgamma.default", "quantized.relu.default"):
        out = edited(converted, tmp_path / target, _set("nodes.1.target", target))
        with pytest.raises(UnsupportedOpsError, match=target):
            rti.build(out)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("nodes.0.target", "aten.frobnicate.default"),
        ("nodes.0.outputs.0.shape", [2, 5]),
        ("nodes.1.args", [{"int": 3}]),
    ],
)
def test_cli_build_and_diagnose_exit_2(converted, tmp_path, path: str, value: Any) -> None:
    out = edited(converted, tmp_path, _set(path, value))
    for command in ("build", "diagnose"):
        r = cli(command, str(out), *(["--quiet"] if command == "build" else []))
        assert r.returncode == ExitCode.BAD_INPUT, (command, r.stderr)
        assert "torch-ir.json: nodes[" in r.stderr and "internal error" not in r.stderr, r.stderr
        assert "Traceback" not in r.stderr, r.stderr


def test_converted_mlp_builds(converted, tmp_path) -> None:
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    assert rti.build(out).ok


def _rebuilds(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path, **kwargs: Any) -> None:
    """Convert (which also checks the files it writes, per node), then build again from disk."""
    report = rti.from_torch(model, inputs, out, **kwargs)
    assert report.ok and not [n for n in report.notes if "per-node parity not computed" in n], report.summary()
    assert rti.build(out, per_node=False).ok


def test_transformer_block_builds(tmp_path) -> None:
    from models import make

    model, inputs = make("transformer_block")
    _rebuilds(model, inputs, tmp_path / "out", decomposition="core")


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).view(x.shape[0], -1, 2).softmax(-1) * x.shape[0]


def test_dynamic_model_builds_and_a_wrong_symbolic_shape_is_refused(tmp_path) -> None:
    torch.manual_seed(0)
    out = tmp_path / "out"
    _rebuilds(Scaled(), (torch.randn(3, 8),), out, dynamic_shapes={"x": {0: Dim("batch", min=1, max=16)}})
    doc = json.loads((out / "torch-ir.json").read_text())
    i, node = next((i, n) for i, n in enumerate(doc["nodes"]) if n["target"] == "aten.linear.default")
    assert isinstance(node["outputs"][0]["shape"][0], str)
    node["outputs"][0]["shape"] = [node["outputs"][0]["shape"][0], 9]
    (out / "torch-ir.json").write_text(json.dumps(doc))
    with pytest.raises(
        TorchIRError,
        match=rf"nodes\[{i}\] \(linear\): outputs\[0\] declares float32\[s\w+, 9\] "
        r"\(float32\[3, 9\] at batch=3\); aten.linear.default gives float32\[3, 8\]",
    ):
        rti.build(out, verify=False)


class ItemArithmetic(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.abs().mean().item()
        n = (x > 0).sum().item()
        return x * s + s * 2 + torch.sym_max(n, 2)


def test_item_and_cond_models_build(tmp_path) -> None:
    torch.manual_seed(0)
    _rebuilds(ItemArithmetic(), (torch.randn(4, 6),), tmp_path / "item")
    _rebuilds(Branchy().eval(), (torch.rand(3, 4),), tmp_path / "cond")
