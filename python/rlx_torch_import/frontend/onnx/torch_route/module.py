"""The ONNX -> torch.nn.Module interpreter: translation context, handler registry, `to_module`.

Translation walks the graph's nodes in order. Each node's handler (registered with `@handles`) looks at
the node (attributes, which inputs are constants, the example value of every input) and returns a
`Fn`: a callable taking the node's inputs as torch tensors (None for an absent input, and for an
input the handler consumed statically with `ctx.const`) and returning a tensor or a tuple of them
(one per node output). The handler may instead return `Const(...)`: outputs known at translation time
(Shape, Size: shapes are static). Every Fn runs once at translation time on the example values, so
each intermediate's shape and dtype is known; a node whose inputs are all small constants is folded
into a constant. Failures of every node are collected and raised together as `Untranslatable`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import torch
from onnx import helper

Fn = Callable[..., Any]
Handler = Callable[["NodeCtx"], Any]
REGISTRY: dict[str, Handler] = {}
SMALL = 16  # initializers with at most this many elements are translation-time constants, not buffers
_FAMILIES = (
    "ops_elementwise",
    "ops_shape",
    "ops_reduce",
    "ops_nn",
    "ops_pool",
    "ops_resample",
    "ops_index",
    "ops_misc",
    "ops_attention",
    "ops_seq",
)
_RANDOM = {"Bernoulli", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"}

# ONNX TensorProto element type -> torch dtype (the types the torch route carries).
ONNX_TO_TORCH: dict[int, torch.dtype] = {
    1: torch.float32,
    2: torch.uint8,
    3: torch.int8,
    4: torch.uint16,
    5: torch.int16,
    6: torch.int32,
    7: torch.int64,
    9: torch.bool,
    10: torch.float16,
    11: torch.float64,
    12: torch.uint32,
    13: torch.uint64,
    16: torch.bfloat16,
}


class Untranslatable(Exception):
    """Nodes the torch route cannot translate, all at once.

    `items`: (node name, "OpType (domain opset N)", reason) for every such node."""

    def __init__(self, items: list[tuple[str, str, str]], inputs_needed_constant: list[str] | None = None) -> None:
        self.items = items
        # graph inputs that a node needed as a translation-time constant (a shape operand), directly or
        # through values computed from them: a caller that
        # knows their values for good may make them initializers and translate again
        self.inputs_needed_constant = inputs_needed_constant or []
        lines = [f"  {name or '<unnamed>'}: {what}: {why}" for name, what, why in items]
        super().__init__(f"{len(items)} ONNX node(s) cannot be translated to torch:\n" + "\n".join(lines))


class NodeError(Exception):
    """Raised by a handler (through `ctx.fail`) for the node it translates; becomes one Untranslatable item.

    `value`: the ONNX value the handler needed constant, when that is why."""

    def __init__(self, reason: str, value: str | None = None) -> None:
        super().__init__(reason)
        self.value = value


def handles(*op_types: str) -> Callable[[Handler], Handler]:
    """Register the decorated handler for the given ai.onnx op types."""

    def register(fn: Handler) -> Handler:
        for op in op_types:
            if op in REGISTRY:
                raise RuntimeError(f"torch_route: two handlers for {op}")
            REGISTRY[op] = fn
        return fn

    return register


@dataclass
class Const:
    """A handler's outputs known at translation time (one tensor per node output)."""

    values: tuple[torch.Tensor, ...]


def torch_dtype(elem: int, what: str = "") -> torch.dtype:
    """The torch dtype of an ONNX element type; NodeError naming it when the route does not carry it."""
    if elem not in ONNX_TO_TORCH:
        name = onnx.TensorProto.DataType.Name(elem) if elem in onnx.TensorProto.DataType.values() else str(elem)
        raise NodeError(f"{what}element type {name} is not carried by the torch route")
    return ONNX_TO_TORCH[elem]


@dataclass
class Value:
    """A value at translation time: its example tensor, and whether it is a constant (`source`)."""

    example: torch.Tensor
    const: bool = False
    buffer: str | None = None  # the registered buffer holding it (large constants)
    deps: frozenset[str] = frozenset()  # the graph inputs it is computed from


