"""torch-ir's wiring, checked when a file is read (`parse`): every tensor a node reads and every output
names a value defined earlier; a boundary-only torch-ir (`TorchIR.boundary_only`) has no nodes."""

from __future__ import annotations

from typing import Any

from ..errors import TorchIRError
from .schema import TorchIR


def check_wiring(ir: TorchIR, source: str) -> None:
    """Every tensor argument and output must name a value defined earlier. A torch-ir without a
    decomposition holds the boundary only (no nodes; its outputs are the front end's program's)."""
    if ir.boundary_only:
        if ir.nodes:
            raise TorchIRError(
                f"{source}: nodes: a torch-ir without a decomposition holds its boundary only, "
                f"found {len(ir.nodes)} nodes"
            )
        return
    defined = {s.name for s in ir.inputs} | {w.name for w in ir.weights}

    def walk(arg: dict[str, Any], where: str) -> None:
        tag, payload = next(iter(arg.items()))
        if tag == "tensor" and payload not in defined:
            raise TorchIRError(f"{where}: tensor {payload!r} is used before it is defined")
        if tag == "list":
            for item in payload:
                walk(item, where)

    for i, node in enumerate(ir.nodes):
        where = f"{source}: nodes[{i}] ({node.name})"
        for a in node.args:
            walk(a, where)
        for a in node.kwargs.values():
            walk(a, where)
        defined.update(o.name for o in node.outputs)
    for i, out in enumerate(ir.outputs):
        if out.value not in defined:
            raise TorchIRError(f"{source}: outputs[{i}]: value {out.value!r} is not defined")
