"""Dtype conversions and graph-only bookkeeping ops (metadata asserts)."""

from __future__ import annotations

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


@lowers("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.type_as.default")
def to_dtype(b: Builder, call: Call) -> Value:
    """Cast to the dtype torch recorded for the result; device moves are no-ops for RLX."""
    return b.cast(call.tensor("self"), call.out_dtype)


@lowers("aten._assert_tensor_metadata.default")
def assert_tensor_metadata(b: Builder, call: Call) -> list[Value | None]:
    """A trace-time check torch already ran; it computes nothing."""
    return []
