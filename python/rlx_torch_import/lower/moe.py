"""Mixture-of-experts routing as Hugging Face's grouped-mm experts path exports it.

transformers sorts token/expert pairs by expert id, counts them (`histc`), takes the
running sum as group ends, and calls its `transformers::grouped_mm_fallback` custom op.
With static shapes each piece has an exact dense lowering; group boundaries stay runtime
values.
"""

from __future__ import annotations

import numpy as np

from .context import Builder, Call, Value, norm_axis
from .registry import lowers

MAX_EXACT_SORT = 4096


def _check_int_sort(call: Call) -> str | None:
    x = call["self"]
    if x.dtype in ("float32", "float16", "bfloat16", "float64"):
        return None
    n = x.dims[norm_axis(call.get("dim", -1), x.rank)] if x.rank else 1
    if n > MAX_EXACT_SORT:
        return f"integer sort over {n} > {MAX_EXACT_SORT} elements is not supported (exact path is O(n^2))"
    return None


def int_sort(b: Builder, call: Call) -> list[Value | None]:
    """Exact stable integer sort by counting: rank_i = #{x_j < x_i} + #{j < i: x_j == x_i}.

    RLX's Sort/ArgSort are inexact for integers above 2**24 (float32) and wrong in float64,
    so keys are split into two float32-exact halves (exact while |x| < 2**48) and ranked by
    lexicographic comparison; the permutation is the scatter of positions to ranks.
    """
    x = call.tensor("self")
    axis = norm_axis(call.get("dim", -1), x.rank)
    desc = bool(call.get("descending", False))
    xt, back = b.to_last_axis(x, axis)
    n = xt.dims[-1]
    key = b.unary("Neg", b.cast(xt, "int64")) if desc else xt
    hi, lo = b.split24(key)

    def pair(v: Value) -> tuple[Value, Value]:
        return b.reshape(v, (*xt.dims, 1)), b.reshape(v, (*xt.dims[:-1], 1, n))  # (x_i, x_j)

    (hi_i, hi_j), (lo_i, lo_j) = pair(hi), pair(lo)

    def f(v: Value) -> Value:
        return b.cast(v, "float32")

    hi_eq = f(b.compare("Eq", hi_j, hi_i))
    less = b.binary("Add", f(b.compare("Lt", hi_j, hi_i)), b.binary("Mul", hi_eq, f(b.compare("Lt", lo_j, lo_i))))
    equal = b.binary("Mul", hi_eq, f(b.compare("Eq", lo_j, lo_i)))
    earlier = b.const(np.tril(np.ones((n, n)), -1), "float32")  # j < i
    rank = b.reduce("Sum", b.binary("Add", less, b.binary("Mul", equal, earlier)), [xt.rank], keep_dim=False)
    # Permutation: order[rank_i] = i (float32 is exact: n <= MAX_EXACT_SORT).
    positions = b.expand(b.const(np.arange(n, dtype=np.float32), "float32"), xt.dims)
    op = {"ScatterElements": {"axis": xt.rank - 1, "reduction": "None"}}
    order = b.emit(op, [positions, rank, positions], xt.dims, "float32")
    # Values: one Gather on the flattened rows with int64 flat indices (exact for any int64 data).
    lead = xt.numel // n
    flat_idx = b.binary(
        "Add",
        b.cast(order, "int64"),
        b.const((np.arange(lead, dtype=np.int64) * n).reshape(*xt.dims[:-1], 1), "int64"),
    )
    values = b.emit({"Gather": {"axis": 0}}, [b.reshape(xt, (xt.numel,)), flat_idx], xt.dims, x.dtype)
    return [b.transpose(values, back), b.transpose(b.cast(order, "int64"), back)]


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
