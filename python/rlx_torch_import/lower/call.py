"""What a lowering function sees: its call (arguments read by schema name) and the values it reads.

Lowerings return RLX values (`builder.py` makes them); the driver in `registry.py` wires them to node outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..sizes import sizes
from ..torchir import Node, decode_float


@dataclass(frozen=True)
class Value:
    """A tensor value in the program being built: RLX value id, dims, torch-ir dtype."""

    id: str
    dims: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def numel(self) -> int:
        return math.prod(self.dims)


class Call:
    """One torch-ir node with its arguments bound to the op schema's names."""

    def __init__(self, node: Node, values: dict[str, Value], schema_names: list[str], defaults: dict[str, Any]) -> None:
        self.node = node
        self.target = node.target
        bound: dict[str, Any] = dict(defaults)
        for name, arg in zip(schema_names, node.args, strict=False):
            bound[name] = _decode(arg, values)
        for name, arg in node.kwargs.items():
            bound[name] = _decode(arg, values)
        self._args = bound
        self.positional = [_decode(a, values) for a in node.args]
        self._names = {n: a["tensor"] for n, a in zip(schema_names, node.args, strict=False) if "tensor" in a}
        self._names.update({n: a["tensor"] for n, a in node.kwargs.items() if "tensor" in a})
        self.mutated: dict[str, Value] = {}

    def __getitem__(self, name: str) -> Any:
        return self._args[name]

    @property
    def arguments(self) -> list[Any]:
        """Every bound argument value (positional and keyword)."""
        return list(self._args.values())

    def get(self, name: str, default: Any = None) -> Any:
        value = self._args.get(name, default)
        return default if value is None else value

    def tensor(self, name: str) -> Value:
        value = self._args[name]
        if not isinstance(value, Value):
            raise TypeError(f"argument {name!r} of {self.target} is not a tensor")
        return value

    def mutate(self, name: str, value: Value) -> None:
        """The op writes `value` into tensor argument `name` in place (e.g. batch norm's running stats);
        later nodes reading that tensor see `value` (the driver rebinds it)."""
        self.mutated[name] = value

    def tensor_name(self, name: str) -> str:
        """The torch-ir value name passed as tensor argument `name`."""
        return self._names[name]

    @property
    def out_dims(self) -> tuple[int, ...]:
        return sizes(self.node.outputs[0].shape)

    @property
    def out_dtype(self) -> str:
        return self.node.outputs[0].dtype


class _Unresolved:
    """A tensor argument whose producer was not lowered (only seen by checks)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _decode(arg: dict[str, Any], values: dict[str, Value]) -> Any:
    ((tag, payload),) = arg.items()
    if tag == "tensor":
        return values.get(payload, _Unresolved(payload))
    if tag == "float":
        return decode_float(payload)
    if tag == "list":
        return [_decode(a, values) for a in payload]
    if tag == "none":
        return None
    return payload


def norm_axis(axis: int, rank: int) -> int:
    """Negative axis -> positive; rank-0 tensors accept axis 0/-1."""
    return axis + max(rank, 1) if axis < 0 else axis
