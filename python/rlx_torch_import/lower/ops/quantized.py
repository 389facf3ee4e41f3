"""PyTorch's quantize/dequantize ops (`quantized_decomposed.*`, the PT2E flow's graph vocabulary).

A graph from `prepare_pt2e` → calibrate → `convert_pt2e` (torchao; X86 Inductor and XNNPACK
quantizers, static and dynamic) computes in float around these ops. Each lowering follows
torch's own definition (`torch/ao/quantization/fx/_decomposed.py`) operation for operation, in
the same dtypes, so any such graph verifies exactly:

- quantize: ``clamp(round(x * inv_scale) + zero_point, quant_min, quant_max).to(dtype)`` with
  ``inv_scale = 1.0 / scale`` (per tensor: a Python float, so a float32 multiplier rounded from
  the double reciprocal; per channel: the float32 reciprocal of each scale), round half to even;
- dequantize: ``(q.to(float32) - zero_point) * scale`` (per channel along `axis`);
- choose_qparams: torch's ``determine_qparams`` on ``aminmax(x)`` (affine and symmetric).

Integer codes (int8/uint8/int16) travel as float32 inside RLX (exact), like every narrow
integer (`dtypes.NARROW_DTYPES`). RLX's integer `QMatMul`/`QConv2d` are not used: they requantize
an exact int32 accumulator, torch's graph rounds a float32 one, and the two differ by one
quantization step near rounding boundaries (docs/design.md, decision al).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...program import DequantizedWeight
from ..builder import Builder
from ..call import Call, Value, norm_axis
from ..registry import lowers
from ..rlx import exact

# The code dtypes torch's quantize ops accept (`_DTYPE_TO_QVALUE_BOUNDS`) that RLX computes.
CODE_DTYPES = ("uint8", "int8", "int16", "int32")


def _check_codes(call: Call) -> str | None:
    """Refuse code dtypes RLX cannot hold and float outputs other than float32 (listed, exit 3)."""
    dtype = str(call.get("dtype", "")).removeprefix("torch.")
    if dtype not in CODE_DTYPES:
        return f"quantization to {dtype} codes is not supported (RLX runs {', '.join(CODE_DTYPES)} codes)"
    out = str(call.get("out_dtype", "torch.float32")).removeprefix("torch.")
    if out != "float32":
        return f"dequantization to {out} is not supported (float32 only)"
    return None


def _float_in(b: Builder, x: Value) -> Value:
    """The float32 input torch's quantize ops read (float16/bfloat16 widened first)."""
    return b.cast(x, "float32")


def _to_codes(b: Builder, scaled: Value, zero_point: Value, call: Call) -> Value:
    """clamp(round(scaled) + zero_point, quant_min, quant_max) as the code dtype."""
    qmin, qmax = int(call["quant_min"]), int(call["quant_max"])
    lo, hi = b.const(float(qmin), "float32"), b.const(float(qmax), "float32")
    # codes within +-2**20 (8- and 16-bit): past 2**22 round_small stays beyond 2**21, clamped away with the zero point
    narrow = max(abs(qmin), abs(qmax)) < exact.ROUND_SMALL_LIMIT // 4
    rounded = exact.round_small(b, scaled) if narrow else b.unary("Round", scaled)
    shifted = b.binary("Add", rounded, zero_point, "float32")
    # torch's code for NaN is its float -> integer cast of NaN (undefined in C++): the clamp need not carry NaN
    b.nan_free_ids.add(shifted.id)
    clamped = b.binary("Min", b.binary("Max", shifted, lo, "float32"), hi, "float32")
    return b.expand(b.exact_cast(clamped, call.out_dtype), call.out_dims)


def _scalar_param(b: Builder, call: Call, name: str) -> Value:
    """A per-tensor scale or zero point as a rank-0 float64 value: a Python number, or the one element of a
    tensor (`.item()` in torch's `.tensor` overloads)."""
    v = call[name]
    if isinstance(v, Value):
        return b.reshape(b.cast(v, "float64"), ())
    return b.const(float(v), "float64")


