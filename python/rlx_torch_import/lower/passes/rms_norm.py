"""`fold_rms_norm`: the decomposed RMS norm becomes RLX's fused one."""

from __future__ import annotations

from typing import Any

from ...program import Program, RlxNode
from ._common import op_variant, scalar_constant, splice, use_counts, value_dims


def fold_rms_norm(program: Program) -> int:
    """RMS normalization written out (`w * (x * rsqrt(mean(x * x, -1, keepdim) + eps))`, Hugging Face's
    LlamaRMSNorm / T5LayerNorm in float32) becomes RLX's `RmsNorm` over the last axis: one pass
    instead of five. Its roundings differ from the chain's by an ulp or so (checked by parity)."""
    by_id = {n.id: n for n in program.nodes}
    params = {p.name: p for p in program.params}
    dims = value_dims(program)
    uses = use_counts(program)

    def only(v: str, kind: str) -> RlxNode | None:
        node = by_id.get(v)
        if node is None or uses.get(v) != 1 or node.dtype != "F32" or op_variant(node.op) != kind.split(".")[0]:
            return None
        if "." in kind and node.op[kind.split(".")[0]] != kind.split(".")[1]:
            return None
        return node

    replaced: dict[str, list[RlxNode]] = {}
    for top in program.nodes:
        if op_variant(top.op) != "Binary" or top.op["Binary"] != "Mul" or top.dtype != "F32" or len(top.dims) < 2:
            continue
        width = top.dims[-1]
        for w, y in (top.inputs, top.inputs[::-1]):
            if w not in params or params[w].dims != (width,) or params[w].dtype != "F32":
                continue
            found = _match_rms(only(y, "Binary.Mul"), only, by_id, dims, top.dims)
            if found is None:
                continue
            x, eps = found
            zeros = RlxNode(
                f"{top.id}.beta", {"Constant": {"data": [0] * (4 * width)}}, (), (width,), "F32", top.provenance
            )
            norm = RlxNode(
                top.id, {"RmsNorm": {"axis": -1, "eps": eps}}, (x, w, zeros.id), top.dims, "F32", top.provenance
            )
            replaced[top.id] = [zeros, norm]
            break
    return splice(program, replaced)


def _match_rms(
    y: RlxNode | None,
    only: Any,
    by_id: dict[str, RlxNode],
    all_dims: dict[str, tuple[int, ...]],
    dims: tuple[int, ...],
) -> tuple[str, float] | None:
    """(x, eps) when `y` is `x * rsqrt(mean(x * x, last axis, keepdim) + eps)`."""
    if y is None or y.dims != dims:
        return None
    for x, r in (y.inputs, y.inputs[::-1]):
        if all_dims.get(x) != dims:
            continue
        rsqrt = only(r, "Activation.Rsqrt")
        add = only(rsqrt.inputs[0], "Binary.Add") if rsqrt is not None else None
        if add is None:
            continue
        for m, c in (add.inputs, add.inputs[::-1]):
            eps = scalar_constant(c, by_id)
            mean = only(m, "Reduce")
            if eps is None or mean is None:
                continue
            reduce = mean.op["Reduce"]
            last = reduce["axes"] in ([len(dims) - 1], [-1])
            if reduce["op"] != "Mean" or not last or not reduce["keep_dim"]:
                continue
            sq = only(mean.inputs[0], "Binary.Mul")
            if sq is not None and sq.inputs == (x, x):
                return x, eps
    return None
