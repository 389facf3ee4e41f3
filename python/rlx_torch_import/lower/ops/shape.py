"""Shape and layout ops: view/reshape, permute/transpose, expand, slicing, concat, identities, strided views,
sliding windows (unfold, im2col)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...sizes import sizes
from ..builder import Builder
from ..call import Call, Value, norm_axis
from ..registry import lowers


@lowers(
    "aten.view.default",
    "aten.reshape.default",
    "aten._unsafe_view.default",
    "aten.flatten.using_ints",
    "aten.unsqueeze.default",
    "aten.squeeze.dim",
    "aten.squeeze.dims",
    "aten.squeeze.default",
    kind="movement",
)
@lowers("aten.unflatten.int")
def reshape(b: Builder, call: Call) -> Value:
    """Row-major reshape to the shape torch recorded (so -1 and squeezes are already resolved)."""
    return b.reshape(call.tensor("self"), call.out_dims)


@lowers(
    "aten.clone.default",
    "aten.contiguous.default",
    "aten.alias.default",
    "aten.detach.default",
    "aten.detach_.default",
    "aten.lift_fresh_copy.default",
    kind="movement",
)
def identity(b: Builder, call: Call) -> Value:
    """Same values (memory format does not change numbers)."""
    return call.tensor("self")


@lowers("aten.permute.default", kind="movement")
def permute(b: Builder, call: Call) -> Value:
    """Reorder axes."""
    x = call.tensor("self")
    return b.transpose(x, [norm_axis(d, x.rank) for d in call["dims"]])


@lowers("aten.transpose.int", kind="movement")
def transpose(b: Builder, call: Call) -> Value:
    """Swap two axes."""
    x = call.tensor("self")
    d0, d1 = norm_axis(call["dim0"], x.rank), norm_axis(call["dim1"], x.rank)
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return b.transpose(x, perm)


@lowers("aten.t.default", kind="movement")
def t(b: Builder, call: Call) -> Value:
    """2-D transpose (identity on 0/1-D)."""
    x = call.tensor("self")
    return b.transpose(x, [1, 0]) if x.rank == 2 else x


@lowers("aten.expand.default", kind="movement")
def expand(b: Builder, call: Call) -> Value:
    """Broadcast to the recorded shape."""
    return b.expand(call.tensor("self"), call.out_dims)


@lowers("aten.slice.Tensor", tensor_scalars=("start", "end"), kind="movement")
def slice_(b: Builder, call: Call) -> Value:
    """x[start:end:step] along one axis (Narrow when step is 1, else strided Slice). A start read
    from a tensor (`x[n:n + 2]`, `narrow(0, n, 2)` with `n = i.item()`), whose slice length torch
    still knows, is a Gather of start + step * arange(length), start clamped as torch clamps it."""
    x = call.tensor("self")
    axis = norm_axis(call.get("dim", 0), x.rank)
    size = x.dims[axis]
    start, end, step = call.get("start", 0), call.get("end", size), call.get("step", 1)
    if isinstance(end, Value) and not isinstance(start, Value):  # a length a size stage computed (decision ax)
        start = max(0, min(size, start + size if start < 0 else start))
        return b.strided(x, axis, start, call.out_dims[axis], step)
    if isinstance(start, Value) or isinstance(end, Value):
        return _gathered_run(b, x, axis, start, call.out_dims, step)
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return b.strided(x, axis, start, call.out_dims[axis], step)


@lowers("aten.narrow.default", tensor_scalars=("start",), kind="movement")
def narrow(b: Builder, call: Call) -> Value:
    """x.narrow(dim, start, length): `length` elements from `start` (a start read from a tensor
    is a Gather, as in `slice`)."""
    x = call.tensor("self")
    axis = norm_axis(call["dim"], x.rank)
    start = call["start"]
    if isinstance(start, Value):
        return _gathered_run(b, x, axis, start, call.out_dims, 1)
    start = start + x.dims[axis] if start < 0 else start
    return b.narrow(x, axis, start, call["length"])


def _gathered_run(b: Builder, x: Value, axis: int, start: Value | int, out_dims: tuple[int, ...], step: int) -> Value:
    """x's elements start, start + step, ... along `axis` (as many as `out_dims` has), `start` a 0-d
    tensor (a value read from a tensor): negative counts from the end, clamped into range as torch
    clamps a slice start."""
    size = x.dims[axis]
    first = b.cast(start if isinstance(start, Value) else b.const(start, "int64"), "int64")
    zero = b.const(0, "int64")
    first = b.emit(
        "Where", [b.compare("Lt", first, zero), b.binary("Add", first, b.const(size, "int64")), first], (), "int64"
    )
    first = b.binary("Min", b.binary("Max", first, zero), b.const(size, "int64"))
    offsets = b.const(np.arange(out_dims[axis], dtype=np.int64) * step, "int64")
    index = b.binary("Min", b.binary("Add", first, offsets), b.const(max(size - 1, 0), "int64"))
    return b.emit({"Gather": {"axis": axis}}, [x, index], tuple(out_dims), x.dtype)


@lowers("aten.select.int", tensor_scalars=("index",), kind="movement")
def select(b: Builder, call: Call) -> Value:
    """x[..., index, ...]: narrow to one element, then drop the axis; an index read from a tensor
    (`x[i.item()]`) is a Gather of it, a negative one counted from the end as torch counts it."""
    x = call.tensor("self")
    axis = norm_axis(call["dim"], x.rank)
    index = call["index"]
    if isinstance(index, Value):
        i = b.cast(index, "int64")
        n = b.const(x.dims[axis], "int64")
        wrapped = b.emit("Where", [b.compare("Lt", i, b.const(0, "int64")), b.binary("Add", i, n), i], (), "int64")
        return b.reshape(
            b.emit({"Gather": {"axis": axis}}, [x, b.reshape(wrapped, (1,))], _one(x, axis), x.dtype), call.out_dims
        )
    index = index + x.dims[axis] if index < 0 else index
    return b.reshape(b.narrow(x, axis, index, 1), call.out_dims)


def _one(x: Value, axis: int) -> tuple[int, ...]:
    return tuple(1 if i == axis else d for i, d in enumerate(x.dims))


@lowers("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", kind="movement")
def split(b: Builder, call: Call) -> list[Value | None]:
    """Consecutive narrows along one axis, one per output."""
    x = call.tensor("self")
    axis = norm_axis(call.get("dim", 0), x.rank)
    outs: list[Value | None] = []
    start = 0
    for spec in call.node.outputs:
        length = sizes(spec.shape)[axis]
        outs.append(b.narrow(x, axis, start, length))
        start += length
    return outs


@lowers("aten.cat.default", kind="movement")
def cat(b: Builder, call: Call) -> Value:
    """Concatenate along one axis (empty tensors are dropped, as torch does)."""
    tensors = [t for t in call["tensors"] if t.numel > 0]
    dtype = call.out_dtype
    axis = norm_axis(call.get("dim", 0), len(call.out_dims))
    if len(tensors) == 1:
        return b.cast(tensors[0], dtype)
    return b.emit({"Concat": {"axis": axis}}, [b.cast(t, dtype) for t in tensors], call.out_dims, dtype)


@lowers("aten.stack.default", kind="movement")
def stack(b: Builder, call: Call) -> Value:
    """Insert a unit axis in each tensor, then concatenate along it."""
    dims = call.out_dims
    axis = norm_axis(call.get("dim", 0), len(dims))
    parts = [b.reshape(b.cast(t, call.out_dtype), (*t.dims[:axis], 1, *t.dims[axis:])) for t in call["tensors"]]
    if len(parts) == 1:
        return parts[0]
    return b.emit({"Concat": {"axis": axis}}, parts, dims, call.out_dtype)


@lowers("aten.gather.default", kind="movement")
def gather(b: Builder, call: Call) -> Value:
    """out[i][j] = self[i][index[i][j]] along `dim` (torch.gather)."""
    x, index = call.tensor("self"), call.tensor("index")
    axis = norm_axis(call["dim"], x.rank)
    return b.emit({"GatherElements": {"axis": axis}}, [x, index], call.out_dims, x.dtype)


@lowers("aten.flip.default", kind="movement")
def flip(b: Builder, call: Call) -> Value:
    """Reverse the element order along each axis in `dims`."""
    x = call.tensor("self")
    axes = sorted({norm_axis(d, x.rank) for d in call["dims"]})
    if not axes:
        return x
    return b.emit({"Reverse": {"axes": axes}}, [x], x.dims, x.dtype)


@lowers("aten.index_select.default", kind="movement")
def index_select(b: Builder, call: Call) -> Value:
    """x.index_select(dim, index): a Gather along `dim` (negative indices are not allowed by torch)."""
    x = call.tensor("self")
    if x.rank == 0:  # a 0-d tensor is one element along dim 0 or -1; the result is 0-d too (torch)
        index = b.reshape(call.tensor("index"), (1,))
        return b.reshape(b.emit({"Gather": {"axis": 0}}, [b.reshape(x, (1,)), index], (1,), x.dtype), call.out_dims)
    axis = norm_axis(call["dim"], x.rank)
    return b.emit({"Gather": {"axis": axis}}, [x, call.tensor("index")], call.out_dims, x.dtype)


@lowers("aten.repeat.default", kind="movement")
def repeat(b: Builder, call: Call) -> Value:
    """Tile the tensor `repeats[i]` times along axis i (leading repeats add axes)."""
    x = call.tensor("self")
    reps = [int(r) for r in call["repeats"]]
    x = b.reshape(x, (1,) * (len(reps) - x.rank) + x.dims)
    return b.emit({"Tile": {"reps": reps}}, [x], call.out_dims, x.dtype)


@lowers("aten.roll.default", kind="movement")
def roll(b: Builder, call: Call) -> Value:
    """Cyclic shift: out[i] = x[(i - shift) mod n] per (shift, dim); no dims means the flattened tensor."""
    x = call.tensor("self")
    shifts, dims = list(call["shifts"]), list(call.get("dims", []) or [])
    if not dims:
        flat = b.reshape(x, (x.numel,))
        return b.reshape(b.emit({"Roll": {"shifts": shifts, "dims": [0]}}, [flat], flat.dims, x.dtype), x.dims)
    axes = [norm_axis(d, x.rank) for d in dims]
    return b.emit({"Roll": {"shifts": shifts, "dims": axes}}, [x], x.dims, x.dtype)


@lowers("aten.tril.default", "aten.triu.default", kind="movement")
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


def _positions(size: list[int] | tuple[int, ...], stride: list[int], offset: int) -> np.ndarray:
    """Storage position of every element of a strided view: offset + sum(index_k * stride_k)."""
    pos = np.full(tuple(size), int(offset), dtype=np.int64)
    for axis, (n, step) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[axis] = n
        pos = pos + (np.arange(n, dtype=np.int64) * int(step)).reshape(shape)
    return pos


def _dense(dims: tuple[int, ...], strides: list[int]) -> bool:
    """Whether a layout is non-overlapping and dense (a permutation of a contiguous one)."""
    live = sorted((s, d) for d, s in zip(dims, strides, strict=True) if d != 1)
    step = 1
    for s, d in live:
        if s != step:
            return False
        step *= d
    return True


def _read_index(call: Call) -> np.ndarray | str:
    """Row-major index into `self` of each element the as_strided view reads, or why it cannot be read.

    torch reads storage: position p = storage_offset + sum(i_k * stride_k). Capture recorded the
    strides and storage offset of `self` (torch-ir `layouts`), which say which logical element of
    `self` sits at each position; a position no element of `self` holds belongs to a base tensor
    RLX does not have. as_strided_scatter writes into a clone of `self`, which torch lays out with
    `self`'s strides at offset 0 when `self` is dense."""
    x = call["self"]
    arg = call.node.args[0].get("tensor", "") if call.node.args else ""
    layout = call.node.layouts.get(arg, {"strides": _row_major(x.dims), "storage_offset": 0})
    strides, base = list(layout["strides"]), int(layout["storage_offset"])
    op = call.target.removeprefix("aten.").removesuffix(".default")
    if call.target == "aten.as_strided_scatter.default":
        if not _dense(x.dims, strides):
            return (
                f"{op} into a view that is not dense (sizes {list(x.dims)}, strides {strides}) is not supported: "
                "torch picks the layout of the copy it writes into"
            )
        base = 0
    offset = call.get("storage_offset")
    offset = base if offset is None else int(offset)
    pos = _positions(call["size"], call["stride"], offset)
    if pos.size == 0:
        return pos
    held = _positions(x.dims, strides, base).ravel()
    end = max(int(pos.max()), int(held.max()) if held.size else 0) + 1
    table = np.full(end, -1, dtype=np.int64)  # storage position -> row-major index of the element there
    table[held] = np.arange(held.size, dtype=np.int64)
    index = table[pos]
    if (index < 0).any():
        missing = int(pos.ravel()[np.argmax(index.ravel() < 0)])
        return (
            f"{op} reads storage position {missing}, which holds no element of its input (sizes {list(x.dims)}, "
            f"strides {strides}, storage offset {layout['storage_offset']}): it belongs to a tensor the input "
            "is a view of, and RLX values are logical tensors without torch's storage"
        )
    return index