@lowers(
    "quantized_decomposed.quantize_per_tensor.default",
    "quantized_decomposed.quantize_per_tensor.tensor",
    check=_check_codes,
)
def quantize_per_tensor(b: Builder, call: Call) -> Value:
    """Affine per-tensor quantization; scale/zero_point are Python numbers (.default) or one-element
    tensors (.tensor). Output: `dtype` codes, the input's shape."""
    x = _float_in(b, call.tensor("input"))
    scale = call["scale"]
    if isinstance(scale, Value):  # 1.0 / scale.item(): a double reciprocal, read as float32 by the multiply
        inv = b.cast(b.binary("Div", b.const(1.0, "float64"), _scalar_param(b, call, "scale")), "float32")
    else:
        inv = b.const(np.float32(1.0 / float(scale)), "float32")
    zero_point = b.cast(_scalar_param(b, call, "zero_point"), "float32")
    return _to_codes(b, b.binary("Mul", x, inv, "float32"), zero_point, call)


@lowers(
    "quantized_decomposed.dequantize_per_tensor.default",
    "quantized_decomposed.dequantize_per_tensor.tensor",
    check=_check_codes,
)
def dequantize_per_tensor(b: Builder, call: Call) -> Value:
    """(q - zero_point) * scale in float32 (the scale rounded to float32, as torch's multiply reads a Python
    float). Output: float32, the input's shape. A stored weight's codes are dequantized once, at conversion."""
    codes = call.tensor("input")
    scale, zero_point = call["scale"], call["zero_point"]
    if b.is_param(codes) and not isinstance(scale, Value) and not isinstance(zero_point, Value):
        recipe = DequantizedWeight(codes.id, None, scale=float(scale), zero_point=int(zero_point))
        return b.derived_param(f"{codes.id}.dequantized", recipe, codes.dims)
    q = b.cast(codes, "float32")
    zero_point = b.cast(_scalar_param(b, call, "zero_point"), "float32")
    scale = b.cast(_scalar_param(b, call, "scale"), "float32")
    return b.binary("Mul", b.binary("Sub", q, zero_point, "float32"), scale, "float32")


def _per_channel(b: Builder, v: Value, axis: int, rank: int) -> Value:
    """A [C] per-channel parameter shaped to broadcast along `axis` of a rank-`rank` tensor, as float32."""
    dims = [1] * rank
    dims[axis] = v.numel
    return b.reshape(b.cast(v, "float32"), tuple(dims))


def _check_per_channel(call: Call) -> str | None:
    scales = call["scales"]
    if isinstance(scales, Value) and scales.dtype != "float32":
        return f"per-channel scales of dtype {scales.dtype} are not supported (float32 only)"
    return _check_codes(call)


@lowers("quantized_decomposed.quantize_per_channel.default", check=_check_per_channel)
def quantize_per_channel(b: Builder, call: Call) -> Value:
    """Affine per-channel quantization along `axis`: x * (1.0 / scales) in float32. Output: `dtype`
    codes, the input's shape."""
    x = _float_in(b, call.tensor("input"))
    axis = norm_axis(int(call["axis"]), x.rank)
    scales = _per_channel(b, call.tensor("scales"), axis, x.rank)
    inv = b.binary("Div", b.const(1.0, "float32"), scales, "float32")
    zero_points = _per_channel(b, call.tensor("zero_points"), axis, x.rank)
    return _to_codes(b, b.binary("Mul", x, inv, "float32"), zero_points, call)


@lowers("quantized_decomposed.dequantize_per_channel.default", check=_check_per_channel)
def dequantize_per_channel(b: Builder, call: Call) -> Value:
    """(q - zero_points) * scales along `axis` (the integer difference is exact in float32). Output:
    float32, the input's shape. A stored weight's codes are dequantized once, at conversion."""
    codes, zp = call.tensor("input"), call.get("zero_points")
    axis = norm_axis(int(call["axis"]), codes.rank)
    if b.is_param(codes) and b.is_param(call.tensor("scales")) and (zp is None or b.is_param(zp)):
        recipe = DequantizedWeight(codes.id, axis, call.tensor("scales").id, None if zp is None else zp.id)
        return b.derived_param(f"{codes.id}.dequantized", recipe, codes.dims)
    q = b.cast(codes, "float32")
    scales = _per_channel(b, call.tensor("scales"), axis, q.rank)
    diff = q if zp is None else b.binary("Sub", q, _per_channel(b, zp, axis, q.rank), "float32")
    return b.expand(b.binary("Mul", diff, scales, "float32"), call.out_dims)


