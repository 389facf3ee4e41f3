"""Ops whose result size depends on tensor values: nonzero, masked_select, unique, bincount,
repeat_interleave with tensor repeats (docs/design.md, decision ax).

Each is lowered at a concrete result size (the size a size stage computed, `lower.stages`), and no
constant depends on that size (`_common.iota`, `_common.true_positions`), so RLX generalizes the
program over it as over a dynamic dim. The boolean-mask form of `x[mask]` lives with advanced
indexing (`indexing.py`).
"""

from __future__ import annotations

import math

import numpy as np

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ._common import iota, positions_fit, true_positions

# bincount and repeat_interleave compare every output slot with every input element.
MAX_PAIRS = 1 << 24


def _truth(b: Builder, x: Value) -> Value:
    """x != 0, flattened (bool)."""
    flat = b.reshape(x, (x.numel,))
    return flat if x.dtype == "bool" else b.compare("Ne", flat, b.const(0, x.dtype))


def _check_nonzero(call: Call) -> str | None:
    if call["self"].rank == 0:
        return "nonzero of a 0-d tensor is not supported"
    return positions_fit(call["self"].numel)


@lowers("aten.nonzero.default", "aten.argwhere.default", check=_check_nonzero, kind="movement")
def nonzero(b: Builder, call: Call) -> Value:
    """[count, rank] int64 coordinates of the nonzero elements in row-major order (torch.nonzero; argwhere,
    which the `aten` level keeps, is the same):
    their flat positions (`true_positions`) unravelled by integer division."""
    x = call.tensor("self")
    count = call.out_dims[0]
    flat = true_positions(b, _truth(b, x), count)
    coords = []
    for a, dim in enumerate(x.dims):
        stride = math.prod(x.dims[a + 1 :])
        c = b.binary("Div", flat, b.const(stride, "int64")) if stride != 1 else flat
        if a > 0:
            c = b.binary("Sub", c, b.binary("Mul", b.binary("Div", c, b.const(dim, "int64")), b.const(dim, "int64")))
        coords.append(b.reshape(c, (count, 1)))
    if len(coords) == 1:
        return coords[0]
    return b.emit({"Concat": {"axis": 1}}, coords, (count, x.rank), "int64")


def _check_masked_select(call: Call) -> str | None:
    return positions_fit(math.prod(call["self"].dims) * math.prod(call["mask"].dims))


@lowers("aten.masked_select.default", check=_check_masked_select, kind="movement")
def masked_select(b: Builder, call: Call) -> Value:
    """The elements of self where mask (both broadcast) is True, in row-major order: a Gather at the
    True positions."""
    x, mask = call.tensor("self"), call.tensor("mask")
    dims = tuple(np.broadcast_shapes(x.dims, mask.dims))
    n = math.prod(dims)
    flat_x = b.reshape(b.expand(x, dims), (n,))
    at = true_positions(b, _truth(b, b.expand(mask, dims)), call.out_dims[0])
    return b.emit({"Gather": {"axis": 0}}, [flat_x, at], call.out_dims, x.dtype)


def _check_unique(call: Call) -> str | None:
    if call["self"].numel < 2:
        return "unique of fewer than 2 elements is not supported"
    if call.get("return_inverse", False) and (pairs := call["self"].numel ** 2) > MAX_PAIRS:
        return f"return_inverse: {pairs} > {MAX_PAIRS} element x distinct value pairs (a dense compare)"
    return positions_fit(call["self"].numel)


