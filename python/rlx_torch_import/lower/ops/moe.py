"""Mixture-of-experts routing as Hugging Face's grouped-mm experts path exports it.

transformers sorts token/expert pairs by expert id (integer sort: `indexing.py`), counts
them (`histc`), takes the running sum as group ends, and calls its
`transformers::grouped_mm_fallback` custom op. With static shapes each piece has an exact
dense lowering; group boundaries stay runtime values.
"""

from __future__ import annotations

import numpy as np

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


def _check_histc(call: Call) -> str | None:
    lo, hi = call.get("min", 0), call.get("max", 0)
    if not lo < hi:
        return f"histc with min={lo} >= max={hi} takes its range from the data, which is not supported"
    return None


@lowers("aten.histc.default", check=_check_histc)
def histc(b: Builder, call: Call) -> Value:
    """Counts of x in `bins` equal-width bins over [min, max] (x == max lands in the last bin), in float32."""
    x = b.cast(call.tensor("self"), "float32")
    bins, lo, hi = int(call.get("bins", 100)), float(call["min"]), float(call["max"])
    flat = b.reshape(x, (x.numel, 1))
    inside = b.binary(
        "Mul",
        b.cast(b.compare("Ge", flat, b.const(lo, "float32")), "float32"),
        b.cast(b.compare("Le", flat, b.const(hi, "float32")), "float32"),
    )
    scaled = b.binary("Mul", b.binary("Sub", flat, b.const(lo, "float32")), b.const(bins / (hi - lo), "float32"))
    index = b.binary("Min", b.unary("Floor", scaled), b.const(float(bins - 1), "float32"))
    edges = b.const(np.arange(bins, dtype=np.float32).reshape(1, bins), "float32")
    onehot = b.cast(b.compare("Eq", index, edges), "float32")
    counts = b.reduce("Sum", b.binary("Mul", onehot, inside), [0], keep_dim=False)
    return b.cast(counts, call.out_dtype)


@lowers("transformers.grouped_mm_fallback.default")
def grouped_mm(b: Builder, call: Call) -> Value:
    """Row block [offs[e-1], offs[e]) of x times weight[e]: every expert on every row, masked, summed."""
    x, w, offs = call.positional
    t, e = x.dims[0], w.dims[0]
    every = b.matmul(b.reshape(x, (1, *x.dims)), w)  # [E, T, N]
    ends_flat = b.cast(offs, "float32")
    zero = b.const(np.zeros(1), "float32")
    starts_flat = (
        b.emit({"Concat": {"axis": 0}}, [zero, b.narrow(ends_flat, 0, 0, e - 1)], (e,), "float32") if e > 1 else zero
    )
    starts, ends = b.reshape(starts_flat, (e, 1)), b.reshape(ends_flat, (e, 1))
    rows = b.const(np.arange(t, dtype=np.float32).reshape(1, t), "float32")
    after_start = b.cast(b.compare("Ge", rows, starts), "float32")
    inside = b.binary("Mul", after_start, b.cast(b.compare("Lt", rows, ends), "float32"))
    masked = b.binary("Mul", every, b.cast(b.reshape(inside, (e, t, 1)), every.dtype))
    return b.reduce("Sum", masked, [0], keep_dim=False)
