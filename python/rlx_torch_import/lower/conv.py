"""Convolution and pooling (2-D NCHW; 1-D runs as 2-D with a unit height)."""

from __future__ import annotations

from .context import Builder, Call, Value
from .registry import lowers


def _pair(v: int | list[int], n: int = 2) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * n if len(v) == 1 else v


def _check_conv(call: Call) -> str | None:
    w = call["weight"]
    if call.get("transposed", False):
        return "transposed convolution is not supported yet"
    if isinstance(call.get("padding"), str):
        return None if call["padding"] in ("valid", "same") else f"padding={call['padding']!r} is not supported"
    rank = getattr(w, "rank", 4)
    if rank not in (3, 4):
        return f"{rank - 2}-D convolution is not supported (only 1-D and 2-D)"
    return None


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
    x, w = call.tensor("input"), call.tensor("weight")
    one_d = w.rank == 3
    if one_d:
        x = b.reshape(x, (x.dims[0], x.dims[1], 1, x.dims[2]))
        w = b.reshape(w, (w.dims[0], w.dims[1], 1, w.dims[2]))
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
    op = {
        "Conv": {
            "kernel_size": kernel,
            "stride": stride,
            "padding": padding,
            "dilation": dilation,
            "groups": int(call.get("groups", 1)),
        }
    }
    y = b.emit(op, [x, w], out_dims, x.dtype)
    bias = call.get("bias")
    if bias is not None:
        y = b.binary("Add", y, b.reshape(bias, (1, bias.dims[0], 1, 1)))
    return b.reshape(y, call.out_dims)


def _check_max_pool(call: Call) -> str | None:
    if any(d != 1 for d in _pair(call.get("dilation", 1))):
        return f"dilation={call.get('dilation')} is not supported"
    x = call["self"]
    if getattr(x, "rank", 4) != 4:
        return "only 4-D (NCHW) input is supported"
    if call.get("ceil_mode", False) and tuple(_floor_out(call)) != tuple(call.out_dims[2:]):
        return "ceil_mode=True changes the output size here and is not supported yet"
    return None


def _floor_out(call: Call) -> list[int]:
    x = call["self"]
    k = _pair(call["kernel_size"])
    s = _pair(call.get("stride") or k)
    p = _pair(call.get("padding", 0))
    return [(x.dims[2 + i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(2)]


@lowers("aten.max_pool2d.default", "aten.max_pool2d_with_indices.default", check=_check_max_pool)
def max_pool2d(b: Builder, call: Call) -> Value | list[Value | None]:
    """Max pooling; the indices output of the Core ATen form is not produced."""
    x = call.tensor("self")
    k = _pair(call["kernel_size"])
    op = {
        "Pool": {
            "kind": "Max",
            "kernel_size": k,
            "stride": _pair(call.get("stride") or k),
            "padding": _pair(call.get("padding", 0)),
        }
    }
    y = b.emit(op, [x], call.out_dims, x.dtype)
    return [y, None] if call.target.endswith("with_indices.default") else y


def _check_adaptive(call: Call) -> str | None:
    x = call["self"]
    out = _pair(call["output_size"])
    if any(o in (None, 0) for o in out):
        return "output_size with None/0 entries is not supported"
    if any(x.dims[-2 + i] % out[i] for i in range(2)):
        return f"input size {x.dims[-2:]} is not a multiple of output_size {out} (non-uniform windows)"
    return None


@lowers("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default", check=_check_adaptive)
def adaptive_avg_pool2d(b: Builder, call: Call) -> Value:
    """Global average (output 1x1) as a mean reduction; uniform windows as average pooling."""
    x = call.tensor("self")
    out = _pair(call["output_size"])
    if out == [1, 1]:
        return b.reduce("Mean", x, [-2, -1], keep_dim=True)
    k = [x.dims[-2] // out[0], x.dims[-1] // out[1]]
    op = {"Pool": {"kind": "Mean", "kernel_size": k, "stride": k, "padding": [0, 0]}}
    return b.emit(op, [x], call.out_dims, x.dtype)
