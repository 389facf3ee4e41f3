"""Shape and layout ops: view/reshape, permute/transpose, expand, slicing, concat, identities, strided views."""

from __future__ import annotations

import numpy as np

from .context import Builder, Call, Value, norm_axis
from .registry import lowers


@lowers(
    "aten.view.default",
    "aten.reshape.default",
    "aten._unsafe_view.default",
    "aten.flatten.using_ints",
    "aten.unflatten.int",
    "aten.unsqueeze.default",
    "aten.squeeze.dim",
    "aten.squeeze.dims",
    "aten.squeeze.default",
)
def reshape(b: Builder, call: Call) -> Value:
    """Row-major reshape to the shape torch recorded (so -1 and squeezes are already resolved)."""
    return b.reshape(call.tensor("self"), call.out_dims)


def _check_dropout(call: Call) -> str | None:
    """Training-mode dropout with 0 < p < 1 draws a random mask from torch's RNG; RLX cannot reproduce it."""
    p, train = float(call["p"]), call["train"] is not False  # native_dropout's train=None means training
    if train and 0.0 < p < 1.0:
        return f"training-mode dropout (p={p}) is random (a Bernoulli mask from torch's RNG); export in eval mode"
    if train and p >= 1.0 and call.target == "aten.dropout.default":
        return "training-mode dropout with p=1 is not supported"
    return None


@lowers(
    "aten.clone.default",
    "aten.contiguous.default",
    "aten.alias.default",
    "aten.detach.default",
    "aten.detach_.default",
    "aten.lift_fresh_copy.default",
)
def identity(b: Builder, call: Call) -> Value:
    """Same values (memory format does not change numbers)."""
    return call.tensor("self")


@lowers("aten.dropout.default", check=_check_dropout)
def dropout(b: Builder, call: Call) -> Value:
    """The input unchanged (eval mode, or p = 0 in training)."""
    return call.tensor("input")


@lowers("aten.native_dropout.default", check=_check_dropout)
def native_dropout(b: Builder, call: Call) -> list[Value]:
    """(x, all-true mask) when not training or p = 0; (zeros, all-false mask) for training with p = 1."""
    x = call.tensor("input")
    drop_all = call["train"] is not False and float(call["p"]) >= 1.0
    out = b.expand(b.const(0, x.dtype), x.dims) if drop_all else x
    return [out, b.expand(b.const(not drop_all, "bool"), x.dims)]


@lowers("aten.permute.default")
def permute(b: Builder, call: Call) -> Value:
    """Reorder axes."""
    x = call.tensor("self")
    return b.transpose(x, [norm_axis(d, x.rank) for d in call["dims"]])


@lowers("aten.transpose.int")
def transpose(b: Builder, call: Call) -> Value:
    """Swap two axes."""
    x = call.tensor("self")
    d0, d1 = norm_axis(call["dim0"], x.rank), norm_axis(call["dim1"], x.rank)
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.transpose(x, perm)


@lowers("aten.t.default")
def t(b: Builder, call: Call) -> Value:
    """2-D transpose (identity on 0/1-D)."""
    x = call.tensor("self")
    return b.transpose(x, [1, 0]) if x.rank == 2 else x


@lowers("aten.expand.default")
def expand(b: Builder, call: Call) -> Value:
    """Broadcast to the recorded shape."""
    return b.expand(call.tensor("self"), call.out_dims)


@lowers("aten.slice.Tensor")
def slice_(b: Builder, call: Call) -> Value:
    """x[start:end:step] along one axis (Narrow when step is 1, else strided Slice)."""
    x = call.tensor("self")
    axis = norm_axis(call.get("dim", 0), x.rank)
    size = x.dims[axis]
    start, end, step = call.get("start", 0), call.get("end", size), call.get("step", 1)
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return b.strided(x, axis, start, call.out_dims[axis], step)


@lowers("aten.select.int")
def select(b: Builder, call: Call) -> Value:
    """x[..., index, ...]: narrow to one element, then drop the axis."""
    x = call.tensor("self")
    axis = norm_axis(call["dim"], x.rank)
    index = call["index"]
    index = index + x.dims[axis] if index < 0 else index
    return b.reshape(b.narrow(x, axis, index, 1), call.out_dims)


