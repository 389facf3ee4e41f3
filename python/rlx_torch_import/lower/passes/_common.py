"""What several conversion-time passes share: reading ops, counting readers, splicing nodes in."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...program import Program, RlxNode, ValueDecl

# A folded value larger than this stays computed at run time (a Constant is stored inline in the HIR JSON).
MAX_FOLDED_ELEMENTS = 1 << 18
LAYOUT_OPS = ("Transpose", "Reshape")


def op_variant(op: Any) -> str:
    return op if isinstance(op, str) else next(iter(op))


def use_counts(program: Program) -> dict[str, int]:
    """How many node inputs read each value; a graph output counts two more, so a rewrite that
    needs a single reader never rewires an output away."""
    uses: dict[str, int] = {}
    for n in program.nodes:
        for i in n.inputs:
            uses[i] = uses.get(i, 0) + 1
    for o in program.outputs:
        uses[o] = uses.get(o, 0) + 2
    return uses


def splice(program: Program, replaced: dict[str, list[RlxNode]]) -> int:
    """Put each `replaced[id]` (nodes ending in one that keeps `id`) where node `id` was; returns the count."""
    if replaced:
        program.nodes = [new for n in program.nodes for new in replaced.get(n.id, [n])]
    return len(replaced)


def value_dims(program: Program) -> dict[str, tuple[int, ...]]:
    """Every value's dims: graph inputs, parameters and nodes."""
    found = {v.name: v.dims for v in (*program.inputs, *program.params)}
    found.update((n.id, n.dims) for n in program.nodes)
    return found


def scalar_constant(v: str, by_id: dict[str, RlxNode]) -> float | None:
    node = by_id.get(v)
    if node is None or op_variant(node.op) != "Constant" or node.dtype != "F32" or math.prod(node.dims) != 1:
        return None
    return float(np.frombuffer(bytes(node.op["Constant"]["data"]), dtype="<f4")[0])


def claim_param(
    program: Program, params: dict[str, ValueDecl], base: str, recipe: Any, dims: tuple[int, ...], dtype: str = "F32"
) -> str:
    """The parameter computed by `recipe` (a `derived_params` entry, `dims` its shape, `dtype` its RLX
    dtype): an existing one with the same recipe, else a new one named `base` (`base_2`, ... when that
    name holds another)."""
    name, n = base, 1
    while name in params or name in program.derived_params:
        if program.derived_params.get(name) == recipe:
            return name
        n += 1
        name = f"{base}_{n}"
    program.derived_params[name] = recipe
    params[name] = ValueDecl(name, dims, dtype)
    program.params.append(params[name])
    return name