@dataclass
class NodeCtx:
    """What a handler sees of its node. Input indices are the node's input positions."""

    node: onnx.NodeProto
    opset: int
    values: list[Value | None]
    static: set[int] = field(default_factory=set)

    @property
    def op(self) -> str:
        return str(self.node.op_type)

    def fail(self, reason: str) -> NodeError:
        """A NodeError to raise: `raise ctx.fail("...")`."""
        return NodeError(reason)

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's Python value (strings decoded, tensors as torch tensors), or `default`."""
        for a in self.node.attribute:
            if a.name == name:
                if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    raise NodeError(f"attribute {name!r} is a subgraph (control flow is not translated)")
                if a.ref_attr_name:
                    raise NodeError(f"attribute {name!r} refers to a function attribute")
                v = helper.get_attribute_value(a)
                if isinstance(v, bytes):
                    return v.decode()
                if isinstance(v, onnx.TensorProto):
                    return tensor_from_proto(v)
                if isinstance(v, list) and v and isinstance(v[0], bytes):
                    return [s.decode() for s in v]
                return v
        return default

    @property
    def n_in(self) -> int:
        return len(self.node.input)

    def has(self, i: int) -> bool:
        """Whether input i is given (present and not the empty name)."""
        return i < len(self.node.input) and bool(self.node.input[i])

    def ex(self, i: int) -> torch.Tensor:
        """Input i's example value (its shape and dtype are the ones the module sees)."""
        v = self.values[i]
        assert v is not None, f"input {i} of {self.op} is absent"
        return v.example

    def shape(self, i: int) -> list[int]:
        return list(self.ex(i).shape)

    def rank(self, i: int) -> int:
        return self.ex(i).dim()

    def dtype(self, i: int) -> torch.dtype:
        return self.ex(i).dtype

    def is_const(self, i: int) -> bool:
        v = self.values[i] if i < len(self.values) else None
        return v is not None and v.const

    def const(self, i: int, what: str = "") -> torch.Tensor:
        """Input i as a translation-time constant (the handler will not receive it at run time)."""
        if not self.is_const(i):
            name = self.node.input[i]
            raise NodeError(
                f"{what or f'input {i}'} ({name!r}) is computed at run time (a graph input or a value that "
                f"depends on one); the torch route needs it constant (shapes must be static for torch.export)",
                value=name,
            )
        self.static.add(i)
        return self.ex(i)

    def unused(self, i: int) -> None:
        """Input i is not needed at run time (only its example's shape or dtype was used)."""
        self.static.add(i)

    def ints(self, i: int, what: str = "") -> list[int]:
        """A constant integer input as a list of Python ints."""
        return [int(v) for v in self.const(i, what).reshape(-1).tolist()]

    def floats(self, i: int, what: str = "") -> list[float]:
        return [float(v) for v in self.const(i, what).reshape(-1).double().tolist()]

    def axis(self, a: int, rank: int) -> int:
        """Normalize a possibly negative axis; NodeError when out of range."""
        if not -rank <= a < max(rank, 1):
            raise NodeError(f"axis {a} out of range for rank {rank}")
        return a + rank if a < 0 else a


def tensor_from_proto(t: onnx.TensorProto) -> torch.Tensor:
    """An initializer / Constant value as a torch tensor of its ONNX dtype (bfloat16 included)."""
    dt = torch_dtype(t.data_type, f"initializer {t.name!r}: ")
    arr = onnx.numpy_helper.to_array(t)
    return array_to_tensor(arr, dt)


def array_to_tensor(arr: np.ndarray, dt: torch.dtype) -> torch.Tensor:
    """numpy -> torch in dtype `dt` (bfloat16 arrays, ml_dtypes or float32, go through float32)."""
    arr = np.asarray(arr)
    if dt == torch.bfloat16 or arr.dtype.kind == "V" or str(arr.dtype) == "bfloat16":
        return torch.from_numpy(np.array(arr, dtype=np.float32)).to(dt)
    return torch.from_numpy(np.array(arr, copy=True)).to(dt)


def _attr_name(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name) or "c"
    if base[0].isdigit():
        base = "c_" + base
    out, n = base, 1
    while out in taken:
        out, n = f"{base}_{n}", n + 1
    taken.add(out)
    return out


def _what(node: onnx.NodeProto, opset: int) -> str:
    dom = node.domain or "ai.onnx"
    return f"{node.op_type} ({dom} opset {opset})"


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {(o.domain or "ai.onnx"): int(o.version) for o in model.opset_import}


@dataclass
class _Step:
    fn: Fn
    sources: list[tuple[str, Any] | None]  # ("env", name) / ("buf", attr) / ("const", tensor) / None
    outputs: list[str]


class OnnxModule(torch.nn.Module):
    """The translated graph. forward(*graph inputs) -> tuple of graph outputs (ONNX dtypes and shapes)."""

    def __init__(self) -> None:
        super().__init__()
        self.onnx_names: dict[str, str] = {}
        self.steps: list[_Step] = []
        self.input_names: list[str] = []
        self.output_sources: list[tuple[str, Any]] = []

    def _fetch(self, src: tuple[str, Any] | None, env: dict[str, torch.Tensor]) -> torch.Tensor | None:
        if src is None:
            return None
        kind, key = src
        if kind == "env":
            return env[key]
        if kind == "buf":
            return getattr(self, key)
        return key

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env: dict[str, torch.Tensor] = dict(zip(self.input_names, args, strict=True))
        for step in self.steps:
            outs = step.fn(*[self._fetch(s, env) for s in step.sources])
            outs = outs if isinstance(outs, tuple) else (outs,)
            for name, out in zip(step.outputs, outs, strict=False):
                if name:
                    env[name] = out
        results = []
        for src in self.output_sources:
            t = self._fetch(src, env)
            assert t is not None
            results.append(t.clone() if src[0] != "env" or src[1] in self.input_names else t)
        return tuple(results)


def load_families() -> None:
    """Import every op family module (each registers its handlers on import)."""
    import importlib

    for fam in _FAMILIES:
        importlib.import_module(f"{__package__}.{fam}")