@lowers("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default")
def split(b: Builder, call: Call) -> list[Value | None]:
    """Consecutive narrows along one axis, one per output."""
    x = call.tensor("self")
    axis = norm_axis(call.get("dim", 0), x.rank)
    outs: list[Value | None] = []
    start = 0
    for spec in call.node.outputs:
        length = spec.shape[axis]
        outs.append(b.narrow(x, axis, start, length))
        start += length
    return outs


@lowers("aten.cat.default")
def cat(b: Builder, call: Call) -> Value:
    """Concatenate along one axis (empty tensors are dropped, as torch does)."""
    tensors = [t for t in call["tensors"] if t.numel > 0]
    dtype = call.out_dtype
    axis = norm_axis(call.get("dim", 0), len(call.out_dims))
    if len(tensors) == 1:
        return b.cast(tensors[0], dtype)
    return b.emit({"Concat": {"axis": axis}}, [b.cast(t, dtype) for t in tensors], call.out_dims, dtype)


@lowers("aten.stack.default")
def stack(b: Builder, call: Call) -> Value:
    """Insert a unit axis in each tensor, then concatenate along it."""
    dims = call.out_dims
    axis = norm_axis(call.get("dim", 0), len(dims))
    parts = [b.reshape(b.cast(t, call.out_dtype), (*t.dims[:axis], 1, *t.dims[axis:])) for t in call["tensors"]]
    if len(parts) == 1:
        return parts[0]
    return b.emit({"Concat": {"axis": axis}}, parts, dims, call.out_dtype)


@lowers("aten.gather.default")
def gather(b: Builder, call: Call) -> Value:
    """out[i][j] = self[i][index[i][j]] along `dim` (torch.gather)."""
    x, index = call.tensor("self"), call.tensor("index")
    axis = norm_axis(call["dim"], x.rank)
    return b.emit({"GatherElements": {"axis": axis}}, [x, index], call.out_dims, x.dtype)


@lowers("aten.flip.default")
def flip(b: Builder, call: Call) -> Value:
    """Reverse the element order along each axis in `dims`."""
    x = call.tensor("self")
    axes = sorted({norm_axis(d, x.rank) for d in call["dims"]})
    if not axes:
        return x
    return b.emit({"Reverse": {"axes": axes}}, [x], x.dims, x.dtype)


@lowers("aten.index_select.default")
def index_select(b: Builder, call: Call) -> Value:
    """x.index_select(dim, index): a Gather along `dim` (negative indices are not allowed by torch)."""
    x = call.tensor("self")
    axis = norm_axis(call["dim"], x.rank)
    return b.emit({"Gather": {"axis": axis}}, [x, call.tensor("index")], call.out_dims, x.dtype)


@lowers("aten.repeat.default")
def repeat(b: Builder, call: Call) -> Value:
    """Tile the tensor `repeats[i]` times along axis i (leading repeats add axes)."""
    x = call.tensor("self")
    reps = [int(r) for r in call["repeats"]]
    x = b.reshape(x, (1,) * (len(reps) - x.rank) + x.dims)
    return b.emit({"Tile": {"reps": reps}}, [x], call.out_dims, x.dtype)


@lowers("aten.roll.default")
def roll(b: Builder, call: Call) -> Value:
    """Cyclic shift: out[i] = x[(i - shift) mod n] per (shift, dim); no dims means the flattened tensor."""
    x = call.tensor("self")
    shifts, dims = list(call["shifts"]), list(call.get("dims", []) or [])
    if not dims:
        flat = b.reshape(x, (x.numel,))
        return b.reshape(b.emit({"Roll": {"shifts": shifts, "dims": [0]}}, [flat], flat.dims, x.dtype), x.dims)
    axes = [norm_axis(d, x.rank) for d in dims]
    return b.emit({"Roll": {"shifts": shifts, "dims": axes}}, [x], x.dims, x.dtype)


@lowers("aten.tril.default", "aten.triu.default")
def tril_triu(b: Builder, call: Call) -> Value:
    """Keep the lower (tril) or upper (triu) triangle of the last two axes relative to `diagonal`."""
    x = call.tensor("self")
    op = {"Trilu": {"upper": call.target == "aten.triu.default", "diagonal": int(call.get("diagonal", 0))}}
    return b.emit(op, [x], x.dims, x.dtype)


