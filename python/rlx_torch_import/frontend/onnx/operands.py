"""Graph inputs RLX's importer (and the torch route's translator) must read at conversion: a Reshape's
shape, a Slice's starts, a reduction's axes, Pad's pads, ... when they are graph inputs rather than
initializers. They fix the shapes of a static bundle, so they become constants holding the values the
conversion runs on (`bake_operands`); the bundle then no longer takes them (`meta.json`
`constant_inputs`, and the report says so)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InputError

# (op type -> input positions) the importer reads as constants at import: shape-fixing operands.
SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3),
    "Squeeze": (1,), "Unsqueeze": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "TopK": (1,),
    "Split": (1,), "Resize": (1, 2, 3), "OneHot": (1,), "CumSum": (1,), "Upsample": (1,), "Trilu": (1,),
    "Compress": (1,), "CenterCropPad": (1,), "Col2Im": (1, 2), "MaxUnpool": (2,),
}  # fmt: skip
_REDUCES = tuple(
    f"Reduce{r}" for r in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp", "SumSquare")
)
SHAPE_OPERANDS.update({r: (1,) for r in _REDUCES})


def shape_operand_inputs(model: Any) -> dict[str, str]:
    """Graph input name -> "<op type> input <k>" for graph inputs a node reads as a shape-fixing operand."""
    inputs = {vi.name for vi in model.graph.input} - {t.name for t in model.graph.initializer}
    found: dict[str, str] = {}
    for node in model.graph.node:
        for k in SHAPE_OPERANDS.get(node.op_type, ()):
            if k < len(node.input) and node.input[k] in inputs:
                found.setdefault(node.input[k], f"{node.op_type} input {k}")
    return found


def bake_operands(model: Any, values: dict[str, np.ndarray], given: set[str]) -> dict[str, str]:
    """Make each shape-operand graph input (`shape_operand_inputs`) a constant holding `values[name]`,
    in place; returns name -> what reads it. Raises InputError for one whose value the user did not
    give (a random value would fix a random shape)."""
    found = shape_operand_inputs(model)
    missing = sorted(n for n in found if n not in given)
    if missing:
        raise InputError(
            "input(s) the importer reads at conversion (they fix the bundle's shapes): "
            + "; ".join(f"{n!r} ({found[n]})" for n in missing),
            hint="pass their values with --inputs (from_onnx(..., inputs={name: array}))",
        )
    bake_inputs(model, list(found), values)
    return found


def bake_inputs(model: Any, names: list[str], values: dict[str, np.ndarray]) -> None:
    """Make each named graph input a constant (initializer) holding `values[name]`, in place."""
    from onnx import numpy_helper

    if not names:
        return
    keep = [vi for vi in model.graph.input if vi.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    for name in names:
        model.graph.initializer.append(numpy_helper.from_array(np.asarray(values[name]), name))
