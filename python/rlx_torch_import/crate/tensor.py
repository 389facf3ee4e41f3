"""Print a lowered program with the `rlx_tensor::Tensor` operator DSL (`tensor` style).

The DSL builds the same RLX ops through its own methods, so this is the one
place with per-op names: each entry below maps an RLX op to the DSL call that
emits exactly that op (checked against rlx-tensor's source). An op with no
such call is never approximated: `unsupported_ops` names it, and conversion
stops before anything is written, suggesting the `graph` style.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import BY_RLX
from ..program import Program, RlxNode, op_name
from .graph import Statements, declarations, node_statements
from .rust_names import RustNames, rust_str

# Activation variant -> Tensor method (rlx-tensor's `unary_ops!` table).
_UNARY = {
    "Relu": "relu",
    "Gelu": "gelu",
    "GeluApprox": "gelu_approx",
    "Silu": "silu",
    "Tanh": "tanh",
    "Exp": "exp",
    "Sqrt": "sqrt",
    "Sigmoid": "sigmoid",
    "Log": "log",
    "Rsqrt": "rsqrt",
    "Abs": "abs",
    "Sin": "sin",
    "Cos": "cos",
    "Tan": "tan",
    "Atan": "atan",
    "Round": "round",
    "Recip": "recip",
    "Floor": "floor",
    "Ceil": "ceil",
    "Sign": "sign",
    "Softplus": "softplus",
    "Elu": "elu",
    "Erf": "erf",
    "HardSwish": "hard_swish",
    "HardSigmoid": "hard_sigmoid",
    "Mish": "mish",
    "Softsign": "softsign",
    "LogSigmoid": "log_sigmoid",
}
_OPERATOR = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}
_BINARY_METHOD = {"Max": "maximum", "Min": "minimum", "Pow": "pow", "Mod": "rem", "Atan2": "atan2"}
_COMPARE = {"Eq": "eq", "Ne": "ne", "Lt": "lt", "Le": "le", "Gt": "gt", "Ge": "ge"}
_REDUCE = {"Sum": "sum", "Mean": "mean", "Max": "max", "Min": "min", "Prod": "prod"}
_CONSTANT_DTYPES = {r: np.dtype(BY_RLX[r].numpy).type for r in ("F32", "F64", "I32", "I64", "U8")}
_ATTENTION_MASKS = ("None", "Causal")
_PRINTED_NAMES = ("MaskKind", "ReduceOp")  # rlx_ir::op types the printers below may name

Printer = Callable[[Any, list[str], RlxNode], str | None]


def _vec(xs: list[Any]) -> str:
    return f"vec![{', '.join(map(str, xs))}]"


def _arr(xs: list[Any]) -> str:
    return f"[{', '.join(map(str, xs))}]"


def _f32(x: float) -> str:
    """The shortest literal that reads back as the same f32."""
    v = np.float32(x)
    if not np.isfinite(v):
        return "f32::NAN" if np.isnan(v) else ("f32::INFINITY" if v > 0 else "f32::NEG_INFINITY")
    return str(v)


def _bool(x: bool) -> str:
    return "true" if x else "false"


def _default_scale(head_dim: int) -> float:
    """RLX's default attention scale, `(head_dim as f32).powf(-0.5)`, through the same libm powf."""
    return float(np.power(np.float32(head_dim), np.float32(-0.5)))


