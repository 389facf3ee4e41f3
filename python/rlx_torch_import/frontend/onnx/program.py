"""The importer's graph (`_core.onnx_import`: program JSON in the core's own vocabulary) as our
`Program`, every node replayed through the one layer that knows RLX's defects (`Builder.emit` ->
`lower/rlx/workarounds.route`, then `audit`), so an ONNX-sourced program meets the same workarounds
as a torch one. The graph's edges follow the ONNX file: inputs and outputs take its dtypes (bool and
narrow integers crossing as float32: boundary-narrow) and shapes (the importer's rank-0 values are
[1]: reshaped at the edges); outputs made by a Transpose read through a Reshape (transpose-output).
Provenance names the ONNX node each RLX node came from (`onnx::<OpType>`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import NARROW_DTYPES, boundary_dtype, from_rlx, numpy_dtype, to_rlx
from ...errors import Unsupported, UnsupportedOpsError
from ...lower.builder import Builder
from ...lower.call import Value
from ...lower.rlx.audit import audit
from ...lower.rlx.boundary import protect_outputs
from ...lower.rlx.routing import RlxLimit
from ...program import Program, Provenance, ValueDecl
from .gaps import HINT


@dataclass(frozen=True)
class Edge:
    """A graph input or output as the ONNX file declares it: name, torch-ir dtype, dims."""

    name: str
    dtype: str
    dims: tuple[int, ...]


def _dims(shape: dict[str, Any]) -> tuple[int, ...]:
    dims = []
    for d in shape["dims"]:
        if "Static" not in d:
            raise ValueError(f"the importer left a dynamic dim {d}")
        dims.append(int(d["Static"]))
    return tuple(dims)


def _to(b: Builder, v: Value, dtype: str, dims: tuple[int, ...]) -> Value:
    """`v` as `dtype` and, when they differ by size-1 axes only, `dims` (a cast, a reshape). Other
    shapes are left as the importer made them (verification reports the difference)."""
    v = b.cast(v, dtype)
    same = tuple(d for d in v.dims if d != 1) == tuple(d for d in dims if d != 1)
    return b.reshape(v, dims) if tuple(v.dims) != tuple(dims) and same else v


def _constant(b: Builder, op: dict[str, Any], dims: tuple[int, ...], rlx: str) -> Value:
    """An importer Constant (raw little-endian bytes) re-made by `Builder.const` (constant-narrow)."""
    raw = bytes(op["Constant"]["data"])
    dtype = from_rlx(rlx)
    store = np.dtype(np.uint8) if dtype == "bool" else numpy_dtype(dtype).newbyteorder("<")
    if len(raw) != math.prod(dims) * store.itemsize:  # e.g. an empty shape vector declared [1]: as it is
        return b.raw(op, [], dims, dtype)
    arr = np.frombuffer(raw, dtype=store).reshape(dims)
    return b.const(arr.astype(bool) if dtype == "bool" else arr, dtype)


def to_program(
    name: str, program_json: str, op_types: dict[str, str], inputs: list[Edge], outputs: list[Edge]
) -> Program:
    """Our program from the core's JSON. `op_types`: ONNX node name (and output tensor name, the
    importer's label for an unnamed node) -> op type, for provenance; `inputs` / `outputs`: the graph's
    edges as the file declares them, in the importer's order (the importer's outputs are these)."""
    doc = json.loads(program_json)
    program = Program(name=name)
    b = Builder(program)
    values: dict[str, Value] = {}
    declared = {e.name: e for e in inputs}
    for v in doc["inputs"]:
        edge = declared[v["name"]]
        carrier = boundary_dtype(edge.dtype)
        program.inputs.append(ValueDecl(edge.name, edge.dims, carrier))
        if carrier != to_rlx(edge.dtype):
            program.carried_inputs[edge.name] = edge.dtype
        b.provenance = Provenance(aten="<boundary cast>", node=edge.name)
        value = Value(edge.name, edge.dims, from_rlx(carrier))
        value = b.cast(value, edge.dtype) if edge.dtype in NARROW_DTYPES else value
        values[edge.name] = _to(b, value, from_rlx(v["shape"]["dtype"]), _dims(v["shape"]))
    for p in doc["params"]:
        dims = _dims(p["shape"])
        program.params.append(ValueDecl(p["name"], dims, p["shape"]["dtype"]))
        values[p["name"]] = Value(p["name"], dims, from_rlx(p["shape"]["dtype"]))
    limits: list[Unsupported] = []
    for n in doc["nodes"]:
        label = n.get("label") or ""
        b.provenance = Provenance(aten=f"onnx::{op_types.get(label, '?')}", node=label or n["id"])
        dims, rlx = _dims(n["shape"]), n["shape"]["dtype"]
        if isinstance(n["op"], dict) and "Constant" in n["op"]:
            values[n["id"]] = _constant(b, n["op"], dims, rlx)
            continue
        try:
            values[n["id"]] = b.emit(n["op"], [values[i] for i in n["inputs"]], dims, from_rlx(rlx))
        except RlxLimit as e:  # no exact route for this op on these operands (lower/rlx/)
            limits.append(Unsupported(b.provenance.aten, b.provenance.node, "", str(e)))
            values[n["id"]] = Value(n["id"], dims, from_rlx(rlx))
    if limits:
        raise UnsupportedOpsError(limits, frontend_hint=HINT)
    for edge, out in zip(outputs, doc["outputs"], strict=False):
        b.provenance = Provenance(aten="<boundary cast>", node=edge.name)
        value = _to(b, values[out], edge.dtype, edge.dims)
        if boundary_dtype(edge.dtype) != to_rlx(edge.dtype):
            program.carried_outputs[edge.name] = edge.dtype
        if edge.dtype in NARROW_DTYPES:
            value = b.cast(value, "float32")
        program.outputs.append(value.id)
    protect_outputs(program)
    audit(program, b.nan_free_ids, b.compensated)
    return program
