"""Pooling (max, average, adaptive; 1-D, 2-D and 3-D), its backward ops, and col2im (fold).

Tensors are [N, C, *spatial] (unbatched [C, *spatial] gets a unit batch). Windows follow
torch: output o reads input o*s - p + i*d for tap i; padding never wins a max and
ceil_mode only lengthens the output. RLX `Pool` (2-D and 3-D kernels; 1-D runs as 2-D with a
unit height) takes the plain float32 cases; dilation, max indices and float64 unroll the
window into one strided slice per tap, folded elementwise; adaptive max indices gather each
window onto a trailing axis. Backward ops are static: the average pools' are a constant 0/1
(or 1/len) matrix per axis, max's a scatter-add at the recorded indices; col2im is a grouped
transposed convolution with a one-hot kernel.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ...dtypes import FLOAT_DTYPES, INT_DTYPES
from ...sizes import sizes
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ..rlx.rules_compute import native_pool
from ._common import contract_axis, gather_axis


def _spatial(call: Call) -> int:
    """Number of spatial axes, from the overload name (max_pool3d_with_indices -> 3; col2im -> 2)."""
    found = re.search(r"(\d)d", call.target)
    return int(found.group(1)) if found else 2


def _ntuple(v: int | list[int], n: int) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * n if len(v) == 1 else v


@dataclass(frozen=True)
class Window:
    """Per spatial axis: kernel, stride (defaults to kernel), padding, dilation."""

    k: list[int]
    s: list[int]
    p: list[int]
    d: list[int]

    @classmethod
    def of(cls, call: Call, n: int) -> Window:
        k = _ntuple(call["kernel_size"], n)
        return cls(
            k,
            _ntuple(call.get("stride") or k, n),
            _ntuple(call.get("padding", 0), n),
            _ntuple(call.get("dilation", 1), n),
        )

    def starts(self, a: int, n_out: int) -> np.ndarray:
        """First input coordinate (possibly in the padding) of each output window on axis `a`."""
        return np.arange(n_out) * self.s[a] - self.p[a]

    def first_in_bounds(self, a: int, n_out: int) -> np.ndarray:
        """The first tap of each window on axis `a` that is not padding (torch steps by d past it)."""
        start = self.starts(a, n_out)
        return start + np.maximum(0, -(start // self.d[a])) * self.d[a]


def _batched(b: Builder, x: Value, n: int) -> Value:
    """[C, *spatial] -> [1, C, *spatial]; batched input passes through."""
    return b.reshape(x, (1, *x.dims)) if x.rank == n + 1 else x


def _check_pool(call: Call) -> str | None:
    n, x = _spatial(call), call["self"]
    rank, dtype = getattr(x, "rank", n + 2), getattr(x, "dtype", "float32")
    if rank not in (n + 1, n + 2):
        return f"rank-{rank} input is not supported by {n}-D pooling (rank {n + 1} or {n + 2})"
    if dtype not in FLOAT_DTYPES and dtype not in INT_DTYPES:
        return f"pooling {dtype} input is not supported (float or integer)"
    return None


# ── windows ──────────────────────────────────────────────────────────────


def _pad_axis(b: Builder, x: Value, axis: int, before: int, after: int, fill: float) -> Value:
    """Concatenate `fill` blocks before/after `x` along `axis` (fill stays out of op fields)."""
    parts = []
    for size in (before, after):
        dims = list(x.dims)
        dims[axis] = size
        parts.append(b.expand(b.const(fill, x.dtype), tuple(dims)) if size else None)
    pieces = [v for v in (parts[0], x, parts[1]) if v is not None]
    if len(pieces) == 1:
        return x
    dims = list(x.dims)
    dims[axis] += before + after
    return b.emit({"Concat": {"axis": axis}}, pieces, dims, x.dtype)


def _taps(b: Builder, x: Value, w: Window, out: tuple[int, ...], fill: float) -> list[tuple[tuple[int, ...], Value]]:
    """(tap, x_pad[.., o*s + i*d, ..]) for every kernel tap in row-major order; `fill` pads (and ceil overhang)."""
    n = len(w.k)
    for a in range(n):
        axis = 2 + a
        extent = (out[a] - 1) * w.s[a] + (w.k[a] - 1) * w.d[a] + 1
        x = _pad_axis(b, x, axis, w.p[a], max(0, extent - x.dims[axis] - w.p[a]), fill)
    taps: list[tuple[tuple[int, ...], Value]] = [((), x)]
    for a in range(n):  # slices of one axis are shared by every tap that follows them
        taps = [((*tap, i), b.strided(v, 2 + a, i * w.d[a], out[a], w.s[a])) for tap, v in taps for i in range(w.k[a])]
    return taps


def _fold(b: Builder, taps: list[tuple[tuple[int, ...], Value]], op: str) -> Value:
    """Left fold of the tap values with a binary op (Max / Add)."""
    y = taps[0][1]
    for _, v in taps[1:]:
        y = b.binary(op, y, v)
    return y


def _rlx_pool(b: Builder, x: Value, kind: str, w: Window, out: tuple[int, ...]) -> Value:
    """RLX Pool over [N, C, *spatial] (skips padding and ceil overhang); 1-D runs with a unit height."""
    lead = x.dims[:2]
    if len(w.k) == 1:
        x2 = b.reshape(x, (*lead, 1, x.dims[2]))
        op = {"Pool": {"kind": kind, "kernel_size": [1, *w.k], "stride": [1, *w.s], "padding": [0, *w.p]}}
        return b.reshape(b.emit(op, [x2], (*lead, 1, *out), x.dtype), (*lead, *out))
    op = {"Pool": {"kind": kind, "kernel_size": w.k, "stride": w.s, "padding": w.p}}
    return b.emit(op, [x], (*lead, *out), x.dtype)


def _native(x: Value, w: Window) -> bool:
    """Whether RLX's fused Pool computes this window exactly (its dtype, no dilation)."""
    return native_pool(x.dtype) and all(d == 1 for d in w.d)


