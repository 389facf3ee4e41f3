"""The graph boundary: which RLX dtype each input and output crosses `run_typed` as, and the
outputs RLX would not compute (transpose-output)."""

from __future__ import annotations

from ...dtypes import NARROW_DTYPES, compute_rlx
from ...program import Program, RlxNode
from .routing import kind_of


def boundary_dtype(dtype: str) -> str:
    """The RLX dtype a graph input or output of torch-ir `dtype` crosses `run_typed` as: bool and narrow
    integers as F32 (boundary-narrow; exact), half precision as the F32 it computes in."""
    return "F32" if dtype in NARROW_DTYPES else compute_rlx(dtype)


def protect_outputs(program: Program) -> None:
    """transpose-output: each graph output made by a Transpose node is read through a same-shape
    Reshape (RLX elides a Transpose whose only reader is a MatMul, output or not)."""
    by_id = {n.id: n for n in program.nodes}
    for i, out in enumerate(program.outputs):
        node = by_id.get(out)
        if node is None or kind_of(node.op) != "Transpose":
            continue
        kept = RlxNode(f"{out}#out{i}", {"Reshape": {"new_shape": list(node.dims)}}, (out,), node.dims, node.dtype,
                       node.provenance)  # fmt: skip
        program.nodes.append(kept)
        program.outputs[i] = kept.id
