"""The importer's graph (`_core.onnx_import`: program JSON in the core's own vocabulary) as our
`Program`, with the graph's edges made as every program's are: bool and narrow integers cross the
boundary as float32 (boundary-narrow), outputs made by a Transpose read through a Reshape
(transpose-output). Provenance names the ONNX node each RLX node came from."""

from __future__ import annotations

import json
from typing import Any

from ...dtypes import NARROW_DTYPES, from_rlx, to_rlx
from ...lower.rlx.boundary import protect_outputs
from ...program import Program, Provenance, RlxNode, ValueDecl


def _dims(shape: dict[str, Any]) -> tuple[int, ...]:
    dims = []
    for d in shape["dims"]:
        if "Static" not in d:
            raise ValueError(f"the importer left a dynamic dim {d}")
        dims.append(int(d["Static"]))
    return tuple(dims)


def to_program(name: str, program_json: str, op_types: dict[str, str], outputs: list[tuple[str, str]]) -> Program:
    """Our program from the core's JSON. `op_types`: ONNX node name (and output tensor name, the
    importer's label for an unnamed node) -> op type, for provenance; `outputs`: the graph's
    outputs in order as (name, torch-ir dtype the file declares). An output the importer computes in
    another dtype is cast to the declared one (its values are still compared with ONNX Runtime's)."""
    doc = json.loads(program_json)
    program = Program(name=name)
    renamed: dict[str, str] = {}
    boundary: list[RlxNode] = []
    for v in doc["inputs"]:
        dims, dtype = _dims(v["shape"]), v["shape"]["dtype"]
        if from_rlx(dtype) in NARROW_DTYPES:
            program.inputs.append(ValueDecl(v["name"], dims, "F32"))
            program.carried_inputs[v["name"]] = from_rlx(dtype)
            cast = RlxNode(
                f"{v['name']}#in", {"Cast": {"to": dtype}}, (v["name"],), dims, dtype,
                Provenance(aten="<boundary cast>", node=v["name"]),
            )  # fmt: skip
            boundary.append(cast)
            renamed[v["name"]] = cast.id
        else:
            program.inputs.append(ValueDecl(v["name"], dims, dtype))
    program.params = [ValueDecl(p["name"], _dims(p["shape"]), p["shape"]["dtype"]) for p in doc["params"]]
    program.nodes = boundary
    for n in doc["nodes"]:
        label = n.get("label") or ""
        program.nodes.append(
            RlxNode(
                n["id"],
                n["op"],
                tuple(renamed.get(i, i) for i in n["inputs"]),
                _dims(n["shape"]),
                n["shape"]["dtype"],
                Provenance(aten=f"onnx::{op_types.get(label, '?')}", node=label or n["id"]),
            )
        )
    by_id = {n.id: n for n in program.nodes}
    declared = {v.name: v for v in program.inputs}
    for k, out in enumerate(doc["outputs"]):
        out = renamed.get(out, out)
        node = by_id.get(out)
        dtype = node.dtype if node is not None else declared[out].dtype
        dims = node.dims if node is not None else declared[out].dims
        if k < len(outputs) and from_rlx(dtype) != outputs[k][1]:
            dtype = to_rlx(outputs[k][1])
            cast = RlxNode(
                f"{out}#as{k}", {"Cast": {"to": dtype}}, (out,), dims, dtype,
                Provenance(aten="<boundary cast>", node=outputs[k][0]),
            )  # fmt: skip
            program.nodes.append(cast)
            out = cast.id
        if from_rlx(dtype) in NARROW_DTYPES:
            if k < len(outputs):
                program.carried_outputs[outputs[k][0]] = from_rlx(dtype)
            cast = RlxNode(
                f"{out}#out{len(program.outputs)}", {"Cast": {"to": "F32"}}, (out,), dims, "F32",
                Provenance(aten="<boundary cast>", node=out),
            )  # fmt: skip
            program.nodes.append(cast)
            out = cast.id
        program.outputs.append(out)
    protect_outputs(program)
    return program