# ── max pooling ──────────────────────────────────────────────────────────


def _flat_index(in_sp: tuple[int, ...], coords: list[np.ndarray]) -> np.ndarray:
    """Row-major flat index into `in_sp` of the outer grid of per-axis coordinates."""
    grids = np.meshgrid(*coords, indexing="ij")
    flat = np.zeros(grids[0].shape, dtype=np.int64)
    for a, g in enumerate(grids):
        flat += g.astype(np.int64) * math.prod(in_sp[a + 1 :])
    return flat


def _greater_or_nan(b: Builder, v: Value, best: Value) -> Value:
    """v > best or v is NaN (torch's max-pool update rule), as a bool tensor."""
    gt = b.cast(b.compare("Gt", v, best), "float32")
    nan = b.cast(b.compare("Ne", v, v), "float32")
    return b.compare("Ne", b.binary("Max", gt, nan), b.const(0.0, "float32"))


def _max_with_indices(b: Builder, x: Value, w: Window, out: tuple[int, ...]) -> tuple[Value, Value]:
    """torch's scan in tap order: a tap wins when greater than the running max or NaN; the index
    starts at the window's first in-bounds tap (so an all -inf window still names a real input)."""
    in_sp = x.dims[2:]
    taps = _taps(b, x, w, out, -math.inf)
    dims = taps[0][1].dims
    first = [w.first_in_bounds(a, out[a]) for a in range(len(out))]
    best = b.expand(b.const(-math.inf, x.dtype), dims)
    index = b.expand(b.const(_flat_index(in_sp, first), "int64"), dims)
    for tap, v in taps:
        pos = _flat_index(in_sp, [w.starts(a, out[a]) + i * w.d[a] for a, i in enumerate(tap)])
        take = _greater_or_nan(b, v, best)
        best = b.emit("Where", [take, v, best], dims, x.dtype)
        index = b.emit("Where", [take, b.expand(b.const(pos, "int64"), dims), index], dims, "int64")
    return best, index


@lowers(
    "aten.max_pool1d.default",
    "aten.max_pool2d.default",
    "aten.max_pool3d.default",
    "aten.max_pool2d_with_indices.default",
    check=_check_pool,
    kind="movement",
)
@lowers("aten.max_pool1d_with_indices.default", "aten.max_pool3d_with_indices.default", check=_check_pool)
def max_pool(b: Builder, call: Call) -> Value | list[Value | None]:
    """Max over each (dilated) window; padding never wins; indices are flat into the input's spatial plane.

    Integer input is pooled in float64 (exact below 2**53) and cast back.
    """
    n = _spatial(call)
    x, w = _batched(b, call.tensor("self"), n), Window.of(call, n)
    out, dtype = call.out_dims[-n:], x.dtype
    x = x if dtype in FLOAT_DTYPES else b.cast(x, "float64")
    if call.target.endswith("with_indices.default"):
        y, index = _max_with_indices(b, x, w, out)
        return [b.reshape(b.cast(y, dtype), call.out_dims), b.reshape(index, call.out_dims)]
    y = _rlx_pool(b, x, "Max", w, out) if _native(x, w) else _fold(b, _taps(b, x, w, out, -math.inf), "Max")
    return b.reshape(b.cast(y, dtype), call.out_dims)


