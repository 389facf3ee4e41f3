"""An ONNX file's structure checked when it is read (`source.read`), before anything is allocated or
imported: every malformed file is a ModelLoadError (exit 2) naming what is wrong and where, never a
`KeyError` or a `MemoryError` from deep inside a route.

- every value a node of the main graph reads is a graph input, an initializer or the output of an
  earlier node (a value nothing provides; a cycle, or nodes out of topological order, which ONNX
  requires); subgraphs (If/Loop/Scan bodies) may read the outer scope and are left to the importer;
- every initializer's data fills its dims exactly (raw bytes, or the typed field holding them);
- every initializer and every declared input shape fits the machine (`limits.check_tensor_size`, the
  torch path's limit)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...errors import ModelLoadError
from ...limits import check_tensor_size

# The typed field of a TensorProto that holds each element type's values when raw_data is empty
# (onnx.proto: float16/bfloat16 and the small integers and bool live in int32_data).
_FIELDS = {
    1: "float_data", 2: "int32_data", 3: "int32_data", 4: "int32_data", 5: "int32_data", 6: "int32_data",
    7: "int64_data", 9: "int32_data", 10: "int32_data", 11: "double_data", 12: "uint64_data",
    13: "uint64_data", 16: "int32_data",
}  # fmt: skip
# Bytes per element of the element types whose raw data is checked (others are the importer's to judge).
_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
# The dtype names `check_tensor_size` sizes them by.
_DTYPE = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
}  # fmt: skip


def check(path: Path, model: Any) -> None:
    """ModelLoadError naming the first malformed part of `model` (read from `path`; module docstring)."""
    graph = model.graph
    for t in graph.initializer:
        _check_initializer(path, t)
    for v in graph.input:
        _check_declared(path, v)
    _check_wiring(path, graph)


def _check_initializer(path: Path, t: Any) -> None:
    where = f"{path}: initializer {t.name!r}"
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise ModelLoadError(f"{where}: dims {dims} hold a negative size")
    if t.data_type in _DTYPE:
        check_tensor_size(dims, _DTYPE[t.data_type], where, ModelLoadError)
    if t.data_location == 1 or t.data_type not in _ITEMSIZE:  # external (read as raw_data by source) or exotic
        return
    count = math.prod(dims)
    if t.raw_data:
        want = count * _ITEMSIZE[t.data_type]
        if len(t.raw_data) != want:
            raise ModelLoadError(
                f"{where}: raw_data holds {len(t.raw_data)} bytes, its dims {dims} of type {_DTYPE[t.data_type]} "
                f"take {want}"
            )
        return
    held = len(getattr(t, _FIELDS[t.data_type]))
    if held != count:
        raise ModelLoadError(f"{where}: {_FIELDS[t.data_type]} holds {held} values, its dims {dims} take {count}")


def _check_declared(path: Path, v: Any) -> None:
    """A graph input's declared static dims within the machine's memory (symbolic ones are sized later)."""
    t = v.type.tensor_type if v.type.HasField("tensor_type") else None
    if t is None or not t.HasField("shape") or t.elem_type not in _DTYPE:
        return
    static = [int(d.dim_value) for d in t.shape.dim if d.HasField("dim_value") and d.dim_value >= 0]
    check_tensor_size(static, _DTYPE[t.elem_type], f"{path}: input {v.name!r}", ModelLoadError)


def _check_wiring(path: Path, graph: Any) -> None:
    """Each value a main-graph node reads is provided before it (module docstring)."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in getattr(graph, "sparse_initializer", [])}
    later = {o: (i, n) for i, n in enumerate(graph.node) for o in n.output if o}
    for i, node in enumerate(graph.node):
        for value in node.input:
            if not value or value in defined:
                continue
            label = node.name or f"{node.op_type} #{i}"
            if value in later:
                j, producer = later[value]
                raise ModelLoadError(
                    f"{path}: node {label!r} ({node.op_type}) reads {value!r}, which node "
                    f"{producer.name or f'{producer.op_type} #{j}'!r} computes "
                    + ("from it (a cycle)" if j == i or _reaches(graph, i, j) else "after it (nodes out of order)")
                )
            raise ModelLoadError(
                f"{path}: node {label!r} ({node.op_type}) reads {value!r}, which no node, input or initializer provides"
            )
        defined.update(o for o in node.output if o)
    for out in graph.output:
        if out.name not in defined:
            raise ModelLoadError(f"{path}: graph output {out.name!r} is computed by no node, input or initializer")


def _reaches(graph: Any, start: int, target: int) -> bool:
    """Whether node `target`'s outputs depend on node `start`'s (so reading them from `start` is a cycle)."""
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(graph.node):
        for v in n.input:
            consumers.setdefault(v, []).append(i)
    seen, stack = {start}, [start]
    while stack:
        for o in graph.node[stack.pop()].output:
            for k in consumers.get(o, []):
                if k == target:
                    return True
                if k not in seen:
                    seen.add(k)
                    stack.append(k)
    return False
