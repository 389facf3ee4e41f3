"""How fx values are written in torch-ir: sizes (ints or SymInt expressions), tensor specs,
tagged arguments, the layouts of layout-sensitive arguments, values read from tensors."""

from __future__ import annotations

from typing import Any

import torch

from ...dtypes import torch_name
from ...errors import InputError
from ...torchir import LAYOUT_SENSITIVE, TensorSpec, encode_float
from .provenance import op_name


def sym_text(value: Any, name: str, op: str) -> int | str:
    """A size as torch-ir records it: an int, or the expression of a SymInt. An unbacked symbol (torch's
    `u0`: nonzero, masked_select, `.item()`) is a size a size stage computes (`unbacked.stage_symbols`,
    which refuses the ones it cannot). Raises InputError for a SymFloat/SymBool."""
    if isinstance(value, int):
        return value
    if isinstance(value, (torch.SymFloat, torch.SymBool)) or not isinstance(value, torch.SymInt):
        raise InputError(
            f"{op} (node {name}) computes a symbolic {type(value).__name__} ({value}); only integer sizes "
            "(SymInt) can be recorded"
        )
    expr = value.node.expr
    if expr.is_number:
        return int(expr)
    return str(expr)


def spec_of(name: str, val: Any, op: str = "graph input", path: str = "") -> TensorSpec:
    return TensorSpec(name, [sym_text(d, name, op) for d in val.shape], torch_name(val.dtype), path)


def data_dependent(val: Any) -> bool:
    """A SymInt/SymFloat/SymBool whose value depends on tensor values (torch's unbacked `u0`, `zuf0`)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(free_unbacked_symbols(val))


# The ops that read a tensor's one element as a Python value (`.item()`).
_ITEM_OPS = {"aten.item.default", "aten._local_scalar_dense.default"}


def scalar_dtype(node: torch.fx.Node, val: Any) -> str:
    """The dtype of the 0-d tensor carrying a data-dependent scalar: the tensor's own dtype for
    `.item()` (its value exactly), else Python's: float64, int64 or bool."""
    if op_name(node.target) in _ITEM_OPS:
        arg = node.args[0]
        assert isinstance(arg, torch.fx.Node)  # `.item()` of a tensor
        return torch_name(arg.meta["val"].dtype)
    return "bool" if isinstance(val, torch.SymBool) else "float64" if isinstance(val, torch.SymFloat) else "int64"


def layouts(node: torch.fx.Node, aliases: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Strides and storage offset of the tensor arguments of a layout-sensitive op (as torch traced them)."""
    if str(node.target) not in LAYOUT_SENSITIVE:
        return {}
    found = {}
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            strides = [int(s) for s in val.stride()]
            found[aliases.get(arg.name, arg.name)] = {"strides": strides, "storage_offset": int(val.storage_offset())}
    return found


class ArgEncoder:
    """Encode fx arguments as tagged torch-ir values; getitem results map to their producer's outputs."""

    def __init__(self, aliases: dict[str, str], staged: frozenset[str] = frozenset()) -> None:
        self.aliases = aliases
        self.staged = staged  # the unbacked symbols a size stage computes (`unbacked.stage_symbols`)

    def is_staged(self, val: Any) -> bool:
        """Whether `val` is a SymInt of sizes a size stage computes (a size expression, not a 0-d tensor)."""
        if not isinstance(val, torch.SymInt) or not self.staged:
            return False
        used = {str(s) for s in val.node.expr.free_symbols}
        return bool(used) and used <= self.staged

    def __call__(self, arg: Any) -> dict[str, Any]:
        if isinstance(arg, torch.fx.Node):
            val = arg.meta.get("val")
            if isinstance(val, torch.SymInt) and self.is_staged(val):  # a size a stage computes, bound like a dim
                return {"sym": str(val.node.expr)}
            if data_dependent(val):  # a 0-d tensor (see `capture`)
                return {"tensor": arg.name}
            if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                return {"sym": str(sym_text(val, arg.name, op_name(arg.target)))}
            return {"tensor": self.aliases.get(arg.name, arg.name)}
        if arg is None:
            return {"none": None}
        if isinstance(arg, bool):
            return {"bool": arg}
        if isinstance(arg, int):
            return {"int": arg}
        if isinstance(arg, float):
            return encode_float(arg)
        if isinstance(arg, str):
            return {"str": arg}
        if isinstance(arg, torch.dtype):
            return {"dtype": torch_name(arg)}
        if isinstance(arg, torch.device):
            return {"device": str(arg)}
        if isinstance(arg, torch.layout):
            return {"layout": str(arg).removeprefix("torch.")}
        if isinstance(arg, torch.memory_format):
            return {"memory_format": str(arg).removeprefix("torch.")}
        if isinstance(arg, (list, tuple)):
            return {"list": [self(a) for a in arg]}
        if isinstance(arg, torch.SymInt):
            text = sym_text(arg, "argument", "a size argument")
            return {"int": text} if isinstance(text, int) else {"sym": text}
        raise InputError(f"cannot record argument {arg!r} of type {type(arg).__name__} in torch-ir")
