"""Exact building blocks for the RLX workaround layer (and `expm1`/`log1p`, which op families use too).

Each computes an op RLX gets wrong from kernels that are right (see `defects.py`):
F32 compares and reductions, I64 integer arithmetic, F64 elementwise math and Sum,
Gather with I64 indices, F64 MatMul. Every function emits through `b.emit`, so the
pieces it uses are themselves routed through the layer.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...dtypes import F32_EXACT, HALF_DTYPES, compute_rlx

if TYPE_CHECKING:
    from ..builder import Builder
    from ..call import Value

# Above this many elements on the sorted axis the O(n^2) counting sort is refused.
MAX_EXACT_SORT = 4096
# One-hot accumulation (integer / float64 scatter-add) is refused beyond this many (row, update) pairs.
MAX_ONE_HOT = 1 << 22


def flag(b: Builder, cond: Value) -> Value:
    """bool -> float32 0/1 (and/or/not become Mul/Max/1 - x)."""
    return b.cast(cond, "float32")


def any_true(b: Builder, conds: list[Value]) -> Value:
    """Elementwise OR of bool tensors."""
    acc = flag(b, conds[0])
    for c in conds[1:]:
        acc = b.binary("Max", acc, flag(b, c))
    return b.compare("Ne", acc, b.const(0.0, "float32"))


def expm1(b: Builder, x: Value) -> Value:
    """exp(x) - 1 without losing small x (Kahan): (u - 1) * x / log(u) for u = exp(x); x where u rounds
    to 1, u for u = inf, -1 where u - 1 rounds to -1 (float dtypes)."""
    one = b.const(1.0, x.dtype)
    u = b.unary("Exp", x)
    um1 = b.binary("Sub", u, one)
    r = b.binary("Mul", um1, b.binary("Div", x, b.unary("Log", u)))
    for cond, value in (
        (b.compare("Eq", u, b.const(math.inf, x.dtype)), u),
        (b.compare("Eq", um1, b.const(-1.0, x.dtype)), b.expand(b.const(-1.0, x.dtype), x.dims)),
        (b.compare("Eq", u, one), x),
    ):
        r = b.emit("Where", [cond, value, r], x.dims, x.dtype)
    return r


def log1p(b: Builder, x: Value) -> Value:
    """log(1 + x) without losing small x (Kahan): log(u) * x / (u - 1) for u = 1 + x; x where u rounds
    to 1, log(u) for u = inf (float dtypes)."""
    one = b.const(1.0, x.dtype)
    u = b.binary("Add", x, one)
    d = b.binary("Sub", u, one)
    log_u = b.unary("Log", u)
    r = b.binary("Mul", log_u, b.binary("Div", x, d))
    r = b.emit("Where", [b.compare("Eq", u, b.const(math.inf, x.dtype)), log_u, r], x.dims, x.dtype)
    return b.emit("Where", [b.compare("Eq", d, b.const(0.0, x.dtype)), x, r], x.dims, x.dtype)


# 1.5 * 2**23: adding it to a float32 of magnitude below 2**22 leaves no fraction bits, so the sum is rounded
# to an integer by IEEE addition itself (half to even); subtracting it again is exact.
_ROUNDING_MAGIC = 12582912.0
ROUND_SMALL_LIMIT = 2**22


def round_small(b: Builder, x: Value) -> Value:
    """float32 x rounded half to even, exact where |x| < ROUND_SMALL_LIMIT (2**22), by two IEEE additions
    (two nodes that RLX folds and fuses exactly). Beyond the limit the result keeps x's sign and is at
    least 2**21 in magnitude; NaN and infinities pass through; a zero result is +0.0. Only for callers
    whose range keeps it exact: quantization codes clamped to |code| < 2**20 (`lower/ops/quantized.py`,
    proved by `tests/ops/test_quantized.py`'s `quantize_past_2_22` sample), and the scaled bfloat16
    subnormals of `rules_elementwise.round_to` (non-negative and below 2**7). Any other rounding goes
    through `round_half_even` (RLX's Round: the workaround layer)."""
    magic = b.const(_ROUNDING_MAGIC, "float32")
    return b.binary("Sub", b.binary("Add", x, magic, "float32"), magic, "float32")


def integral_from(dtype: str) -> float:
    """The magnitude from which every value of float `dtype` (as RLX computes it) is an integer: 2**52 for
    float64, 2**23 for float32 and the half dtypes (computed as float32; their own limits are lower)."""
    return 2.0**52 if compute_rlx(dtype) == "F64" else 2.0**23


def round_half_even(b: Builder, x: Value) -> Value:
    """x rounded to the nearest integer, ties to even (torch.round, ONNX Round), over the whole range of a
    float dtype without RLX's Round (whose constant folding rounds ties away from zero, `round-fold`):
    |x| + 2**p - 2**p for |x| < 2**p (p = 52 for float64, 23 otherwise, `integral_from`): the sum has no
    fraction bits, so IEEE addition rounds it half to even, and subtracting 2**p again is exact; every
    larger |x| is an integer already and passes through, as do ±inf and NaN. The result takes x's sign,
    a zero included (round(-0.4) = round(-0.0) = -0.0, as torch). Eight nodes and three constants."""
    if x.dtype in HALF_DTYPES:  # computed as float32: 2**23 as a float16 constant would be inf
        return replace(round_half_even(b, replace(x, dtype="float32")), dtype=x.dtype)
    limit = b.const(integral_from(x.dtype), x.dtype)
    magnitude = b.unary("Abs", x)
    rounded = b.binary("Sub", b.binary("Add", magnitude, limit), limit)
    rounded = b.emit("Where", [b.compare("Lt", magnitude, limit), rounded, magnitude], x.dims, x.dtype)
    return with_sign_of(b, rounded, x)


def negative(b: Builder, x: Value) -> Value:
    """x < 0 (bool; false for -0.0 and NaN). float64 is read through its sign (-1/0/+1, exact), cast to
    float32: RLX's F64 Compare is wrong, and a float32 cast of x would turn tiny negatives into -0.0."""
    if compute_rlx(x.dtype) == "F64":
        x = b.cast(b.unary("Sign", x), "float32")
    return b.emit({"Compare": "Lt"}, [x, b.const(0.0, x.dtype)], x.dims, "bool")


def with_sign_of(b: Builder, magnitude: Value, x: Value) -> Value:
    """A non-negative (or NaN) `magnitude` with the sign of x, zeros included: -magnitude where x < 0, x
    itself where x is ±0 (so a zero x keeps its own sign)."""
    signed = b.emit("Where", [negative(b, x), b.unary("Neg", magnitude), magnitude], x.dims, x.dtype)
    zero = b.const(0.0, x.dtype)
    if compute_rlx(x.dtype) == "F64":  # x == 0 as the float32 cast of its sign (RLX's F64 Compare is wrong)
        is_zero = b.emit(
            {"Compare": "Eq"}, [b.cast(b.unary("Sign", x), "float32"), b.const(0.0, "float32")], x.dims, "bool"
        )
    else:
        is_zero = b.emit({"Compare": "Eq"}, [x, zero], x.dims, "bool")
    return b.emit("Where", [is_zero, x, signed], x.dims, x.dtype)


def trunc(b: Builder, x: Value) -> Value:
    """Round toward zero (torch.trunc, torch.fix): Ceil where x < 0, else Floor (both exact in RLX's
    kernels and constant folding), so -0.0, ±inf and NaN pass through and trunc(-0.7) = -0.0."""
    return b.emit("Where", [negative(b, x), b.unary("Ceil", x), b.unary("Floor", x)], x.dims, x.dtype)


def is_nan(b: Builder, x: Value) -> Value:
    """x != x (bool). float64 is tested after a cast to float32 (NaN stays NaN; RLX's F64 Compare is wrong)."""
    if compute_rlx(x.dtype) == "F64":
        x = b.cast(x, "float32")
    return b.emit({"Compare": "Ne"}, [x, x], x.dims, "bool")


def compare_f64(b: Builder, op: str, x: Value, y: Value) -> Value:
    """float64 x <op> y without RLX's F64 Compare: from s = sign(x - y) as int64 (F64 Sub/Sign and I64
    Compare are exact). x - y is NaN when an operand is NaN (nothing holds but Ne) or for equal
    infinities, told apart by x + y, which is NaN for opposite infinities only (those give a finite
    nonzero sign already) and for NaN operands."""
    diff = b.binary("Sub", x, y)
    sign = b.cast(b.emit({"Activation": "Sign"}, [diff], diff.dims, "float64"), "int64")
    defined = flag(b, _not(b, is_nan(b, diff)))  # RLX's Sign gives 0 for NaN, like torch

    def signed(cmp: str) -> Value:
        return b.binary(
            "Mul", flag(b, b.emit({"Compare": cmp}, [sign, b.const(0, "int64")], diff.dims, "bool")), defined
        )

    both_inf = b.binary(
        "Mul", b.binary("Sub", b.const(1.0, "float32"), defined), flag(b, _not(b, is_nan(b, b.binary("Add", x, y))))
    )
    equal = b.binary("Max", signed("Eq"), both_inf)
    if op == "Eq":
        result = equal
    elif op == "Ne":
        result = b.binary("Sub", b.const(1.0, "float32"), equal)
    else:
        result = signed(op)
        if op in ("Le", "Ge"):
            result = b.binary("Max", signed("Lt" if op == "Le" else "Gt"), equal)
    return b.compare("Ne", result, b.const(0.0, "float32"))


def last_axes(b: Builder, x: Value, axes: list[int]) -> Value:
    """`x` with the `axes` moved last and merged into one."""
    rest = [a for a in range(x.rank) if a not in axes]
    y = b.transpose(x, rest + axes)
    return b.reshape(y, (*(x.dims[a] for a in rest), math.prod(x.dims[a] for a in axes)))


def reduced_dims(x: Value, axes: list[int], keep_dim: bool) -> tuple[int, ...]:
    return tuple((1 if a in axes else d) for a, d in enumerate(x.dims) if keep_dim or a not in axes)


def pairwise(b: Builder, op: str, x: Value, axes: list[int], keep_dim: bool) -> Value:
    """Reduce `axes` of x by halving with an elementwise Binary `op` (exact when the op is: integer
    Add/Mul/Max/Min wrap like torch; float64 Max/Min; float64 Mul is correctly rounded per step)."""
    y = last_axes(b, x, axes)
    while y.dims[-1] > 1:
        half, odd = divmod(y.dims[-1], 2)
        last = y.rank - 1
        paired = b.binary(op, b.narrow(y, last, 0, half), b.narrow(y, last, half, half))
        if odd:
            leftover = b.narrow(y, last, 2 * half, 1)
            paired = b.emit({"Concat": {"axis": last}}, [paired, leftover], (*y.dims[:-1], half + 1), y.dtype)
        y = paired
    if y.dims[-1] == 0:  # an empty reduction: the op's identity
        identity = {"Add": 0, "Mul": 1, "Max": -math.inf, "Min": math.inf}[op]
        y = b.expand(b.const(identity, y.dtype), (*y.dims[:-1], 1))
    return b.reshape(y, reduced_dims(x, axes, keep_dim))


def running_total(b: Builder, x: Value, axes: list[int], keep_dim: bool) -> Value:
    """The int64 sum over `axes` of x as the last element of RLX's Cumsum (exact for I64) over the axes
    merged last with one 0 after them (so the scan is never empty: RLX's CPU Cumsum divides by its length).
    One graph at every length, where `pairwise`'s halving is a tree shaped by the length: for a sum over a
    size that differs between runs (a dynamic dim, a size a stage computes)."""
    y = last_axes(b, x, axes)
    n, last = y.dims[-1], y.rank - 1
    zero = b.expand(b.const(0, y.dtype), (*y.dims[:-1], 1))
    padded = b.emit({"Concat": {"axis": last}}, [y, zero], (*y.dims[:-1], n + 1), y.dtype)
    running = b.emit({"Cumsum": {"axis": -1, "exclusive": False}}, [padded], padded.dims, y.dtype)
    return b.reshape(b.narrow(running, last, n, 1), reduced_dims(x, axes, keep_dim))


def scan(b: Builder, op: str, x: Value, identity: float | None = None) -> Value:
    """Inclusive scan of the last axis with Binary `op` (Add/Mul, or Max/Min with their `identity`) in
    log2(n) steps (Hillis-Steele): y_k = y_{k-1} op shift(y_{k-1}, 2**(k-1)), the shift filled with op's
    identity."""
    n, last = x.dims[-1], x.rank - 1
    if identity is None:
        identity = 0 if op == "Add" else 1
    y, step = x, 1
    while step < n:
        fill = b.expand(b.const(identity, x.dtype), (*x.dims[:-1], step))
        shifted = b.emit({"Concat": {"axis": last}}, [fill, b.narrow(y, last, 0, n - step)], x.dims, x.dtype)
        y = b.binary(op, y, shifted)
        step *= 2
    return y


def split24(b: Builder, x: Value) -> tuple[Value, Value]:
    """Integer x == hi * 2**24 + lo with 0 <= lo < 2**24; both float32-exact while |x| < 2**48."""
    wide = b.cast(x, "int64")
    hi = b.binary("Div", wide, b.const(F32_EXACT, "int64"))  # truncates toward zero
    lo = b.binary("Sub", wide, b.binary("Mul", hi, b.const(F32_EXACT, "int64")))
    negative = b.cast(b.compare("Lt", lo, b.const(0, "int64")), "int64")  # floor: lo in [0, 2**24)
    hi = b.binary("Sub", hi, negative)
    lo = b.binary("Add", lo, b.binary("Mul", negative, b.const(F32_EXACT, "int64")))
    return b.cast(hi, "float32"), b.cast(lo, "float32")


def first_index(b: Builder, x: Value, values: Value, axis: int) -> Value:
    """The smallest index along `axis` where x equals `values` (kept axis) or both are NaN, as float32."""
    n = x.dims[axis]
    shape = [1] * x.rank
    shape[axis] = n
    positions = b.expand(b.const(np.arange(n, dtype=np.float32).reshape(shape), "float32"), x.dims)
    beyond = b.expand(b.const(float(n), "float32"), x.dims)
    hit = b.compare("Eq", x, values)
    if compute_rlx(x.dtype) in ("F32", "F64"):
        both_nan = _and(b, is_nan(b, x), b.expand(is_nan(b, values), x.dims), x.dims)
        hit = any_true(b, [hit, both_nan])
    picked = b.emit("Where", [hit, positions, beyond], x.dims, "float32")
    return b.emit({"Reduce": {"op": "Min", "axes": [axis], "keep_dim": True}}, [picked], values.dims, "float32")


def sort(b: Builder, x: Value, axis: int, descending: bool) -> tuple[Value, Value]:
    """(values, float32 indices) of a stable sort along `axis` by counting:
    rank_i = #{j: x_j before x_i} + #{j < i: x_j == x_i}, NaN above +inf (torch's order).

    Compares are exact for every dtype (the layer routes them); O(n^2) in the axis length."""
    xt, back = b.to_last_axis(x, axis)
    n = xt.dims[-1]
    key = xt if compute_rlx(x.dtype) in ("F32", "F64") else b.cast(xt, "int64")
    col = b.reshape(key, (*xt.dims, 1))  # x_i
    row = b.reshape(key, (*xt.dims[:-1], 1, n))  # x_j
    before = b.compare("Gt" if descending else "Lt", row, col)
    equal = b.compare("Eq", row, col)
    if compute_rlx(key.dtype) in ("F32", "F64"):  # NaN sorts above everything, ties among NaN are equal
        nan_i, nan_j = b.compare("Ne", col, col), b.compare("Ne", row, row)
        grid = (*xt.dims, n)
        if descending:
            before = any_true(b, [before, _and(b, nan_j, _not(b, nan_i), grid)])
        else:
            before = any_true(b, [before, _and(b, nan_i, _not(b, nan_j), grid)])
        equal = any_true(b, [equal, _and(b, nan_i, nan_j, grid)])
    earlier = b.const(np.tril(np.ones((n, n), dtype=np.float32), -1), "float32")  # j < i
    count = b.binary("Add", flag(b, before), b.binary("Mul", flag(b, equal), earlier))
    rank = b.emit({"Reduce": {"op": "Sum", "axes": [xt.rank], "keep_dim": False}}, [count], xt.dims, "float32")
    # The permutation: order[rank_i] = i (float32 holds n <= MAX_EXACT_SORT exactly).
    positions = b.expand(b.const(np.arange(n, dtype=np.float32), "float32"), xt.dims)
    op = {"ScatterElements": {"axis": xt.rank - 1, "reduction": "None"}}
    order = b.emit(op, [positions, rank, positions], xt.dims, "float32")
    values = gather_along(b, xt, b.cast(order, "int64"), xt.rank - 1)
    return b.transpose(values, back), b.transpose(order, back)


def _and(b: Builder, p: Value, q: Value, dims: tuple[int, ...]) -> Value:
    both = b.binary("Mul", b.expand(flag(b, p), dims), b.expand(flag(b, q), dims))
    return b.compare("Ne", both, b.const(0.0, "float32"))


def _not(b: Builder, p: Value) -> Value:
    return b.compare("Eq", flag(b, p), b.const(0.0, "float32"))


def gather_along(b: Builder, x: Value, index: Value, axis: int) -> Value:
    """torch.gather(x, axis, index) (index int64, in range) as one Gather on the flattened x with
    positions index * stride(axis) + the row-major offset of every other coordinate (exact for any dtype)."""
    flat = flat_positions(b, index, x.dims, axis)
    return b.emit({"Gather": {"axis": 0}}, [b.reshape(x, (x.numel,)), flat], index.dims, x.dtype)


def flat_positions(b: Builder, index: Value, dims: tuple[int, ...], axis: int) -> Value:
    """int64 row-major positions in a tensor of `dims` of every element of `index` read as coordinates
    along `axis` (the other coordinates are the element's own): index * stride(axis) + offsets."""
    strides = [math.prod(dims[a + 1 :]) for a in range(len(dims))]
    base = np.zeros(index.dims, dtype=np.int64)
    for a, n in enumerate(index.dims):
        if a != axis:
            shape = [1] * index.rank
            shape[a] = n
            base = base + (np.arange(n, dtype=np.int64) * strides[a]).reshape(shape)
    scaled = b.binary("Mul", b.cast(index, "int64"), b.const(strides[axis], "int64"))
    return b.binary("Add", scaled, b.const(base, "int64"))


def one_hot_add(b: Builder, data: Value, flat: Value, updates: Value) -> Value:
    """data[flat[i]] += updates[i] along data's first axis (flat: [count] int64, updates: [count, *rest]),
    exactly for int64 (as float32-exact halves summed by float64 matmuls, exact while sums < 2**53) and in
    float64 rounding for float64."""
    rows, count = data.dims[0], flat.dims[0]
    width = math.prod(data.dims[1:])
    positions = b.expand(b.const(np.arange(rows).reshape(rows, 1), "int64"), (rows, count))
    hot = b.cast(b.compare("Eq", positions, b.expand(b.reshape(flat, (1, count)), (rows, count))), "float64")
    upd = b.reshape(updates, (count, width))
    if data.dtype == "float64":
        total = b.matmul(hot, upd)
        return b.reshape(b.binary("Add", b.reshape(data, (rows, width)), total), data.dims)
    hi, lo = (b.cast(b.matmul(hot, b.cast(h, "float64")), "int64") for h in split24(b, upd))
    total = b.binary("Add", b.binary("Mul", hi, b.const(F32_EXACT, "int64")), lo)
    summed = b.binary("Add", b.reshape(b.cast(data, "int64"), (rows, width)), total)
    return b.reshape(b.cast(summed, data.dtype), data.dims)


def conv(b: Builder, x: Value, w: Value, spec: dict[str, Any], dims: tuple[int, ...]) -> Value:
    """Convolution over every axis after [N, C] (RLX Conv / Conv3d fields) as strided-slice taps contracted by
    MatMul, per group: cols[n, c*K + k, p] = x_pad[n, c, o*s + i*d, ...] for tap k (row-major over the kernel);
    out = W_g @ cols_g."""
    n, c = x.dims[0], x.dims[1]
    co, cg, *kernel = w.dims
    stride, padding, dilation, groups = spec["stride"], spec["padding"], spec["dilation"], spec["groups"]
    out = dims[2:]
    if any(padding):
        pads = [[0, 0], [0, 0], *[[p, p] for p in padding]]
        padded = (n, c, *(d + 2 * p for d, p in zip(x.dims[2:], padding, strict=True)))
        x = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [x], padded, x.dtype)
    taps = [x]
    for a, k in enumerate(kernel):  # slices of one axis are shared by every tap that follows them
        taps = [b.strided(t, 2 + a, i * dilation[a], out[a], stride[a]) for t in taps for i in range(k)]
    size, ksize = math.prod(out), math.prod(kernel)
    taps = [b.reshape(t, (n, c, 1, size)) for t in taps]
    cols = taps[0] if len(taps) == 1 else b.emit({"Concat": {"axis": 2}}, taps, (n, c, ksize, size), x.dtype)
    per_group = co // groups
    outs = []
    for g in range(groups):
        cols_g = b.reshape(b.narrow(cols, 1, g * cg, cg), (n, cg * ksize, size))
        w_g = b.reshape(b.narrow(w, 0, g * per_group, per_group), (1, per_group, cg * ksize))
        outs.append(b.matmul(b.expand(w_g, (n, per_group, cg * ksize)), cols_g))
    out_v = outs[0] if groups == 1 else b.emit({"Concat": {"axis": 1}}, outs, (n, co, size), x.dtype)
    return b.reshape(out_v, dims)


def _stuff(b: Builder, x: Value, axis: int, s: int) -> Value:
    """s - 1 zeros between neighbours along `axis`: [.., L, ..] -> [.., (L - 1) * s + 1, ..]."""
    if s == 1 or x.dims[axis] == 1:
        return x
    length = x.dims[axis]
    col = b.reshape(x, (*x.dims[: axis + 1], 1, *x.dims[axis + 1 :]))
    zeros_dims = list(col.dims)
    zeros_dims[axis + 1] = s - 1
    both = list(col.dims)
    both[axis + 1] = s
    col = b.emit(
        {"Concat": {"axis": axis + 1}}, [col, b.expand(b.const(0.0, x.dtype), tuple(zeros_dims))], both, x.dtype
    )
    merged = list(x.dims)
    merged[axis] = length * s
    return b.narrow(b.reshape(col, merged), axis, 0, (length - 1) * s + 1)


def conv_transpose(b: Builder, x: Value, w: Value, spec: dict[str, Any], dims: tuple[int, ...]) -> Value:
    """Transposed convolution (RLX ConvTranspose2d / 3d fields, weight [C_in, C_out/g, *k]) as a stride-1
    `conv` of the zero-stuffed input (s - 1 zeros between neighbours), padded by d*(k-1) - p before and that
    plus output_padding after (cropped where negative), with the kernel flipped and in/out channels swapped
    per group."""
    stride, padding, dilation = spec["stride"], spec["padding"], spec["dilation"]
    out_pad, groups = spec["output_padding"], spec["groups"]
    kernel = w.dims[2:]
    pads = [[0, 0], [0, 0]]
    for a, k in enumerate(kernel):
        axis = 2 + a
        x = _stuff(b, x, axis, stride[a])
        before = dilation[a] * (k - 1) - padding[a]
        after = before + out_pad[a]
        start, stop = max(0, -before), x.dims[axis] - max(0, -after)
        x = b.narrow(x, axis, start, stop - start)
        pads.append([max(0, before), max(0, after)])
    if any(p for pair in pads for p in pair):
        padded = tuple(d + lo + hi for d, (lo, hi) in zip(x.dims, pads, strict=True))
        x = b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [x], padded, x.dtype)
    c_in, c_out_g = w.dims[0], w.dims[1]
    c_in_g, n = c_in // groups, len(kernel)
    wt = b.reshape(w, (groups, c_in_g, c_out_g, *kernel))
    wt = b.reshape(b.transpose(wt, [0, 2, 1, *range(3, 3 + n)]), (groups * c_out_g, c_in_g, *kernel))
    wt = b.emit({"Reverse": {"axes": list(range(2, 2 + n))}}, [wt], wt.dims, wt.dtype)
    plain = {"stride": [1] * n, "padding": [0] * n, "dilation": list(dilation), "groups": groups}
    return conv(b, x, wt, plain, dims)
