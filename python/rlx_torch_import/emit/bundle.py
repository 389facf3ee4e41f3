"""Write a bundle: model.hir.json (rlx-ir's own format), weights.safetensors, meta.json."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__, _core, safetensors_io
from ..dtypes import from_rlx
from ..lower.optimize import derived_spec, materialize
from ..outdir import write_text
from ..program import Program
from ..torchir import TorchIR

BUNDLE_FORMAT = "rlx-torch-import-bundle"
BUNDLE_VERSION = 1
HIR = "model.hir.json"
# A dynamic bundle's symbolic graph (RLX's .rlxmodel text), specialized per binding at run time.
SYMBOLIC = "model.rlxmodel"
WEIGHTS = "weights.safetensors"
META = "meta.json"


def _derived_bytes(program: Program, name: str, weights: dict[str, safetensors_io.RawTensor]) -> memoryview:
    _, array = materialize(program, name, weights)
    return memoryview(np.ascontiguousarray(array).view(np.uint8).reshape(-1))


def _leaves(program: Program, name: str) -> set[str]:
    d = program.derived_params.get(name)
    return {name} if d is None else set().union(*(_leaves(program, s) for s in d.sources()))


def write_bundle(
    program: Program,
    ir: TorchIR,
    weights: dict[str, safetensors_io.RawTensor],
    directory: Path,
    rlxmodel: str | None = None,
    lowered_at: dict[str, list[dict[str, int]]] | None = None,
    *,
    with_meta: bool = True,
) -> dict[str, Any]:
    """Build the HIR through the Rust core and write the three bundle files into `directory`;
    returns meta.json's content. Without `with_meta`, meta.json is left to `write_meta` (verification
    decides its `flush_denormals` first; `runtime.BundleModel` takes the content as `meta`).

    A dynamic program (`ir.symbols`) also gets `model.rlxmodel`, its symbolic graph; then
    meta.json's shapes are symbolic and `model.hir.json` is the graph at the example sizes."""
    directory.mkdir(parents=True, exist_ok=True)
    hir_json = _core.program_to_hir_json(program.to_core_json())
    write_text(directory / HIR, hir_json)
    if rlxmodel is not None:
        write_text(directory / SYMBOLIC, rlxmodel)
    used = {p.name for p in program.params}
    tensors: dict[str, safetensors_io.TensorEntry] = {
        k: (t.dtype, t.shape, t.data) for k, t in weights.items() if k in used
    }
    for name in used & set(program.derived_params):  # weights in the layout RLX reads, folded batch norms
        dtype, dims = derived_spec(program, name, weights)
        tensors[name] = (dtype, dims, lambda n=name: _derived_bytes(program, n, weights))
    # Each stored weight's pages are dropped once written (or once every derived tensor that reads it is).
    readers: dict[str, int] = {}
    for name in tensors:
        for leaf in _leaves(program, name):
            readers[leaf] = readers.get(leaf, 0) + 1

    def done(name: str) -> None:
        for leaf in _leaves(program, name):
            readers[leaf] -= 1
            if readers[leaf] == 0 and leaf in weights:
                weights[leaf].release()

    safetensors_io.write(directory / WEIGHTS, tensors, {n: (lambda n=n: done(n)) for n in tensors})
    meta = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "name": program.name,
        "rlx_version": _core.rlx_version(),
        "producer": {**ir.producer, "name": "rlx-torch-import", "version": __version__},
        "decomposition": ir.decomposition,
        "inputs": [
            {
                "name": v.name,
                "shape": list(spec.shape) if rlxmodel is not None else list(v.dims),
                "dtype": program.carried_inputs.get(v.name, from_rlx(v.dtype)),
                "rlx_dtype": from_rlx(v.dtype),
                # where the tensor sits in the model's call: forward argument, then keys/positions
                "path": spec.path or v.name,
            }
            for v, spec in zip(program.inputs, ir.inputs, strict=True)
        ],
        # The example call's positional arguments, by forward's parameter names (BundleModel.call).
        "call_args": list(ir.call_args),
        # Python values of the model's call that torch.export baked into the graph.
        "constant_inputs": list(ir.constant_inputs),
        # The structure forward returns (leaves: {"output": name} for an entry of "outputs",
        # {"constant": value, "name"} and {"size": expression, "name"} for Python values); {} = flat.
        "output_tree": ir.output_tree,
        "outputs": [
            {
                "name": o.name,
                "value": value,
                "shape": list(o.shape),
                "dtype": o.dtype,
                "rlx_dtype": "float32" if o.name in program.carried_outputs else o.dtype,
            }
            for o, value in zip(ir.outputs, program.outputs, strict=True)
        ],
        # Dynamic dims: each symbol once, with its range (max null: unbounded). Shapes above are
        # then lists of sizes and expressions of the symbols' torch names.
        "symbols": [asdict(sym) for sym in ir.symbols] if rlxmodel is not None else [],
        "specialized": list(ir.specialized),
        # The sizes (symbol label -> size) the symbolic graph was generalized from ("probes"; the sweep
        # points checked it too), and sweep points whose own lowering differs from it ("unreproduced").
        "lowered_at": lowered_at or {},
        # What a dynamic bundle makes per binding (docs/design.md, z): no op is lowered per binding.
        "per_binding": "the compiled executable: model.rlxmodel specialized to the binding and compiled once, "
        "then cached"
        if rlxmodel is not None
        else None,
        # dtype: the parameter's in the graph; stored: the tensor's in weights.safetensors (a half
        # weight of a float32 parameter is stored as it is; RLX widens it when binding).
        "params": [
            {"name": v.name, "shape": list(v.dims), "dtype": from_rlx(v.dtype), "stored": tensors[v.name][0]}
            for v in program.params
        ],
        "derived_params": {name: d.describe() for name, d in program.derived_params.items()},
        "rewrites": program.rewrites,
        # Set by verification when flushing subnormals leaves the verified outputs bit-identical.
        "flush_denormals": False,
        "op_histogram": program.op_histogram(),
        "aten_histogram": program.aten_histogram(),
        "provenance": {
            n.id: {
                "aten": n.provenance.aten,
                "node": n.provenance.node,
                "module_path": n.provenance.module_path,
                "source": n.provenance.source,
            }
            for n in program.nodes
        },
    }
    if with_meta:
        write_meta(directory, meta)
    return meta


def meta_text(meta: dict[str, Any]) -> str:
    """meta.json's text."""
    return json.dumps(meta, indent=1, allow_nan=False) + "\n"


def write_meta(directory: Path, meta: dict[str, Any]) -> None:
    """Write the bundle's meta.json (`meta`: its content, from `write_bundle`)."""
    write_text(directory / META, meta_text(meta))
