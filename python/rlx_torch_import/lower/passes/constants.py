"""Constant evaluation (`evaluate`, also used by `Builder.known` during lowering) and `fold_constants`.

A value computed from constants alone (attention masks built from `arange`, position tables, shape
arithmetic) is evaluated once, by RLX itself, and stored as a `Constant`.
"""

from __future__ import annotations

import math

import numpy as np

from ...program import Program, Provenance, RlxNode
from ..rlx.harness import BOUNDARY, NP
from ._common import MAX_FOLDED_ELEMENTS, op_variant, splice


def constant_ids(program: Program) -> set[str]:
    """Nodes whose value depends on constants only (no graph input, no parameter)."""
    found: set[str] = set()
    for node in program.nodes:
        if op_variant(node.op) == "Constant" or (node.inputs and all(i in found for i in node.inputs)):
            found.add(node.id)
    return found


def evaluate(program: Program, ids: list[str]) -> dict[str, np.ndarray]:
    """Compute constant-only values `ids` by running their sub-graph on RLX (same kernels as a real run)."""
    from ... import _core

    wanted = set(ids)
    need: set[str] = set()
    by_id = {n.id: n for n in program.nodes}
    stack = list(wanted)
    while stack:
        v = stack.pop()
        if v in need:
            continue
        need.add(v)
        stack.extend(by_id[v].inputs)
    sub = Program("consteval")
    sub.nodes = [n for n in program.nodes if n.id in need]
    where = Provenance("<constant folding>", "consteval")
    carriers: dict[str, str] = {}
    for v in ids:
        node = by_id[v]
        if node.dtype in BOUNDARY:
            sub.outputs.append(v)
            carriers[v] = node.dtype
        else:  # bool and narrow integers cross RLX's boundary as float32 (boundary-narrow)
            sub.nodes.append(RlxNode(f"{v}.out", {"Cast": {"to": "F32"}}, (v,), node.dims, "F32", where))
            sub.outputs.append(f"{v}.out")
            carriers[v] = "F32"
    model = _core.CompiledModel(_core.program_to_hir_json(sub.to_core_json()))
    results = model.run([])
    out = {}
    for v, (data, _dtype, dims) in zip(ids, results, strict=True):
        array = np.frombuffer(data, NP[carriers[v]])  # type: ignore[call-overload]  # numpy: Buffer on 3.12+ only
        out[v] = array.reshape(dims).astype(NP[by_id[v].dtype])
    return out


def constant_node(node_id: str, array: np.ndarray, rlx_dtype: str, provenance: Provenance) -> list[RlxNode]:
    """RLX nodes that hold `array` as value `node_id` (narrow dtypes stored as float32 and cast: constant-narrow)."""
    dims = tuple(array.shape)
    if rlx_dtype in BOUNDARY:
        data = np.ascontiguousarray(array.astype(np.dtype(NP[rlx_dtype]).newbyteorder("<"))).tobytes()
        return [RlxNode(node_id, {"Constant": {"data": list(data)}}, (), dims, rlx_dtype, provenance)]
    stored = f"{node_id}.f32"
    data = np.ascontiguousarray(array.astype("<f4")).tobytes()
    return [
        RlxNode(stored, {"Constant": {"data": list(data)}}, (), dims, "F32", provenance),
        RlxNode(node_id, {"Cast": {"to": rlx_dtype}}, (stored,), dims, rlx_dtype, provenance),
    ]


def fold_constants(program: Program) -> int:
    """Replace every computed constant that a run reads by its value; returns how many were folded.
    Values of size-dependent nodes of a dynamic program stay computed (`Program.size_dependent`,
    `Program.size_valued`)."""
    consts = constant_ids(program)
    readers: dict[str, bool] = {}
    for node in program.nodes:
        if node.id not in consts:
            for i in node.inputs:
                readers[i] = True
    frontier = [
        n
        for n in program.nodes
        if n.id in consts
        and op_variant(n.op) != "Constant"
        and (readers.get(n.id) or n.id in program.outputs)
        and math.prod(n.dims) <= MAX_FOLDED_ELEMENTS
        and n.provenance.node not in program.size_dependent
        and n.provenance.node not in program.size_valued
    ]
    if not frontier:
        return 0
    values = evaluate(program, [n.id for n in frontier])
    return splice(program, {n.id: constant_node(n.id, values[n.id], n.dtype, n.provenance) for n in frontier})
