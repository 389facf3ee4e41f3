"""Indexing and selection: advanced indexing (x[i, j]), topk, sort, argmax/argmin.

RLX returns TopK/ArgSort/ArgMax indices f32-encoded (exact below 2**24); they are
cast to int64 here, as a visible node.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import NARROW_DTYPES
from .context import Builder, Call, Value, norm_axis
from .registry import lowers


def _check_index(call: Call) -> str | None:
    if all(t is None for t in call["indices"]):
        return "indexing without any index tensor is not supported"
    for t in call["indices"]:
        if t is not None and getattr(t, "dtype", "") in ("bool", "uint8"):
            return "boolean-mask indexing has a data-dependent shape and is not supported"
    return None


def _non_negative(b: Builder, idx: Value, size: int) -> Value:
    """idx + size where idx < 0 (torch allows negative indices)."""
    idx = b.cast(idx, "int64")
    neg = b.cast(b.compare("Lt", idx, b.const(0, "int64")), "int64")
    return b.binary("Add", idx, b.binary("Mul", neg, b.const(size, "int64")))


@lowers("aten.index.Tensor", check=_check_index)
def index(b: Builder, call: Call) -> Value:
    """x[i0, i1, ...]: indexed axes merge into one, a flat index is computed, then one Gather."""
    x = call.tensor("self")
    slots = list(call["indices"]) + [None] * (x.rank - len(call["indices"]))
    axes = [a for a, t in enumerate(slots) if t is not None]
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    if not adjacent:  # torch puts the broadcast index dims first
        perm = axes + [a for a in range(x.rank) if a not in axes]
        x, slots = b.transpose(x, perm), [slots[a] for a in perm]
        axes = list(range(len(axes)))
    start, sizes = axes[0], [x.dims[a] for a in axes]
    bdims = tuple(np.broadcast_shapes(*(slots[a].dims for a in axes)))
    terms = []
    for a, stride in zip(axes, [math.prod(sizes[i + 1 :]) for i in range(len(sizes))], strict=True):
        term = _non_negative(b, slots[a], x.dims[a])
        terms.append(term if stride == 1 else b.binary("Mul", term, b.const(stride, "int64")))
    flat = terms[0]
    for term in terms[1:]:
        flat = b.binary("Add", flat, term)
    flat = b.expand(flat, bdims)
    merged = b.reshape(x, (*x.dims[:start], math.prod(sizes), *x.dims[start + len(axes) :]))
    out_dims = (*merged.dims[:start], *bdims, *merged.dims[start + 1 :])
    y = b.move({"Gather": {"axis": start}}, [merged, flat], out_dims, x.dtype)
    return b.reshape(y, call.out_dims)


def _check_float(call: Call) -> str | None:
    x = call["self"]
    if getattr(x, "dtype", "float32") not in ("float32", "float16", "bfloat16", "float64"):
        return f"{call.target} on {x.dtype} is not supported (float only)"
    return None


def _check_topk(call: Call) -> str | None:
    if getattr(call["self"], "dtype", "") == "float64":
        return "topk on float64 is not supported (RLX 0.2.17's TopK corrupts memory on float64 input)"
    return _check_float(call)


@lowers("aten.topk.default", check=_check_topk)
def topk(b: Builder, call: Call) -> list[Value | None]:
    """k largest (or smallest) along `dim`: RLX TopK gives indices, a gather gives values."""
    x = call.tensor("self")
    axis = norm_axis(call.get("dim", -1), x.rank)
    xt, back = b.to_last_axis(x, axis)
    keyed = xt if call.get("largest", True) else b.unary("Neg", xt)
    k = int(call["k"])
    dims = (*xt.dims[:-1], k)
    idx = b.emit({"TopK": {"k": k}}, [keyed], dims, "float32")
    values = b.emit({"GatherElements": {"axis": xt.rank - 1}}, [xt, idx], dims, x.dtype)
    return [b.transpose(values, back), b.transpose(b.cast(idx, "int64"), back)]


MAX_EXACT_SORT = 4096


def _check_sort(call: Call) -> str | None:
    x = call["self"]
    if x.dtype in ("float32", "float16", "bfloat16", "float64"):
        return None
    n = x.dims[norm_axis(call.get("dim", -1), x.rank)] if x.rank else 1
    if n > MAX_EXACT_SORT:
        return f"integer sort over {n} > {MAX_EXACT_SORT} elements is not supported (exact path is O(n^2))"
    return None


def _int_sort(b: Builder, call: Call) -> list[Value | None]:
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


@lowers("aten.sort.default", "aten.sort.stable", check=_check_sort)
def sort(b: Builder, call: Call) -> list[Value | None]:
    """Sorted values and the permutation indices along `dim` (integers: exact counting sort)."""
    x = call.tensor("self")
    if x.dtype not in ("float32", "float16", "bfloat16", "float64"):
        return _int_sort(b, call)
    axis = norm_axis(call.get("dim", -1), x.rank)
    desc = bool(call.get("descending", False))
    values = b.emit({"Sort": {"axis": axis, "descending": desc}}, [x], x.dims, x.dtype)
    idx = b.emit({"ArgSort": {"axis": axis, "descending": desc}}, [x], x.dims, "float32")
    return [values, b.cast(idx, "int64")]


def _arg(op: str):  # noqa: ANN202 - factory returning a lowering
    def lower_arg(b: Builder, call: Call) -> Value:
        x = call.tensor("self")
        dim = call.get("dim")
        if dim is None:
            x, axis, keep = b.reshape(x, (x.numel,)), 0, False
        else:
            axis, keep = norm_axis(dim, x.rank), bool(call.get("keepdim", False))
        _, idx = b.arg_extreme(op, x, axis, keep)
        return b.reshape(idx, call.out_dims)

    lower_arg.__name__ = f"arg{op.lower()}"
    lower_arg.__doc__ = f"Index of the first {'largest' if op == 'Max' else 'smallest'} element along `dim`."
    return lower_arg


lowers("aten.argmax.default")(_arg("Max"))
lowers("aten.argmin.default")(_arg("Min"))


WIDE_INTS = ("int32", "int64")
MAX_ONE_HOT = 1 << 22  # integer scatter-add runs as a [rows, count] one-hot matmul


def _accumulate_ints(b: Builder, data: Value, flat: Value, updates: Value) -> Value:
    """data[flat[i]] += updates[i] for int32/int64, exactly: RLX's scatters corrupt wide integers and its
    float64 ScatterND add is wrong, so the sums are float64 one-hot matmuls of the two float32-exact
    halves of the updates (Builder.split24), recombined in int64 (exact while |values| < 2**48)."""
    rows, count = data.dims[0], flat.dims[0]
    width = math.prod(data.dims[1:])
    positions = b.expand(b.const(np.arange(rows).reshape(rows, 1), "int64"), (rows, count))
    one_hot = b.cast(b.compare("Eq", positions, b.expand(b.reshape(flat, (1, count)), (rows, count))), "float64")
    halves = b.split24(b.reshape(updates, (count, width)))
    hi, lo = (b.cast(b.matmul(one_hot, b.cast(h, "float64")), "int64") for h in halves)
    total = b.binary("Add", b.binary("Mul", hi, b.const(1 << 24, "int64")), lo)
    return b.cast(b.binary("Add", b.reshape(b.cast(data, "int64"), (rows, width)), total), data.dtype)


def _check_index_put(call: Call) -> str | None:
    reason = _check_index(call)
    if reason:
        return reason
    x = call["self"]
    if call.get("accumulate", False) and getattr(x, "dtype", "") in WIDE_INTS:
        count = math.prod(np.broadcast_shapes(*(t.dims for t in call["indices"] if t is not None)))
        if count * math.prod(t for t, i in zip(x.dims, call["indices"], strict=False) if i is not None) > MAX_ONE_HOT:
            return f"integer index_put with accumulate=True is exact only up to {MAX_ONE_HOT} index x row pairs"
    return None


@lowers("aten.index_put.default", check=_check_index_put)
def index_put(b: Builder, call: Call) -> Value:
    """x[.., i0, i1, ..] = values (or += with accumulate): indexed axes moved first, one ScatterND, moved back."""
    x = call.tensor("self")
    slots = list(call["indices"]) + [None] * (x.rank - len(call["indices"]))
    axes = [a for a, t in enumerate(slots) if t is not None]
    perm = axes + [a for a in range(x.rank) if a not in axes]
    bdims = tuple(np.broadcast_shapes(*(slots[a].dims for a in axes)))
    values = _values_leading(b, call.tensor("values"), x, axes, bdims)
    leading = b.transpose(x, perm)
    y = _scatter_leading(b, leading, [slots[a] for a in axes], values, bool(call.get("accumulate", False)))
    return b.transpose(y, [perm.index(a) for a in range(x.rank)])


def _values_leading(b: Builder, values: Value, x: Value, axes: list[int], bdims: tuple[int, ...]) -> Value:
    """`values` broadcast to torch's layout (index dims in place of adjacent indexed axes, else
    first), then transposed to [*index dims, *unindexed axes]."""
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    start = axes[0] if adjacent else 0
    rest = [d for a, d in enumerate(x.dims) if a not in axes]
    dims = (*rest[:start], *bdims, *rest[start:])
    v = b.expand(b.cast(values, x.dtype), dims)
    k = len(bdims)
    return b.transpose(v, [*range(start, start + k), *range(start), *range(start + k, len(dims))])


def _scatter_leading(b: Builder, x: Value, slots: list[Value], values: Value, accumulate: bool) -> Value:
    """index_put on the leading len(slots) axes: they merge into one, a flat index, one ScatterND."""
    k = len(slots)
    sizes = list(x.dims[:k])
    terms = []
    for a, t in enumerate(slots):
        term = _non_negative(b, t, sizes[a])
        stride = math.prod(sizes[a + 1 :])
        terms.append(term if stride == 1 else b.binary("Mul", term, b.const(stride, "int64")))
    flat = terms[0]
    for term in terms[1:]:
        flat = b.binary("Add", flat, term)
    bdims = values.dims[: values.rank - (x.rank - k)]
    count = math.prod(bdims)
    flat = b.reshape(b.expand(flat, bdims), (count, 1))
    rest = x.dims[k:]
    merged = b.reshape(x, (math.prod(sizes), *rest))
    updates = b.reshape(values, (count, *rest))
    op = {"ScatterNd": {"reduction": "Add" if accumulate else "None"}}
    if x.dtype in WIDE_INTS and accumulate:
        y = b.reshape(_accumulate_ints(b, merged, flat, updates), merged.dims)
    elif x.dtype in WIDE_INTS:
        y = b.move_int(op, [merged, flat, updates], [0, 2], merged.dims, x.dtype)
    else:
        y = b.move(op, [merged, flat, updates], merged.dims, x.dtype)
    return b.reshape(y, x.dims)


_SCATTER_REDUCE = {"sum": "Add", "prod": "Mul", "amax": "Max", "amin": "Min"}


def _check_scatter(call: Call) -> str | None:
    reduce = call.get("reduce")
    if getattr(call["self"], "dtype", "") in WIDE_INTS and (call.target != "aten.scatter.src" or reduce):
        if call.target not in ("aten.scatter.src", "aten.scatter.value"):
            return f"{call.target} on integer tensors is not supported"
    if call.target == "aten.scatter_reduce.two":
        if reduce not in _SCATTER_REDUCE:
            return f"scatter_reduce with reduce={reduce!r} is not supported"
        if not call.get("include_self", True):
            return "scatter_reduce with include_self=False is not supported"
    elif reduce is not None:
        return f"scatter with reduce={reduce!r} is not supported"
    return None


@lowers(
    "aten.scatter.src",
    "aten.scatter.value",
    "aten.scatter_add.default",
    "aten.scatter_reduce.two",
    check=_check_scatter,
)
def scatter(b: Builder, call: Call) -> Value:
    """out = self; out[... index[i][j] ...] (op)= src[i][j] along `dim` (ScatterElements)."""
    x, index = call.tensor("self"), b.cast(call.tensor("index"), "float32")
    axis = norm_axis(call["dim"], x.rank)
    src = call.get("src")
    if src is None:  # scatter.value: a scalar broadcast to the index shape
        src = b.expand(b.const(call["value"], x.dtype), index.dims)
    src = b.narrow_to(b.cast(src, x.dtype), index.dims) if src.dims != index.dims else b.cast(src, x.dtype)
    if call.target == "aten.scatter_add.default":
        reduction = "Add"
    elif call.target == "aten.scatter_reduce.two":
        reduction = _SCATTER_REDUCE[call["reduce"]]
    else:
        reduction = "None"
    op = {"ScatterElements": {"axis": axis, "reduction": reduction}}
    if x.dtype in WIDE_INTS:
        return b.move_int(op, [x, index, src], [0, 2], x.dims, x.dtype)
    return b.move(op, [x, index, src], x.dims, x.dtype)


# ── masked_scatter ───────────────────────────────────────────────────────

F32_EXACT = 1 << 24


def _check_masked_scatter(call: Call) -> str | None:
    n = math.prod(call.out_dims)
    if n > F32_EXACT:
        return f"masked_scatter over {n} > 2**24 elements is not supported (float32 running count)"
    return None


@lowers("aten.masked_scatter.default", check=_check_masked_scatter)
def masked_scatter(b: Builder, call: Call) -> Value:
    """out = self, with the True positions of mask (broadcast) filled by source in row-major order.

    The k-th True position takes source.flat[k]: k is the running count of the flattened
    mask minus one (a float32 Cumsum, exact below 2**24), read by one Gather.
    """
    x, source = call.tensor("self"), call.tensor("source")
    dims, dtype = call.out_dims, call.out_dtype
    n = math.prod(dims)
    if source.numel == 0:  # then the mask has no True position
        return b.expand(b.cast(x, dtype), dims)
    mask = b.reshape(b.expand(call.tensor("mask"), dims), (n,))
    count = b.emit({"Cumsum": {"axis": -1, "exclusive": False}}, [b.cast(mask, "float32")], (n,), "float32")
    k = b.binary("Max", b.binary("Sub", count, b.const(1.0, "float32")), b.const(0.0, "float32"))
    flat_src = b.reshape(b.cast(source, dtype), (source.numel,))
    taken = b.move({"Gather": {"axis": 0}}, [flat_src, b.cast(k, "int64")], (n,), dtype)
    compute = "float32" if dtype in NARROW_DTYPES else dtype  # Where moves bool/narrow values wrongly
    flat_x = b.reshape(b.expand(b.cast(x, compute), dims), (n,))
    out = b.emit("Where", [mask, b.cast(taken, compute), flat_x], (n,), compute)
    return b.reshape(b.cast(out, dtype), dims)
