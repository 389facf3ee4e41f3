"""Conversion-time rewrites of the lowered program: work done once here is not done on every run.

Each pass keeps the numbers RLX computes exactly as they were:

- `fold_param_layouts`: a `Transpose` or `Reshape` of a parameter becomes a
  parameter stored in the new layout (`Program.derived_params`; the bundle writer
  applies the move to the weight's bytes). `Linear` lowers to `x @ W^T`; RLX 0.2.19
  merges that transpose into its GEMM only for 2-D, bias-free matmuls, and
  otherwise transposes the weight on every run (docs/design.md, "Weights in the
  layout RLX reads").
- `fold_constants`: a value computed from constants alone (attention masks built
  from `arange`, position tables, shape arithmetic) is evaluated once, by RLX
  itself (`evaluate`), and stored as a `Constant`.
- `remove_dead`: nodes and parameters nothing reads any more are dropped.

`Builder.known` uses `evaluate` during lowering, so a lowering can specialize on a
constant operand (e.g. attention with a causal mask built from `arange` becomes
RLX's fused causal attention).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..program import DerivedParam, Program, Provenance, RlxNode
from .defects import _BOUNDARY, _NP

# A folded value larger than this stays computed at run time (a Constant is stored inline in the HIR JSON).
MAX_FOLDED_ELEMENTS = 1 << 18
_LAYOUT_OPS = ("Transpose", "Reshape")


def _variant(op: Any) -> str:
    return op if isinstance(op, str) else next(iter(op))


def fold_param_layouts(program: Program) -> int:
    """Store parameters in the layout their readers want; returns how many moves were folded."""
    params = {p.name: p for p in program.params}
    derived = program.derived_params
    renames: dict[str, str] = {}
    kept: list[RlxNode] = []
    folded = 0
    for node in program.nodes:
        inputs = tuple(renames.get(i, i) for i in node.inputs)
        variant = _variant(node.op)
        if (
            variant in _LAYOUT_OPS
            and len(inputs) == 1
            and inputs[0] in params
            and params[inputs[0]].dtype == node.dtype
        ):
            src = params[inputs[0]]
            if variant == "Transpose":
                perm = tuple(int(p) for p in node.op["Transpose"]["perm"])
                step: tuple[str, tuple[int, ...]] = ("transpose", perm)
                suffix = "T" if perm == (1, 0) else "permute_" + "_".join(map(str, perm))
            else:
                step = ("reshape", node.dims)
                suffix = "reshape_" + "x".join(map(str, node.dims))
            base = derived.get(src.name, DerivedParam(src.name, ()))
            name = f"{src.name}.{suffix}"
            if name not in params:
                derived[name] = DerivedParam(base.source, (*base.steps, step))
                params[name] = type(src)(name, node.dims, node.dtype)
                program.params.append(params[name])
            renames[node.id] = name
            folded += 1
            continue
        kept.append(
            node if inputs == node.inputs else RlxNode(node.id, node.op, inputs, node.dims, node.dtype, node.provenance)
        )
    program.nodes = kept
    program.outputs = [renames.get(o, o) for o in program.outputs]
    return folded


def derive(array: np.ndarray, steps: tuple[tuple[str, tuple[int, ...]], ...]) -> np.ndarray:
    """Apply a `DerivedParam`'s moves to the weight's elements (any dtype, bytes unchanged)."""
    for kind, arg in steps:
        array = np.transpose(array, arg) if kind == "transpose" else array.reshape(arg)
    return np.ascontiguousarray(array)


def constant_ids(program: Program) -> set[str]:
    """Nodes whose value depends on constants only (no graph input, no parameter)."""
    found: set[str] = set()
    for node in program.nodes:
        if _variant(node.op) == "Constant" or (node.inputs and all(i in found for i in node.inputs)):
            found.add(node.id)
    return found


def evaluate(program: Program, ids: list[str]) -> dict[str, np.ndarray]:
    """Compute constant-only values `ids` by running their sub-graph on RLX (same kernels as a real run)."""
    from .. import _core

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
        if node.dtype in _BOUNDARY:
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
        array = np.frombuffer(data, dtype=_NP[carriers[v]]).reshape(dims)
        out[v] = array.astype(_NP[by_id[v].dtype])
    return out


def constant_node(node_id: str, array: np.ndarray, rlx_dtype: str, provenance: Provenance) -> list[RlxNode]:
    """RLX nodes that hold `array` as value `node_id` (narrow dtypes stored as float32 and cast: constant-narrow)."""
    dims = tuple(array.shape)
    if rlx_dtype in _BOUNDARY:
        data = np.ascontiguousarray(array.astype(np.dtype(_NP[rlx_dtype]).newbyteorder("<"))).tobytes()
        return [RlxNode(node_id, {"Constant": {"data": list(data)}}, (), dims, rlx_dtype, provenance)]
    stored = f"{node_id}.f32"
    data = np.ascontiguousarray(array.astype("<f4")).tobytes()
    return [
        RlxNode(stored, {"Constant": {"data": list(data)}}, (), dims, "F32", provenance),
        RlxNode(node_id, {"Cast": {"to": rlx_dtype}}, (stored,), dims, rlx_dtype, provenance),
    ]


def fold_constants(program: Program) -> int:
    """Replace every computed constant that a run reads by its value; returns how many were folded."""
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
        and _variant(n.op) != "Constant"
        and (readers.get(n.id) or n.id in program.outputs)
        and math.prod(n.dims) <= MAX_FOLDED_ELEMENTS
    ]
    if not frontier:
        return 0
    values = evaluate(program, [n.id for n in frontier])
    replaced = {n.id: constant_node(n.id, values[n.id], n.dtype, n.provenance) for n in frontier}
    nodes: list[RlxNode] = []
    for node in program.nodes:
        nodes.extend(replaced.get(node.id, [node]))
    program.nodes = nodes
    return len(frontier)


def remove_dead(program: Program) -> int:
    """Drop nodes and parameters no output depends on; returns how many nodes went."""
    live = set(program.outputs)
    kept: list[RlxNode] = []
    for node in reversed(program.nodes):
        if node.id in live:
            kept.append(node)
            live.update(node.inputs)
    removed = len(program.nodes) - len(kept)
    program.nodes = kept[::-1]
    program.params = [p for p in program.params if p.name in live]
    program.derived_params = {k: v for k, v in program.derived_params.items() if k in live}
    return removed


def optimize(program: Program) -> dict[str, int]:
    """Run every pass; returns what each changed (for the report and the benchmark)."""
    stats = {"param_layouts_folded": fold_param_layouts(program)}
    stats["constants_folded"] = fold_constants(program)
    stats["dead_nodes_removed"] = remove_dead(program)
    return stats
