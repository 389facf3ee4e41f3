"""`fold_rotary`: rotate-half rotary embeddings become RLX's fused rotary op."""

from __future__ import annotations

import math

from ...program import Program, RlxNode
from ._common import op_variant, splice, value_dims

_ELEMENTWISE_UNARY = ("Activation", "Cast")


def _half_duplicated(v: str, by_id: dict[str, RlxNode]) -> bool:
    """Whether `v`'s last axis is two equal halves by construction: elementwise ops (unary, or with a
    scalar operand) over `Concat([a, a])` on the last axis (Hugging Face's `cat((freqs, freqs), -1)`)."""
    for _ in range(8):
        node = by_id.get(v)
        if node is None:
            return False
        kind = op_variant(node.op)
        if kind == "Concat":
            axis = node.op["Concat"]["axis"]
            last = axis in (-1, len(node.dims) - 1)
            return last and len(node.inputs) == 2 and node.inputs[0] == node.inputs[1]
        if kind in _ELEMENTWISE_UNARY and len(node.inputs) == 1:
            v = node.inputs[0]
        elif kind == "Binary" and len(node.inputs) == 2:
            dims = [by_id[i].dims if i in by_id else None for i in node.inputs]
            scalar = [d is not None and math.prod(d) == 1 for d in dims]
            if scalar[1] and not scalar[0]:
                v = node.inputs[0]
            elif scalar[0] and not scalar[1]:
                v = node.inputs[1]
            else:
                return False
        else:
            return False
    return False


def _table(v: str, by_id: dict[str, RlxNode], seq: int, dim: int) -> str | None:
    """The [.., seq, dim] rotary table (leading extents all 1) a broadcast operand reshapes, if its
    halves are equal by construction."""
    node = by_id.get(v)
    while node is not None and op_variant(node.op) == "Reshape":
        v, node = node.inputs[0], by_id.get(node.inputs[0])
    if node is None or node.dims[-2:] != (seq, dim) or math.prod(node.dims) != seq * dim:
        return None
    return v if _half_duplicated(v, by_id) else None


def fold_rotary(program: Program) -> int:
    """Rotary embeddings written as rotate-half (`q * cos + cat(-q2, q1) * sin`, Hugging Face's
    `apply_rotary_pos_emb`) become RLX's `Rope` (NeoX style). Only when cos and sin are tables whose
    halves are equal by construction (see `_half_duplicated`), so Rope's half table holds the same
    numbers; Rope computes `q1*c - q2*s` and `q2*c + q1*s` with the same roundings as the original."""
    by_id = {n.id: n for n in program.nodes}
    dims = value_dims(program)
    replaced: dict[str, list[RlxNode]] = {}
    for add in program.nodes:
        if op_variant(add.op) != "Binary" or add.op["Binary"] != "Add" or add.dtype != "F32" or len(add.dims) < 3:
            continue
        found = _match_rotate_half(add, by_id, dims)
        if found is None:
            continue
        q, cos, sin = found
        seq, dim = add.dims[-2], add.dims[-1]
        half = dim // 2
        where = add.provenance
        new: list[RlxNode] = []
        tables = []
        for name, table in (("cos", cos), ("sin", sin)):
            flat = RlxNode(
                f"{add.id}.{name}", {"Reshape": {"new_shape": [seq, dim]}}, (table,), (seq, dim), "F32", where
            )
            narrow = RlxNode(
                f"{add.id}.{name}_half",
                {"Narrow": {"axis": 1, "start": 0, "len": half}},
                (flat.id,),
                (seq, half),
                "F32",
                where,
            )
            new += [flat, narrow]
            tables.append(narrow.id)
        rope = {"Rope": {"head_dim": dim, "n_rot": dim, "style": "NeoX"}}
        new.append(RlxNode(add.id, rope, (q, *tables), add.dims, "F32", where))
        replaced[add.id] = new
    return splice(program, replaced)


def _match_rotate_half(
    add: RlxNode, by_id: dict[str, RlxNode], dims: dict[str, tuple[int, ...]]
) -> tuple[str, str, str] | None:
    """(q, cos table, sin table) when `add` is `q * cos + cat(-q[..., h:], q[..., :h]) * sin`."""
    seq, dim = add.dims[-2], add.dims[-1]
    if dim % 2:
        return None
    half = dim // 2
    muls = [by_id.get(i) for i in add.inputs]
    if any(m is None or op_variant(m.op) != "Binary" or m.op["Binary"] != "Mul" or m.dims != add.dims for m in muls):
        return None
    for plain, rotated in (muls, muls[::-1]):
        assert plain is not None and rotated is not None
        for q, cos in (plain.inputs, plain.inputs[::-1]):
            if dims.get(q) != add.dims:
                continue
            for cat, sin in (rotated.inputs, rotated.inputs[::-1]):
                c = by_id.get(cat)
                if c is None or op_variant(c.op) != "Concat" or c.op["Concat"]["axis"] not in (-1, len(c.dims) - 1):
                    continue
                if len(c.inputs) != 2:
                    continue
                neg, first = (by_id.get(i) for i in c.inputs)
                if neg is None or first is None or neg.op != {"Activation": "Neg"}:
                    continue
                second = by_id.get(neg.inputs[0])
                if not (_narrow_of(first, q, 0, half) and second is not None and _narrow_of(second, q, half, half)):
                    continue
                cos_t, sin_t = _table(cos, by_id, seq, dim), _table(sin, by_id, seq, dim)
                if cos_t is not None and sin_t is not None:
                    return q, cos_t, sin_t
    return None


def _narrow_of(node: RlxNode, source: str, start: int, length: int) -> bool:
    if op_variant(node.op) != "Narrow" or node.inputs[0] != source:
        return False
    p = node.op["Narrow"]
    return p["axis"] in (-1, len(node.dims) - 1) and p["start"] == start and p["len"] == length
