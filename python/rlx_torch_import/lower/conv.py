"""Convolution and transposed convolution (2-D NCHW; 1-D runs as 2-D with a unit height)."""

from __future__ import annotations

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
