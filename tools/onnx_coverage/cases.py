"""The ONNX node conformance cases of the pinned onnx wheel, classified in or out of scope.

`onnx.backend.test.case.node.collect_testcases()` builds every node test case the onnx package
ships (each a one-node model, or the node's function body for an `_expanded` case, with one data
set of inputs and expected outputs computed by onnx's numpy reference). A case is *in scope* when
every graph input and output is a plain tensor of an element type in `IN_SCOPE`; every other case
(strings, sequences, optionals, maps, float8 / float4 / int4 / int2, complex, ...) is out of scope,
with the reason.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# ONNX TensorProto element type -> torch-ir dtype name of the element types a case may use.
IN_SCOPE = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    16: "bfloat16",
}


@dataclass
class Case:
    """One in-scope case: its model (serialized ModelProto), inputs and expected outputs by graph name.

    Arrays are numpy in the graph's element type, except bfloat16, held as float32 values (numpy has
    no bfloat16); `dtypes` gives each input's and output's torch-ir dtype name."""

    name: str
    op_type: str  # the op under test (an `_expanded` case's is its base case's); `domain.Op` outside ai.onnx
    expanded: bool
    model: bytes
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    dtypes: dict[str, str] = field(default_factory=dict)


@dataclass
class OutOfScope:
    """A case left out, and why (`input 'x' is string`, `output 'y' is a sequence`, ...)."""

    name: str
    op_type: str
    reason: str


def _op_type(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _value_kind(value_info: Any) -> str | None:
    """None when the value is a tensor of an in-scope type; else what it is (`string`, `a sequence`)."""
    import onnx

    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        return f"a{'n' if (kind or 'x')[0] in 'aeiou' else ''} {(kind or 'untyped').removesuffix('_type')}"
    elem = value_info.type.tensor_type.elem_type
    if elem in IN_SCOPE:
        return None
    return str(onnx.TensorProto.DataType.Name(elem)).lower()


def scope_reason(model: Any) -> str:
    """Why a case's model is out of scope ("" when in scope): each input and output of another type."""
    why = []
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for v in values:
            what = _value_kind(v)
            if what is not None:
                why.append(f"{kind} {v.name!r} is {what}")
    return "; ".join(why)


def as_array(value: Any, dtype: str) -> np.ndarray:
    """A data-set value (ndarray, numpy scalar or TensorProto) as numpy in `dtype` (bfloat16 as float32)."""
    from onnx import TensorProto, numpy_helper

    arr = numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)
    if dtype == "bfloat16":
        return np.asarray(arr, dtype=np.float32)  # ml_dtypes.bfloat16 values, exactly
    return np.array(arr, order="C")  # not ascontiguousarray: it makes a rank-0 array [1]


def _collect() -> list[Any]:
    """onnx's node test cases; its generators' numpy warnings and prints are silenced."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        return list(collect_testcases())


def _base_ops(cases: list[Any]) -> dict[str, str]:
    """Case name -> op type under test, for the cases that are not `_expanded`."""
    return {c.name: _op_type(c.model.graph.node[0]) for c in cases if "_expanded" not in c.name and c.model.graph.node}


def load(only: set[str] | None = None) -> tuple[list[Case], list[OutOfScope]]:
    """Every node case (those of the op types in `only`, when given), in scope and out, sorted by op
    type and name. `only` matches op types case-insensitively, with or without their domain."""
    import onnx

    raw = _collect()
    base = _base_ops(raw)
    wanted = {o.lower() for o in only} if only else None
    cases: list[Case] = []
    left: list[OutOfScope] = []
    for c in raw:
        expanded = "_expanded" in c.name
        op = base.get(c.name.split("_expanded")[0], "") if expanded else base.get(c.name, "")
        op = op or (_op_type(c.model.graph.node[0]) if c.model.graph.node else "?")
        if wanted is not None and not {op.lower(), op.rsplit(".", 1)[-1].lower()} & wanted:
            continue
        why = scope_reason(c.model)
        if why:
            left.append(OutOfScope(c.name, op, why))
            continue
        ins, outs = c.data_sets[0]
        dtypes = {v.name: IN_SCOPE[v.type.tensor_type.elem_type] for v in [*c.model.graph.input, *c.model.graph.output]}
        graph = c.model.graph
        inputs = {v.name: as_array(a, dtypes[v.name]) for v, a in zip(graph.input, ins, strict=True)}
        expected = {v.name: as_array(a, dtypes[v.name]) for v, a in zip(graph.output, outs, strict=True)}
        model = onnx.ModelProto()
        model.CopyFrom(c.model)
        cases.append(Case(c.name, op, expanded, model.SerializeToString(), inputs, expected, dtypes))
    cases.sort(key=lambda x: (x.op_type.lower(), x.name))
    left.sort(key=lambda x: (x.op_type.lower(), x.name))
    return cases, left
