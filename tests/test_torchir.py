"""torch-ir.json: strict JSON, versioned, and validated with errors that name the file and field."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import torchir


class WithInf(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(min=-1.0) + torch.full((3,), float("-inf")).clamp(min=0.0)


def _strict(text: str) -> dict:
    def reject(token: str) -> None:
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(text, parse_constant=reject)


def test_round_trip_and_strict_json(tmp_path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
    rti.from_torch(model, (torch.randn(2, 4),), tmp_path / "o")
    text = (tmp_path / "o" / "torch-ir.json").read_text()
    doc = _strict(text)
    assert doc["format"] == "rlx-torch-ir" and doc["version"] == torchir.VERSION == 4
    ir = torchir.parse(doc)
    assert ir.to_json() == text
    assert {w.key for w in ir.weights} == set(model.state_dict())
    assert all(n.module_path for n in ir.nodes)  # provenance: which submodule each op came from
    old = {k: v for k, v in doc.items() if k not in ("symbols", "specialized", "sweep")}
    assert torchir.parse({**old, "version": 1}).nodes == ir.nodes  # version 1 (static) files still read


def test_non_finite_floats_are_spelled_out() -> None:
    assert torchir.encode_float(float("inf")) == {"float": "inf"}
    assert torchir.encode_float(float("-inf")) == {"float": "-inf"}
    assert torchir.encode_float(float("nan")) == {"float": "nan"}
    assert math.isinf(torchir.decode_float("-inf")) and torchir.decode_float(1.5) == 1.5
    ir = torchir.TorchIR("m", "aten", [], [], [torchir.Node("n", "aten.clamp.default", [{"float": "inf"}], {}, [])], [])
    _strict(ir.to_json())


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(version=99), "torch-ir version 99 is not supported"),
        (lambda d: d.update(format="onnx"), "field 'format'"),
        (lambda d: d.pop("nodes"), "missing field 'nodes'"),
        (lambda d: d["inputs"][0].update(shape=[-1]), "inputs[0].shape[0]: -1 is not a size"),
        (lambda d: d["nodes"][0]["args"].append(3), "nodes[0].args[3]: argument 3 is not a tagged value"),
        (lambda d: d["nodes"][0]["args"].append({"blob": 1}), "unknown argument tag 'blob'"),
        (lambda d: d["nodes"][0]["args"][0].update(tensor="ghost"), "tensor 'ghost' is used before it is defined"),
        (lambda d: d["outputs"][0].update(value="ghost"), "outputs[0]: value 'ghost' is not defined"),
    ],
)
def test_validation_names_the_field(mutate, needle: str, tmp_path) -> None:
    torch.manual_seed(0)
    rti.from_torch(nn.Linear(4, 3), (torch.randn(2, 4),), tmp_path / "o", verify=False)
    path = tmp_path / "o" / "torch-ir.json"
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(rti.TorchIRError) as info:
        torchir.load(tmp_path / "o")
    assert needle in info.value.message
    assert "torch-ir.json" in info.value.message


def test_not_json_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "torch-ir.json").write_text("{nope")
    with pytest.raises(rti.TorchIRError, match="not valid JSON"):
        torchir.load(tmp_path)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_bare_non_finite_token_is_refused_naming_where(token: str, tmp_path) -> None:
    """Python's json reads NaN/Infinity; the documented format (docs/torch-ir.md) is strict JSON."""
    torch.manual_seed(0)
    rti.from_torch(nn.Linear(4, 3), (torch.randn(2, 4),), tmp_path / "o", verify=False)
    path = tmp_path / "o" / "torch-ir.json"
    doc = json.loads(path.read_text())
    doc["nodes"][0]["args"].append({"float": 1.5})
    text = json.dumps(doc, indent=1).replace("1.5", token)
    path.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if token in t)
    with pytest.raises(
        rti.TorchIRError, match=rf"torch-ir.json: not strict JSON: a bare {token} token at line {line},"
    ):
        torchir.load(tmp_path / "o")
    r = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", "build", str(tmp_path / "o")], capture_output=True, text=True
    )
    assert r.returncode == 2 and f"a bare {token} token" in r.stderr and '{"float": "nan"}' in r.stderr


def test_numbers_past_float64_and_unknown_float_spellings_are_refused(tmp_path) -> None:
    torch.manual_seed(0)
    rti.from_torch(nn.Linear(4, 3), (torch.randn(2, 4),), tmp_path / "o", verify=False)
    path = tmp_path / "o" / "torch-ir.json"
    doc = json.loads(path.read_text())
    for payload, message in [
        ("1e999", r"the number 1e999 is past float64's range"),
        ('"NaN"', r"\.float: 'NaN' is not"),
    ]:
        doc["nodes"][0]["args"].append({"float": 1.5})
        path.write_text(json.dumps(doc, indent=1).replace("1.5", payload))
        doc["nodes"][0]["args"].pop()
        with pytest.raises(rti.TorchIRError, match=message):
            torchir.load(tmp_path / "o")