def _check_as_strided(call: Call) -> str | None:
    index = _read_index(call)
    return index if isinstance(index, str) else None


@lowers("aten.as_strided.default", "aten.as_strided_copy.default", check=_check_as_strided, kind="movement")
def as_strided(b: Builder, call: Call) -> Value:
    """out[i...] = storage[storage_offset + sum(i_k * stride_k)], read as one Gather of `self`'s elements
    (which element sits at each storage position comes from the layout torch traced for `self`)."""
    x = call.tensor("self")
    index = _read_index(call)
    assert not isinstance(index, str)
    flat = b.reshape(x, (x.numel,))
    return b.emit({"Gather": {"axis": 0}}, [flat, b.const(index, "int64")], call.out_dims, x.dtype)


@lowers("aten.as_strided_scatter.default", check=_check_as_strided)
def as_strided_scatter(b: Builder, call: Call) -> Value:
    """self with its as_strided(size, stride, storage_offset) view replaced by src: a Where on a constant
    mask of the written elements, which read src through one Gather."""
    x, dtype = call.tensor("self"), call.out_dtype
    index = _read_index(call)
    assert not isinstance(index, str)
    written = np.zeros(x.numel, dtype=bool)
    written[index.ravel()] = True
    source = np.zeros(x.numel, dtype=np.int64)
    source[index.ravel()] = np.arange(index.size, dtype=np.int64)
    flat_x = b.reshape(b.cast(x, dtype), (x.numel,))
    if index.size == 0:
        return b.reshape(flat_x, call.out_dims)
    src = b.reshape(b.cast(call.tensor("src"), dtype), (index.size,))
    taken = b.emit({"Gather": {"axis": 0}}, [src, b.const(source, "int64")], (x.numel,), dtype)
    y = b.emit("Where", [b.const(written, "bool"), taken, flat_x], (x.numel,), dtype)
    return b.reshape(y, call.out_dims)


