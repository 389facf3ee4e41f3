"""Write a bundle: model.hir.json (rlx-ir's own format), weights.safetensors, meta.json (`format.meta_for`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from .. import _core, safetensors_io
from ..outdir import write_text
from ..program import Program
from ..torchir import TorchIR
from ..weights import derived_spec, materialize
from .format import HIR, META, SYMBOLIC, WEIGHTS, meta_for, write_meta


def _derived_bytes(program: Program, name: str, weights: dict[str, safetensors_io.RawTensor]) -> memoryview:
    _, array = materialize(program, name, weights)
    flat = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
    return memoryview(flat)  # type: ignore[arg-type]  # numpy: Buffer on 3.12+ only


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
    returns meta.json's content. Without `with_meta`, meta.json is left to `format.write_meta`
    (verification decides its `flush_denormals` first; `BundleModel` takes the content as `meta`).

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
        tensors[name] = (dtype, dims, functools.partial(_derived_bytes, program, name, weights))
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

    safetensors_io.write(directory / WEIGHTS, tensors, {n: functools.partial(done, n) for n in tensors})
    meta = meta_for(program, ir, tensors, rlxmodel, lowered_at)
    if with_meta:
        write_meta(directory / META, meta)
    return meta
