"""Backward (gradient) ops, built from the forward kernels: convolution, layer/group norm, embedding.

Training graphs carry these explicitly; each output is produced only when its `output_mask` entry is set.
"""

from __future__ import annotations

import math

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ._common import conv2d_node, conv_transpose2d_node


def _to_2d(b: Builder, x: Value) -> Value:
    """[N, C, L] -> [N, C, 1, L] (rank-4 passes through): 1-D convolution runs as 2-D."""
    return b.reshape(x, (x.dims[0], x.dims[1], 1, x.dims[2])) if x.rank == 3 else x


def _spatial(values: list[int], n: int, fill: int) -> list[int]:
    """A per-axis argument for the 2-D kernels (1-D gets a unit leading axis)."""
    values = list(values) * n if len(values) == 1 else list(values)
    return [fill, *values] if n == 1 else values


def _check_conv_backward(call: Call) -> str | None:
    rank = getattr(call["weight"], "rank", 4)
    if rank not in (3, 4):
        return f"{rank - 2}-D convolution_backward is not supported (only 1-D and 2-D)"
    return None


def _grad_weight(b: Builder, x: Value, dy: Value, geometry: tuple[list[int], ...], groups: int, k: list[int]) -> Value:
    """gw[o, i, kh, kw] = sum_n,p dy[n, o, p] * x_pad[n, i, p*s + k*d]: a correlation of x with dy.

    Batch becomes the reduced channel axis: x' = [C_in/g, g*N, H, W], dy' = [C_out, N, Ho, Wo] as the
    weight of a grouped Conv with stride and dilation swapped; the result [C_in/g, C_out, K', ...] is cut
    to the kernel (K' can exceed it when rows of x are never read) and transposed.
    """
    stride, padding, dilation = geometry
    n, c_in = x.dims[:2]
    cig = c_in // groups
    xg = b.reshape(x, (n, groups, cig, *x.dims[2:]))
    xg = b.reshape(b.transpose(xg, [2, 1, 0, 3, 4]), (cig, groups * n, *x.dims[2:]))
    dyt = b.transpose(dy, [1, 0, 2, 3])
    full = [(x.dims[2 + a] + 2 * padding[a] - stride[a] * (dy.dims[2 + a] - 1) - 1) // dilation[a] + 1 for a in (0, 1)]
    gw = conv2d_node(b, xg, dyt, (cig, dy.dims[1], *full), (dilation, padding, stride), groups)
    gw = b.narrow(b.narrow(gw, 2, 0, k[0]), 3, 0, k[1])
    return b.transpose(gw, [1, 0, 2, 3])


def _grad_input(
    b: Builder, dy: Value, w: Value, x_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """dx = conv_transpose(dy, w), output padding chosen so the result has x's size."""
    stride, padding, dilation = geometry
    k = w.dims[2:]
    out_pad = [
        x_dims[2 + a] - ((dy.dims[2 + a] - 1) * stride[a] - 2 * padding[a] + dilation[a] * (k[a] - 1) + 1)
        for a in (0, 1)
    ]
    return conv_transpose2d_node(b, dy, w, x_dims, (stride, padding, dilation, out_pad), groups)


@lowers("aten.convolution_backward.default", check=_check_conv_backward)
def convolution_backward(b: Builder, call: Call) -> list[Value | None]:
    """(grad_input, grad_weight, grad_bias) of (transposed) convolution, per output_mask.

    Convolution: dx is a transposed conv of dy with w, dw a correlation of x with dy, db = sum dy.
    Transposed convolution swaps the roles: dx is a conv of dy with w, dw a correlation of dy with x.
    """
    dy, x, w = call.tensor("grad_output"), call.tensor("input"), call.tensor("weight")
    n = w.rank - 2
    geometry = tuple(_spatial(call[name], n, fill) for name, fill in (("stride", 1), ("padding", 0), ("dilation", 1)))
    groups, mask = int(call["groups"]), list(call["output_mask"])
    dy4, x4, w4 = _to_2d(b, dy), _to_2d(b, x), _to_2d(b, w)
    transposed = bool(call["transposed"])
    outs: list[Value | None] = [None, None, None]
    if mask[0]:
        if transposed:
            dx = conv2d_node(b, dy4, w4, x4.dims, geometry, groups)
        else:
            dx = _grad_input(b, dy4, w4, x4.dims, geometry, groups)
        outs[0] = b.reshape(dx, x.dims)
    if mask[1]:
        if transposed:
            dw = _grad_weight(b, dy4, x4, geometry, groups, list(w4.dims[2:]))
        else:
            dw = _grad_weight(b, x4, dy4, geometry, groups, list(w4.dims[2:]))
        outs[1] = b.reshape(dw, w.dims)
    if mask[2]:
        outs[2] = b.reduce("Sum", dy, [0, *range(2, dy.rank)], keep_dim=False)
    return outs


# ── normalization ────────────────────────────────────────────────────────


def _normalized_grad(b: Builder, g: Value, x_hat: Value, rstd: Value) -> Value:
    """dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), means over the last axis ([rows, M] operands)."""
    mean_g = b.reduce("Mean", g, [1], keep_dim=True)
    mean_gx = b.reduce("Mean", b.binary("Mul", g, x_hat), [1], keep_dim=True)
    centered = b.binary("Sub", b.binary("Sub", g, mean_g), b.binary("Mul", x_hat, mean_gx))
    return b.binary("Mul", centered, rstd)


def _check_float_input(call: Call) -> str | None:
    x = call["grad_output" if call.target == "aten.embedding_dense_backward.default" else "input"]
    if getattr(x, "dtype", "float32") not in ("float32", "float64", "float16", "bfloat16"):
        return f"{call.target} on {x.dtype} is not supported (float only)"
    return None


@lowers("aten.native_layer_norm_backward.default", check=_check_float_input)
def native_layer_norm_backward(b: Builder, call: Call) -> list[Value | None]:
    """(dx, dgamma, dbeta) of layer norm from the saved mean/rstd, per output_mask (gamma/beta only if given)."""
    dy, x = call.tensor("grad_out"), call.tensor("input")
    inner = math.prod(call["normalized_shape"])
    rows = x.numel // inner if inner else 0
    dy2, x2 = b.reshape(dy, (rows, inner)), b.reshape(x, (rows, inner))
    mean, rstd = b.reshape(call.tensor("mean"), (rows, 1)), b.reshape(call.tensor("rstd"), (rows, 1))
    x_hat = b.binary("Mul", b.binary("Sub", x2, mean), rstd)
    weight, bias, mask = call.get("weight"), call.get("bias"), list(call["output_mask"])
    outs: list[Value | None] = [None, None, None]
    if mask[0]:
        g = dy2 if weight is None else b.binary("Mul", dy2, b.reshape(weight, (1, inner)))
        outs[0] = b.reshape(_normalized_grad(b, g, x_hat, rstd), x.dims)
    if mask[1] and weight is not None:
        outs[1] = b.reshape(b.reduce("Sum", b.binary("Mul", dy2, x_hat), [0], keep_dim=False), weight.dims)
    if mask[2] and bias is not None:
        outs[2] = b.reshape(b.reduce("Sum", dy2, [0], keep_dim=False), bias.dims)
    return outs


@lowers("aten.native_group_norm_backward.default", check=_check_float_input)
def native_group_norm_backward(b: Builder, call: Call) -> list[Value | None]:
    """(dx, dgamma, dbeta) of group norm from the saved [N, G] mean/rstd, per output_mask."""
    dy, x, weight = call.tensor("grad_out"), call.tensor("input"), call.get("weight")
    n, c, hw, groups = int(call["N"]), int(call["C"]), int(call["HxW"]), int(call["group"])
    rows, per_group = n * groups, (c // groups) * hw
    dy3, x3 = b.reshape(dy, (n, c, hw)), b.reshape(x, (n, c, hw))
    mean, rstd = b.reshape(call.tensor("mean"), (rows, 1)), b.reshape(call.tensor("rstd"), (rows, 1))
    x_hat = b.binary("Mul", b.binary("Sub", b.reshape(x3, (rows, per_group)), mean), rstd)
    mask = list(call["output_mask"])
    outs: list[Value | None] = [None, None, None]
    if mask[0]:
        g = dy3 if weight is None else b.binary("Mul", dy3, b.reshape(weight, (1, c, 1)))
        outs[0] = b.reshape(_normalized_grad(b, b.reshape(g, (rows, per_group)), x_hat, rstd), x.dims)
    if mask[1]:  # torch gives dgamma/dbeta even without a weight
        prod = b.binary("Mul", dy3, b.reshape(x_hat, (n, c, hw)))
        outs[1] = b.reduce("Sum", prod, [0, 2], keep_dim=False)
    if mask[2]:
        outs[2] = b.reduce("Sum", dy3, [0, 2], keep_dim=False)
    return outs


# ── embedding ────────────────────────────────────────────────────────────


@lowers("aten.embedding_dense_backward.default", check=_check_float_input)
def embedding_dense_backward(b: Builder, call: Call) -> Value:
    """grad_weight[w] = sum of the grad_output rows indexed w (not padding_idx), / count if scale_grad_by_freq.

    One ScatterND add into zeros."""
    dy, idx = call.tensor("grad_output"), call.tensor("indices")
    num_weights, padding_idx = int(call["num_weights"]), int(call["padding_idx"])
    count, width = idx.numel, math.prod(dy.dims[idx.rank :])
    flat = b.reshape(b.cast(idx, "int64"), (count, 1))
    rows = b.reshape(dy, (count, width))
    if padding_idx >= 0:
        keep = b.cast(b.compare("Ne", flat, b.const(padding_idx, "int64")), dy.dtype)
        rows = b.binary("Mul", rows, keep)
    op = {"ScatterNd": {"reduction": "Add"}}
    zeros = b.expand(b.const(0.0, dy.dtype), (num_weights, width))
    grad = b.emit(op, [zeros, flat, rows], (num_weights, width), dy.dtype)
    if call["scale_grad_by_freq"]:
        ones, empty = b.expand(b.const(1.0, dy.dtype), (count, 1)), b.expand(b.const(0.0, dy.dtype), (num_weights, 1))
        counts = b.emit(op, [empty, flat, ones], (num_weights, 1), dy.dtype)
        grad = b.binary("Div", grad, b.binary("Max", counts, b.const(1.0, dy.dtype)))
    return b.reshape(grad, call.out_dims)
