"""Embedding lookup as a Gather on the table's first axis (a table quantized at conversion: a gather of its
packed codes and scales, dequantized after); embedding bags as masked matmul / max."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import F32_EXACT
from ...program import QuantizedTable
from ...quant.schemes import BLOCK, SCHEMES, WORD_BYTES, table_words
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


@lowers("aten.embedding.default", kind="movement")
def embedding(b: Builder, call: Call) -> Value:
    """weight[indices] (padding_idx only matters for training)."""
    w, idx = call.tensor("weight"), call.tensor("indices")
    scheme, listed = b.quantized
    if w.id in listed and b.is_param(w) and w.dtype == "float32" and w.rank == 2 and w.dims[1] % BLOCK == 0:
        return _quantized_rows(b, w, idx, scheme, call.out_dims)
    return b.emit({"Gather": {"axis": 0}}, [w, idx], call.out_dims, w.dtype)


def _quantized_rows(b: Builder, w: Value, idx: Value, scheme_name: str, out_dims: tuple[int, ...]) -> Value:
    """The rows of a table quantized at conversion (`--quantize`; `quant.schemes.table_parts`): gather the rows'
    int64 words of code bytes and their block scales (stored float16, bound widened to float32: exact), take
    the bytes out of each word by floor division by 256 (exact int64; RLX's division truncates, so a negative
    remainder borrows 256), then codes * scale in float32, the values `quant.schemes.dequantize` gives (the
    reference's). Output: float32 [*idx.dims, D]."""
    scheme = SCHEMES[scheme_name]
    (rows, dim), lead, blocks = w.dims, idx.dims, w.dims[1] // BLOCK
    words = table_words(dim, scheme)
    word_table = b.derived_param(
        f"{w.id}.{scheme.rlx}.words", QuantizedTable(w.id, scheme.rlx, "words", (rows, dim)), (rows, words), "int64"
    )
    scale_table = b.derived_param(
        f"{w.id}.{scheme.rlx}.scales", QuantizedTable(w.id, scheme.rlx, "scales", (rows, dim)), (rows, blocks)
    )
    picked = b.emit({"Gather": {"axis": 0}}, [word_table, idx], (*lead, words), "int64")
    scales = b.emit({"Gather": {"axis": 0}}, [scale_table, idx], (*lead, blocks), "float32")
    base, zero, rest, parts = b.const(256, "int64"), b.const(0, "int64"), picked, []
    for _ in range(WORD_BYTES):  # little end first
        high = b.binary("Div", rest, base)
        low = b.binary("Sub", rest, b.binary("Mul", high, base))  # in (-256, 256), the sign of rest
        borrow = b.cast(b.compare("Lt", low, zero), "int64")
        parts.append(b.reshape(b.binary("Add", low, b.binary("Mul", borrow, base)), (*lead, words, 1)))
        rest = b.binary("Sub", high, borrow)
    stream = b.emit({"Concat": {"axis": len(lead) + 1}}, parts, (*lead, words, WORD_BYTES), "int64")
    row_bytes = dim if scheme.bits == 8 else dim // 2
    code_bytes = b.cast(b.narrow(b.reshape(stream, (*lead, words * WORD_BYTES)), len(lead), 0, row_bytes), "float32")
    if scheme.bits == 8:
        codes = b.reshape(b.binary("Sub", code_bytes, b.const(128.0, "float32")), (*lead, blocks, BLOCK))
    else:  # Q4_0 bytes: element i of a block in the low nibble of byte i, element i + 16 in the high one
        packed = b.reshape(code_bytes, (*lead, blocks, BLOCK // 2))
        high_nibble = b.unary("Floor", b.binary("Mul", packed, b.const(1 / 16, "float32")))
        low_nibble = b.binary("Sub", packed, b.binary("Mul", high_nibble, b.const(16.0, "float32")))
        nibbles = b.emit(
            {"Concat": {"axis": len(lead) + 1}}, [low_nibble, high_nibble], (*lead, blocks, BLOCK), "float32"
        )
        codes = b.binary("Sub", nibbles, b.const(8.0, "float32"))
    values = b.binary("Mul", codes, b.reshape(scales, (*lead, blocks, 1)))
    return b.reshape(values, out_dims)


# ── embedding bags ───────────────────────────────────────────────────────

_MODES = {0: "sum", 1: "mean", 2: "max"}


def _check_bag(call: Call) -> str | None:
    idx, offsets, mode = call["indices"], call["offsets"], call.get("mode", 0)
    if mode not in _MODES:
        return f"embedding_bag mode={mode} is not supported"
    if getattr(idx, "rank", 1) != 1 or getattr(offsets, "rank", 1) != 1:
        return "embedding_bag with non-1-D indices/offsets is not supported (torch flattens 2-D input first)"
    if getattr(idx, "numel", 1) >= F32_EXACT:
        return "embedding_bag with 2**24 or more indices is not supported (positions are compared in float32)"
    return None


def _membership(b: Builder, offsets: Value, n: int, include_last: bool) -> Value:
    """float32 [B, n]: 1 where position i lies in bag b = [offsets[b], offsets[b + 1]) (the last bag ends at n
    unless include_last_offset). Offsets are a runtime tensor, so membership is computed by compares.

    The same nodes serve every n (a dynamic index count): positions are a running count of ones, and the
    last bag's end is +inf (every position is below n)."""
    off = b.cast(offsets, "float32")  # exact: positions < 2**24
    bags = off.dims[0] - 1 if include_last else off.dims[0]
    starts = b.narrow(off, 0, 0, bags)
    if include_last:
        ends = b.narrow(off, 0, 1, bags)
    else:
        tail = b.const(np.array([math.inf]), "float32")
        ends = (
            tail
            if bags == 1
            else b.emit({"Concat": {"axis": 0}}, [b.narrow(off, 0, 1, bags - 1), tail], (bags,), "float32")
        )
    ones = b.expand(b.const(1.0, "float32"), (n,))
    count = b.emit({"Cumsum": {"axis": -1, "exclusive": False}}, [ones], (n,), "float32")
    pos = b.expand(b.reshape(b.binary("Sub", count, b.const(1.0, "float32")), (1, n)), (bags, n))
    after = b.compare("Ge", pos, b.expand(b.reshape(starts, (bags, 1)), (bags, n)))
    before = b.compare("Lt", pos, b.expand(b.reshape(ends, (bags, 1)), (bags, n)))
    return b.binary("Mul", b.cast(after, "float32"), b.cast(before, "float32"))


def _bag_max(b: Builder, weights: Value, rows: Value, count: Value) -> Value:
    """max over each bag's rows ([B, n] 0/1 weights, [n, D] rows); an empty bag gives 0."""
    bags, n, d = weights.dims[0], rows.dims[0], rows.dims[1]
    inside = b.expand(b.reshape(b.compare("Gt", weights, b.const(0.0, "float32")), (bags, n, 1)), (bags, n, d))
    lowest = b.expand(b.const(-math.inf, rows.dtype), (bags, n, d))
    picked = b.emit(
        "Where", [inside, b.expand(b.reshape(rows, (1, n, d)), (bags, n, d)), lowest], (bags, n, d), rows.dtype
    )
    best = b.reduce("Max", picked, [1], keep_dim=False)
    nonempty = b.expand(b.compare("Gt", count, b.const(0.0, "float32")), (bags, d))
    return b.emit("Where", [nonempty, best, b.expand(b.const(0.0, rows.dtype), (bags, d))], (bags, d), rows.dtype)


@lowers(
    "aten._embedding_bag.default",
    "aten._embedding_bag_forward_only.default",
    "aten.embedding_bag.padding_idx",
    check=_check_bag,
)
def embedding_bag(b: Builder, call: Call) -> list[Value | None]:
    """Sum (optionally per-sample weighted), mean or max of each bag's weight[indices], padding_idx skipped.

    Empty bags give 0. Only the first output is produced (offset2bag/bag_size/max_indices serve the backward)."""
    w, idx = call.tensor("weight"), call.tensor("indices")
    n, mode = idx.dims[0], _MODES[call.get("mode", 0)]
    rows = b.emit({"Gather": {"axis": 0}}, [w, idx], (n, w.dims[1]), w.dtype)
    weights = _membership(b, call.tensor("offsets"), n, bool(call.get("include_last_offset", False)))
    padding_idx = call.get("padding_idx", -1)
    if padding_idx >= 0:
        keep = b.cast(
            b.compare("Ne", b.reshape(b.cast(idx, "int64"), (1, n)), b.const(padding_idx, "int64")), "float32"
        )
        weights = b.binary("Mul", weights, keep)
    if mode == "max":
        return [_bag_max(b, weights, rows, b.reduce("Sum", weights, [1], keep_dim=True)), None, None, None]
    scaled = b.cast(weights, w.dtype)
    if call.get("per_sample_weights") is not None:
        scaled = b.binary("Mul", scaled, b.reshape(b.cast(call.tensor("per_sample_weights"), w.dtype), (1, n)))
    out = b.matmul(scaled, rows)
    if mode == "mean":
        count = b.reduce("Sum", weights, [1], keep_dim=True)
        out = b.binary("Div", out, b.cast(b.binary("Max", count, b.const(1.0, "float32")), w.dtype))
    return [out, None, None, None]