# ── strided views read as gathers: as_strided, diagonal; select_scatter ──


def _row_major(dims: tuple[int, ...]) -> list[int]:
    strides, step = [], 1
    for d in reversed(dims):
        strides.append(step)
        step *= max(d, 1)
    return strides[::-1]


def _strided_positions(call: Call) -> np.ndarray:
    """Storage position of every output element: storage_offset + sum(index_k * stride_k)."""
    pos = np.full(tuple(call["size"]), int(call.get("storage_offset", 0)), dtype=np.int64)
    for axis, (n, stride) in enumerate(zip(call["size"], call["stride"], strict=True)):
        shape = [1] * len(call["size"])
        shape[axis] = n
        pos = pos + (np.arange(n, dtype=np.int64) * int(stride)).reshape(shape)
    return pos


def _check_as_strided(call: Call) -> str | None:
    x = call["self"]
    arg = call.node.args[0].get("tensor", "") if call.node.args else ""
    layout = call.node.layouts.get(arg, {"strides": _row_major(x.dims), "storage_offset": 0})
    live = [(d, s) for d, s in zip(x.dims, layout["strides"], strict=True) if d != 1]
    contiguous = live == [(d, s) for d, s in zip(x.dims, _row_major(x.dims), strict=True) if d != 1]
    if not contiguous or layout["storage_offset"] != 0:
        return (
            f"as_strided of a view (strides {layout['strides']}, storage offset {layout['storage_offset']}) "
            "is not supported: it reads torch's storage, which RLX values do not have (only contiguous inputs)"
        )
    pos = _strided_positions(call)
    if pos.size and (pos.min() < 0 or pos.max() >= x.numel):
        return f"as_strided reads storage positions up to {pos.max()} outside the input's {x.numel} elements"
    return None


@lowers("aten.as_strided.default", check=_check_as_strided)
def as_strided(b: Builder, call: Call) -> Value:
    """out[i...] = flat(self)[storage_offset + sum(i_k * stride_k)] on a contiguous input (one Gather)."""
    x = call.tensor("self")
    flat = b.reshape(x, (x.numel,))
    index = b.const(_strided_positions(call), "int64")
    return b.emit({"Gather": {"axis": 0}}, [flat, index], call.out_dims, x.dtype)


@lowers("aten.diagonal.default")
def diagonal(b: Builder, call: Call) -> Value:
    """Elements (i, i + offset) of the (dim1, dim2) planes, as a new last axis (one Gather)."""
    x = call.tensor("self")
    d1, d2 = norm_axis(call.get("dim1", 0), x.rank), norm_axis(call.get("dim2", 1), x.rank)
    offset = int(call.get("offset", 0))
    rest = [a for a in range(x.rank) if a not in (d1, d2)]
    xt = b.transpose(x, [*rest, d1, d2])
    n1, n2 = x.dims[d1], x.dims[d2]
    length = call.out_dims[-1]
    rows = np.arange(length, dtype=np.int64) + max(-offset, 0)
    index = rows * n2 + rows + offset
    flat = b.reshape(xt, (*xt.dims[:-2], n1 * n2))
    axis = flat.rank - 1
    return b.emit({"Gather": {"axis": axis}}, [flat, b.const(index, "int64")], call.out_dims, x.dtype)


@lowers("aten.select_scatter.default")
def select_scatter(b: Builder, call: Call) -> Value:
    """self with self.select(dim, index) = src: a Where on a constant one-hot of the axis."""
    x, dtype, dims = call.tensor("self"), call.out_dtype, call.out_dims
    axis = norm_axis(call["dim"], x.rank)
    index = int(call["index"])
    index = index + x.dims[axis] if index < 0 else index
    src = b.reshape(b.cast(call.tensor("src"), dtype), (*dims[:axis], 1, *dims[axis + 1 :]))
    hot = np.zeros([dims[a] if a == axis else 1 for a in range(len(dims))], dtype=bool)
    hot[(0,) * axis + (index,)] = True
    pick = [b.expand(b.const(hot, "bool"), dims), b.expand(src, dims), b.cast(x, dtype)]
    return b.emit("Where", pick, dims, dtype)
