"""The ONNX door (`door.Door`): a conversion from an ONNX file, through RLX's importer (torch-ir holding
the boundary only; the program is the importer's, made again from the folder's source.onnx) or through the
torch route (torch-ir with the graph as ATen nodes, `torch_route`). Its reference runtime is ONNX Runtime;
per-node parity of an importer conversion compares ONNX Runtime's intermediates (`nodes.node_values`) and
writes an ONNX repro folder (`repro.write_repro`). Its modules load when first used: the package imports
this one at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...door import Door, register
from ...torchir import TorchIR

if TYPE_CHECKING:
    from ...conversion import Conversion
    from ...program import Program
    from ...progress import Progress
    from ...verify.nodes import NodeReport, NodeValues
    from ...verify.report import NodeParity

# How an ONNX conversion's bundle was made (torch-ir `producer["route"]`; `convert.py`).
ROUTES = {
    "importer": "RLX's ONNX importer (rlx-onnx-import, after the pre-pass)",
    "torch": "the torch route (the ONNX graph as a torch module, through torch.export and the ATen registry)",
}


def _notes(ir: TorchIR) -> list[str]:
    """The route that made the bundle, then the front end's notes (`producer["note.<k>"]`)."""
    route = ROUTES.get(ir.producer.get("route", ""))
    notes = [f"route: {route}"] if route else []
    return notes + [v for k, v in sorted(ir.producer.items(), key=lambda kv: kv[0]) if k.startswith("note.")]


def _node_label(ir: TorchIR) -> str:
    """Per-node parity of a torch-route conversion runs its ATen nodes in PyTorch."""
    return "PyTorch" if ir.producer.get("route") == "torch" else ""


def _program(conv: Conversion) -> Program:
    from .driver import reimport

    return reimport(conv.directory, conv.ir.name)


def _node_values(conv: Conversion, device: str, progress: Progress) -> NodeValues:
    from .nodes import node_values

    return node_values(conv, device, progress)


def _op_kind(op: str, dtype: str) -> str:
    """The kind of an ONNX op as per-node rows name it (`onnx::<op type>`)."""
    from .kinds import op_kind

    return op_kind(op.removeprefix("onnx::"), dtype)


def _write_repro(directory: Path, found: NodeReport, row: NodeParity, target: Path) -> Path:
    from .repro import write_repro

    return write_repro(directory, found, row, target)


ONNX = register(
    Door(
        name="onnx",
        label="ONNX Runtime",
        notes=_notes,
        node_label=_node_label,
        program=_program,
        node_values=_node_values,
        op_kind=_op_kind,
        write_repro=_write_repro,
    )
)