def _attention(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    scale = p["score_scale"]
    if len(a) != 3 or p["v_head_dim"] is not None or p["attn_logit_softcap"] is not None:
        return None
    if p["mask_kind"] not in _ATTENTION_MASKS:
        return None
    if scale is not None and float(np.float32(scale)) != _default_scale(p["head_dim"]):
        return None
    return f"{a[0]}.attention(&{a[1]}, &{a[2]}, {p['num_heads']}, {p['head_dim']}, MaskKind::{p['mask_kind']})"


def _conv(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    if len(a) != 2 or len(p["kernel_size"]) != 2:
        return None
    args = ", ".join(_arr(p[k]) for k in ("kernel_size", "stride", "padding", "dilation"))
    return f"{a[0]}.conv2d(&{a[1]}, {args}, {p['groups']})"


def _pool(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    if len(p["kernel_size"]) != 2 or p["kind"] not in ("Max", "Mean"):
        return None
    args = ", ".join(_arr(p[k]) for k in ("kernel_size", "stride", "padding"))
    return f"{a[0]}.pool2d(ReduceOp::{p['kind']}, {args})"


def _constant(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    kind = _CONSTANT_DTYPES.get(node.dtype)
    if kind is None:
        return None
    values = np.frombuffer(bytes(p["data"]), dtype=np.dtype(kind).newbyteorder("<"))
    text = [_f64(float(v)) for v in values]
    return f"s.constant_nd({_vec(text)}, {_vec(list(node.dims))}, DType::{node.dtype})"


def _f64(v: float) -> str:
    if np.isnan(v):
        return "f64::NAN"
    if np.isinf(v):
        return "f64::INFINITY" if v > 0 else "f64::NEG_INFINITY"
    return repr(v)


def _binary(kind: str, a: list[str]) -> str | None:
    if kind in _OPERATOR:
        return f"&{a[0]} {_OPERATOR[kind]} &{a[1]}"
    if kind in _BINARY_METHOD:
        return f"{a[0]}.{_BINARY_METHOD[kind]}(&{a[1]})"
    return None


def _reduce(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    method = _REDUCE.get(p["op"])
    return None if method is None else f"{a[0]}.{method}({_vec(p['axes'])}, {_bool(p['keep_dim'])})"


def _layer_norm(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    return f"{a[0]}.layer_norm(&{a[1]}, &{a[2]}, {_f32(p['eps'])})" if p["axis"] == -1 and len(a) == 3 else None


def _rms_norm(p: dict[str, Any], a: list[str], node: RlxNode) -> str | None:
    return f"{a[0]}.rms_norm(&{a[1]}, &{a[2]}, {_f32(p['eps'])})" if p["axis"] == -1 and len(a) == 3 else None


def _concat(p: dict[str, Any], a: list[str], node: RlxNode) -> str:
    return f"cat(&[{', '.join('&' + x for x in a)}], {p['axis']})"


_STRUCT: dict[str, Printer] = {
    "Reshape": lambda p, a, n: f"{a[0]}.reshape({_vec(p['new_shape'])})",
    "Transpose": lambda p, a, n: f"{a[0]}.transpose({_vec(p['perm'])})",
    "Cast": lambda p, a, n: f"{a[0]}.cast(DType::{p['to']})",
    "Narrow": lambda p, a, n: f"{a[0]}.narrow({p['axis']}, {p['start']}, {p['len']})",
    "Expand": lambda p, a, n: f"{a[0]}.broadcast_to({_vec(p['target_shape'])})",
    "Softmax": lambda p, a, n: f"{a[0]}.softmax({p['axis']})",
    "Gather": lambda p, a, n: f"{a[0]}.gather(&{a[1]}, {p['axis']})",
    "Cumsum": lambda p, a, n: f"{a[0]}.cumsum({p['axis']}, {_bool(p['exclusive'])})",
    "Concat": _concat,
    "LayerNorm": _layer_norm,
    "RmsNorm": _rms_norm,
    "Reduce": _reduce,
    "Attention": _attention,
    "Conv": _conv,
    "Pool": _pool,
    "Constant": _constant,
}


def tensor_expr(node: RlxNode, args: list[str]) -> str | None:
    """The DSL expression that emits exactly `node.op`, or None when the DSL has none."""
    op = node.op
    if op == "MatMul":
        return f"{args[0]}.matmul(&{args[1]})"
    if op == "Where":
        return f"{args[0]}.where_(&{args[1]}, &{args[2]})"
    if not isinstance(op, dict):
        return None
    ((variant, payload),) = op.items()
    if variant == "Activation":
        if payload == "Neg":
            return f"-&{args[0]}"
        return f"{args[0]}.{_UNARY[payload]}()" if payload in _UNARY else None
    if variant == "Binary":
        return _binary(payload, args)
    if variant == "Compare":
        return f"{args[0]}.{_COMPARE[payload]}(&{args[1]})" if payload in _COMPARE else None
    printer = _STRUCT.get(variant)
    return printer(payload, args, node) if printer else None


def unsupported_ops(program: Program) -> dict[str, str]:
    """RLX op name -> first ATen node needing it, for every op the DSL cannot express."""
    missing: dict[str, str] = {}
    for node in program.nodes:
        if tensor_expr(node, ["a"] * len(node.inputs)) is None:
            missing.setdefault(op_name(node.op), f"{node.provenance.aten} at node {node.provenance.node}")
    return missing


def tensor_statements(program: Program, names: RustNames) -> Statements:
    """`let` statements building the graph through a `GraphScope` named `s`."""
    out = Statements(types={"Shape", "DType"})
    ident, used = declarations(program, names)
    for method, values in (("input", program.inputs), ("param", program.params)):
        for v in values:
            call = f"s.{method}({rust_str(v.name)}, Shape::new(&{_arr(list(v.dims))}, DType::{v.dtype}))"
            # Declared even when no node reads it: RLX binds inputs and weights by name.
            out.lines.append(f"let {ident[v.name]} = {call};" if v.name in used else f"{call};")

    def dsl(node: RlxNode, args: list[str]) -> str:
        expr = tensor_expr(node, args)
        assert expr is not None, f"{op_name(node.op)} has no tensor-DSL form (unsupported_ops checks this first)"
        # Expressions hold only sanitized identifiers, so these names can only come from the printers.
        out.types.update(t for t in _PRINTED_NAMES if f"{t}::" in expr)
        if expr.startswith("cat("):
            out.types.add("cat")
        return expr

    node_statements(program, names, ident, out, dsl)
    return out
