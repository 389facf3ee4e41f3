"""The ONNX front end's run: read the file, list every gap, bind the sizes and inputs, run ONNX
Runtime for the reference, import through the core, and write the conversion folder the back half
(`backend.lower_write_verify`) takes: torch-ir.json holding the graph's boundary only (inputs,
outputs, weights; no decomposition and no nodes, `TorchIR.boundary_only`: the program is the importer's), the static
model the importer read (`source.onnx`), weights.safetensors keyed by initializer name and
reference.safetensors with ONNX Runtime's outputs."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import _core, safetensors_io
from ...dtypes import from_rlx, numpy_dtype
from ...errors import InputError, LoweringError, Unsupported, UnsupportedOpsError
from ...layout import REFERENCE, WEIGHTS, input_key, output_key
from ...program import Program
from ...progress import Progress
from ...sizes import Dim
from ...torchir import BOUNDARY_ONLY, OutputSpec, TensorSpec, TorchIR, WeightSpec
from . import bind, expand, gaps, prepass, reference, source
from .program import Edge, to_program

# The static model the importer read, kept in the conversion folder (`build` imports it again).
SOURCE = "source.onnx"
# Rounds of function expansion (a function body may use another function op the importer lacks).
EXPAND_ROUNDS = 3


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


@dataclass
class Imported:
    """One import of a static ONNX model: our program, its weights (name -> (torch-ir dtype, shape,
    bytes)), and the ONNX op histogram."""

    program: Program
    weights: dict[str, tuple[str, tuple[int, ...], bytes]]
    onnx_ops: dict[str, int] = field(default_factory=dict)


def op_types(model: Any) -> dict[str, str]:
    """ONNX node name and each output tensor name -> op type (the importer labels an RLX node by its
    ONNX node's name, or its first output's when unnamed)."""
    found: dict[str, str] = {}
    for node in model.graph.node:
        for key in (node.name, *node.output):
            if key:
                found.setdefault(key, node.op_type)
    return found


def edges(value_infos: Any) -> list[Edge]:
    """The graph inputs or outputs as the file declares them (dtype, static dims)."""
    found = []
    for vi in value_infos:
        info = source.tensor_info(vi)
        dims = tuple(d if isinstance(d, int) else 1 for d in info.dims or ())
        found.append(Edge(info.name, info.dtype or "float32", dims))
    return found


def _imported(src: source.OnnxSource, model: Any, result: tuple[str, Any, str], name: str) -> Imported:
    program_json, raw_weights, _report = result
    program = to_program(name, program_json, op_types(model), edges(model.graph.input), edges(model.graph.output))
    shapes = {p.name: p.dims for p in program.params}
    weights = {n: (from_rlx(dt), shapes[n], bytes(data)) for n, dt, data in raw_weights}
    ops = Counter(f"onnx::{n.op_type}" for n in model.graph.node)
    program.aten_counts = dict(sorted(ops.items()))
    return Imported(program, weights, dict(sorted(ops.items())))


def import_static(src: source.OnnxSource, path: Path, sizes: dict[str, int], name: str) -> Imported:
    """Import the static model at `path` (already pre-passed) through the core. Raises
    UnsupportedOpsError listing every node the importer refused or stubbed, or the node it failed on."""
    import onnx

    model = onnx.load(str(path))
    try:
        result = _core.onnx_import(str(path), sizes, False)
    except (_core.CheckError, _core.RlxFailure) as e:
        raise UnsupportedOpsError([gaps.failure(str(e))], frontend_hint=gaps.HINT) from None
    gaps.raise_all(gaps.importer_gaps(src, model, json.loads(result[2])))
    return _imported(src, model, result, name)


def _failed_node(model: Any, message: str) -> tuple[int, str] | None:
    """(index, op type) of the node an importer failure names: "lowering node NAME", or the node
    producing the tensor of "tensor not in env: NAME" (an output the importer did not make)."""
    for marker, by_output in (("tensor not in env: ", True), ("lowering node ", False)):
        if marker in message:
            name = message.split(marker, 1)[1].split(":", 1)[0].split("\n", 1)[0].strip()
            for i, node in enumerate(model.graph.node):
                if (name in node.output) if by_output else (name in (node.name, node.op_type)):
                    return i, node.op_type
    return None


def import_expanding(
    src: source.OnnxSource, static: Any, path: Path, sizes: dict[str, int], name: str
) -> tuple[Imported | None, list[Unsupported], Counter[str]]:
    """Import `static` (written to `path`, which the folder keeps), expanding each op type the importer
    refuses that ONNX defines as a function (`expand`) and importing again, up to EXPAND_ROUNDS times.
    Returns the import (None when gaps remain), the gaps, and the op types expanded."""
    expanded: Counter[str] = Counter()
    for round_ in range(EXPAND_ROUNDS + 1):
        prepass.save(static, path)
        try:
            result = _core.onnx_import(str(path), sizes, False)
        except (_core.CheckError, _core.RlxFailure) as e:
            culprit = _failed_node(static, str(e))
            if culprit is not None and round_ < EXPAND_ROUNDS and expand.expandable(static, culprit[1]):
                done = expand.expand(static, set(), only={culprit[0]})
                if done:
                    expanded += done
                    static = prepass.infer(prepass.fold(static))
                    continue
            return None, [gaps.failure(str(e))], expanded
        report = json.loads(result[2])
        refused = {op for op, _count in report.get("unsupported", [])}
        todo = {op for op in refused if expand.expandable(static, op)}
        if todo and round_ < EXPAND_ROUNDS:
            done = expand.expand(static, todo)
            if done:
                expanded += done
                static = prepass.infer(prepass.fold(static))
                continue
        found = gaps.importer_gaps(src, static, report)
        if found:
            return None, found, expanded
        return _imported(src, static, result, name), [], expanded
    raise AssertionError("unreachable")


def reimport(directory: Path, name: str) -> Program:
    """The program of the ONNX conversion in `directory`, imported again from its source.onnx (`build`).
    Raises InputError when the folder has no source.onnx."""
    path = directory / SOURCE
    if not path.is_file():
        raise InputError(f"{path}: not found; an ONNX conversion's folder keeps the model it imports")
    return import_static(source.read(path), path, {}, name).program


def _boundary_ir(src: source.OnnxSource, name: str, program: Program, out: dict[str, np.ndarray]) -> TorchIR:
    """torch-ir for the graph's boundary: inputs and outputs at the program's shapes, the weights."""
    inputs = [
        TensorSpec(v.name, list(v.dims), program.carried_inputs.get(v.name, from_rlx(v.dtype))) for v in program.inputs
    ]
    dims_of = {v.name: v.dims for v in (*program.inputs, *program.params)} | {n.id: n.dims for n in program.nodes}
    outputs = []
    for spec, value in zip(src.outputs, program.outputs, strict=False):
        dims = [int(d) for d in dims_of[value]]
        dtype = spec.dtype or (str(out[spec.name].dtype) if spec.name in out else "float32")
        shape: list[Dim] = list(dims)
        outputs.append(OutputSpec(spec.name, spec.name, shape, dtype))
    weights = [WeightSpec(p.name, p.name, "parameter", list(p.dims), from_rlx(p.dtype)) for p in program.params]
    return TorchIR(
        name=name,
        decomposition=BOUNDARY_ONLY,
        inputs=inputs,
        weights=weights,
        nodes=[],
        outputs=outputs,
        producer={**src.producer(), **route_producer("importer", src)},
    )


def route_producer(route: str, src: source.OnnxSource) -> dict[str, str]:
    """torch-ir producer entries of an ONNX conversion: the front end, its route, the file, the
    outputs judged bit for bit (`nodes.exact_outputs_record`, from the file as ONNX Runtime runs it) and
    the reference's tie order ("specified": ONNX's TopK gives the lower index first, so RLX's indices
    among tied values are never judged as a free choice, `verify/ties.py`)."""
    from .kinds import exact_outputs_record

    return {
        "frontend": "onnx",
        "route": route,
        "source": str(src.path),
        "exact_outputs": exact_outputs_record(src.model),
        "tie_order": "specified",
    }


def _fit(name: str, arr: np.ndarray, dims: list[int], notes: list[str], what: str) -> np.ndarray:
    """`arr` at the bundle's shape `dims` when it differs only by size-1 axes (RLX has no rank-0
    tensor: ONNX's [] is [1] in the bundle), noted. Raises LoweringError when the importer made the
    value another shape than ONNX Runtime's (it lowers some node wrongly)."""
    if tuple(arr.shape) == tuple(dims):
        return arr
    if squeezed(tuple(arr.shape)) == squeezed(tuple(dims)):
        notes.append(f"{what} {name!r}: ONNX shape {list(arr.shape)} is {dims} in the bundle")
        return arr.reshape(dims)
    raise LoweringError(
        f"{what} {name!r}: RLX's ONNX importer made it {dims}, ONNX Runtime gives {list(arr.shape)} "
        "(the importer lowers some node of the graph wrongly)",
        hint="--no-verify writes the bundle without the reference",
    )