# ── sliding windows and blocks: unfold, im2col ───────────────────────────


def _window_rows(b: Builder, call: Call, axis: int, count: int, count_at: Any) -> int:
    """How many windows the index table holds: `count`, or (for a node whose sizes follow a dynamic
    dim) one more than the most windows any size in range gives, so that the table is one constant
    narrowed to `count` at every size. `count_at(length)` is the window count of an axis length."""
    if b.provenance.node not in b.program.size_dependent:
        return count
    top = b.program.size_bounds.get(call.tensor_name("self"))
    if top is None:  # a static input, or an unbounded symbol: the table is exact for this size
        return count
    return max(count_at(top[axis]), count) + 1


def _windows(b: Builder, x: Value, axis: int, count: int, width: int, step: int, dilation: int, rows: int) -> Value:
    """x with `axis` replaced by (count, width): window i, tap j is x[..., i*step + j*dilation, ...] (one
    Gather of a constant index table of `rows` >= count windows, narrowed to `count`)."""
    table = np.arange(rows, dtype=np.int64)[:, None] * step + np.arange(width, dtype=np.int64)[None, :] * dilation
    index = b.narrow(b.const(table, "int64"), 0, 0, count)
    dims = (*x.dims[:axis], count, width, *x.dims[axis + 1 :])
    return b.emit({"Gather": {"axis": axis}}, [x, index], dims, x.dtype)


