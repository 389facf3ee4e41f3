"""Graph inputs RLX's importer (and the torch route's translator) must read at conversion: a Reshape's
shape, a Slice's starts, a reduction's axes, Pad's pads, ... when they are graph inputs rather than
initializers (`bake_operands`), and graph inputs such an operand or an `If`'s condition is computed
from (`bake_read_values`: RLX's importer picks an `If`'s branch when it imports the graph, taking
`then` when it cannot tell; docs/design.md (as)). They fix the shapes or the branches of a static
bundle, so they become constants holding the values the conversion runs on; the bundle then no
longer takes them (`meta.json` `constant_inputs`, and the report says so), and a run given another
value for one is refused (`bundle.host.check_baked`), as for the torch route's baked values."""

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
    _need_given(found, given)
    bake_inputs(model, list(found), values)
    return found


def _need_given(found: dict[str, str], given: set[str]) -> None:
    """InputError naming each input in `found` (name -> what reads it) whose value the user did not give."""
    missing = sorted(n for n in found if n not in given)
    if missing:
        raise InputError(
            "input(s) the importer reads at conversion (they fix the bundle's shapes or pick an If branch): "
            + "; ".join(f"{n!r} ({found[n]})" for n in missing),
            hint="pass their values with --inputs (from_onnx(..., inputs={name: array})); the bundle is then made "
            "for those values and refuses others",
        )


# Nodes whose output depends on their input's shape only (at static sizes: a constant).
_SHAPE_ONLY = frozenset({"Shape", "Size"})


def value_sources(model: Any, name: str) -> set[str]:
    """The graph inputs whose values the value `name` of the main graph is computed from (through
    the nodes producing it; `Shape` and `Size` read only their input's shape, and a node with
    subgraphs counts every name its subgraphs read)."""
    return _Sources(model)(name)


class _Sources:
    """`value_sources` for many values of one graph (the producer map built once)."""

    def __init__(self, model: Any) -> None:
        graph = model.graph
        self.inputs = {vi.name for vi in graph.input} - {t.name for t in graph.initializer}
        self.producer = {out: node for node in graph.node for out in node.output if out}

    def __call__(self, name: str) -> set[str]:
        found: set[str] = set()
        todo, seen = [name], set()
        while todo:
            value = todo.pop()
            if not value or value in seen:
                continue
            seen.add(value)
            if value in self.inputs:
                found.add(value)
                continue
            node = self.producer.get(value)
            if node is None or node.op_type in _SHAPE_ONLY:
                continue
            todo.extend(node.input)
            todo.extend(_subgraph_reads(node))
        return found


def _subgraph_reads(node: Any) -> list[str]:
    """Every value name the nodes of `node`'s subgraphs (If branches, Loop and Scan bodies) read."""
    names: list[str] = []
    for attr in node.attribute:
        for g in [attr.g] if attr.HasField("g") else list(attr.graphs):
            for inner in g.node:
                names.extend(inner.input)
                names.extend(_subgraph_reads(inner))
    return names


def read_values(model: Any) -> dict[str, str]:
    """Graph input -> what reads it at conversion through a value computed from it: the condition of an
    `If` (RLX's importer picks the branch at import), or a shape-fixing operand (`SHAPE_OPERANDS`)."""
    found: dict[str, str] = {}
    sources = _Sources(model)
    for node in model.graph.node:
        label = repr(node.name or node.op_type)
        if node.op_type == "If" and node.domain in ("", "ai.onnx"):
            reads = [(0, f"the condition of If node {label}")]
        else:
            reads = [(k, f"{node.op_type} input {k} of node {label}") for k in SHAPE_OPERANDS.get(node.op_type, ())]
        for k, what in reads:
            if k < len(node.input) and node.input[k]:
                for source in sorted(sources(node.input[k])):
                    found.setdefault(source, what if source == node.input[k] else f"{what}, computed from it")
    return found


def bake_read_values(model: Any, values: dict[str, np.ndarray], given: set[str]) -> dict[str, str]:
    """Make each graph input `read_values` finds a constant holding `values[name]`, in place; returns name
    -> what reads it. Raises InputError for one whose value the user did not give (a random value would
    pick a random branch or shape)."""
    found = read_values(model)
    _need_given(found, given)
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
