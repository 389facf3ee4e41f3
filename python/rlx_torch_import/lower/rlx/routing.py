"""What every rule of the workaround layer shares: the exception for a missing route and the
helpers that read an op's kind and a value's RLX dtype, or run an op in a wider carrier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...dtypes import compute_rlx
from ...program import op_name

if TYPE_CHECKING:
    from ..builder import Builder
    from ..call import Value


class RlxLimit(Exception):
    """No exact route exists for this op on these operands (the reason says why)."""


def rlx_of(v: Value) -> str:
    return compute_rlx(v.dtype)


def kind_of(op: Any) -> str:
    return op_name(op).split(".")[0]


def via(
    b: Builder, op: Any, inputs: list[Value], data: tuple[int, ...], dims: tuple[int, ...], dtype: str, carrier: str
) -> Value:
    """The op on data operands (positions `data`, and the result) cast to `carrier`, then cast back."""
    moved = [b.cast(v, carrier) if i in data else v for i, v in enumerate(inputs)]
    return b.cast(b.emit(op, moved, dims, carrier), dtype)
