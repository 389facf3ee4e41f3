"""Convolution and transposed convolution, 1-D to 3-D (NC + spatial axes).

2-D runs on RLX's Conv / ConvTranspose2d, 1-D as 2-D with a unit height, 3-D on Conv3d /
ConvTranspose3d. Unbatched input ([C, *spatial]) gets a unit batch. Bias is a broadcast add.
"""

from __future__ import annotations

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers
from ._common import conv2d_node, conv_transpose2d_node


def _ntuple(v: int | list[int], n: int) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * n if len(v) == 1 else v


def _check_rank(call: Call, what: str) -> str | None:
    rank = getattr(call["weight"], "rank", 4)
    if rank not in (3, 4, 5):
        return f"{rank - 2}-D {what} is not supported (1-D to 3-D)"
    return None


def _check_conv(call: Call) -> str | None:
    padding = call.get("padding")
    if isinstance(padding, str) and padding not in ("valid", "same"):
        return f"padding={padding!r} is not supported"
    return _check_rank(call, "transposed convolution" if call.get("transposed", False) else "convolution")


def _batched(b: Builder, x: Value, w: Value) -> Value:
    """[C, *spatial] -> [1, C, *spatial]; batched input passes through."""
    return b.reshape(x, (1, *x.dims)) if x.rank == w.rank - 1 else x


def _add_bias(b: Builder, y: Value, bias: Value | None) -> Value:
    """y + bias[None, :, None, ...]."""
    return y if bias is None else b.binary("Add", y, b.reshape(bias, (1, bias.dims[0], *[1] * (y.rank - 2))))


def _pad_end(b: Builder, x: Value, extra: list[int]) -> Value:
    """Zeros appended at the end of each spatial axis (`extra[a]` of them)."""
    if not any(extra):
        return x
    pads = [[0, 0], [0, 0], *[[0, e] for e in extra]]
    dims = (*x.dims[:2], *(d + e for d, e in zip(x.dims[2:], extra, strict=True)))
    return b.emit({"Pad": {"pads": pads, "mode": {"Constant": 0.0}}}, [x], dims, x.dtype)


@lowers(
    "aten.conv1d.default",
    "aten.conv2d.default",
    "aten.conv3d.default",
    "aten.conv1d.padding",
    "aten.conv2d.padding",
    "aten.conv3d.padding",
    "aten.convolution.default",
    "aten._convolution.default",
    "aten._convolution.deprecated",
    check=_check_conv,
    kind="contraction",
)
def conv(b: Builder, call: Call) -> Value:
    """Grouped, strided, dilated, padded convolution (1-D to 3-D); bias is a broadcast add."""
    if call.get("transposed", False):
        return _conv_transpose(b, call)
    w = call.tensor("weight")
    x, n = _batched(b, call.tensor("input"), w), w.rank - 2
    stride, dilation = _ntuple(call.get("stride", 1), n), _ntuple(call.get("dilation", 1), n)
    padding = call.get("padding", 0)
    if padding == "valid":
        padding = [0] * n
    elif padding == "same":  # total d*(k-1); torch puts the odd extra zero at the end
        total = [d * (k - 1) for d, k in zip(dilation, w.dims[2:], strict=True)]
        padding = [t // 2 for t in total]
        x = _pad_end(b, x, [t % 2 for t in total])
    out_dims = (x.dims[0], w.dims[0], *call.out_dims[-n:])
    y = conv_node(b, x, w, out_dims, (stride, _ntuple(padding, n), dilation), int(call.get("groups", 1)))
    return b.reshape(_add_bias(b, y, call.get("bias")), call.out_dims)


def conv_node(
    b: Builder, x: Value, w: Value, out_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """One RLX convolution of batched `x` with weight [C_out, C_in/groups, *k]; geometry = (stride, padding,
    dilation), one entry per spatial axis."""
    n = w.rank - 2
    if n == 1:
        stride, padding, dilation = ([fill, *v] for v, fill in zip(geometry, (1, 0, 1), strict=True))
        x2, w2 = (b.reshape(v, (*v.dims[:2], 1, v.dims[2])) for v in (x, w))
        out2 = (*out_dims[:2], 1, out_dims[2])
        return b.reshape(conv2d_node(b, x2, w2, out2, (stride, padding, dilation), groups), out_dims)
    if n == 2:
        return conv2d_node(b, x, w, out_dims, geometry, groups)
    stride, padding, dilation = geometry
    op = {"Conv3d": {"stride": list(stride), "padding": list(padding), "dilation": list(dilation), "groups": groups}}
    return b.emit(op, [x, w], out_dims, x.dtype)


def conv_transpose_node(
    b: Builder, x: Value, w: Value, out_dims: tuple[int, ...], geometry: tuple[list[int], ...], groups: int
) -> Value:
    """One RLX transposed convolution of batched `x` with weight [C_in, C_out/groups, *k]; geometry = (stride,
    padding, dilation, output_padding), one entry per spatial axis."""
    n = w.rank - 2
    if n == 1:
        geometry2 = tuple([fill, *v] for v, fill in zip(geometry, (1, 0, 1, 0), strict=True))
        x2, w2 = (b.reshape(v, (*v.dims[:2], 1, v.dims[2])) for v in (x, w))
        out2 = (*out_dims[:2], 1, out_dims[2])
        return b.reshape(conv_transpose2d_node(b, x2, w2, out2, geometry2, groups), out_dims)
    if n == 2:
        return conv_transpose2d_node(b, x, w, out_dims, geometry, groups)
    stride, padding, dilation, output_padding = (list(v) for v in geometry)
    op = {
        "ConvTranspose3d": {
            "stride": stride,
            "padding": padding,
            "dilation": dilation,
            "output_padding": output_padding,
            "groups": groups,
        }
    }
    return b.emit(op, [x, w], out_dims, x.dtype)


def _check_conv_transpose(call: Call) -> str | None:
    return _check_rank(call, "transposed convolution")


@lowers(
    "aten.conv_transpose1d.default",
    "aten.conv_transpose2d.input",
    "aten.conv_transpose3d.input",
    check=_check_conv_transpose,
    kind="contraction",
)
def conv_transpose(b: Builder, call: Call) -> Value:
    """Transposed (fractionally strided) convolution, 1-D to 3-D, weight [C_in, C_out/groups, *k]; bias added."""
    return _conv_transpose(b, call)


def _conv_transpose(b: Builder, call: Call) -> Value:
    """y[n, co, o] = sum x[n, ci, i] * w[ci, co, k] over o = i*s - p + k*d (per spatial axis)."""
    w = call.tensor("weight")
    x, n = _batched(b, call.tensor("input"), w), w.rank - 2
    names = (("stride", 1), ("padding", 0), ("dilation", 1), ("output_padding", 0))
    geometry = tuple(_ntuple(call.get(name, default), n) for name, default in names)
    groups = int(call.get("groups", 1))
    out_dims = (x.dims[0], w.dims[1] * groups, *call.out_dims[-n:])
    y = conv_transpose_node(b, x, w, out_dims, geometry, groups)
    return b.reshape(_add_bias(b, y, call.get("bias")), call.out_dims)
