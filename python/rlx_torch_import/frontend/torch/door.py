"""The PyTorch door (`door.Door`): torch-ir written by `from_torch`'s front end holds the whole ATen
graph, which the ATen registry lowers and PyTorch runs node by node for per-node parity, so it needs no
program hook, oracle or repro writer of its own; the report notes the call's Python values torch.export
baked in."""

from __future__ import annotations

from ...door import Door, register
from ...torchir import TorchIR


def _notes(ir: TorchIR) -> list[str]:
    return [
        f"input {c['path']} = {c['value']!r} baked in (torch.export specializes on it)"
        for c in ir.constant_inputs
        if not c.get("default")  # a default forward used: not something the caller passed
    ]


TORCH = register(Door(name="torch", label="PyTorch", notes=_notes))
