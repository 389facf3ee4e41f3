"""The ONNX front end's run: read the file, list every gap, bind the sizes and inputs, run ONNX
Runtime for the reference, import through the core, and write the conversion folder the back half
(`backend.lower_write_verify`) takes: torch-ir.json holding the graph's boundary only (inputs,
outputs, weights; `decomposition: "onnx"`, no nodes: the program is the importer's), the static
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
from ...dtypes import from_rlx
from ...errors import InputError, Unsupported, UnsupportedOpsError
from ...layout import REFERENCE, WEIGHTS, input_key, output_key
from ...program import Program
from ...progress import Progress
from ...torchir import OutputSpec, TensorSpec, TorchIR, WeightSpec
from . import bind, gaps, prepass, reference, source
from .program import to_program

# The static model the importer read, kept in the conversion folder (`build` imports it again).
SOURCE = "source.onnx"
DECOMPOSITION = "onnx"


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


def import_static(src: source.OnnxSource, path: Path, sizes: dict[str, int], name: str) -> Imported:
    """Import the static model at `path` through the core. Raises UnsupportedOpsError listing every
    node the importer refused or stubbed (or naming the node it failed on)."""
    try:
        program_json, raw_weights, report_json = _core.onnx_import(str(path), sizes, False)
    except _core.CheckError as e:
        text = str(e)
        node = text.split("lowering node ", 1)[1].split(":", 1)[0] if "lowering node " in text else "(import)"
        raise UnsupportedOpsError(
            [Unsupported("<importer>", node, "", f"RLX's ONNX importer failed: {text[:400]}")], decomposition="onnx"
        ) from None
    report = json.loads(report_json)
    refused = gaps.importer_gaps(src, report, set())
    if refused:
        raise UnsupportedOpsError(refused, decomposition=DECOMPOSITION)
    model = src.model
    outputs = [(o.name, o.dtype or "float32") for o in src.outputs]
    program = to_program(name, program_json, op_types(model), outputs)
    shapes = {p.name: p.dims for p in program.params}
    weights = {n: (from_rlx(dt), shapes[n], bytes(data)) for n, dt, data in raw_weights}
    ops = Counter(f"onnx::{n.op_type}" for n in model.graph.node)
    program.aten_counts = dict(ops)
    return Imported(program, weights, dict(sorted(ops.items())))


def reimport(directory: Path, name: str) -> Program:
    """The program of the ONNX conversion in `directory`, imported again from its source.onnx (`build`).
    Raises InputError when the folder has no source.onnx."""
    path = directory / SOURCE
    if not path.is_file():
        raise InputError(f"{path}: not found; an ONNX conversion's folder keeps the model it imports")
    return import_static(source.read(path), path, {}, name).program


def _boundary_ir(
    src: source.OnnxSource, name: str, program: Program, feed: dict[str, np.ndarray], out: dict[str, np.ndarray]
) -> TorchIR:
    """torch-ir for the graph's boundary: inputs and outputs at the program's shapes, the weights."""
    inputs = [
        TensorSpec(s.name, list(v.dims), program.carried_inputs.get(s.name, from_rlx(v.dtype)))
        for s, v in zip(src.inputs, program.inputs, strict=True)
    ]
    by_id = {n.id: n for n in program.nodes}
    outputs = []
    for spec, value in zip(src.outputs, program.outputs, strict=False):
        node = by_id.get(value)
        dims = list(node.dims) if node is not None else list(next(v.dims for v in program.inputs if v.name == value))
        outputs.append(OutputSpec(spec.name, spec.name, dims, spec.dtype or str(out[spec.name].dtype)))
    weights = [WeightSpec(p.name, p.name, "parameter", list(p.dims), from_rlx(p.dtype)) for p in program.params]
    return TorchIR(
        name=name,
        decomposition=DECOMPOSITION,
        inputs=inputs,
        weights=weights,
        nodes=[],
        outputs=outputs,
        producer={**src.producer(), "frontend": "onnx", "source": str(src.path)},
    )


def _fit(name: str, arr: np.ndarray, dims: list[int], notes: list[str], what: str) -> np.ndarray:
    """`arr` at the bundle's shape `dims` when it differs only by size-1 axes (RLX has no rank-0
    tensor: ONNX's [] is [1] in the bundle), noted; InputError otherwise."""
    if tuple(arr.shape) == tuple(dims):
        return arr
    if squeezed(tuple(arr.shape)) == squeezed(tuple(dims)):
        notes.append(f"{what} {name!r}: ONNX shape {list(arr.shape)} is {dims} in the bundle")
        return arr.reshape(dims)
    raise InputError(f"{what} {name!r}: the importer made it {dims}, ONNX Runtime gives {list(arr.shape)}")


def convert(
    path: str | Path,
    stage: Path,
    prog: Progress,
    *,
    inputs: Any = None,
    dims: Any = None,
    name: str | None = None,
) -> tuple[TorchIR, Program, list[str]]:
    """Read, check, bind and import the ONNX file at `path`; write torch-ir.json, source.onnx,
    weights.safetensors and reference.safetensors into `stage`. Returns the boundary torch-ir, the
    program and the notes for the report. Raises UnsupportedOpsError (every gap at once), InputError
    (a symbolic dim without a size, inputs that do not fit), ModelLoadError (a file that is not an
    ONNX model ONNX Runtime runs)."""
    with prog.phase("read"):
        src = source.read(path)
        gaps.check(src)  # every op-type and dtype gap, before anything is written
        given = bind.read_inputs(inputs)
        sizes = bind.bind_sizes(src, bind.parse_dims(dims), given)
        feed, notes = bind.make_inputs(src, sizes, given)
        if sizes:
            notes.append(
                "symbolic dims specialized: " + ", ".join(f"{k}={v}" for k, v in sizes.items())
                + " (the bundle is static at these sizes)"
            )  # fmt: skip
    name = name or src.path.stem
    with prog.phase("import"):
        static = prepass.prepare(src.model, {k: tuple(v.shape) for k, v in feed.items()})
        model_path = prepass.save(static, stage / SOURCE)
        imported = import_static(src, model_path, sizes, name)
    with prog.phase("reference (ONNX Runtime)"):
        out = reference.run(src.path, feed)
    program = imported.program
    ir = _boundary_ir(src, name, program, feed, out)
    tensors: dict[str, safetensors_io.TensorEntry] = {}
    for spec in ir.inputs:
        tensors[input_key(spec.name)] = _entry(_fit(spec.name, feed[spec.name], list(spec.shape), notes, "input"))
    for o in ir.outputs:
        tensors[output_key(o.name)] = _entry(_fit(o.name, out[o.name], list(o.shape), notes, "output"))
    ir.save(stage)
    safetensors_io.write(stage / WEIGHTS, dict(imported.weights))
    safetensors_io.write(stage / REFERENCE, tensors)
    return ir, program, notes


def _entry(arr: np.ndarray) -> safetensors_io.TensorEntry:
    arr = np.ascontiguousarray(arr)
    return (str(arr.dtype), tuple(arr.shape), arr.tobytes())
