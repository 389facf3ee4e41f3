"""The seam between the front ends and the one back half (docs/design.md, decision bc): what the back
half, the verifier and `diagnose` ask of the front end that wrote a conversion, looked up by torch-ir's
`producer["frontend"]` (`front_end`).

Each front end's door module registers its `Door` when it loads; `FRONT_ENDS` names those modules
(the package loads lazily, so the first lookup imports them, as a plugin table would). `backend.py` and
`verify/` import this module and never `frontend/` (tests/test_import_cycles.py holds that): a new door
is one entry here, and verification, reports and diagnosis stay one code path for every door."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .torchir import TorchIR, TorchIRError

if TYPE_CHECKING:
    from .conversion import Conversion
    from .program import Program
    from .progress import Progress
    from .verify.nodes import NodeReport, NodeValues
    from .verify.report import NodeParity


def _no_notes(ir: TorchIR) -> list[str]:
    return []


@dataclass(frozen=True)
class Door:
    """One door into the house.

    - `name`: its `producer["frontend"]` value in torch-ir.json ("torch", "onnx").
    - `label`: the runtime whose outputs reference.safetensors holds ("PyTorch", "ONNX Runtime").
    - `notes(ir)`: the report's lines on what it baked in or how it made the bundle.
    - `node_label(ir)`: the runtime per-node parity compares a torch-ir graph's nodes with when it is not
      `label` (an ONNX model through the torch route: PyTorch), else "".
    - `program(conv)`: the program hook, for a torch-ir holding its boundary only (`TorchIR.boundary_only`):
      the program its front end makes again from the conversion folder (RLX's ONNX importer on source.onnx).
    - `node_values(conv, device, progress)`: the intermediates oracle of a boundary-only conversion:
      each value its graph computes, its reference runtime's value and RLX's two debug values, for the
      one per-node comparison (`verify.nodes.compare_nodes`). A torch-ir with nodes needs none: PyTorch
      runs its nodes (`verify.torch_values`).
    - `op_kind(op, dtype)`: the numerical character of one of its graph's ops as the oracle's rows name
      them (`NodeParity.aten`), which per-node budgets follow (`lower.registry.KINDS`).
    - `write_repro(directory, found, row, target)`: the repro folder of one of its graph's nodes, for a
      boundary-only conversion (`diagnose`)."""

    name: str
    label: str
    notes: Callable[[TorchIR], list[str]] = _no_notes
    node_label: Callable[[TorchIR], str] = lambda ir: ""
    program: Callable[[Conversion], Program] | None = None
    node_values: Callable[[Conversion, str, Progress], NodeValues] | None = None
    op_kind: Callable[[str, str], str] | None = None
    write_repro: Callable[[Path, NodeReport, NodeParity, Path], Path] | None = None


# producer["frontend"] -> the module that registers that door.
FRONT_ENDS = {
    "torch": "rlx_torch_import.frontend.torch.door",
    "onnx": "rlx_torch_import.frontend.onnx.door",
}
_DOORS: dict[str, Door] = {}


def register(door: Door) -> Door:
    """Make `door` the front end of torch-ir whose `producer["frontend"]` is `door.name`."""
    _DOORS[door.name] = door
    return door


def front_end(ir: TorchIR) -> Door:
    """The front end that wrote `ir` (`TorchIR.frontend`). Raises TorchIRError naming the field for a
    front end this build does not have, or a boundary-only torch-ir whose front end has no program hook."""
    if ir.frontend in FRONT_ENDS and ir.frontend not in _DOORS:
        importlib.import_module(FRONT_ENDS[ir.frontend])  # it registers itself
    door = _DOORS.get(ir.frontend)
    if door is None:
        where = f"{ir.origin}: " if ir.origin else ""
        raise TorchIRError(
            f"{where}producer.frontend: {ir.frontend!r} is not a front end of this build "
            f"(known: {', '.join(sorted(FRONT_ENDS))})",
            hint="convert the model again with this version of rlx-torch-import",
        )
    if ir.boundary_only and (door.program is None or door.node_values is None or door.op_kind is None):
        where = f"{ir.origin}: " if ir.origin else ""
        raise TorchIRError(
            f'{where}decomposition: "" (the boundary only) but front end {door.name!r} makes no program of its own'
        )
    return door


def front_ends() -> dict[str, Door]:
    """Every front end of this build by name (each door module loaded)."""
    for module in FRONT_ENDS.values():
        importlib.import_module(module)
    return dict(_DOORS)
