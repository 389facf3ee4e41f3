"""torch prims that decompositions (torch._refs) leave in a graph: iota, collapse, convert_element_type, div.

torch.export keeps a `prims.*` call as it is at every level (prims have no decomposition), and the
automatic decomposition fallback accepts a decomposition that emits only prims registered here.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import FLOAT_DTYPES
from ...errors import InputError
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


@lowers("prims.iota.default")
def iota(b: Builder, call: Call) -> Value:
    """start + i * step for i < length, in the requested (integer) dtype, computed exactly in int64."""
    start, step, dtype, n = call["start"], call["step"], call.out_dtype, call.out_dims[0]
    length = n
    if b.provenance.node in b.program.size_dependent:  # one table over the dim's maximum, narrowed per size
        bounds = b.program.size_bounds.get(call.node.outputs[0].name)
        if bounds is None:
            raise InputError(
                f"iota at node {call.node.name} has a length that depends on a dynamic dim with no maximum",
                hint="give the Dim a max (torch.export.Dim(name, max=...)) so the range can be precomputed",
            )
        length = max(bounds[0], n) + 1
    values = np.int64(start) + np.arange(length, dtype=np.int64) * np.int64(step)
    return b.narrow(b.const(values, dtype), 0, 0, n)


@lowers("prims.collapse.default")
def collapse(b: Builder, call: Call) -> Value:
    """Axes start..end (inclusive) merged into one, row-major (a reshape to torch's recorded shape)."""
    return b.reshape(call.tensor("a"), call.out_dims)


@lowers("prims.convert_element_type.default")
def convert_element_type(b: Builder, call: Call) -> Value:
    """Cast to `dtype` (as torch's conversion: float -> int truncates, nonzero -> True)."""
    return b.cast(call.tensor("a"), call.out_dtype)


@lowers("prims.div.default")
def div(b: Builder, call: Call) -> Value:
    """self / other: true division for floating point, truncating division for integers (C semantics)."""
    x, y, dtype = call["self"], call["other"], call.out_dtype
    x = x if isinstance(x, Value) else b.const(x, dtype)
    y = y if isinstance(y, Value) else b.const(y, dtype)
    if dtype in FLOAT_DTYPES:
        return b.binary("Div", b.cast(x, dtype), b.cast(y, dtype), dtype)
    return b.cast(b.binary("Div", b.cast(x, "int64"), b.cast(y, "int64")), dtype)
