"""What a lowering function sees: its call (arguments read by schema name) and a builder.

Lowerings return RLX values; the driver in `registry.py` wires them to node outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import (
    FLOAT_DTYPES,
    HALF_DTYPES,
    INT_COMPUTE,
    NARROW_DTYPES,
    compute_rlx,
    numpy_dtype,
    promote,
    round_half,
)
from ..program import Program, Provenance, RlxNode
from ..torchir import Node, decode_float
from . import exact


@dataclass(frozen=True)
class Value:
    """A tensor value in the program being built: RLX value id, dims, torch-ir dtype."""

    id: str
    dims: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def numel(self) -> int:
        return math.prod(self.dims)


class Call:
    """One torch-ir node with its arguments bound to the op schema's names."""

    def __init__(self, node: Node, values: dict[str, Value], schema_names: list[str], defaults: dict[str, Any]) -> None:
        self.node = node
        self.target = node.target
        bound: dict[str, Any] = dict(defaults)
        for name, arg in zip(schema_names, node.args, strict=False):
            bound[name] = _decode(arg, values)
        for name, arg in node.kwargs.items():
            bound[name] = _decode(arg, values)
        self._args = bound
        self.positional = [_decode(a, values) for a in node.args]
        self._names = {n: a["tensor"] for n, a in zip(schema_names, node.args, strict=False) if "tensor" in a}
        self._names.update({n: a["tensor"] for n, a in node.kwargs.items() if "tensor" in a})
        self.mutated: dict[str, Value] = {}

    def __getitem__(self, name: str) -> Any:
        return self._args[name]

    def get(self, name: str, default: Any = None) -> Any:
        value = self._args.get(name, default)
        return default if value is None else value

    def tensor(self, name: str) -> Value:
        value = self._args[name]
        if not isinstance(value, Value):
            raise TypeError(f"argument {name!r} of {self.target} is not a tensor")
        return value

    def mutate(self, name: str, value: Value) -> None:
        """The op writes `value` into tensor argument `name` in place (e.g. batch norm's running stats);
        later nodes reading that tensor see `value` (the driver rebinds it)."""
        self.mutated[name] = value

    def tensor_name(self, name: str) -> str:
        """The torch-ir value name passed as tensor argument `name`."""
        return self._names[name]

    @property
    def out_dims(self) -> tuple[int, ...]:
        return tuple(self.node.outputs[0].shape)

    @property
    def out_dtype(self) -> str:
        return self.node.outputs[0].dtype


