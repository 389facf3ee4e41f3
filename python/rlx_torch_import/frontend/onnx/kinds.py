"""The numerical character of ONNX ops (`op_kind`, the kinds of `lower.registry.KINDS`) and which values
of an ONNX graph are exactly determined (`exact_values`, as `verify/exactness.py` judges a torch-ir
graph), read by the ONNX door's per-node parity (`nodes.py`) and recorded for the output verdict at
conversion (`exact_outputs_record`)."""

from __future__ import annotations

import json
from typing import Any

from ...lower.registry import VALUE_EXACT_KINDS
from . import prepass

# ONNX op type -> the numerical character its local budget follows (`verify.nodes.op_kind`'s kinds).
CONTRACTIONS = {"MatMul", "Gemm", "Conv", "ConvTranspose", "MatMulInteger", "Einsum", "Attention"}
_REDUCTIONS = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum", "Softmax", "LogSoftmax", "LayerNormalization",
    "BatchNormalization", "InstanceNormalization", "GroupNormalization", "AveragePool", "GlobalAveragePool",
    "LpNormalization", "CumSum", "SkipLayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
}  # fmt: skip
_MOVEMENT = {
    "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather", "Expand",
    "Identity", "Tile", "Pad", "GatherElements", "GatherND", "DepthToSpace", "SpaceToDepth", "MaxPool",
    "GlobalMaxPool", "ReduceMax", "ReduceMin", "Max", "Min", "Relu", "Where", "Constant",
}  # fmt: skip
# ONNX TensorProto element types of the float dtypes: FLOAT, FLOAT16, DOUBLE, BFLOAT16.
_FLOATS = frozenset({1, 10, 11, 16})
# Value-exact ops (`lower.registry.KINDS`' "exact"): rounding to an integer, sign, negation, magnitude.
_EXACT = {"Round", "Floor", "Ceil", "Sign", "Abs", "Neg"}


def _kind(op_type: str) -> str:
    """The numerical character of an ONNX op's float results (`lower.registry.KINDS`)."""
    if op_type in CONTRACTIONS:
        return "contraction"
    if op_type in _REDUCTIONS:
        return "reduction"
    if op_type in _MOVEMENT:
        return "movement"
    if op_type in _EXACT:
        return "exact"
    return "elementwise"


def op_kind(op_type: str, dtype: str) -> str:
    """The numerical character a node's local budget follows: exact for integer and bool results,
    else the op's kind (`_kind`)."""
    return "exact" if dtype != "float32" else _kind(op_type)


def exact_values(model: Any) -> set[str]:
    """The names of the exact-judged values of an ONNX graph (shapes inferred, `prepass.infer`), as
    `verify.exactness.exact_values` judges a torch-ir graph: the graph inputs and initializers, and
    every output of a node that reads only exact-judged values when its op is value-exact (kind
    movement or exact) or the output is not a float. A node with a subgraph (If, Loop, Scan) reads
    values its inputs do not list: its outputs are not exact-judged."""
    g = model.graph
    types = {vi.name: vi.type.tensor_type.elem_type for vi in [*g.value_info, *g.input, *g.output]}
    known = {i.name for i in g.input} | {t.name for t in g.initializer}
    for node in g.node:
        if any(a.g.node or a.graphs for a in node.attribute) or not all(i in known for i in node.input if i):
            continue
        exact_op = _kind(node.op_type) in VALUE_EXACT_KINDS
        known |= {o for o in node.output if o and (exact_op or types.get(o, 0) not in _FLOATS | {0})}  # 0: unknown
    return known


def exact_outputs_record(model: Any) -> str:
    """The float graph outputs of the ONNX file `model` (as read, before the pre-pass folds anything)
    that are exact-judged (`exact_values`), as the JSON list torch-ir's `producer["exact_outputs"]`
    holds (`verify.run.exact_outputs` reads it). Read from the file as ONNX Runtime runs it, not from a
    folded or translated graph: a constant folded at conversion (a `HannWindow` of no input) is the
    folder's arithmetic, not ONNX Runtime's."""
    known = exact_values(prepass.infer(model))
    names = [o.name for o in model.graph.output if o.type.tensor_type.elem_type in _FLOATS and o.name in known]
    return json.dumps(names)
