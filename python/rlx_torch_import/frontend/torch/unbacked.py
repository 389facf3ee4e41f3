"""Sizes that depend on tensor values (torch's unbacked symbols `u0`, ...): which node defines each,
torch's range for it, and its value at the example inputs (docs/design.md, decision ax).

Such a size is computed at run time by a *size stage* (`lower.stages`) and bound like a dynamic
dim, so only the sizes that appear in a shape become symbols here; a value read with `.item()` and
used as a number stays a 0-d tensor (`encode.data_dependent`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind

from ...errors import InputError
from ...sizes import Symbol
from .provenance import op_name

# The ops whose result size (or value, for `.item()`) a size stage can compute.
DEFINERS = {
    "aten.nonzero.default": "the number of nonzero elements",
    "aten.argwhere.default": "the number of nonzero elements",
    "aten.index.Tensor": "the number of True elements of the boolean mask",
    "aten.masked_select.default": "the number of True elements of the (broadcast) mask",
    "aten._unique2.default": "the number of distinct values",
    "aten.bincount.default": "max(x) + 1, at least minlength",
    "aten.repeat_interleave.Tensor": "the sum of the repeats",
    "aten.repeat_interleave.self_Tensor": "the sum of the repeats",
    "aten._local_scalar_dense.default": "the value read with .item()",
    "aten.slice.Tensor": "the length of a slice whose end is a value read with .item() (step 1)",
    "aten.item.default": "the value read with .item()",
}


def _shape_symbols(graph: torch.fx.Graph) -> set[str]:
    """The unbacked symbols that occur in some value's shape."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found: set[str] = set()
    for node in graph.nodes:
        val = node.meta.get("val")
        for v in val if isinstance(val, (tuple, list)) else [val]:
            if isinstance(v, torch.Tensor):
                found |= {str(s) for d in v.shape for s in free_unbacked_symbols(d)}
    return found


def _definers(graph: torch.fx.Graph) -> dict[str, tuple[torch.fx.Node | None, Any]]:
    """Unbacked symbol -> (the node that binds it, torch's key path from its value to the size)."""
    found: dict[str, tuple[torch.fx.Node | None, Any]] = {}
    for node in graph.nodes:
        for sym, path in (node.meta.get("unbacked_bindings") or {}).items():
            found.setdefault(str(sym), (node, path))
    return found


def _example_values(ep: torch.export.ExportedProgram, tensors: tuple[torch.Tensor, ...]) -> dict[str, Any]:
    """Every node's value when the exported graph runs on the example inputs (eager, on CPU)."""
    user = iter(tensors)
    args: list[Any] = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(next(user, None))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            # a non-persistent buffer is kept in `ep.constants`, not in `ep.state_dict`
            key = str(spec.target)
            args.append(ep.state_dict[key] if key in ep.state_dict else ep.constants[key])
        else:
            args.append(None)
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            out = super().run_node(n)
            values[n.name] = out
            return out

    with torch.no_grad():
        Recorder(ep.graph_module).run(*args)
    return values


def stage_symbols(ep: torch.export.ExportedProgram, tensors: tuple[torch.Tensor, ...], first_id: int) -> list[Symbol]:
    """The sizes that depend on tensor values, as staged symbols (ids from `first_id`), with torch's
    range and the size at the example inputs `tensors` (the user inputs, in order). A size computed
    from tensors sized by other such sizes (a chain: VITS's durations read after a masked spline)
    gets the stage after the latest of theirs; the others stage 1.

    Raises InputError naming the symbol and node when a size comes from an op no size stage computes
    (a slice by an unchecked bound, ...)."""
    graph = ep.graph_module.graph
    used = _shape_symbols(graph)
    if not used:
        return []
    definers = _definers(graph)
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    values: dict[str, Any] | None = None
    found: list[Symbol] = []
    stage_of: dict[str, int] = {}
    order = {node: i for i, node in enumerate(graph.nodes)}
    # in graph order, so that a size computed from values sized by another comes after it (a chain)
    for name in sorted(used, key=lambda s: (order.get(definers.get(s, (None, ()))[0], -1), s)):
        node, path = definers.get(name, (None, ()))
        target = op_name(node.target) if node is not None else "?"
        if node is None or target not in DEFINERS:
            raise InputError(
                f"{target} (node {node.name if node is not None else '?'}) gives a size that depends on tensor values "
                f"(torch's {name}) that no size stage computes; supported: {', '.join(sorted(DEFINERS))}",
                hint="bound it with torch._check(0 <= n <= size) before using it, or keep the size static",
            )
        chained = _upstream_symbols(node) - {name}
        unknown = sorted(chained - set(stage_of))
        if unknown:
            raise InputError(
                f"{target} (node {node.name}) gives a size ({name}) computed from tensors sized by "
                f"{', '.join(unknown)}, which no earlier size stage computes",
                hint="report the model: torch defined those sizes after the node that reads them",
            )
        # a size computed from values sized by earlier staged sizes runs in a later stage (a chain)
        stage_of[name] = 1 + max((stage_of[c] for c in chained), default=0)
        if values is None:
            values = _example_values(ep, tensors)
        example = int(pytree.key_get(values[node.name], path))
        vr = ranges.get(name)
        lo = max(_bound(vr.lower) or 0, 0, _least(node, target)) if vr is not None else _least(node, target)
        hi = _bound(vr.upper) if vr is not None else None
        found.append(
            Symbol(first_id + len(found), name, f"{node.name}.size", lo, hi, example, stage_of[name], node.name)
        )
    return found


def _least(node: torch.fx.Node, target: str) -> int:
    """The smallest size `node` can give, where torch's range says 0 but the op cannot: unique and bincount
    of a non-empty tensor give at least one value (bincount at least minlength)."""
    arg = node.args[0] if node.args else None
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or not all(isinstance(d, int) for d in val.shape) or val.numel() == 0:
        return 0  # empty, or sized by tensor values itself (it may be empty: a chain)
    if target == "aten._unique2.default":
        return 1
    if target == "aten.bincount.default":
        minlength = node.args[2] if len(node.args) > 2 else node.kwargs.get("minlength", 0)
        return max(1, minlength if isinstance(minlength, int) else 0)
    return 0


def _upstream_symbols(node: torch.fx.Node) -> set[str]:
    """The unbacked symbols in the shapes of every value `node` is computed from (its inputs, their
    inputs, ...): a size computed from values sized by another such size needs a chain of stages."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found: set[str] = set()
    seen: set[torch.fx.Node] = set()
    todo = list(node.all_input_nodes)
    while todo:
        arg = todo.pop()
        if arg in seen:
            continue
        seen.add(arg)
        val = arg.meta.get("val")
        for v in val if isinstance(val, (tuple, list)) else [val]:
            if isinstance(v, torch.Tensor):
                found |= {str(s) for d in v.shape for s in free_unbacked_symbols(d)}
        todo.extend(arg.all_input_nodes)
    return found


def _bound(value: Any) -> int | None:
    """A range bound as an int; None for torch's `int_oo` (unbounded)."""
    try:
        v = int(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
    return v if abs(v) < 2**62 else None
