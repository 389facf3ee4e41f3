"""The ONNX door's intermediates oracle (`door.Door.node_values`): what per-node parity of an importer
conversion compares, in the one comparison every door shares (`verify.nodes.compare_nodes`), so where
along the ONNX graph RLX's numbers leave ONNX Runtime's is judged in the same rows and budgets.

For every float32 value an ONNX node computes, two comparisons (bit-exact where the value is exactly
determined, `exact_values`, as `verify.nodes` judges a torch-ir graph):

- **cumulative**: the value in RLX fed the model inputs against ONNX Runtime's (both run the static
  model of the conversion, `source.onnx`, with every such value made a graph output: `prepass.expose`);
- **local** (reference-fed): the node alone, fed ONNX Runtime's values of its inputs (float inputs as
  graph inputs, integer and bool ones as constants holding ORT's values, since the importer reads
  shapes and indices at import), so its error is the node's lowering alone.

The first node whose local error is over budget is then the first divergence: the ONNX node the importer
lowers wrongly. Both RLX runs are debug imports, never the shipped graph."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ... import _core
from ...bundle.host import bind_weight, from_carrier, to_carrier
from ...conversion import Conversion
from ...dtypes import from_rlx
from ...errors import DeviceError
from ...layout import input_key
from ...progress import Progress
from ...safetensors_io import RawTensor
from ...verify.nodes import NodeValues
from ...verify.report import NodeParity
from . import prepass, reference
from .driver import SOURCE, import_static, squeezed
from .kinds import CONTRACTIONS, exact_values
from .source import elem_dtype, read


def _float_values(model: Any) -> list[tuple[int, Any, str]]:
    """(node index, node, output name) for each float32 value a node computes that is not already
    a graph output, in graph order."""
    types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.value_info}
    types.update({vi.name: vi.type.tensor_type.elem_type for vi in model.graph.output})
    return [(i, n, o) for i, n in enumerate(model.graph.node) for o in n.output if o and types.get(o) == 1]


def _run(
    program: Any, weights: dict[str, tuple[str, tuple[int, ...], bytes]], feed: dict[str, np.ndarray], device: str
) -> list[np.ndarray]:
    """Compile and run an imported program on `feed`; its outputs in order as arrays."""
    dtypes = {v.name: program.carried_inputs.get(v.name, from_rlx(v.dtype)) for v in program.inputs}
    args = [(v.name, to_carrier(feed[v.name], dtypes[v.name], from_rlx(v.dtype)), v.dtype) for v in program.inputs]
    try:
        model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()), device)
        for p in program.params:
            dt, shape, data = weights[p.name]
            bind_weight(model, p.name, RawTensor(dt, shape, memoryview(data)))
        raw = model.run(args)
    except _core.DeviceError as e:
        raise DeviceError(f"per-node values on {device}: {e}") from None
    return [from_carrier(data, dims, from_rlx(rlx), from_rlx(rlx)) for data, rlx, dims in raw]


def _import(src: Any, model: Any, directory: Path, name: str) -> Any:
    path = prepass.save(model, directory / f"{name}.onnx")
    return import_static(src, path, {}, name)


def local_model(
    model: Any, values: dict[str, np.ndarray], skip: set[int]
) -> tuple[Any, dict[str, np.ndarray], list[str]]:
    """Every node alone: float inputs made graph inputs `n<i>:<name>` (fed ORT's values), integer and
    bool inputs constants holding ORT's values, outputs renamed `n<i>:<name>`. Returns the model, its
    feed and its output names."""
    import onnx
    from onnx import helper, numpy_helper

    g = model.graph
    inits = {t.name for t in g.initializer}
    types = {vi.name: vi for vi in [*g.value_info, *g.input, *g.output]}
    local = onnx.ModelProto()
    local.CopyFrom(model)
    lg = local.graph
    del lg.node[:], lg.input[:], lg.output[:], lg.value_info[:]
    feed: dict[str, np.ndarray] = {}
    made: set[str] = set()
    outs: list[str] = []
    for i, node in enumerate(g.node):
        if i in skip or not any(o in values or types.get(o) for o in node.output):
            continue
        if not all(o in values for o in node.output if o and types.get(o) and types[o].type.tensor_type.elem_type == 1):
            continue
        new = helper.make_node(node.op_type, [], [], name=f"n{i}", domain=node.domain)
        new.attribute.extend(node.attribute)
        for inp in node.input:
            if not inp or inp in inits:
                new.input.append(inp)
                continue
            if inp not in values:
                break
            arr = values[inp]
            fresh = f"n{i}:{inp}"
            if fresh in feed or fresh in made:  # the same value read twice (Mul(x, x)): one input
                pass
            elif arr.dtype == np.float32:
                lg.input.append(helper.make_tensor_value_info(fresh, 1, arr.shape))
                feed[fresh] = arr
            else:
                lg.initializer.append(numpy_helper.from_array(arr, fresh))
                made.add(fresh)
            new.input.append(fresh)
        else:
            for o in node.output:
                new.output.append(f"n{i}:{o}" if o else "")
                if o and o in values and values[o].dtype == np.float32:
                    lg.output.append(helper.make_tensor_value_info(f"n{i}:{o}", 1, values[o].shape))
                    outs.append(f"n{i}:{o}")
            lg.node.append(new)
    used = {i for n in lg.node for i in n.input}
    kept = [t for t in lg.initializer if t.name in used]
    del lg.initializer[:]
    lg.initializer.extend(kept)
    return prepass.infer(local), feed, outs


def _local_values(
    src: Any, model: Any, values: dict[str, np.ndarray], wanted: list[tuple[int, Any, str]], tmp: Path, device: str
) -> tuple[dict[str, np.ndarray], dict[int, str]]:
    """RLX's reference-fed values (value name -> array), every node alone in one debug import fed
    ONNX Runtime's `values`; a node the importer cannot lower alone is left out, with the reason
    (node index -> reason), and the import is tried again without it (up to four times)."""
    local: dict[str, np.ndarray] = {}
    skip: set[int] = set()
    alone: dict[int, str] = {}
    for _ in range(4):
        lmodel, lfeed, louts = local_model(model, values, skip)
        try:
            limp = _import(src, lmodel, tmp, "local")
            lvals = _run(limp.program, limp.weights, lfeed, device)
        except DeviceError:
            raise
        except Exception as e:
            found = re.search(r"node n(\d+)", str(e))
            if found is None:
                alone.update({i: f"no local RLX value: lowered alone, {str(e)[:160]}" for i, _, _ in wanted})
                break
            i = int(found.group(1))
            skip.add(i)
            alone[i] = f"no local RLX value: the importer cannot lower it alone ({str(e)[:160]})"
            continue
        local = {n.split(":", 1)[1]: v for n, v in zip(louts, lvals, strict=False)}
        break
    return local, alone


def node_values(conv: Conversion, device: str = "cpu", progress: Progress | None = None) -> NodeValues:
    """The ONNX door's intermediates oracle (`door.Door.node_values`): each float32 value the ONNX
    conversion `conv`'s graph computes (its source.onnx, weights and reference, at the example inputs), ONNX
    Runtime's value and RLX's two debug values on `device` (module docstring), for the one per-node
    comparison (`verify.nodes.compare_nodes`)."""
    src = read(conv.path(SOURCE))
    model = src.model
    ref = conv.reference
    feed = {}
    for spec in src.inputs:
        arr = ref[input_key(spec.name)].to_numpy()
        dims = tuple(int(d) for d in spec.dims or ())
        feed[spec.name] = arr.reshape(dims) if squeezed(dims) == squeezed(arr.shape) else arr
    wanted = _float_values(model)
    exposed = prepass.infer(model)
    added = prepass.expose(exposed, [o for _, _, o in wanted])
    ort = reference.run(exposed, feed, [o.name for o in exposed.graph.output])
    with tempfile.TemporaryDirectory(prefix="rti-onnx-nodes-") as tmp:
        cumulative: dict[str, np.ndarray] = {}
        notes: dict[str, str] = {}
        try:
            imported = _import(src, exposed, Path(tmp), "cumulative")
            outs = _run(imported.program, imported.weights, feed, device)
            names = [o.name for o in exposed.graph.output]
            cumulative = dict(zip(names, outs, strict=False))
        except DeviceError:
            raise
        except Exception as e:
            note = f"no cumulative RLX value: the debug import failed ({str(e)[:160]})"
            notes = {o: note for o in added}
        local, alone = _local_values(src, model, {**feed, **ort}, wanted, Path(tmp), device)
    rows: list[tuple[NodeParity, Any]] = []
    by_node: dict[str, str] = {}
    dtype = elem_dtype(1) or "float32"
    for index, (i, node, value) in enumerate(wanted):
        expected = ort.get(value)
        row = NodeParity(
            index=index,
            node=node.name or f"{node.op_type}_{i}",
            value=value,
            aten=f"onnx::{node.op_type}",
            module_path="",
            source="",
            shape=list(expected.shape) if expected is not None else [],
            dtype=dtype,
            kind="",  # the door's `op_kind` (kinds.op_kind), which the comparison asks
        )
        if expected is None:
            row.note = "no ONNX Runtime value"
        else:
            row.reduction = _reduction(node, ort, expected)
        if i in alone:
            by_node[row.node] = alone[i]
        rows.append((row, None))
    return NodeValues(
        rows,
        lambda row: ort[row.value],
        local,
        cumulative,
        alone=by_node,
        value_notes=notes,
        exact=exact_values(exposed),
        fit=True,
        label="ONNX Runtime",
        expected={**feed, **ort},  # for a repro folder (`repro.write_repro`)
    )


def _reduction(node: Any, values: dict[str, np.ndarray], expected: np.ndarray) -> int:
    """The reduction length a contraction or reduction's budget scales with (1 otherwise)."""
    ins: Sequence[np.ndarray] = [values[n] for n in node.input if n in values]
    if not ins:
        return 1
    if node.op_type in CONTRACTIONS and len(ins) >= 2:
        return max(1, round(float(np.sqrt(ins[0].size * ins[1].size / max(expected.size, 1)))))
    last = ins[0].shape[-1] if ins[0].ndim else 1
    return max(1, round(ins[0].size / max(expected.size, 1)), int(last))
