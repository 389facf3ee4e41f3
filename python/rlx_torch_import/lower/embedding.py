"""Embedding lookup as a Gather on the table's first axis."""

from __future__ import annotations

from .context import Builder, Call, Value
from .registry import lowers


@lowers("aten.embedding.default")
def embedding(b: Builder, call: Call) -> Value:
    """weight[indices] (padding_idx only matters for training)."""
    w, idx = call.tensor("weight"), call.tensor("indices")
    return b.emit({"Gather": {"axis": 0}}, [w, idx], call.out_dims, w.dtype)
