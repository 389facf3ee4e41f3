"""The one home for RLX workarounds: every node a lowering emits passes through `route`.

Op families express torch semantics only and emit plain RLX ops through `Builder.emit`.
`route` looks at the op kind and its operands' dtypes and, where `defects.py` lists a defect
for that combination, builds the same result from kernels that are right (`exact.py`);
otherwise it appends the raw node. `audit` checks a finished program against every
defect's `hits`, so a raw op on a known-defect path is an internal error, never a wrong
number. `RlxLimit` is raised where no exact route exists (the registry reports it as an
unsupported op use, with the node).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..dtypes import F32_EXACT, HALF_DTYPES, NARROW_DTYPES, NARROWER_INTS, compute_rlx, numpy_dtype, promote, round_half
from ..errors import LoweringError
from ..program import Program, op_name
from . import defects, exact

if TYPE_CHECKING:
    from .context import Builder, Value


class RlxLimit(Exception):
    """No exact route exists for this op on these operands (the reason says why)."""


def _rlx(v: Value) -> str:
    return compute_rlx(v.dtype)


def _kind(op: Any) -> str:
    return op_name(op).split(".")[0]


def route(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """Emit `op` (result `dims`, torch-ir `dtype`) so that no known RLX defect is on its path."""
    rule = _RULES.get(_kind(op))
    return rule(b, op, inputs, dims, dtype) if rule else b.raw(op, inputs, dims, dtype)


def _via(
    b: Builder, op: Any, inputs: list[Value], data: tuple[int, ...], dims: tuple[int, ...], dtype: str, carrier: str
) -> Value:
    """The op on data operands (positions `data`, and the result) cast to `carrier`, then cast back."""
    moved = [b.cast(v, carrier) if i in data else v for i, v in enumerate(inputs)]
    return b.cast(b.emit(op, moved, dims, carrier), dtype)


# ── constants ────────────────────────────────────────────────────────────────────────────────


def constant(b: Builder, array: Any, dtype: str) -> Value:
    """A Constant of `dtype`; bool/narrow integers are stored as float32 and cast (constant-narrow)."""
    if dtype in NARROW_DTYPES:
        return b.cast(constant(b, np.asarray(array).astype(np.float32), "float32"), dtype)
    arr = np.asarray(array)
    arr = round_half(arr, dtype) if dtype in HALF_DTYPES else arr.astype(numpy_dtype(dtype))
    data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    return b.raw({"Constant": {"data": list(data)}}, [], arr.shape, dtype)


# ── elementwise ──────────────────────────────────────────────────────────────────────────────


def _compare(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, y = inputs
    common = promote(x.dtype, y.dtype)
    if common in NARROWER_INTS:  # compare-narrow-int
        common = "int64"
    x, y = b.cast(x, common), b.cast(y, common)
    if compute_rlx(common) == "F64":  # compare-f64
        return exact.compare_f64(b, op["Compare"], x, y)
    return b.raw(op, [x, y], dims, dtype)


def _nan_of(b: Builder, v: Value) -> Value | None:
    """v != v, or None when v cannot hold NaN (a NaN-free constant, a cast from integers or bool)."""
    if b.nan_free(v):
        return None
    return exact.is_nan(b, v)


def _keep_nan(b: Builder, result: Value, operands: list[Value]) -> Value:
    """NaN wherever an operand is NaN (torch's maximum/minimum/clamp/amax propagate NaN)."""
    for v in operands:
        nan = _nan_of(b, v)
        if nan is not None:
            result = b.emit("Where", [b.expand(nan, result.dims), b.expand(v, result.dims), result], result.dims,
                            result.dtype)  # fmt: skip
    return result


def _binary(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    name = op["Binary"]
    rlx = compute_rlx(dtype)
    if rlx in ("I32", "I16", "I8", "U8", "Bool"):  # binary-narrow-int
        return _via(b, op, inputs, (0, 1), dims, dtype, "int64")
    if name == "Mod" and rlx == "I64":  # the kernel panics on a zero divisor: a - trunc(a / b) * b
        x, y = inputs
        return b.binary("Sub", x, b.binary("Mul", b.binary("Div", x, y), y))
    if name in ("Max", "Min") and rlx in ("F32", "F64"):  # binary-nan
        return _keep_nan(b, b.raw(op, inputs, dims, dtype, compensated="binary-nan"), inputs)
    return b.raw(op, inputs, dims, dtype)


def _clamp(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """Clamp as Max/Min against constants (so NaN propagates, and bounds may be infinite)."""
    (x,) = inputs
    y = b.binary("Max", x, b.const(op["Clamp"]["min"], x.dtype))
    return b.binary("Min", y, b.const(op["Clamp"]["max"], x.dtype))


_EXACT_INT_ACTIVATIONS = ("Abs", "Neg", "Sign", "Relu", "Floor", "Ceil", "Round", "Trunc")


def _activation(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    name = op["Activation"]
    if _rlx(x) in (*defects.INTS, "Bool"):  # activation-int
        if name not in _EXACT_INT_ACTIVATIONS:
            return b.cast(b.emit(op, [b.cast(x, "float64")], dims, "float64"), dtype)
        wide = b.cast(x, "int64")
        zero = b.const(0, "int64")
        if name == "Neg":
            wide = b.binary("Sub", zero, wide)
        elif name == "Abs":
            wide = b.emit("Where", [b.compare("Lt", wide, zero), b.binary("Sub", zero, wide), wide], dims, "int64")
        elif name == "Sign":
            pos, neg = (b.cast(b.compare(c, wide, zero), "int64") for c in ("Gt", "Lt"))
            wide = b.binary("Sub", pos, neg)
        elif name == "Relu":
            wide = b.binary("Max", wide, zero)
        return b.cast(wide, dtype)
    if name == "Round":  # round-fold: half to even from Floor, whatever folds
        return _round_half_even(b, x)
    if name == "Exp" and _rlx(x) == "F32":  # exp-range
        return _exp_full_range(b, op, x, dims, dtype)
    if name == "Elu":  # elu-expm1: RLX's Elu computes exp(x) - 1
        return b.emit("Where", [b.compare("Gt", x, b.const(0.0, x.dtype)), x, exact.expm1(b, x)], dims, dtype)
    return b.raw(op, inputs, dims, dtype)


# |x| up to which RLX's vector exp is right: it clamps x to [-87.3, 88.7] before its polynomial.
_EXP_SAFE = 87.0


def _exp_full_range(b: Builder, op: Any, x: Value, dims: tuple[int, ...], dtype: str) -> Value:
    """exp(x) on all of float32: RLX's kernel inside |x| <= 87, exp(x / 2) ** 2 outside it (IEEE gradual
    underflow to subnormals and 0, overflow to inf, as torch's exp), NaN kept (RLX's AVX exp maps NaN to
    ~1e-38)."""
    inside = b.compare("Le", b.unary("Abs", x), b.const(_EXP_SAFE, x.dtype))
    half = b.raw(op, [b.binary("Mul", x, b.const(0.5, x.dtype))], dims, dtype, compensated="exp-range")
    y = b.emit("Where", [inside, b.raw(op, [x], dims, dtype, compensated="exp-range"), b.binary("Mul", half, half)],
               dims, dtype)  # fmt: skip
    nan = _nan_of(b, x)
    return y if nan is None else b.emit("Where", [nan, x, y], dims, dtype)


def _round_half_even(b: Builder, x: Value) -> Value:
    """floor(x + 0.5), minus 1 on ties whose result is odd (torch rounds half to even)."""
    half = b.const(0.5, x.dtype)
    up = b.emit({"Activation": "Floor"}, [b.binary("Add", x, half)], x.dims, x.dtype)
    tie = b.cast(b.compare("Eq", b.binary("Sub", up, x), half), x.dtype)
    two = b.const(2.0, x.dtype)
    halved = b.emit({"Activation": "Floor"}, [b.binary("Div", up, two)], x.dims, x.dtype)
    odd = b.binary("Sub", up, b.binary("Mul", halved, two))
    return b.binary("Sub", up, b.binary("Mul", tie, odd))


def _where(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    if dtype in NARROW_DTYPES:  # where-narrow
        return _via(b, op, inputs, (1, 2), dims, dtype, "float32")
    if dtype == "int32":
        return _via(b, op, inputs, (1, 2), dims, dtype, "int64")
    return b.raw(op, inputs, dims, dtype)


# ── rounding to half precision ───────────────────────────────────────────────────────────────

# RLX number formats of the half dtypes, and the magnitude at which IEEE rounding overflows to inf
# (the largest finite value plus half an ulp: a tie there rounds to the even neighbour, infinity).
_HALF_FORMATS = {
    "float16": ({"exp_bits": 5, "man_bits": 10, "bias": 15, "max_normal": 65504.0}, 65520.0),
    "bfloat16": ({"exp_bits": 8, "man_bits": 7, "bias": 127, "max_normal": 3.3895313892515355e38}, 3.3961514e38),
}


def round_to(b: Builder, x: Value, dtype: str) -> Value:
    """x (computed as float32) rounded to `dtype`'s grid, nearest even, as torch stores a half tensor.

    RLX's RoundToFormat saturates at the format's largest value where IEEE rounding overflows to
    ±inf (round-to-format), so magnitudes at or past the overflow threshold become x * inf; and it
    flushes float32 subnormals to zero, so bfloat16's subnormals (|x| < 2**-126, multiples of
    2**-133) are rounded as |x| * 2**133 to an integer, half to even, scaled back (both exact) and
    given x's sign (a negative zero included)."""
    fmt, overflow = _HALF_FORMATS[dtype]
    x = b.cast(x, "float32") if x.dtype not in HALF_DTYPES else replace(x, dtype="float32")
    op = {"RoundToFormat": {"format": fmt, "scaling": "None"}}
    rounded = b.raw(op, [x], x.dims, "float32", compensated="round-to-format")
    magnitude = b.unary("Abs", x)
    big = b.compare("Ge", magnitude, b.const(overflow, "float32"))
    out = b.emit("Where", [big, b.binary("Mul", x, b.const(math.inf, "float32")), rounded], x.dims, "float32")
    if dtype == "bfloat16":
        scales = (2.0**66, 2.0**67)  # 2**133 in two exact steps: it is past float32's range
        steps = _round_half_even(
            b, b.binary("Mul", b.binary("Mul", magnitude, b.const(scales[0], "float32")), b.const(scales[1], "float32"))
        )
        for scale in scales:
            steps = b.binary("Mul", steps, b.const(1.0 / scale, "float32"))
        negative = b.compare("Lt", b.unary("Recip", x), b.const(0.0, "float32"))  # -0.0 too (1 / -0 = -inf)
        steps = b.emit("Where", [negative, b.unary("Neg", steps), steps], x.dims, "float32")
        tiny = b.compare("Lt", magnitude, b.const(2.0**-126, "float32"))
        out = b.emit("Where", [tiny, steps, out], x.dims, "float32")
    return replace(out, dtype=dtype)


# ── data movement ────────────────────────────────────────────────────────────────────────────


def _move(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """move-narrow / move-i32: data moves as float32 (narrow) or int64 (int32) when the kernel needs it."""
    kind = _kind(op)
    data = defects.DATA_POSITIONS.get(kind, tuple(range(len(inputs))))
    if dtype in NARROW_DTYPES:
        return _via(b, op, inputs, data, dims, dtype, "float32")
    if dtype == "int32" and kind not in defects.I32_SAFE:
        return _via(b, op, inputs, data, dims, dtype, "int64")
    return b.raw(op, inputs, dims, dtype)


def _trilu(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    spec = op["Trilu"]  # trilu: a Where against the constant triangle
    rows, cols = dims[-2], dims[-1]
    tri = np.triu if spec["upper"] else np.tril
    keep = tri(np.ones((rows, cols), dtype=bool), spec["diagonal"])
    zero = b.expand(b.const(0, x.dtype), dims)
    return b.emit("Where", [b.expand(b.const(keep, "bool"), dims), x, zero], dims, dtype)


def _gather(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, index = inputs
    if index.dtype != "int64":  # gather-index-dtype
        index = b.cast(index, "int64")
    return _move(b, op, [x, index], dims, dtype)


def _gather_elements(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, index = inputs
    axis = op["GatherElements"]["axis"]
    rlx = _rlx(x)
    if rlx == "F32" and x.dims[axis] < F32_EXACT:  # gather-elements: F32 data takes an F32 index
        return b.raw(op, [x, b.cast(index, "float32")], dims, dtype)
    if rlx == "I64":
        return b.raw(op, [x, b.cast(index, "int64")], dims, dtype)
    if dtype in NARROW_DTYPES:
        return b.cast(exact.gather_along(b, b.cast(x, "float32"), index, axis), dtype)
    return exact.gather_along(b, x, index, axis)


def _scatter(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    kind = _kind(op)
    x, index, src = inputs
    if index.dtype not in ("int64", "float32"):  # gather-index-dtype
        index = b.cast(index, "int64")
    reduction = op[kind]["reduction"]
    rlx = _rlx(x)
    if dtype in NARROW_DTYPES:
        return _via(b, op, [x, index, src], (0, 2), dims, dtype, "float32")
    if rlx == "F32":
        return _scatter_f32(b, kind, op, x, index, src, dtype)
    if reduction == "None":  # scatter-f64 / scatter-i64: scatter which update wins, then gather it
        return _scatter_by_winner(b, kind, op, x, index, src, dtype)
    if reduction == "Add" and rlx in ("I64", "I32", "F64"):
        return _scatter_add_one_hot(b, kind, op, x, index, src, dtype)
    if kind == "ScatterElements":
        return _scatter_dense(b, op, x, index, src, dtype)
    raise RlxLimit(f"{kind} with reduction {reduction} on {x.dtype} has no exact RLX route (RLX's scatters are "
                   "right for float32 data only)")  # fmt: skip


_MAX_DENSE_SCATTER = 1 << 24


def _scatter_dense(b: Builder, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """ScatterElements with a Mul/Max/Min reduction on integer/float64 data, exactly: along the scattered axis,
    a [target, update] one-hot selects each target's updates, which exact reductions combine with x."""
    spec = op["ScatterElements"]
    axis, reduction = spec["axis"] % x.rank, spec["reduction"]
    n, m = x.dims[axis], index.dims[axis]
    if index.numel * n > _MAX_DENSE_SCATTER:
        raise RlxLimit(f"scatter with reduction {reduction} on {x.dtype} is exact only up to {_MAX_DENSE_SCATTER} "
                       "(update, target) pairs (dense one-hot)")  # fmt: skip
    wide = "int64" if dtype not in ("float64",) else "float64"
    xt, back = b.to_last_axis(b.cast(x, wide), axis)
    it, _ = b.to_last_axis(b.cast(index, "int64"), axis)
    st, _ = b.to_last_axis(b.cast(src, wide), axis)
    lead = it.dims[:-1]  # the index's other extents (at most x's)
    sub = b.narrow_to(xt, (*lead, n))
    grid = (*lead, n, m)
    targets = b.expand(b.const(np.arange(n, dtype=np.int64).reshape(n, 1), "int64"), grid)
    hot = b.compare("Eq", b.expand(b.reshape(it, (*lead, 1, m)), grid), targets)
    identity = {"Mul": 1, "Max": -math.inf, "Min": math.inf}[reduction]
    if wide == "int64" and reduction != "Mul":
        info = np.iinfo(np.int64)
        identity = int(info.min) if reduction == "Max" else int(info.max)
    updates = b.expand(b.reshape(st, (*lead, 1, m)), grid)
    picked = b.emit("Where", [hot, updates, b.expand(b.const(identity, wide), grid)], grid, wide)
    reduced = b.reduce({"Mul": "Prod", "Max": "Max", "Min": "Min"}[reduction], picked, [len(grid) - 1], keep_dim=False)
    touched = b.compare("Ne", b.reduce("Sum", b.cast(hot, "float32"), [len(grid) - 1], keep_dim=False),
                        b.const(0.0, "float32"))  # fmt: skip
    combined = b.emit("Where", [touched, b.binary(reduction, sub, reduced), sub], sub.dims, wide)
    if sub.dims != xt.dims:  # positions beyond the index's extent keep x
        pads = [[0, xt.dims[a] - sub.dims[a]] for a in range(xt.rank)]
        combined = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [combined], xt.dims, wide)
        inside = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}},
                        [b.expand(b.const(1.0, "float32"), sub.dims)], xt.dims, "float32")  # fmt: skip
        combined = b.emit("Where", [b.compare("Ne", inside, b.const(0.0, "float32")), combined, xt], xt.dims, wide)
    return b.cast(b.transpose(combined, back), dtype)


_F32_MAX = float(np.finfo(np.float32).max)
_SCATTER_IDENTITY = {"Add": 0.0, "Mul": 1.0, "Max": -_F32_MAX, "Min": _F32_MAX}


def _scatter_f32(b: Builder, kind: str, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """The raw kernel, corrected where the data may hold inf/NaN (scatter-nonfinite: ScatterElements reads
    them as 0): there the result is x op (the updates reduced from the op's identity), or x if untouched."""
    raw = b.raw(op, [x, index, src], x.dims, dtype, compensated="scatter-nonfinite")
    if kind != "ScatterElements" or b.finite(x):
        return raw
    reduction = op[kind]["reduction"]
    ones = b.expand(b.const(1.0, "float32"), index.dims)
    zeros = b.expand(b.const(0.0, "float32"), x.dims)
    touched_op = {kind: {**op[kind], "reduction": "None"}}
    marks = b.raw(touched_op, [zeros, index, ones], x.dims, "float32", compensated="scatter-nonfinite")
    touched = b.compare("Ne", marks, b.const(0.0, "float32"))
    if reduction == "None":
        changed = raw
    else:
        identity = b.const(_SCATTER_IDENTITY[reduction], "float32")  # finite in float32, whatever dtype x is
        base = b.expand(replace(identity, dtype=dtype), x.dims)
        part = b.raw(op, [base, index, src], x.dims, dtype, compensated="scatter-nonfinite")
        changed = b.binary(reduction, x, part)
    finite = b.compare("Eq", b.binary("Sub", x, x), b.const(0.0, dtype))  # inf - inf and NaN - NaN are NaN
    fixed = b.emit("Where", [touched, changed, x], x.dims, dtype)
    return b.emit("Where", [finite, raw, fixed], x.dims, dtype)


def _scatter_by_winner(b: Builder, kind: str, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """Overwriting scatter of any dtype, exactly: scatter each update's position (float32, exact below 2**24)
    with RLX's right float32 kernel, then Gather the winning updates; untouched positions keep x."""
    if kind == "ScatterNd":  # [count, 1] index into the first axis; updates [count, *rest]
        count = src.dims[0]
        if index.rank != 2 or index.dims[1] != 1 or count >= F32_EXACT:
            raise RlxLimit("ScatterNd on integer/float64 data needs a [count, 1] index with count < 2**24")
        order = b.const(np.arange(count, dtype=np.float32).reshape(count, 1), "float32")
        start = b.expand(b.const(-1.0, "float32"), (x.dims[0], 1))
        winner = b.emit(op, [start, index, order], (x.dims[0], 1), "float32")
        rows = b.binary("Max", b.reshape(winner, (x.dims[0],)), b.const(0.0, "float32"))
        picked = b.emit({"Gather": {"axis": 0}}, [src, b.cast(rows, "int64")], x.dims, dtype)
        hit = b.expand(b.reshape(b.compare("Ge", winner, b.const(0.0, "float32")), (x.dims[0],) + (1,) * (x.rank - 1)),
                       x.dims)  # fmt: skip
        return b.emit("Where", [hit, picked, x], x.dims, dtype)
    axis = op[kind]["axis"] % x.rank
    if index.dims[axis] >= F32_EXACT:
        raise RlxLimit("scatter of integer/float64 data along an axis of 2**24 or more updates has no exact route")
    shape = [1] * index.rank
    shape[axis] = index.dims[axis]
    order = b.expand(b.const(np.arange(index.dims[axis], dtype=np.float32).reshape(shape), "float32"), index.dims)
    start = b.expand(b.const(-1.0, "float32"), x.dims)
    winner = b.emit(op, [start, index, order], x.dims, "float32")  # the axis coordinate of the update that lands
    pads = [[0, x.dims[a] - src.dims[a] if a != axis else 0] for a in range(x.rank)]
    if any(p[1] for p in pads):  # positions beyond the index's extent are never touched; pad src to reach them
        padded = tuple(x.dims[a] if a != axis else src.dims[a] for a in range(x.rank))
        src = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [src], padded, dtype)
    coord = b.cast(b.binary("Max", winner, b.const(0.0, "float32")), "int64")
    picked = exact.gather_along(b, src, coord, axis)
    return b.emit("Where", [b.compare("Ge", winner, b.const(0.0, "float32")), picked, x], x.dims, dtype)


def _scatter_add_one_hot(b: Builder, kind: str, op: Any, x: Value, index: Value, src: Value, dtype: str) -> Value:
    """Scatter-add of integer/float64 data as one-hot matmuls over the flattened target (exact.one_hot_add)."""
    if kind == "ScatterNd":  # the layer only sees ScatterNd with a [count, 1] index into the first axis
        if index.rank != 2 or index.dims[1] != 1:
            raise RlxLimit("ScatterNd add on integer/float64 data needs a [count, 1] index")
        flat, updates, target = b.reshape(b.cast(index, "int64"), (index.dims[0],)), src, x
    else:  # ScatterElements: flat positions of every update in the flattened target
        flat = b.reshape(exact.flat_positions(b, index, x.dims, op[kind]["axis"]), (index.numel,))
        updates, target = b.reshape(src, (index.numel, 1)), b.reshape(x, (x.numel, 1))
    if target.dims[0] * flat.dims[0] > exact.MAX_ONE_HOT:
        raise RlxLimit(f"integer/float64 scatter-add is exact only up to {exact.MAX_ONE_HOT} (target row, update) "
                       "pairs (one-hot matmul)")  # fmt: skip
    return b.reshape(exact.one_hot_add(b, target, flat, b.cast(updates, x.dtype)), x.dims)


# ── reductions, scans, sorting ───────────────────────────────────────────────────────────────


def _reduce(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    spec = op["Reduce"]
    red, keep = spec["op"], spec["keep_dim"]
    axes = sorted({a % x.rank for a in spec["axes"]}) if x.rank else []
    if not axes:  # a rank-0 tensor, or no axes: nothing to reduce (RLX's kernel panics on rank 0)
        return b.reshape(x, dims)
    rlx = _rlx(x)
    if rlx == "Bool":
        return b.cast(b.emit({"Reduce": {**spec, "axes": axes}}, [b.cast(x, "float32")], dims, "float32"), dtype)
    if rlx in defects.INTS:  # reduce-int: pairwise with exact int64 ops
        if red == "Mean":
            return b.cast(b.emit(op, [b.cast(x, "float64")], dims, "float64"), dtype)
        wide = b.cast(x, "int64")
        pair = {"Sum": "Add", "Prod": "Mul", "Max": "Max", "Min": "Min"}[red]
        return b.cast(exact.pairwise(b, pair, wide, axes, keep), dtype)
    if rlx == "F64" and red != "Sum":  # reduce-f64
        if red == "Mean":
            total = b.emit({"Reduce": {"op": "Sum", "axes": axes, "keep_dim": keep}}, [x], dims, dtype)
            return b.binary("Div", total, b.const(float(math.prod(x.dims[a] for a in axes)), dtype))
        pair = {"Prod": "Mul", "Max": "Max", "Min": "Min"}[red]
        return exact.pairwise(b, pair, x, axes, keep)
    nan_fix = red in ("Max", "Min") and rlx in ("F32", "F64") and not b.nan_free(x)
    y = _contiguous_reduce(b, red, x, axes, keep, dtype, compensated="reduce-nan" if nan_fix else "")
    if nan_fix:  # reduce-nan
        nan = b.cast(exact.is_nan(b, x), "float32")
        any_nan = b.compare("Ne", _contiguous_reduce(b, "Sum", nan, axes, keep, "float32"), b.const(0.0, "float32"))
        y = b.emit("Where", [any_nan, b.expand(b.const(math.nan, dtype), dims), y], dims, dtype)
    return y


def _contiguous_reduce(
    b: Builder, red: str, x: Value, axes: list[int], keep: bool, dtype: str, compensated: str = ""
) -> Value:
    """Raw Reduce nodes over runs of adjacent axes (the CPU kernel wants a contiguous range), highest first."""
    runs: list[list[int]] = []
    for a in axes:
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    y = x
    for run in reversed(runs):  # highest axes first, so lower indices stay valid
        out = tuple((1 if i in run else d) for i, d in enumerate(y.dims) if keep or i not in run)
        y = b.raw({"Reduce": {"op": red, "axes": run, "keep_dim": keep}}, [y], out, dtype, compensated=compensated)
    return y


def _scan(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    kind = _kind(op)
    spec = op[kind]
    if x.rank == 0:
        return b.reshape(b.emit({kind: {**spec, "axis": -1}}, [b.reshape(x, (1,))], (1,), dtype), dims)
    axis = spec["axis"] % x.rank
    if axis != x.rank - 1:  # scan-axis
        moved, back = b.to_last_axis(x, axis)
        y = b.emit({kind: {**spec, "axis": -1}}, [moved], moved.dims, dtype)
        return b.transpose(y, back)
    if spec["axis"] != -1:
        op = {kind: {**spec, "axis": -1}}
    rlx = _rlx(x)
    if spec.get("exclusive"):
        raise RlxLimit(f"exclusive {kind} is not used by any lowering")
    if rlx == "F32" or (kind == "Cumsum" and rlx == "I64"):
        return b.raw(op, [x], dims, dtype)
    if rlx in (*defects.INTS, "Bool"):  # cumprod-int; narrower ints accumulate in int64
        return b.cast(exact.scan(b, "Add" if kind == "Cumsum" else "Mul", b.cast(x, "int64")), dtype)
    return exact.scan(b, "Add" if kind == "Cumsum" else "Mul", x)  # scan-f64


def _check_sortable(x: Value, axis: int) -> None:
    n = x.dims[axis] if x.rank else 1
    if n > exact.MAX_EXACT_SORT:
        raise RlxLimit(f"sorting {x.dtype} over {n} > {exact.MAX_EXACT_SORT} elements has no exact RLX route "
                       "(the exact counting sort is O(n^2))")  # fmt: skip


def _sort(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    kind = _kind(op)
    if _rlx(x) == "F32":
        return b.raw(op, inputs, dims, dtype)
    spec = op[kind]  # sort-f64 (integers too)
    axis = spec["axis"] % max(x.rank, 1)
    _check_sortable(x, axis)
    values, order = b.memo(("sort", x.id, axis, spec["descending"]), lambda: exact.sort(b, x, axis, spec["descending"]))
    return values if kind == "Sort" else b.cast(order, dtype)


def _topk(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    (x,) = inputs
    if _rlx(x) == "F32":
        return b.raw(op, inputs, dims, dtype)
    _check_sortable(x, x.rank - 1)  # topk-f64: the exact sort, first k
    _, order = b.memo(("sort", x.id, x.rank - 1, True), lambda: exact.sort(b, x, x.rank - 1, True))
    return b.cast(b.narrow(order, x.rank - 1, 0, op["TopK"]["k"]), dtype)


def _arg_extreme(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    """argmax: the first index equal to the NaN-propagating extreme (every dtype)."""
    (x,) = inputs
    kind = _kind(op)
    axis = op[kind]["axis"] % max(x.rank, 1)
    values = b.reduce("Max" if kind == "ArgMax" else "Min", x, [axis], keep_dim=True)
    index = exact.first_index(b, x, values, axis)
    return b.cast(b.reshape(index, dims), dtype)


# ── linear algebra, convolution, normalization ───────────────────────────────────────────────

_MAX_INT_MATMUL = 1 << 24


def _matmul(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, y = inputs
    if _rlx(x) not in (*defects.INTS, "Bool"):
        return b.raw(op, inputs, dims, dtype)
    m, k, n = x.dims[-2], x.dims[-1], y.dims[-1]  # matmul-int: broadcast Mul, pairwise Sum over k
    if math.prod(dims) * k > _MAX_INT_MATMUL:
        raise RlxLimit(f"integer matmul with {math.prod(dims) * k} products > {_MAX_INT_MATMUL} has no exact RLX "
                       "route (RLX's MatMul is float-only)")  # fmt: skip
    a = b.reshape(b.cast(x, "int64"), (*x.dims[:-2], m, k, 1))
    c = b.reshape(b.cast(y, "int64"), (*y.dims[:-2], 1, k, n))
    products = b.binary("Mul", a, c)
    return b.cast(exact.pairwise(b, "Add", products, [products.rank - 2], keep_dim=False), dtype)


def _conv(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, w = inputs
    spec = op[_kind(op)]
    if _rlx(x) in defects.INTS:  # conv-f64 / conv3d-f64 (integers too): in float64, exact while |sums| < 2**53
        wide = exact.conv(b, b.cast(x, "float64"), b.cast(w, "float64"), spec, dims)
        return b.cast(wide, dtype)
    if _rlx(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    return exact.conv(b, x, w, spec, dims)  # conv-f64 / conv3d-f64


def _conv_transpose(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, w = inputs
    spec = op[_kind(op)]
    if _rlx(x) in defects.INTS:  # conv-transpose-f64 / conv-transpose3d-f64 (integers too): in float64
        wide = exact.conv_transpose(b, b.cast(x, "float64"), b.cast(w, "float64"), spec, dims)
        return b.cast(wide, dtype)
    if _rlx(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    return exact.conv_transpose(b, x, w, spec, dims)  # conv-transpose-f64 / conv-transpose3d-f64


def _batch_norm(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, gamma, beta, mean, var = inputs
    if _rlx(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    eps = b.const(op["BatchNormInference"]["eps"], dtype)  # norm-f64: (x - mean) * gamma / sqrt(var + eps) + beta
    scale = b.binary("Mul", gamma, b.emit({"Activation": "Rsqrt"}, [b.binary("Add", var, eps)], var.dims, dtype))
    return b.binary("Add", b.binary("Mul", b.binary("Sub", x, mean), scale), beta)


def _group_norm(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    x, gamma, beta = inputs
    if _rlx(x) != "F64":
        return b.raw(op, inputs, dims, dtype)
    spec = op["GroupNorm"]  # norm-f64: per (n, group) statistics from Sum reductions
    n, c, groups = x.dims[0], x.dims[1], spec["num_groups"]
    flat = b.reshape(x, (n, groups, x.numel // (n * groups)))
    mean = b.reduce("Mean", flat, [2], keep_dim=True)
    centered = b.binary("Sub", flat, mean)
    var = b.reduce("Mean", b.binary("Mul", centered, centered), [2], keep_dim=True)
    rstd = b.emit({"Activation": "Rsqrt"}, [b.binary("Add", var, b.const(spec["eps"], dtype))], var.dims, dtype)
    y = b.reshape(b.binary("Mul", centered, rstd), x.dims)
    affine = (1, c, *([1] * (x.rank - 2)))
    return b.binary("Add", b.binary("Mul", y, b.reshape(gamma, affine)), b.reshape(beta, affine))


def _pool(b: Builder, op: Any, inputs: list[Value], dims: tuple[int, ...], dtype: str) -> Value:
    if _rlx(inputs[0]) != "F32":  # pool-f64: the pool family unrolls other dtypes (native_pool)
        raise LoweringError(f"internal error: Pool on {inputs[0].dtype} reached RLX; the pool family unrolls it")
    return b.raw(op, inputs, dims, dtype)


def native_pool(dtype: str) -> bool:
    """Whether RLX's fused Pool computes this dtype right (pool-f64)."""
    return compute_rlx(dtype) == "F32"


_RULES: dict[str, Callable[[Builder, Any, list[Value], tuple[int, ...], str], Value]] = {
    "Compare": _compare,
    "Binary": _binary,
    "Clamp": _clamp,
    "Activation": _activation,
    "Where": _where,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "ScatterElements": _scatter,
    "ScatterNd": _scatter,
    "Trilu": _trilu,
    "Reduce": _reduce,
    "Cumsum": _scan,
    "CumProd": _scan,
    "Sort": _sort,
    "ArgSort": _sort,
    "TopK": _topk,
    "ArgMax": _arg_extreme,
    "ArgMin": _arg_extreme,
    "MatMul": _matmul,
    "Conv": _conv,
    "Conv3d": _conv,
    "ConvTranspose2d": _conv_transpose,
    "ConvTranspose3d": _conv_transpose,
    "BatchNormInference": _batch_norm,
    "GroupNorm": _group_norm,
    "Pool": _pool,
    **dict.fromkeys(("Transpose", "Slice", "Narrow", "Concat", "Expand", "Reverse", "Roll", "Tile", "Pad"), _move),
}


def protect_outputs(program: Program) -> None:
    """transpose-output: each graph output made by a Transpose node is read through a same-shape
    Reshape (RLX elides a Transpose whose only reader is a MatMul, output or not)."""
    from ..program import RlxNode

    by_id = {n.id: n for n in program.nodes}
    for i, out in enumerate(program.outputs):
        node = by_id.get(out)
        if node is None or _kind(node.op) != "Transpose":
            continue
        kept = RlxNode(f"{out}#out{i}", {"Reshape": {"new_shape": list(node.dims)}}, (out,), node.dims, node.dtype,
                       node.provenance)  # fmt: skip
        program.nodes.append(kept)
        program.outputs[i] = kept.id


def audit(program: Program, nan_free: Collection[str] = (), compensated: Mapping[str, str] | None = None) -> None:
    """Raise LoweringError if any node of `program` is a raw op on a known-defect path.

    `nan_free`: value ids that cannot hold NaN (NaN-only defects do not concern them);
    `compensated`: node id -> the defect the layer corrects right after that node."""
    compensated = compensated or {}
    dtypes = {v.name: v.dtype for v in (*program.inputs, *program.params)}
    found = []
    for node in program.nodes:
        ins = [dtypes[i] for i in node.inputs]
        dtypes[node.id] = node.dtype
        may_nan = any(i not in nan_free for i in node.inputs)
        for defect in defects.DEFECTS:
            if (defect.nan_only and not may_nan) or compensated.get(node.id) == defect.key:
                continue
            if not defect.accepted and defect.hits(node.op, ins, node.dtype):
                found.append(f"{node.provenance.label()}: {op_name(node.op)}({', '.join(ins)}) -> {node.dtype} "
                             f"meets RLX defect {defect.key!r}")  # fmt: skip
    if found:
        raise LoweringError(
            "internal error: raw RLX ops on known-defect paths (an op family bypassed lower/workarounds.py):\n  "
            + "\n  ".join(found[:20])
        )