# ── average pooling ──────────────────────────────────────────────────────


def _window_counts(n_in: int, n_out: int, k: int, s: int, p: int, include_pad: bool) -> np.ndarray:
    """torch's per-axis avg-pool divisor: window length clipped to [-p, n + p), or to [0, n) without padding."""
    start = np.arange(n_out) * s - p
    end = np.minimum(start + k, n_in + p)
    if include_pad:
        return (end - start).astype(np.float64)
    return (np.minimum(end, n_in) - np.maximum(start, 0)).astype(np.float64)


def _avg_divisors(call: Call, in_sp: tuple[int, ...], out: tuple[int, ...], w: Window) -> np.ndarray:
    """torch's avg-pool divisor for every output position (count_include_pad, ceil_mode, divisor_override)."""
    if call.get("divisor_override") is not None:
        return np.full(out, float(call["divisor_override"]))
    include_pad = bool(call.get("count_include_pad", True))
    divisor = np.ones(())
    for a in range(len(out)):
        divisor = np.multiply.outer(divisor, _window_counts(in_sp[a], out[a], w.k[a], w.s[a], w.p[a], include_pad))
    return divisor


@lowers(
    "aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default", check=_check_pool, kind="reduction"
)
def avg_pool(b: Builder, call: Call) -> Value:
    """Window sum (padding counts as 0) divided by torch's divisor map (count_include_pad, ceil_mode, override);
    integers divide truncating toward zero."""
    n = _spatial(call)
    x, w = _batched(b, call.tensor("self"), n), Window.of(call, n)
    out, dtype = call.out_dims[-n:], x.dtype
    if dtype not in FLOAT_DTYPES:  # integers: exact float64 sums, divided and truncated as torch's int kernel does
        x = b.cast(x, "float64")
    total = _rlx_pool(b, x, "Sum", w, out) if _native(x, w) else _fold(b, _taps(b, x, w, out, 0.0), "Add")
    y = b.binary("Div", total, b.const(_avg_divisors(call, x.dims[2:], out, w), x.dtype))
    if dtype not in FLOAT_DTYPES:
        y = b.cast(b.trunc(y), dtype)
    return b.reshape(y, call.out_dims)


def _membership(n_in: int, n_out: int, k: int, s: int, p: int) -> np.ndarray:
    """[n_out, n_in] with 1 where input i lies in output window o."""
    start = (np.arange(n_out) * s - p)[:, None]
    i = np.arange(n_in)[None, :]
    return ((i >= start) & (i < start + k)).astype(np.float64)


def _check_backward(call: Call) -> str | None:
    dtype = getattr(call["grad_output"], "dtype", "float32")
    return None if dtype in FLOAT_DTYPES else f"{dtype} gradients are not supported (float only)"


@lowers("aten.avg_pool2d_backward.default", "aten.avg_pool3d_backward.default", check=_check_backward)
def avg_pool_backward(b: Builder, call: Call) -> Value:
    """grad_input[i] = sum over windows o holding i of grad[o] / divisor[o]: a 0/1 matrix per axis."""
    n = _spatial(call)
    g, x, w = call.tensor("grad_output"), call.tensor("self"), Window.of(call, n)
    in_sp, out = x.dims[-n:], g.dims[-n:]
    g = b.binary("Div", g, b.const(_avg_divisors(call, in_sp, out, w), g.dtype))
    for a in range(n):
        member = _membership(in_sp[a], out[a], w.k[a], w.s[a], w.p[a])
        g = contract_axis(b, g, g.rank - n + a, member.T)
    return b.cast(g, call.out_dtype)


# ── adaptive pooling ─────────────────────────────────────────────────────


def _check_adaptive(call: Call) -> str | None:
    n, x = _spatial(call), call["self"]
    rank = getattr(x, "rank", n + 2)
    if rank not in (n + 1, n + 2):
        return f"rank-{rank} input is not supported by {n}-D adaptive pooling (rank {n + 1} or {n + 2})"
    if any(o in (None, 0) for o in _ntuple(call["output_size"], n)):
        return "output_size with None/0 entries is not supported"
    return None