def _notes(
    sizes: dict[str, int], baked: dict[str, str], feed: dict[str, np.ndarray], expanded: Counter[str]
) -> list[str]:
    notes = []
    if sizes:
        specialized = ", ".join(f"{k}={v}" for k, v in sizes.items())
        notes.append(f"symbolic dims specialized: {specialized} (the bundle is static at these sizes)")
    if baked:
        notes.append(
            "inputs read at conversion (they fix shapes or pick an If branch), baked in as constants; the bundle "
            "does not take them and refuses other values: "
            + ", ".join(f"{n} ({why}) = {_short(feed[n])}" for n, why in baked.items())
        )
    if expanded:
        notes.append(
            "expanded into their ONNX function definitions (the importer has no lowering for them): "
            + ", ".join(f"{op} x{n}" for op, n in sorted(expanded.items()))
        )
    return notes


def read_and_bind(
    path: Path, inputs: Any, dims: Any
) -> tuple[source.OnnxSource, dict[str, np.ndarray] | None, dict[str, int], dict[str, tuple[int, ...]]]:
    """The file read, the user's inputs (or None), each symbolic dim's size and each input's shape
    (`bind`): what both routes start from."""
    src = source.read(path)
    given = bind.read_inputs(inputs)
    sizes = bind.bind_sizes(src, bind.parse_dims(dims), given)
    shapes = {
        s.name: tuple(given[s.name].shape) if given and s.name in given else bind.input_shape(s, sizes)
        for s in src.inputs
    }
    return src, given, sizes, shapes


