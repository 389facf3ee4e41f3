"""The one home for RLX workarounds: every node a lowering emits passes through `route`.

Op families express torch semantics only and emit plain RLX ops through `Builder.emit`.
`route` looks at the op kind and its operands' dtypes and, where `defects.py` lists a defect
for that combination, builds the same result from kernels that are right (`exact.py`);
otherwise it appends the raw node. `audit` checks a finished program against every
defect's `hits`, so a raw op on a known-defect path is an internal error, never a wrong
number. `RlxLimit` is raised where no exact route exists (the registry reports it as an
unsupported op use, with the node).

The layer's modules: this one (`route`, constants), the rules by op group
(`rules_elementwise.py`, `rules_movement.py`, `rules_compute.py`, sharing `routing.py`),
the graph boundary (`boundary.py`) and `audit.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...dtypes import HALF_DTYPES, NARROW_DTYPES, numpy_dtype, round_half
from . import rules_compute, rules_elementwise, rules_movement
from .routing import kind_of

if TYPE_CHECKING:
    from ..builder import Builder
    from ..call import Value

_RULES = {**rules_elementwise.RULES, **rules_movement.RULES, **rules_compute.RULES}


def route(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """Emit `op` (result `dims`, torch-ir `dtype`) so that no known RLX defect is on its path."""
    rule = _RULES.get(kind_of(op))
    return rule(b, op, inputs, dims, dtype) if rule else b.raw(op, inputs, dims, dtype)


def constant(b: Builder, array: Any, dtype: str) -> Value:
    """A Constant of `dtype`; bool/narrow integers are stored as float32 and cast (constant-narrow)."""
    if dtype in NARROW_DTYPES:
        return b.cast(constant(b, np.asarray(array).astype(np.float32), "float32"), dtype)
    arr = np.asarray(array)
    arr = round_half(arr, dtype) if dtype in HALF_DTYPES else arr.astype(numpy_dtype(dtype))
    data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    return b.raw({"Constant": {"data": list(data)}}, [], arr.shape, dtype)
