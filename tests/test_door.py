"""The seam between the front ends and the one back half (`door.py`, docs/design.md (bc)): torch-ir names
its front end in `producer["frontend"]`, `decomposition` means the decomposition only (torch-ir version 4;
"" for a torch-ir holding its boundary only, whose program is its front end's), older files still read,
and a front end this build lacks is a clear TorchIRError."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rlx_torch_import import door, torchir
from rlx_torch_import.errors import TorchIRError, Unsupported, UnsupportedOpsError
from rlx_torch_import.torchir import OutputSpec, TensorSpec, TorchIR


def _doc(decomposition: str, version: int, frontend: str | None = "onnx") -> dict[str, Any]:
    """A boundary-only torch-ir document (one input, one output, no nodes) as version `version` wrote it."""
    ir = TorchIR(
        name="m",
        decomposition="high",
        inputs=[TensorSpec("x", [2, 3], "float32")],
        weights=[],
        nodes=[],
        outputs=[OutputSpec("y", "x", [2, 3], "float32")],
        producer={} if frontend is None else {"frontend": frontend},
    )
    doc = json.loads(ir.to_json())
    doc["decomposition"], doc["version"] = decomposition, version
    return doc


def test_a_version_3_onnx_file_reads_as_boundary_only() -> None:
    """Up to version 3 the ONNX door spelled itself as decomposition "onnx": read as boundary-only."""
    ir = torchir.parse(_doc("onnx", 3, frontend=None), "old/torch-ir.json")
    assert (ir.decomposition, ir.frontend, ir.boundary_only, ir.made_by) == ("", "onnx", True, "onnx")
    assert door.front_end(ir).label == "ONNX Runtime"


def test_version_4_writes_the_decomposition_apart_from_the_front_end() -> None:
    ir = torchir.parse(_doc("", 4), "new/torch-ir.json")
    assert ir.boundary_only and ir.made_by == "onnx"
    saved = json.loads(ir.to_json())
    assert (saved["version"], saved["decomposition"], saved["producer"]["frontend"]) == (4, "", "onnx")
    torch_ir = torchir.parse(_doc("core", 4, frontend=None), "t/torch-ir.json")
    assert (torch_ir.frontend, torch_ir.boundary_only, torch_ir.made_by) == ("torch", False, "core")
    assert door.front_end(torch_ir).label == "PyTorch"


@pytest.mark.parametrize(
    ("decomposition", "version", "message"),
    [
        ("onnx", 4, "decomposition: 'onnx' is not one of aten, high, core"),  # the old spelling, in a new file
        ("", 3, "decomposition: '' is not one of aten, high, core"),  # no boundary-only files before version 4
    ],
)
def test_a_decomposition_out_of_its_version_is_refused(decomposition: str, version: int, message: str) -> None:
    with pytest.raises(TorchIRError, match=message):
        torchir.parse(_doc(decomposition, version), "f/torch-ir.json")


def test_a_boundary_only_file_with_nodes_is_refused() -> None:
    doc = _doc("", 4)
    doc["nodes"] = [
        {"name": "r", "target": "aten.relu.default", "args": [{"tensor": "x"}], "kwargs": {},
         "outputs": [{"name": "r", "shape": [2, 3], "dtype": "float32"}]}
    ]  # fmt: skip
    with pytest.raises(TorchIRError, match="holds its boundary only, found 1 nodes"):
        torchir.parse(doc, "f/torch-ir.json")


def test_an_unknown_front_end_is_a_torch_ir_error() -> None:
    ir = torchir.parse(_doc("", 4, frontend="tflite"), "f/torch-ir.json")
    with pytest.raises(TorchIRError, match=r"f/torch-ir.json: producer.frontend: 'tflite' is not a front end"):
        door.front_end(ir)
    torch_ir = torchir.parse(_doc("", 4, frontend="torch"), "g/torch-ir.json")
    with pytest.raises(TorchIRError, match="front end 'torch' makes no program of its own"):
        door.front_end(torch_ir)


def test_a_front_end_gives_its_own_unsupported_hint() -> None:
    items = [Unsupported("onnx::Foo", "n0", "", "the importer has no lowering")]
    assert "docs/onnx.md" in (UnsupportedOpsError(items, frontend_hint="see docs/onnx.md").hint or "")
    assert "adding-an-op.md" in (UnsupportedOpsError(items).hint or "")