def _check_choose(call: Call) -> str | None:
    dtype = str(call["dtype"]).removeprefix("torch.")
    if dtype not in CODE_DTYPES:
        return f"quantization parameters for {dtype} codes are not supported (RLX runs {', '.join(CODE_DTYPES)} codes)"
    return None


@lowers(
    "quantized_decomposed.choose_qparams.tensor",
    "quantized_decomposed.choose_qparams_symmetric.tensor",
    check=_check_choose,
    kind="reduction",
)
def choose_qparams(b: Builder, call: Call) -> list[Value | None]:
    """Per-tensor (scale, zero_point) from the input's min and max (torch's `determine_qparams`, affine or
    symmetric): scale float64 [1] (computed in float32, then widened), zero_point int64 [1]."""
    x = _float_in(b, call.tensor("input"))
    flat = b.reshape(x, (x.numel,))
    zero = b.const(0.0, "float32")
    lo = b.binary("Min", b.reduce("Min", flat, [0], keep_dim=True), zero, "float32")
    hi = b.binary("Max", b.reduce("Max", flat, [0], keep_dim=True), zero, "float32")
    qmin, qmax = int(call["quant_min"]), int(call["quant_max"])
    eps = b.const(np.float32(call["eps"]), "float32")
    if call.target.endswith("choose_qparams_symmetric.tensor"):
        top = b.binary("Max", b.unary("Neg", lo), hi, "float32")
        scale = b.binary("Max", b.binary("Div", top, b.const((qmax - qmin) / 2, "float32"), "float32"), eps, "float32")
        mid = 128 if str(call["dtype"]).endswith("uint8") else 0
        zero_point = b.const(np.array([mid], dtype=np.int64), "int64")
    else:
        span = b.binary("Sub", hi, lo, "float32")
        scale = b.binary(
            "Max", b.binary("Div", span, b.const(float(qmax - qmin), "float32"), "float32"), eps, "float32"
        )
        steps = b.unary("Round", b.binary("Div", lo, scale, "float32"))
        zp = b.binary("Sub", b.const(float(qmin), "float32"), steps, "float32")
        zp = b.binary(
            "Min", b.binary("Max", zp, b.const(float(qmin), "float32"), "float32"), b.const(float(qmax), "float32")
        )
        zero_point = b.cast(zp, "int64")
    return [b.cast(scale, "float64"), zero_point]


# The ops a PT2E graph's weights feed, by op name (the target without namespace and overload): every
# linear/matmul form and every convolution form (transposed ones included), as `lower/ops/linalg.py` and
# `lower/ops/conv.py` register them.
_LINEARS = frozenset({"linear", "mm", "addmm", "bmm", "matmul", "addbmm", "baddbmm", "_int_mm"})
_CONVOLUTIONS = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "convolution",
        "_convolution",
    }
)


def _op_name(target: str) -> str:
    """The op name of a target: `aten.conv_transpose2d.input` -> `conv_transpose2d`."""
    parts = target.split(".")
    return parts[1] if len(parts) == 3 else target


def pt2e_note(nodes: list[Any]) -> str | None:
    """The report's line on a PT2E quantized graph (torch-ir `nodes`), or None when it has no quantize ops: how
    many quantize/dequantize ops, and how many linears/matmuls and convolutions (transposed ones included) read
    dequantized values (a dequantize's output, or one moved by data-movement ops: view, transpose, ...)."""
    from ..registry import REGISTRY

    ops = [n for n in nodes if n.target.startswith("quantized_decomposed.")]
    if not ops:
        return None
    dequantized: set[str] = set()
    linears = convolutions = 0
    for n in nodes:
        reads = any(name in dequantized for name in n.reads())
        lowering = REGISTRY.get(n.target)
        if ".dequantize_" in n.target or (reads and lowering is not None and lowering.kind == "movement"):
            dequantized.update(o.name for o in n.outputs)
        elif reads and _op_name(n.target) in _LINEARS:
            linears += 1
        elif reads and _op_name(n.target) in _CONVOLUTIONS:
            convolutions += 1
    return (
        f"PT2E quantized graph: {len(ops)} quantize/dequantize op(s) lowered as torch defines them; the "
        f"{linears} linear/matmul(s) and {convolutions} convolution(s) between them run in float32 as torch's "
        "graph does, not on RLX's integer QMatMul/QConv2d, whose requantization differs from torch's by one step "
        "on some codes (RLX defect qmatmul-requant)"
    )
