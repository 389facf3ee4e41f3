"""`share_kv_heads`: grouped-query attention reads each key/value head once, not repeated per query head.

Hugging Face's `repeat_kv` (and `enable_gqa`, `lower/ops/attention.py`) copies every KV head
`rep = H / H_kv` times before attention: `[.., H_kv, S, D] -> [.., H_kv, 1, S, D] -> Expand
[.., H_kv, rep, S, D] -> [.., H, S, D]`. On a decoder's KV cache that is a copy of the whole
cache per layer and step (RLX runs the Expand as an element-by-element walk: ~21 ms of a 45 ms
decode step at a 1024-token cache on the benchmark Llama).

The sdpa lowering runs attention as single-head attention over `[N, S, D]` rows, `N = lead * H`.
The `rep` query heads that read one KV head are `rep` consecutive rows of N; stacking them along
the query axis, `[N / rep, rep * Sq, D]` (a Reshape, the same memory), lets one single-head
attention serve all of them against the KV head itself. Every query row's scores, softmax and
weighted sum are the ones it had (the same dot products in the same order), so the bits are
unchanged. The mask has to be per query row for this: the pass applies to mask kinds `None` and
`Bias` (`[N, 1, Sq, Sk]` reshapes to `[N / rep, 1, rep * Sq, Sk]`, again the same memory), not to
`Causal`, whose alignment depends on the row's index.
"""

from __future__ import annotations

from ...program import Program, RlxNode
from ._common import op_variant, splice

_MASKS = ("None", "Bias")


def _through_reshapes(v: str, by_id: dict[str, RlxNode]) -> RlxNode | None:
    """The first node that is not a Reshape, walking `v`'s producers back."""
    node = by_id.get(v)
    while node is not None and op_variant(node.op) == "Reshape":
        node = by_id.get(node.inputs[0])
    return node


def _repeated(v: str, by_id: dict[str, RlxNode]) -> tuple[str, int] | None:
    """(the un-repeated `[.., H_kv, 1, S, D]` value, rep) when `v` (`[N, S, D]`) is reshapes of an
    Expand that repeats each KV head `rep` times along its own axis (`repeat_kv`)."""
    expand = _through_reshapes(v, by_id)
    if expand is None or op_variant(expand.op) != "Expand" or len(expand.dims) < 4:
        return None
    source = by_id.get(expand.inputs[0])
    if source is None:
        return None
    *lead, rep, s, d = expand.dims
    if tuple(source.dims) != (*lead, 1, s, d) or rep < 2:
        return None
    return source.id, rep


def _share(att: RlxNode, by_id: dict[str, RlxNode]) -> list[RlxNode] | None:
    spec = att.op["Attention"]
    if spec["num_heads"] != 1 or spec["mask_kind"] not in _MASKS or len(att.dims) != 3:
        return None
    q, k, v = att.inputs[:3]
    found = [_repeated(k, by_id), _repeated(v, by_id)]
    if found[0] is None or found[1] is None or found[0][1] != found[1][1]:
        return None
    rep = found[0][1]
    n, sq, d = att.dims
    kd, vd = by_id[k].dims, by_id[v].dims
    if n % rep or kd[0] != n or vd[0] != n:
        return None
    groups = n // rep
    where = att.provenance

    def reshape(name: str, source: str, dims: tuple[int, ...]) -> RlxNode:
        return RlxNode(f"{att.id}.{name}", {"Reshape": {"new_shape": list(dims)}}, (source,), dims, att.dtype, where)

    new = [
        reshape("q_grouped", q, (groups, rep * sq, d)),
        reshape("k_shared", found[0][0], (groups, *kd[1:])),
        reshape("v_shared", found[1][0], (groups, *vd[1:])),
    ]
    if spec["mask_kind"] == "Bias":
        sk = kd[1]
        new.append(reshape("bias_grouped", att.inputs[3], (groups, 1, rep * sq, sk)))
    grouped = RlxNode(f"{att.id}.grouped", att.op, tuple(x.id for x in new), (groups, rep * sq, d), att.dtype, where)
    back = RlxNode(att.id, {"Reshape": {"new_shape": list(att.dims)}}, (grouped.id,), att.dims, att.dtype, where)
    return [*new, grouped, back]


def share_kv_heads(program: Program) -> int:
    """Attention over repeated KV heads (module docstring) reads the KV heads themselves; returns how
    many attention nodes changed. The Expands left unread go in `remove_dead`."""
    by_id = {n.id: n for n in program.nodes}
    replaced: dict[str, list[RlxNode]] = {}
    for node in program.nodes:
        if op_variant(node.op) == "Attention":
            new = _share(node, by_id)
            if new is not None:
                replaced[node.id] = new
    return splice(program, replaced)