@lowers("aten._unique2.default", check=_check_unique, kind="movement")
def unique(b: Builder, call: Call) -> list[Value | None]:
    """The distinct values in ascending order (torch.unique on CPU sorts whether or not `sorted`): a Sort,
    then the first element of each run of equal values (its neighbour before it differs). `return_inverse`:
    for each element, how many distinct values are below it (a dense compare, summed in float32: exact);
    `return_counts`: the distance from each run's first position to the next one's (or to n)."""
    x = call.tensor("self")
    n, count = x.numel, call.out_dims[0]
    ordered = b.emit({"Sort": {"axis": 0, "descending": False}}, [b.reshape(x, (n,))], (n,), x.dtype)
    differ = b.compare("Ne", b.narrow(ordered, 0, 1, n - 1), b.narrow(ordered, 0, 0, n - 1))
    first = b.emit({"Concat": {"axis": 0}}, [b.const(np.array([True]), "bool"), differ], (n,), "bool")
    at = true_positions(b, first, count)
    values = b.emit({"Gather": {"axis": 0}}, [ordered, at], call.out_dims, x.dtype)
    inverse = counts = None
    if call.get("return_inverse", False):
        pairs = (n, count)
        below = b.compare("Lt", b.expand(b.reshape(values, (1, count)), pairs), b.expand(b.reshape(x, (n, 1)), pairs))
        total = b.reduce("Sum", b.cast(below, "float32"), [1], False)
        inverse = b.reshape(b.cast(total, "int64"), x.dims)
    if call.get("return_counts", False):
        starts = b.cast(at, "float32")  # positions below 2**23 (`positions_fit`): exact
        ends = [b.narrow(starts, 0, 1, count - 1), b.const(np.array([n], dtype=np.float32), "float32")]
        ends_at = b.emit({"Concat": {"axis": 0}}, ends, (count,), "float32")
        counts = b.cast(b.binary("Sub", ends_at, starts), "int64")
    return [values, inverse, counts]


def _check_pairs(call: Call, name: str) -> str | None:
    pairs = math.prod(call.out_dims) * call[name].numel
    if pairs > MAX_PAIRS:
        return f"{pairs} > {MAX_PAIRS} output x input pairs (each output slot is a dense compare against every input)"
    return None


def _check_bincount(call: Call) -> str | None:
    return _check_pairs(call, "self")


@lowers("aten.bincount.default", check=_check_bincount)
def bincount(b: Builder, call: Call) -> Value:
    """counts[j] = number of x == j (or the sum of their weights), j < the size a stage computed
    (max(x) + 1, at least minlength): one compare of an iota column against x, summed per row."""
    x = call.tensor("self")
    (length,) = call.out_dims
    n = x.numel
    hit = b.compare("Eq", b.reshape(iota(b, length), (length, 1)), b.reshape(b.cast(x, "int64"), (1, n)))
    weights = call.get("weights")
    dtype = call.out_dtype
    if weights is None:
        per = b.cast(hit, "int64")
    else:
        w = b.expand(b.reshape(b.cast(weights, dtype), (1, n)), (length, n))
        per = b.emit("Where", [hit, w, b.expand(b.const(0, dtype), (length, n))], (length, n), dtype)
    return b.reshape(b.reduce("Sum", per, [1], keep_dim=False), (length,))


def _check_repeat_interleave(call: Call) -> str | None:
    return _check_pairs(call, "repeats")


def _repeated_index(b: Builder, repeats: Value, length: int) -> Value:
    """The index i repeated repeats[i] times, for each i in order ([length] int64, length = sum(repeats)):
    slot j takes the number of running totals of repeats that are <= j."""
    n = repeats.numel
    ends = b.emit(
        {"Cumsum": {"axis": -1, "exclusive": False}}, [b.cast(b.reshape(repeats, (n,)), "int64")], (n,), "int64"
    )
    hit = b.compare("Le", b.reshape(ends, (1, n)), b.reshape(iota(b, length), (length, 1)))
    return b.reshape(b.reduce("Sum", b.cast(hit, "int64"), [1], keep_dim=False), (length,))


@lowers("aten.repeat_interleave.Tensor", check=_check_repeat_interleave)
def repeat_interleave(b: Builder, call: Call) -> Value:
    """torch.repeat_interleave(repeats): each index i, repeats[i] times ([sum(repeats)] int64)."""
    return _repeated_index(b, call.tensor("repeats"), call.out_dims[0])


def _check_repeat_rows(call: Call) -> str | None:
    if call["repeats"].numel == 1:
        return "repeat_interleave with one tensor repeat (a size that is the repeat times the length) is not supported"
    return _check_pairs(call, "repeats")


@lowers("aten.repeat_interleave.self_Tensor", check=_check_repeat_rows, kind="movement")
def repeat_interleave_rows(b: Builder, call: Call) -> Value:
    """torch.repeat_interleave(x, repeats, dim): slice i along `dim` (x flattened when dim is None), repeats[i]
    times: one Gather of the repeated index (`_repeated_index`)."""
    x, dim = call.tensor("self"), call.get("dim")
    if dim is None:
        x, axis = b.reshape(x, (x.numel,)), 0
    else:
        axis = dim % x.rank
    at = _repeated_index(b, call.tensor("repeats"), call.out_dims[axis])
    return b.emit({"Gather": {"axis": axis}}, [x, at], call.out_dims, x.dtype)