def _adaptive_bounds(n_in: int, n_out: int) -> list[tuple[int, int]]:
    """torch's adaptive windows [floor(o*n/out), ceil((o+1)*n/out))."""
    return [((o * n_in) // n_out, -((-(o + 1) * n_in) // n_out)) for o in range(n_out)]


def _adaptive_axis(b: Builder, x: Value, axis: int, out: int, kind: str) -> Value:
    """Pool one axis to `out` cells: one reshape + reduce when the windows are uniform, else per cell."""
    n = x.dims[axis]
    if n == out:
        return x
    if n % out == 0:
        split = b.reshape(x, (*x.dims[:axis], out, n // out, *x.dims[axis + 1 :]))
        return b.reduce(kind, split, [axis + 1], keep_dim=False)
    cells = [
        b.reduce(kind, b.narrow(x, axis, lo, hi - lo), [axis], keep_dim=True) for lo, hi in _adaptive_bounds(n, out)
    ]
    dims = list(x.dims)
    dims[axis] = out
    return b.emit({"Concat": {"axis": axis}}, cells, dims, x.dtype)


def _adaptive(b: Builder, call: Call, kind: str) -> Value:
    """Separable adaptive pooling, one spatial axis after another (a mean/max of a box is separable)."""
    n, x = _spatial(call), call.tensor("self")
    out = _ntuple(call["output_size"], n)
    first = x.rank - n
    if all(o == 1 for o in out):
        return b.reshape(b.reduce(kind, x, list(range(first, x.rank)), keep_dim=True), call.out_dims)
    for a in range(n):
        x = _adaptive_axis(b, x, first + a, out[a], kind)
    return b.reshape(x, call.out_dims)


@lowers(
    "aten.adaptive_avg_pool1d.default",
    "aten.adaptive_avg_pool2d.default",
    "aten.adaptive_avg_pool3d.default",
    check=_check_adaptive,
    kind="reduction",
)
@lowers("aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool3d.default", check=_check_adaptive)
def adaptive_avg_pool(b: Builder, call: Call) -> Value:
    """Mean over torch's adaptive windows [floor(i*In/Out), ceil((i+1)*In/Out)) per spatial axis."""
    return _adaptive(b, call, "Mean")


@lowers(
    "aten.adaptive_max_pool1d.default",
    "aten.adaptive_max_pool2d.default",
    "aten.adaptive_max_pool3d.default",
    check=_check_adaptive,
)
def adaptive_max_pool(b: Builder, call: Call) -> list[Value | None]:
    """Max over torch's adaptive windows; indices (flat into the input's spatial plane) by torch's scan."""
    return [_adaptive(b, call, "Max"), b.reshape(_adaptive_argmax(b, call), sizes(call.node.outputs[1].shape))]


def _adaptive_argmax(b: Builder, call: Call) -> Value:
    """torch's scan of each adaptive window in row-major order (a value wins when greater than the running
    max or NaN), vectorized: the last NaN's position if the window holds one, else the first position of
    its max. Each window is gathered onto a trailing axis (a shorter window repeats its last element, which
    changes neither rule) beside a constant table of the flat input positions."""
    n, x = _spatial(call), call.tensor("self")
    first, out = x.rank - n, _ntuple(call["output_size"], n)
    in_sp = x.dims[first:]
    reads = []  # per axis: [out, longest window] input coordinates
    for a in range(n):
        bounds = _adaptive_bounds(in_sp[a], out[a])
        longest = max(hi - lo for lo, hi in bounds)
        reads.append(np.array([[lo + min(k, hi - lo - 1) for k in range(longest)] for lo, hi in bounds]))
    win = x
    for a, r in enumerate(reads):  # axis a becomes (cell, tap)
        axis = first + 2 * a
        win = gather_axis(b, win, axis, r.reshape(-1))
        win = b.reshape(win, (*win.dims[:axis], *r.shape, *win.dims[axis + 1 :]))
    cells, taps = [first + 2 * a for a in range(n)], [first + 2 * a + 1 for a in range(n)]
    win = b.transpose(win, [*range(first), *cells, *taps])
    size = math.prod(r.shape[1] for r in reads)
    win = b.reshape(win, (*x.dims[:first], *out, size))
    pos = np.zeros([*out, *(r.shape[1] for r in reads)], dtype=np.int64)
    for a, r in enumerate(reads):  # flat position: sum of coordinate * row-major stride
        shape = [1] * (2 * n)
        shape[a], shape[n + a] = r.shape
        pos = pos + r.reshape(shape) * math.prod(in_sp[a + 1 :])
    pos_v = b.expand(b.const(pos.reshape(*out, size), "int64"), win.dims)
    peak = b.reduce("Max", win, [win.rank - 1], keep_dim=True)

    def where_pos(cond: Value, fill: int) -> Value:
        return b.emit("Where", [cond, pos_v, b.expand(b.const(fill, "int64"), win.dims)], win.dims, "int64")

    first_peak = b.reduce("Min", where_pos(b.compare("Eq", win, peak), math.prod(in_sp)), [win.rank - 1], False)
    last_nan = b.reduce("Max", where_pos(b.compare("Ne", win, win), -1), [win.rank - 1], False)
    has_nan = b.compare("Ge", last_nan, b.const(0, "int64"))
    return b.emit("Where", [has_nan, last_nan, first_peak], last_nan.dims, "int64")


def _adaptive_matrix(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] averaging matrix of the adaptive windows (1/len on each window)."""
    m = np.zeros((n_out, n_in))
    for o, (lo, hi) in enumerate(_adaptive_bounds(n_in, n_out)):
        m[o, lo:hi] = 1.0 / (hi - lo)
    return m


@lowers(
    "aten._adaptive_avg_pool2d_backward.default",
    "aten._adaptive_avg_pool3d_backward.default",
    check=_check_backward,
)
def adaptive_avg_pool_backward(b: Builder, call: Call) -> Value:
    """grad_input[i] = sum over windows o holding i of grad[o] / len(o): the averaging matrix transposed per axis."""
    n = _spatial(call)
    g, x = call.tensor("grad_output"), call.tensor("self")
    for a in range(n):
        axis = g.rank - n + a
        g = contract_axis(b, g, axis, _adaptive_matrix(x.dims[x.rank - n + a], g.dims[axis]).T)
    return b.cast(g, call.out_dtype)


# ── max pooling backward ─────────────────────────────────────────────────


def _check_max_backward(call: Call) -> str | None:
    dtype = getattr(call["self"], "dtype", "float32")
    return None if dtype in FLOAT_DTYPES else f"{dtype} gradients are not supported (float only)"


@lowers(
    "aten.max_pool2d_with_indices_backward.default",
    "aten.max_pool3d_with_indices_backward.default",
    check=_check_max_backward,
)
def max_pool_backward(b: Builder, call: Call) -> Value:
    """grad_input.flat[indices[o]] += grad[o] per (n, c) plane: a ScatterElements add into zeros."""
    n = _spatial(call)
    g, x, idx = call.tensor("grad_output"), call.tensor("self"), call.tensor("indices")
    planes, size, count = math.prod(x.dims[:-n]), math.prod(x.dims[-n:]), math.prod(g.dims[-n:])
    zeros = b.expand(b.const(0.0, x.dtype), (planes, size))
    index = b.reshape(idx, (planes, count))
    grad = b.reshape(b.cast(g, x.dtype), (planes, count))
    op = {"ScatterElements": {"axis": 1, "reduction": "Add"}}
    return b.reshape(b.emit(op, [zeros, index, grad], (planes, size), x.dtype), x.dims)


# ── col2im (fold) ────────────────────────────────────────────────────────


def _check_col2im(call: Call) -> str | None:
    x = call["self"]
    rank = getattr(x, "rank", 3)
    if rank not in (2, 3):
        return f"rank-{rank} input is not supported by col2im (rank 2 or 3)"
    return None


@lowers("aten.col2im.default", check=_check_col2im)
def col2im(b: Builder, call: Call) -> Value:
    """out[n, c, o*s - p + i*d] += cols[n, c*K + i, o]: a transposed convolution (groups = C) with a one-hot kernel."""
    x = call.tensor("self")
    x = b.reshape(x, (1, *x.dims)) if x.rank == 2 else x
    k, s = _ntuple(call["kernel_size"], 2), _ntuple(call["stride"], 2)
    p, d = _ntuple(call["padding"], 2), _ntuple(call["dilation"], 2)
    size = _ntuple(call["output_size"], 2)
    blocks = [(size[a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(2)]
    taps = k[0] * k[1]
    channels = x.dims[1] // taps
    weight = np.zeros((channels * taps, 1, *k))
    for c in range(channels):
        for t in range(taps):
            weight[c * taps + t, 0, t // k[1], t % k[1]] = 1.0
    full = [(blocks[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 for a in range(2)]
    op = {
        "ConvTranspose2d": {
            "kernel_size": k,
            "stride": s,
            "padding": [0, 0],
            "dilation": d,
            "output_padding": [0, 0],
            "groups": channels,
        }
    }
    cols = b.reshape(x, (x.dims[0], x.dims[1], *blocks))
    y = b.emit(op, [cols, b.const(weight, x.dtype)], (x.dims[0], channels, *full), x.dtype)
    for a in range(2):  # the padded frame [-p, full - p) cropped / zero-extended to [0, size)
        axis, kept = 2 + a, min(size[a], full[a] - p[a])
        y = _pad_axis(b, b.narrow(y, axis, p[a], kept), axis, 0, size[a] - kept, 0.0)
    return b.reshape(y, call.out_dims)