@lowers("aten.unfold.default", kind="movement")
def unfold(b: Builder, call: Call) -> Value:
    """out[..., i, ..., j] = self[..., i*step + j, ...]: every window of `size` elements `step` apart along
    `dimension`, the window as a new last axis (a Gather of index windows; a reshape when step == size)."""
    x = call.tensor("self")
    if x.rank == 0:  # a scalar unfolds to itself, as one window of one element
        return b.reshape(x, call.out_dims)
    axis = norm_axis(call["dimension"], x.rank)
    size, step = int(call["size"]), int(call["step"])
    count = call.out_dims[axis]
    if step == size and b.provenance.node not in b.program.size_dependent:  # disjoint windows: blocks
        kept = b.narrow(x, axis, 0, count * size)
        y = b.reshape(kept, (*x.dims[:axis], count, size, *x.dims[axis + 1 :]))
    else:
        rows = _window_rows(b, call, axis, count, lambda n: (n - size) // step + 1)
        y = _windows(b, x, axis, count, size, step, 1, rows)
    perm = [a for a in range(y.rank) if a != axis + 1] + [axis + 1]
    return b.transpose(y, perm)


@lowers("aten.im2col.default")
def im2col(b: Builder, call: Call) -> Value:
    """cols[n, c*kh*kw + a*kw + e, i*ow + j] = pad(x)[n, c, i*sh + a*dh, j*sw + e*dw] (F.unfold): a zero Pad,
    one Gather of index windows per spatial axis, a transpose and a reshape."""
    x = call.tensor("self")
    first = x.rank - 2  # the input's first spatial axis (inputs are (c, h, w) or (n, c, h, w))
    x = x if x.rank == 4 else b.reshape(x, (1, *x.dims))
    k, d = [int(v) for v in call["kernel_size"]], [int(v) for v in call["dilation"]]
    p, s = [int(v) for v in call["padding"]], [int(v) for v in call["stride"]]
    if any(p):
        dims = (*x.dims[:2], x.dims[2] + 2 * p[0], x.dims[3] + 2 * p[1])
        pads = [[0, 0], [0, 0], [p[0], p[0]], [p[1], p[1]]]
        x = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [x], dims, x.dtype)
    for a in range(2):  # height is axis 2; after its Gather (oh, kh at axes 2, 3) width is axis 4
        axis = 2 + 2 * a
        count = (x.dims[axis] - d[a] * (k[a] - 1) - 1) // s[a] + 1
        rows = _window_rows(
            b, call, first + a, count, lambda m, a=a: (m + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1
        )
        x = _windows(b, x, axis, count, k[a], s[a], d[a], rows)
    cols = b.transpose(x, [0, 1, 3, 5, 2, 4])  # (n, c, oh, kh, ow, kw) -> (n, c, kh, kw, oh, ow)
    return b.reshape(cols, call.out_dims)


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
