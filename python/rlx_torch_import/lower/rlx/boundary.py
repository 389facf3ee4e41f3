"""The graph's edges: which RLX dtype each input and output crosses `run_typed` as
(boundary-narrow), the weights RLX cannot bind (weight-int16), the calls whose outputs are
all empty (zero-size-output) and the outputs RLX would not compute (transpose-output)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import Unsupported
from ...program import Program, RlxNode
from .routing import kind_of

if TYPE_CHECKING:
    from ...torchir import WeightSpec
    from ..builder import Builder
    from ..call import Value

# weight-int16: weight dtypes RLX's CPU backend cannot bind (`set_param_typed` panics on I16).
UNBINDABLE_WEIGHT_DTYPES = frozenset({"int16"})


def protect_outputs(program: Program) -> None:
    """transpose-output: each graph output made by a Transpose node is read through a same-shape
    Reshape (RLX elides a Transpose whose only reader is a MatMul, output or not)."""
    by_id = {n.id: n for n in program.nodes}
    for i, out in enumerate(program.outputs):
        node = by_id.get(out)
        if node is None or kind_of(node.op) != "Transpose":
            continue
        kept = RlxNode(
            f"{out}#out{i}", {"Reshape": {"new_shape": list(node.dims)}}, (out,), node.dims, node.dtype, node.provenance
        )
        program.nodes.append(kept)
        program.outputs[i] = kept.id


def unbindable_weights(weights: Sequence[WeightSpec]) -> list[Unsupported]:
    """weight-int16: each parameter or buffer RLX cannot bind as a weight, refused by the capability
    pass with the dtype to store it as instead."""
    return [
        Unsupported(
            "<weight>",
            w.name,
            "",
            f"{w.kind} {w.key!r} is {w.dtype}, which RLX's CPU backend cannot bind as a weight "
            "(set_param rejects I16); store it as int32 or int64",
        )
        for w in weights
        if w.dtype in UNBINDABLE_WEIGHT_DTYPES
    ]


def empty_outputs(builder: Builder, node: Any) -> list[Value | None] | None:
    """zero-size-output: a call whose tensor outputs all have zero elements computes nothing: each
    output is an empty constant. RLX's CPU kernels panic writing a zero-size float64/int result."""
    tensors = [o for o in node.outputs if o.dtype != "none"]
    if not tensors or any(math.prod(o.shape) for o in tensors):
        return None
    return [
        None if o.dtype == "none" else builder.const(np.zeros(o.shape, dtype=np.float32), o.dtype) for o in node.outputs
    ]
