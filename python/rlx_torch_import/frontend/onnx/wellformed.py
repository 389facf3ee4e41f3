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


def _numeric(elem_type: int) -> Any | None:
    """The numpy dtype of an ONNX element type whose data is checked here: the integers, bool and the real
    floats, bfloat16 included (onnx's own mapping, `helper.tensor_dtype_to_np_dtype`); None for strings,
    complex, 8-bit floats and packed 4-bit types, which are the importer's to judge."""
    import numpy as np
    from onnx import helper

    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None
    return dtype if dtype.kind in "biuf" or dtype.name == "bfloat16" else None


def check(path: Path, model: Any) -> None:
    """ModelLoadError naming the first malformed part of `model` (read from `path`; module docstring)."""
    graph = model.graph
    for t in graph.initializer:
        _check_initializer(path, t)
    for v in graph.input:
        _check_declared(path, v)
    _check_wiring(path, graph)


def _check_initializer(path: Path, t: Any) -> None:
    from onnx import helper

    where = f"{path}: initializer {t.name!r}"
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise ModelLoadError(f"{where}: dims {dims} hold a negative size")
    dtype = _numeric(t.data_type)
    if dtype is None:
        return
    check_tensor_size(dims, dtype.name, where, ModelLoadError)
    if t.data_location == 1:  # external: source.read loads it as raw_data
        return
    count = math.prod(dims)
    if t.raw_data:
        want = count * dtype.itemsize
        if len(t.raw_data) != want:
            raise ModelLoadError(
                f"{where}: raw_data holds {len(t.raw_data)} bytes, its dims {dims} of type {dtype.name} take {want}"
            )
        return
    field = helper.tensor_dtype_to_field(t.data_type)  # the typed field holding the values without raw_data
    held = len(getattr(t, field))
    if held != count:
        raise ModelLoadError(f"{where}: {field} holds {held} values, its dims {dims} take {count}")


def _check_declared(path: Path, v: Any) -> None:
    """A graph input's declared static dims within the machine's memory (symbolic ones are sized later)."""
    t = v.type.tensor_type if v.type.HasField("tensor_type") else None
    dtype = _numeric(t.elem_type) if t is not None and t.HasField("shape") else None
    if t is None or dtype is None:
        return
    static = [int(d.dim_value) for d in t.shape.dim if d.HasField("dim_value") and d.dim_value >= 0]
    check_tensor_size(static, dtype.name, f"{path}: input {v.name!r}", ModelLoadError)


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