class _Unresolved:
    """A tensor argument whose producer was not lowered (only seen by checks)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _decode(arg: dict[str, Any], values: dict[str, Value]) -> Any:
    ((tag, payload),) = arg.items()
    if tag == "tensor":
        return values.get(payload, _Unresolved(payload))
    if tag == "float":
        return decode_float(payload)
    if tag == "list":
        return [_decode(a, values) for a in payload]
    if tag == "none":
        return None
    return payload


def norm_axis(axis: int, rank: int) -> int:
    """Negative axis -> positive; rank-0 tensors accept axis 0/-1."""
    return axis + max(rank, 1) if axis < 0 else axis


class Builder:
    """Appends RLX nodes to a program under the provenance of the node being lowered."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.provenance = Provenance(aten="", node="")
        self._counter = 0
        self._consts: dict[tuple[bytes, str, tuple[int, ...]], Value] = {}

    def _fresh(self) -> str:
        self._counter += 1
        return f"{self.provenance.node or 'v'}#{self._counter}"

    def emit(self, op: Any, inputs: list[Value], dims: tuple[int, ...] | list[int], dtype: str) -> Value:
        """Add one RLX node; `dtype` is the torch-ir dtype name of its result."""
        value = Value(self._fresh(), tuple(int(d) for d in dims), dtype)
        self.program.nodes.append(
            RlxNode(value.id, op, tuple(v.id for v in inputs), value.dims, compute_rlx(dtype), self.provenance)
        )
        return value

    # ── constants ────────────────────────────────────────────────────────
    def const(self, array: np.ndarray | float | int | bool, dtype: str) -> Value:
        """A constant tensor (little-endian bytes of `dtype`); identical constants are shared.
        Bool and narrow-integer constants are stored as float32 (exact) and cast, like every
        narrow value at the boundary: RLX's f32-aliased arena misreads them stored natively."""
        if dtype in NARROW_DTYPES:
            return self.cast(self.const(np.asarray(array).astype(np.float32), "float32"), dtype)
        arr = np.asarray(array)
        if dtype in HALF_DTYPES:  # rounded to the half dtype, stored as the float32 it computes in
            arr = round_half(arr, dtype)
        else:
            arr = arr.astype(numpy_dtype(dtype))
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        key = (data, dtype, tuple(arr.shape))
        if key not in self._consts:
            self._consts[key] = self.emit({"Constant": {"data": list(data)}}, [], arr.shape, dtype)
        return self._consts[key]

    def scalar_like(self, value: float | int | bool, like: Value) -> Value:
        """A rank-0 constant of `like`'s dtype."""
        return self.const(value, like.dtype)

    def move(self, op: Any, inputs: list[Value], dims: tuple[int, ...] | list[int], dtype: str) -> Value:
        """A data-movement op; bool/narrow-int data moves as float32 (see dtypes.NARROW_DTYPES).

        Inputs whose dtype is the result's are data; others (index tensors) pass unchanged.
        """
        if dtype not in NARROW_DTYPES:
            return self.emit(op, inputs, dims, dtype)
        data = [self.cast(v, "float32") if v.dtype == dtype else v for v in inputs]
        return self.cast(self.emit(op, data, dims, "float32"), dtype)

    def split24(self, x: Value) -> tuple[Value, Value]:
        """Integer x == hi * 2**24 + lo with 0 <= lo < 2**24; both float32-exact while |x| < 2**48."""
        hi = self.unary("Floor", self.binary("Div", self.cast(x, "float64"), self.const(float(1 << 24), "float64")))
        wide = self.cast(x, "int64")
        lo = self.binary("Sub", wide, self.binary("Mul", self.cast(hi, "int64"), self.const(1 << 24, "int64")))
        return self.cast(hi, "float32"), self.cast(lo, "float32")

    def move_int(self, op: Any, inputs: list[Value], data: list[int], dims: tuple[int, ...], dtype: str) -> Value:
        """A data-movement op on int32/int64 data, which RLX's scatter kernels corrupt: the data
        inputs (positions `data`) move as two float32-exact halves, recombined in int64."""
        halves = {i: self.split24(inputs[i]) for i in data}
        parts = []
        for k in (0, 1):
            args = [halves[i][k] if i in halves else v for i, v in enumerate(inputs)]
            parts.append(self.cast(self.emit(op, args, dims, "float32"), "int64"))
        hi, lo = parts
        return self.cast(self.binary("Add", self.binary("Mul", hi, self.const(1 << 24, "int64")), lo), dtype)

    # ── shape helpers ────────────────────────────────────────────────────
    def reshape(self, x: Value, dims: tuple[int, ...] | list[int]) -> Value:
        dims = tuple(int(d) for d in dims)
        if dims == x.dims:
            return x
        return self.emit({"Reshape": {"new_shape": list(dims)}}, [x], dims, x.dtype)

    def transpose(self, x: Value, perm: list[int]) -> Value:
        if perm == list(range(x.rank)):
            return x
        dims = tuple(x.dims[p] for p in perm)
        return self._relayout({"Transpose": {"perm": perm}}, x, dims)

    def narrow(self, x: Value, axis: int, start: int, length: int) -> Value:
        """x[start : start + length] along `axis` (no node when it is the whole axis)."""
        if start == 0 and length == x.dims[axis]:
            return x
        dims = list(x.dims)
        dims[axis] = length
        return self.emit({"Narrow": {"axis": axis, "start": start, "len": length}}, [x], dims, x.dtype)

    def narrow_to(self, x: Value, dims: tuple[int, ...]) -> Value:
        """The leading `dims` block of x (torch's scatter/gather read only that much of src)."""
        for axis, length in enumerate(dims):
            x = self.narrow(x, axis, 0, length)
        return x

    def to_last_axis(self, x: Value, axis: int) -> tuple[Value, list[int]]:
        """Move `axis` last (for kernels that only work there); returns the permutation back."""
        perm = [a for a in range(x.rank) if a != axis] + [axis]
        back = [perm.index(a) for a in range(x.rank)]
        return self.transpose(x, perm), back

    def expand(self, x: Value, dims: tuple[int, ...]) -> Value:
        if x.dims == tuple(dims):
            return x
        if x.rank < len(dims):
            x = self.reshape(x, (1,) * (len(dims) - x.rank) + x.dims)
        return self._relayout({"Expand": {"target_shape": list(dims)}}, x, dims)

    def _relayout(self, op: Any, x: Value, dims: tuple[int, ...]) -> Value:
        """Transpose/Expand. RLX's CPU kernels for them corrupt the heap on 2-byte integer
        (I16) slots, so int16 data moves as float32 (exact); other dtypes move natively."""
        if x.dtype == "int16":
            return self.move(op, [x], dims, x.dtype)
        return self.emit(op, [x], dims, x.dtype)

    def cast(self, x: Value, dtype: str) -> Value:
        """Explicit Cast node; between float32 and a half dtype (both computed as F32) it only relabels."""
        if x.dtype == dtype:
            return x
        if compute_rlx(x.dtype) == compute_rlx(dtype):
            return Value(x.id, x.dims, dtype)
        return self.emit({"Cast": {"to": compute_rlx(dtype)}}, [x], x.dims, dtype)

    # ── arithmetic helpers ───────────────────────────────────────────────
    def binary(self, op: str, a: Value, b: Value, out_dtype: str | None = None) -> Value:
        """Broadcasting binary op; both operands are first cast to the promoted dtype."""
        dtype = out_dtype or promote(a.dtype, b.dtype)
        compute = INT_COMPUTE.get(dtype, dtype)
        a, b = self.cast(a, compute), self.cast(b, compute)
        dims = tuple(np.broadcast_shapes(a.dims, b.dims))
        return self.cast(self.emit({"Binary": op}, [a, b], dims, compute), dtype)

    def unary(self, activation: str, x: Value) -> Value:
        """Elementwise RLX Activation; integer inputs go through float64 (RLX's kernels are float-only)."""
        if x.dtype in FLOAT_DTYPES:
            return self.emit({"Activation": activation}, [x], x.dims, x.dtype)
        wide = self.cast(x, "float64")
        return self.cast(self.emit({"Activation": activation}, [wide], x.dims, "float64"), x.dtype)

    def compare(self, op: str, a: Value, b: Value) -> Value:
        """Elementwise comparison -> bool. RLX's CPU Compare reads only int64 and float32
        correctly, so narrower integers compare as int64 and float64 takes `_compare_f64`."""
        dtype = promote(a.dtype, b.dtype)
        dtype = INT_COMPUTE.get(dtype, dtype)
        a, b = self.cast(a, dtype), self.cast(b, dtype)
        if dtype == "float64":
            return exact.compare_f64(self, op, a, b)
        dims = tuple(np.broadcast_shapes(a.dims, b.dims))
        return self.emit({"Compare": op}, [a, b], dims, "bool")

    def reduce(self, op: str, x: Value, axes: list[int], keep_dim: bool) -> Value:
        """Reduce over `axes`; RLX's CPU kernel wants a contiguous axis range, so runs are split."""
        axes = sorted({norm_axis(a, x.rank) for a in axes})
        if op in ("Max", "Min") and axes and compute_rlx(x.dtype) not in ("F32", "Bool"):
            return exact.extreme(self, op, x, axes, keep_dim)
        if op == "Prod" and axes and compute_rlx(x.dtype) not in ("F32", "Bool"):
            return exact.product(self, x, axes, keep_dim)
        runs: list[list[int]] = []
        for a in axes:
            if runs and runs[-1][-1] == a - 1:
                runs[-1].append(a)
            else:
                runs.append([a])
        dtype = x.dtype
        if dtype not in FLOAT_DTYPES:  # RLX's CPU Reduce is float-only; float64 is exact below 2**53
            x = self.cast(x, "float64")
        for run in reversed(runs):  # highest axes first, so lower indices stay valid
            dims = tuple((1 if i in run else d) for i, d in enumerate(x.dims) if keep_dim or i not in run)
            x = self.emit({"Reduce": {"op": op, "axes": run, "keep_dim": keep_dim}}, [x], dims, x.dtype)
        return self.cast(x, dtype)

    def arg_extreme(self, op: str, x: Value, axis: int, keep_dim: bool) -> tuple[Value, Value]:
        """(values, int64 indices) of Max/Min along `axis`; the first index on ties, like torch.
        float32-computed data uses RLX's ArgMax/ArgMin; integers and float64 compare against
        the exact extreme and take the smallest matching index."""
        values = self.reduce(op, x, [axis], keep_dim=True)
        dims = tuple((1 if a == axis else d) for a, d in enumerate(x.dims) if keep_dim or a != axis)
        if compute_rlx(x.dtype) in ("F32", "Bool") or x.dtype in NARROW_DTYPES:
            kind = "ArgMax" if op == "Max" else "ArgMin"
            idx = self.emit({kind: {"axis": axis, "keep_dim": True}}, [self.as_float(x)], values.dims, "float32")
        else:
            idx = exact.first_index(self, x, values, axis)
        return self.reshape(values, dims), self.reshape(self.cast(idx, "int64"), dims)

    def matmul(self, a: Value, b: Value) -> Value:
        dtype = promote(a.dtype, b.dtype)
        batch = tuple(np.broadcast_shapes(a.dims[:-2], b.dims[:-2]))
        return self.emit("MatMul", [self.cast(a, dtype), self.cast(b, dtype)], (*batch, a.dims[-2], b.dims[-1]), dtype)

    def as_float(self, x: Value) -> Value:
        """Integer/bool tensors become float32 (torch's default float) before float math."""
        return x if x.dtype in FLOAT_DTYPES else self.cast(x, "float32")
