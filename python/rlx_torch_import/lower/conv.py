"""Convolution, transposed convolution and pooling (2-D NCHW; 1-D runs as 2-D with a unit height)."""

from __future__ import annotations

import math

import numpy as np

from .context import Builder, Call, Value
from .registry import lowers


def _pair(v: int | list[int], n: int = 2) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * n if len(v) == 1 else v


def _check_conv(call: Call) -> str | None:
    w = call["weight"]
    if isinstance(call.get("padding"), str):
        return None if call["padding"] in ("valid", "same") else f"padding={call['padding']!r} is not supported"
    rank = getattr(w, "rank", 4)
    if rank not in (3, 4):
        return f"{rank - 2}-D convolution is not supported (only 1-D and 2-D)"
    return None


def _as_2d(b: Builder, x: Value) -> Value:
    """[N, C, L] -> [N, C, 1, L] (rank-4 input passes through)."""
    return b.reshape(x, (x.dims[0], x.dims[1], 1, x.dims[2])) if x.rank == 3 else x


def _add_bias(b: Builder, y: Value, bias: Value | None) -> Value:
    """y + bias[None, :, None, None]."""
    return y if bias is None else b.binary("Add", y, b.reshape(bias, (1, bias.dims[0], 1, 1)))


@lowers(
    "aten.conv2d.default",
    "aten.conv1d.default",
    "aten.convolution.default",
    "aten.conv2d.padding",
    "aten.conv1d.padding",
    check=_check_conv,
)
def conv(b: Builder, call: Call) -> Value:
    """Grouped, strided, dilated, padded convolution; bias is a broadcast add."""
    if call.get("transposed", False):
        return _conv_transpose(b, call)
    x, w = call.tensor("input"), call.tensor("weight")
    one_d = w.rank == 3
    x, w = _as_2d(b, x), _as_2d(b, w)
    n = 1 if one_d else 2
    stride, dilation = _pair(call.get("stride", 1), n), _pair(call.get("dilation", 1), n)
    padding = call.get("padding", 0)
    kernel = list(w.dims[2:])
    if padding == "valid":
        padding = [0] * n
    elif padding == "same":
        padding = [d * (k - 1) // 2 for d, k in zip(dilation, kernel[-n:], strict=True)]
    padding = _pair(padding, n)
    if one_d:
        stride, dilation, padding = [1, *stride], [1, *dilation], [0, *padding]
    out_dims = call.out_dims if not one_d else (call.out_dims[0], call.out_dims[1], 1, call.out_dims[2])
    y = conv2d_node(b, x, w, out_dims, (stride, padding, dilation), int(call.get("groups", 1)))
    return b.reshape(_add_bias(b, y, call.get("bias")), call.out_dims)


def conv2d_node(
    b: Builder, x: Value, w: Value, out_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """One RLX Conv on NCHW `x` with weight [C_out, C_in/groups, kH, kW]; geometry = (stride, padding, dilation)."""
    stride, padding, dilation = geometry
    op = {
        "Conv": {
            "kernel_size": list(w.dims[2:]),
            "stride": list(stride),
            "padding": list(padding),
            "dilation": list(dilation),
            "groups": groups,
        }
    }
    return b.emit(op, [x, w], out_dims, x.dtype)


def conv_transpose2d_node(
    b: Builder, x: Value, w: Value, out_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """One RLX ConvTranspose2d (weight [C_in, C_out/groups, kH, kW]); geometry = (stride, padding, dilation,
    output_padding)."""
    stride, padding, dilation, output_padding = geometry
    op = {
        "ConvTranspose2d": {
            "kernel_size": list(w.dims[2:]),
            "stride": list(stride),
            "padding": list(padding),
            "dilation": list(dilation),
            "output_padding": list(output_padding),
            "groups": groups,
        }
    }
    return b.emit(op, [x, w], out_dims, x.dtype)


def _check_conv_transpose(call: Call) -> str | None:
    rank = getattr(call["weight"], "rank", 4)
    return None if rank in (3, 4) else f"{rank - 2}-D transposed convolution is not supported (only 1-D and 2-D)"


@lowers("aten.conv_transpose2d.input", "aten.conv_transpose1d.default", check=_check_conv_transpose)
def conv_transpose(b: Builder, call: Call) -> Value:
    """Transposed (fractionally strided) convolution, weight [C_in, C_out/groups, kH, kW]; bias added."""
    return _conv_transpose(b, call)


def _conv_transpose(b: Builder, call: Call) -> Value:
    """y[n, co, oh, ow] = sum x[n, ci, ih, iw] * w[ci, co, kh, kw] where oh = ih*s - p + kh*d."""
    x, w = call.tensor("input"), call.tensor("weight")
    one_d = w.rank == 3
    x, w = _as_2d(b, x), _as_2d(b, w)
    n = 1 if one_d else 2

    def arg(name: str, default: int) -> list[int]:
        v = _pair(call.get(name, default), n)
        return [default, *v] if one_d else v

    out_dims = call.out_dims if not one_d else (call.out_dims[0], call.out_dims[1], 1, call.out_dims[2])
    geometry = (arg("stride", 1), arg("padding", 0), arg("dilation", 1), arg("output_padding", 0))
    y = conv_transpose2d_node(b, x, w, out_dims, geometry, int(call.get("groups", 1)))
    return b.reshape(_add_bias(b, y, call.get("bias")), call.out_dims)


# ── pooling ──────────────────────────────────────────────────────────────


def _pool_args(call: Call) -> tuple[list[int], list[int], list[int]]:
    """kernel, stride (defaults to kernel), padding."""
    k = _pair(call["kernel_size"])
    return k, _pair(call.get("stride") or k), _pair(call.get("padding", 0))


def _check_pool(call: Call) -> str | None:
    x = call["self"]
    if getattr(x, "rank", 4) != 4:
        return "only 4-D (NCHW) input is supported"
    return None


@lowers(
    "aten.max_pool2d.default",
    "aten.max_pool2d_with_indices.default",
    check=_check_pool,
)
def max_pool2d(b: Builder, call: Call) -> Value | list[Value | None]:
    """Max over each (dilated) window; padding never wins; ceil_mode only changes the output size."""
    x = call.tensor("self")
    k, s, p = _pool_args(call)
    d = _pair(call.get("dilation", 1))
    if d == [1, 1]:
        # RLX skips padded and overhanging (ceil_mode) positions, like torch's -inf padding.
        op = {"Pool": {"kind": "Max", "kernel_size": k, "stride": s, "padding": p}}
        y = b.emit(op, [x], call.out_dims, x.dtype)
    else:
        y = _dilated_max_pool(b, x, k, s, p, d, call.out_dims[2:])
    return [y, None] if call.target.endswith("with_indices.default") else y


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


def _strided(b: Builder, x: Value, axis: int, start: int, length: int, step: int) -> Value:
    """x[start : start + length*step : step] along `axis`."""
    if start == 0 and length == x.dims[axis] and step == 1:
        return x
    dims = list(x.dims)
    dims[axis] = length
    if step == 1:
        return b.emit({"Narrow": {"axis": axis, "start": start, "len": length}}, [x], dims, x.dtype)
    return b.emit({"Slice": {"axis": axis, "start": start, "len": length, "step": step}}, [x], dims, x.dtype)


def _dilated_max_pool(
    b: Builder, x: Value, k: list[int], s: list[int], p: list[int], d: list[int], out: tuple[int, ...]
) -> Value:
    """max over (i, j) of x_pad[h*s + i*d, w*s + j*d], x padded with -inf."""
    for axis in (2, 3):
        a = axis - 2
        extent = (out[a] - 1) * s[a] + (k[a] - 1) * d[a] + 1
        x = _pad_axis(b, x, axis, p[a], max(0, extent - x.dims[axis] - p[a]), -math.inf)
    windows = [
        _strided(b, _strided(b, x, 2, i * d[0], out[0], s[0]), 3, j * d[1], out[1], s[1])
        for i in range(k[0])
        for j in range(k[1])
    ]
    y = windows[0]
    for win in windows[1:]:
        y = b.binary("Max", y, win)
    return y


def _avg_divisors(call: Call) -> np.ndarray:
    """torch's avg_pool2d divisor per output position ([Ho, Wo]), as in its CPU kernel."""
    x = call["self"]
    k, s, p = _pool_args(call)
    if call.get("divisor_override") is not None:
        return np.full(call.out_dims[2:], float(call["divisor_override"]))
    include_pad = call.get("count_include_pad", True)
    sizes = []
    for a in range(2):
        n_in, counts = x.dims[2 + a], []
        for o in range(call.out_dims[2 + a]):
            start = o * s[a] - p[a]
            end = min(start + k[a], n_in + p[a])
            full = end - start
            clipped = min(end, n_in) - max(start, 0)
            counts.append(full if include_pad else clipped)
        sizes.append(np.asarray(counts, dtype=np.float64))
    return np.outer(sizes[0], sizes[1])


@lowers("aten.avg_pool2d.default", check=_check_pool)
def avg_pool2d(b: Builder, call: Call) -> Value:
    """Window sum (padding counts as 0) divided by torch's divisor map (count_include_pad, ceil_mode, override)."""
    x = call.tensor("self")
    k, s, p = _pool_args(call)
    op = {"Pool": {"kind": "Sum", "kernel_size": k, "stride": s, "padding": p}}
    total = b.emit(op, [x], call.out_dims, x.dtype)
    return b.binary("Div", total, b.const(_avg_divisors(call), x.dtype))


# ── adaptive pooling ─────────────────────────────────────────────────────


def _check_adaptive(call: Call) -> str | None:
    x = call["self"]
    if getattr(x, "rank", 4) not in (3, 4):
        return "only 3-D (CHW) and 4-D (NCHW) input is supported"
    out = _pair(call["output_size"])
    if any(o in (None, 0) for o in out):
        return "output_size with None/0 entries is not supported"
    return None


def _adaptive_axis(b: Builder, x: Value, axis: int, out: int, kind: str) -> Value:
    """Pool one axis to `out` cells; cell i covers [floor(i*n/out), ceil((i+1)*n/out))."""
    n = x.dims[axis]
    if n == out:
        return x
    if n % out == 0:  # uniform windows: one pooling node
        k = [n // out if axis == 2 else 1, n // out if axis == 3 else 1]
        dims = list(x.dims)
        dims[axis] = out
        return b.emit({"Pool": {"kind": kind, "kernel_size": k, "stride": k, "padding": [0, 0]}}, [x], dims, x.dtype)
    cells = []
    for i in range(out):
        start, end = (i * n) // out, -((-(i + 1) * n) // out)
        cells.append(b.reduce(kind, _strided(b, x, axis, start, end - start, 1), [axis], keep_dim=True))
    dims = list(x.dims)
    dims[axis] = out
    return b.emit({"Concat": {"axis": axis}}, cells, dims, x.dtype)


def _adaptive(b: Builder, call: Call, kind: str) -> Value:
    """Separable adaptive pooling: rows, then columns (a mean/max of a rectangle is separable)."""
    x = call.tensor("self")
    out = _pair(call["output_size"])
    x4 = b.reshape(x, (1, *x.dims)) if x.rank == 3 else x
    if out == [1, 1]:
        y = b.reduce(kind, x4, [2, 3], keep_dim=True)
    else:
        y = _adaptive_axis(b, _adaptive_axis(b, x4, 2, out[0], kind), 3, out[1], kind)
    return b.reshape(y, call.out_dims)


@lowers("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default", check=_check_adaptive)
def adaptive_avg_pool2d(b: Builder, call: Call) -> Value:
    """Mean over torch's adaptive windows [floor(i*In/Out), ceil((i+1)*In/Out))."""
    return _adaptive(b, call, "Mean")


@lowers("aten.adaptive_max_pool2d.default", check=_check_adaptive)
def adaptive_max_pool2d(b: Builder, call: Call) -> list[Value | None]:
    """Max over torch's adaptive windows; the indices output is not produced."""
    return [_adaptive(b, call, "Max"), None]
