"""Values read from tensors: `.item()` and the Python arithmetic torch.export records on them.

torch.export keeps a scalar read from a tensor (`aten.item`, `aten._local_scalar_dense`) as an
unbacked SymInt/SymFloat/SymBool (`u0`, `zuf0`), and the Python operators and `torch.sym_*`
functions applied to it as graph nodes. The front end (`frontend/capture.py`) makes each a 0-d
tensor of the dtype Python computes in (the tensor's own dtype for `.item()`, else float64,
int64 or bool), so here each is the elementwise ATen op with the same meaning (Python's `//`
and `%` floor like `aten.floor_divide` / `aten.remainder`). A scalar used as a size is refused
by the front end; one used in arithmetic stays a tensor.
"""

from __future__ import annotations

from typing import Any

from ..builder import Builder
from ..call import Call, Value
from ..registry import REGISTRY, lowers, make_call

# Python operator / torch.sym_* function -> the ATen overload computing the same on 0-d tensors.
_SAME_AS = {
    "operator.add": "aten.add.Tensor",
    "operator.sub": "aten.sub.Tensor",
    "operator.mul": "aten.mul.Tensor",
    "operator.truediv": "aten.div.Tensor",
    "operator.floordiv": "aten.floor_divide.default",
    "operator.mod": "aten.remainder.Tensor",
    "operator.pow": "aten.pow.Tensor_Tensor",
    "operator.neg": "aten.neg.default",
    "operator.ge": "aten.ge.Tensor",
    "operator.gt": "aten.gt.Tensor",
    "operator.le": "aten.le.Tensor",
    "operator.lt": "aten.lt.Tensor",
    "operator.eq": "aten.eq.Tensor",
    "operator.ne": "aten.ne.Tensor",
    "operator.and_": "aten.logical_and.default",
    "operator.or_": "aten.logical_or.default",
    "torch.sym_not": "aten.logical_not.default",
    "torch.sym_max": "aten.maximum.default",
    "torch.sym_min": "aten.minimum.default",
}


_BITWISE = {"operator.and_": "aten.bitwise_and.Tensor", "operator.or_": "aten.bitwise_or.Tensor"}


def _as_tensor(b: Builder, v: Any, dtype: str) -> Value:
    return v if isinstance(v, Value) else b.const(v, dtype)


@lowers(*_SAME_AS)
def python_operator(b: Builder, call: Call) -> Value:
    """The Python operator on data-dependent scalars, as the ATen op of the same meaning."""
    target = _SAME_AS[call.target]
    node = call.node
    if call.target in _BITWISE and node.outputs[0].dtype != "bool":  # `&` / `|` on ints
        target = _BITWISE[call.target]
    args = list(call.positional)
    dtype = node.outputs[0].dtype
    values: dict[str, Value] = {}
    encoded = []
    for i, a in enumerate(args):  # every operand a 0-d tensor: the ATen op then promotes as Python does
        value = _as_tensor(b, a, dtype if dtype != "bool" else _operand_dtype(args))
        values[f"__operand{i}"] = value
        encoded.append({"tensor": f"__operand{i}"})
    proxy = type(node)(node.name, target, encoded, {}, node.outputs)
    result = REGISTRY[target].fn(b, make_call(proxy, values))
    assert isinstance(result, Value)
    return b.cast(result, dtype)


def _operand_dtype(args: list[Any]) -> str:
    """The dtype a Python number compared with the tensor operands is held in."""
    tensors = [a for a in args if isinstance(a, Value)]
    if any(isinstance(a, float) for a in args) or any(t.dtype.startswith(("float", "bfloat")) for t in tensors):
        return "float64"
    return tensors[0].dtype if tensors else "int64"


@lowers("aten.item.default", "aten._local_scalar_dense.default", kind="movement")
def item(b: Builder, call: Call) -> Value:
    """The one element of `self`, as a 0-d tensor of its dtype (torch.Tensor.item)."""
    x = call.tensor("self")
    return b.reshape(x, ())


@lowers("torch.sym_ite")
def sym_ite(b: Builder, call: Call) -> Value:
    """`a if cond else b` on data-dependent scalars (torch.sym_ite), a Where."""
    cond, x, y = call.positional
    dtype = call.node.outputs[0].dtype
    x, y = _as_tensor(b, x, dtype), _as_tensor(b, y, dtype)
    return b.emit("Where", [cond, b.cast(x, dtype), b.cast(y, dtype)], (), dtype)


@lowers("torch.sym_float")
def sym_float(b: Builder, call: Call) -> Value:
    """float(x) of a data-dependent scalar (torch.sym_float): float64."""
    return b.cast(call.positional[0], "float64")


@lowers("math.floor", "math.ceil")
def floor_ceil(b: Builder, call: Call) -> Value:
    """math.floor / math.ceil of a data-dependent scalar: an int64 (Python's int result)."""
    x = call.positional[0]
    if not x.dtype.startswith("float"):
        return b.cast(x, "int64")
    return b.cast(b.unary("Floor" if call.target == "math.floor" else "Ceil", x), "int64")


@lowers("math.trunc")
def sym_int(b: Builder, call: Call) -> Value:
    """int(x) / math.trunc(x) of a data-dependent scalar: rounded toward zero, an int64."""
    x = call.positional[0]
    return b.cast(b.trunc(x) if x.dtype.startswith("float") else x, "int64")
