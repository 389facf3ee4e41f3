"""The graph's edges: which RLX dtype each input and output crosses `run_typed` as
(boundary-narrow), the weights RLX cannot bind (weight-int16), the calls whose outputs are
all empty (zero-size-output), the outputs RLX would not compute (transpose-output) and those it
cannot read when they are empty at run time (empty-output)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import Unsupported
from ...program import Program, RlxNode
from ...sizes import Dim, Symbol, evaluate, free_symbols
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


# empty-output: RLX reads an F64/I64/I32 graph output from its arena offset, which an empty value
# does not have (rlx-runtime 0.2.19 cpu_backend.rs: a panic slicing from usize::MAX); F32 reads are fine.
_EMPTY_UNREADABLE = frozenset({"int64", "float64", "int32"})


def pad_empty_output(builder: Builder, value: Value, shape: list[Dim], symbols: list[Symbol]) -> tuple[Value, int]:
    """empty-output: an int64/float64/int32 graph output whose one symbolic dim (`shape`, torch-ir's
    symbolic shape; a line of a size a stage computes) may be 0 at run time is returned flattened with one
    padding element after it, so RLX never reads an empty value; the host takes the first elements back
    (`bundle.host.unpad_outputs`, the crate's `unpad`). Returns (the value to output, the axis that may be
    0), or (`value`, -1) where nothing is padded."""
    if value.dtype not in _EMPTY_UNREADABLE:
        return value, -1
    symbolic = [i for i, d in enumerate(shape) if not isinstance(d, int)]
    if len(symbolic) != 1:
        return value, -1
    (axis,) = symbolic
    by_name = {s.name: s for s in symbols}
    used = [by_name.get(n) for n in free_symbols(shape[axis])]
    if len(used) != 1 or used[0] is None or not used[0].stage:
        return value, -1
    sym = used[0]
    at = [evaluate(shape[axis], {sym.name: v}) for v in (sym.min, sym.min + 1, sym.min + 2)]
    if at[0] != 0 or at[2] - at[1] != at[1] - at[0]:  # never empty, or not a line of the size
        return value, -1
    flat = builder.reshape(value, (math.prod(value.dims),))
    pad = builder.const(np.zeros(1, dtype=np.float32), value.dtype)
    return builder.emit({"Concat": {"axis": 0}}, [flat, pad], (flat.dims[0] + 1,), value.dtype), axis