def convert(
    path: Path,
    stage: Path,
    prog: Progress,
    *,
    inputs: Any = None,
    dims: Any = None,
    name: str | None = None,
    verify: bool = True,
) -> tuple[TorchIR, Program]:
    """Read, check, bind and import the ONNX file at `path`; write torch-ir.json (its `producer` holds
    the report's notes as `note.<k>`), source.onnx, weights.safetensors and (with `verify`)
    reference.safetensors into `stage`. Returns the boundary torch-ir and the program. Raises
    UnsupportedOpsError (every gap at once), InputError (a symbolic dim without a size, inputs that do
    not fit), ModelLoadError (a file that is not an ONNX model, or one ONNX Runtime cannot run)."""
    with prog.phase("read"):
        src, given, sizes, shapes = read_and_bind(path, inputs, dims)
        found = gaps.domain_gaps(src) + gaps.dtype_gaps(src) + gaps.zero_size_gaps(shapes)
    name = name or src.path.stem
    with prog.phase("import"):
        static, baked = prepass.prepare(src.model, shapes, given)
        imported, more, expanded = import_expanding(src, static, stage / SOURCE, sizes, name)
        gaps.raise_all(found + more)  # every gap at once (exit 3), before anything runs
        assert imported is not None
        feed, notes = bind.make_inputs(src, sizes, given)
        notes += _notes(sizes, baked, feed, expanded)
    out: dict[str, np.ndarray] = {}
    if verify:
        with prog.phase("reference (ONNX Runtime)"):
            out = reference.run(src.path, feed)
    ir = _boundary_ir(src, name, imported.program, out)
    ir.constant_inputs = [{"path": n, "value": feed[n].tolist()} for n in baked]
    tensors: dict[str, safetensors_io.TensorEntry] = {}
    for spec in ir.inputs:
        arr = _fit(spec.name, feed[spec.name], _ints(spec.shape), notes, "input")
        tensors[input_key(spec.name)] = _entry(arr, spec.dtype)
    for o in ir.outputs if verify else []:
        tensors[output_key(o.name)] = _entry(_fit(o.name, out[o.name], _ints(o.shape), notes, "output"), o.dtype)
    ir.producer.update({f"note.{k}": note for k, note in enumerate(notes)})
    ir.save(stage)
    safetensors_io.write(stage / WEIGHTS, dict(imported.weights))
    if verify:
        safetensors_io.write(stage / REFERENCE, tensors)
    return ir, imported.program


def _ints(dims: Any) -> list[int]:
    return [int(d) for d in dims]


def _short(arr: np.ndarray) -> str:
    flat = np.asarray(arr).reshape(-1)
    return str(flat.tolist()) if flat.size <= 8 else f"{arr.dtype}{list(arr.shape)}"


def _entry(arr: np.ndarray, dtype: str) -> safetensors_io.TensorEntry:
    """A reference tensor of torch-ir `dtype` (bfloat16 arrives as its uint16 bits)."""
    arr = np.array(arr, dtype=numpy_dtype(dtype), order="C", copy=True)
    return (dtype, tuple(arr.shape), arr.tobytes())
