"""Inline torch.export's control-flow operators into the top-level FX graph, before capture.

- `torch.ops.higher_order.cond(pred, true_fn, false_fn, operands)`: both branches are
  inlined and each output becomes `aten.where.self(pred, true_out, false_out)`. This is
  RLX's own meaning of `Op::If` (rlx-autodiff `control_flow::inline_if`: both branches
  inlined, one `Where` selects), written in ops the registry already lowers. A predicate
  torch.export already knows (a Python bool) keeps only the taken branch. A predicate computed
  from dynamic sizes (`x.shape[0] > 4`, comparisons joined by `&`, `|`, `torch.sym_not`) becomes
  the same computation on 0-d int64 tensors of the sizes (`_size_predicate`), so each binding's
  sizes choose the branch when the bundle runs.
- `torch.ops.higher_order.map_impl(body, xs, args)`: unrolled over the leading dim of
  `xs` (`select` each step, `stack` the results), which must be static.
- `torch.ops.higher_order.scan(combine, init, xs, additional_inputs)`: unrolled the same
  way, the carry threaded from step to step; returns the final carry and stacked outputs.
- `torch.ops.higher_order.while_loop`: refused (its trip count depends on tensor values;
  RLX's `While` returns only its first carried value).

Each inlined operator is recorded (`TorchIR.control_flow`) so the report says what was done.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch import fx

from ...errors import InputError
from .provenance import module_info

aten = torch.ops.aten


def _hop(name: str) -> Any:
    return getattr(torch.ops.higher_order, name, None)


def _where(node: fx.Node) -> str:
    """`, module <path>, File "<user file>", line N, in forward` for a control-flow node, as far as known."""
    module, _ = module_info(node)
    stack = node.meta.get("stack_trace") or ""
    lines = [
        line.strip() for line in stack.splitlines() if line.strip().startswith("File") and "<eval_with_key>" not in line
    ]
    return (f", module {module}" if module else "") + (f", {lines[-1]}" if lines else "")


def _new(graph: fx.Graph, target: Any, args: tuple[Any, ...], like: fx.Node | None = None, **kwargs: Any) -> fx.Node:
    """A call_function node with its fake value computed from its arguments' fake values."""
    node = graph.call_function(target, args, kwargs or None)

    def val(a: Any) -> Any:
        if isinstance(a, fx.Node):
            return a.meta["val"]
        if isinstance(a, (list, tuple)):
            return type(a)(val(x) for x in a)
        return a

    values = val(args)
    with _fake_mode(graph, values):
        node.meta["val"] = target(*values, **kwargs)
    if like is not None:
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in like.meta:
                node.meta[key] = like.meta[key]
    return node


def _fake_mode(graph: fx.Graph, args: tuple[Any, ...]) -> Any:
    """For an op on sizes alone (`scalar_tensor(s0)`), the fake mode of `graph`'s inputs, so it gives a
    fake tensor of that mode rather than a real one at the example size; a null context for an op
    with a (fake) tensor argument, which computes in its argument's mode, or when there is none."""
    from contextlib import nullcontext

    from torch._guards import detect_fake_mode

    if any(isinstance(a, torch.Tensor) for a in args):
        return nullcontext()
    inputs = [n.meta.get("val") for n in graph.find_nodes(op="placeholder")]
    mode = detect_fake_mode([v for v in inputs if isinstance(v, torch.Tensor)])
    return mode if mode is not None else nullcontext()


def _inline(graph: fx.Graph, sub: fx.GraphModule, operands: list[Any]) -> list[Any]:
    """Copy `sub`'s nodes into `graph` (before the current insertion point) with its
    placeholders bound to `operands`; returns what `sub` returns, flattened."""
    env: dict[fx.Node, Any] = {}
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(operands):
        raise InputError(f"a control-flow body takes {len(placeholders)} inputs but is given {len(operands)}")
    env.update(zip(placeholders, operands, strict=True))
    result: list[Any] = []
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            out = n.args[0]
            flat = list(out) if isinstance(out, (list, tuple)) else [out]
            result = [env[a] if isinstance(a, fx.Node) else a for a in flat]
            continue
        if n.op == "get_attr":
            raise InputError(f"a control-flow body reads attribute {n.target!r}; only tensors passed in are supported")
        env[n] = graph.node_copy(n, lambda a: env[a])
    return result


# Python operators on sizes -> the ATen op computing them on 0-d int64 tensors (`_size_predicate`).
_SIZE_COMPARISONS = {
    operator.gt: aten.gt,
    operator.ge: aten.ge,
    operator.lt: aten.lt,
    operator.le: aten.le,
    operator.eq: aten.eq,
    operator.ne: aten.ne,
}
_SIZE_LOGIC = {operator.and_: aten.logical_and.default, operator.or_: aten.logical_or.default}
_SIZE_NOT = (operator.not_, operator.invert, torch.sym_not)
# Python's floor division and modulo are torch's floor_divide and remainder on integers.
_SIZE_ARITHMETIC = {
    operator.add: aten.add.Tensor,
    operator.sub: aten.sub.Tensor,
    operator.mul: aten.mul.Tensor,
    operator.floordiv: aten.floor_divide.default,
    operator.mod: aten.remainder.Tensor,
    torch.sym_max: aten.maximum.default,
    torch.sym_min: aten.minimum.default,
}


def _affine(value: Any) -> bool:
    """Whether a SymInt is a*s + b of at most one symbol: the form the dynamic lowering computes
    per binding from a size's one-element constant (`lower.generalize._size_scalars`)."""
    expr = value.node.expr
    free = list(expr.free_symbols)
    return len(free) <= 1 and (not free or (expr.is_polynomial(free[0]) and expr.as_poly(free[0]).degree() <= 1))


def _size_predicate(graph: fx.Graph, pred: fx.Node, cond: fx.Node) -> fx.Node:
    """A 0-d bool tensor computing the size predicate `pred`, a SymBool: comparisons of integers and
    sizes joined by `&`, `|` and `torch.sym_not`, where a size is a*s + b of one symbol or `+`, `-`,
    `*`, `//`, `%`, `torch.sym_max`/`sym_min` of such. Each a*s + b is a 0-d int64 tensor
    (`aten.scalar_tensor`), which the dynamic lowering evaluates at each binding; the arithmetic and
    the comparisons are tensor ops on them, so the branch is chosen when the bundle runs. Raises
    DynamicShapeError (exit 3) naming the cond node and the part of the predicate it cannot compute."""
    from ...errors import DynamicShapeError

    def refuse(what: str) -> DynamicShapeError:
        return DynamicShapeError(
            f"torch.cond (node {cond.name}{_where(cond)}): its predicate {pred.meta['val']} is computed from sizes "
            f"with {what}; a size predicate is chosen per binding when it compares integers and sizes a*s + b "
            "(or +, -, *, //, %, sym_max, sym_min of them), joined by &, | and torch.sym_not",
            hint="compute the predicate as a tensor, or make that dim static",
        )

    def size(a: Any) -> fx.Node | int:
        if isinstance(a, int) and not isinstance(a, bool):
            return a
        val = a.meta.get("val") if isinstance(a, fx.Node) else None
        if not isinstance(val, torch.SymInt):
            raise refuse(f"{type(val if val is not None else a).__name__} {a}")
        if a.op == "call_function" and a.target in _SIZE_ARITHMETIC:  # computed in tensors: a - 3 may be < 0
            x, y = (size(v) for v in a.args)
            return _new(graph, _SIZE_ARITHMETIC[a.target], (tensor(x), tensor(y)), cond)
        if _affine(val):  # a size (sym_size): never negative, as the lowering's size tables need
            return _new(graph, aten.scalar_tensor.default, (a,), cond, dtype=torch.int64)
        raise refuse(f"{val.node.expr} ({a.target})")

    def tensor(v: fx.Node | int) -> fx.Node:
        if isinstance(v, int):
            return _new(graph, aten.scalar_tensor.default, (v,), cond, dtype=torch.int64)
        return v

    def build(p: Any) -> fx.Node:
        if isinstance(p, fx.Node) and p.op == "call_function":
            if p.target in _SIZE_COMPARISONS:
                a, b = (size(v) for v in p.args)
                return _new(graph, _SIZE_COMPARISONS[p.target].Tensor, (tensor(a), tensor(b)), cond)
            if p.target in _SIZE_LOGIC:
                return _new(graph, _SIZE_LOGIC[p.target], (build(p.args[0]), build(p.args[1])), cond)
            if p.target in _SIZE_NOT:
                return _new(graph, aten.logical_not.default, (build(p.args[0]),), cond)
        raise refuse(f"{getattr(p, 'target', p)}")

    return build(pred)


def _replace_results(node: fx.Node, results: list[Any]) -> None:
    """Point each `getitem(node, i)` at `results[i]` and remove `node`."""
    for user in list(node.users):
        if user.op == "call_function" and user.target is operator.getitem:
            index = user.args[1]
            assert isinstance(index, int)  # getitem of a multi-output node takes its position
            value = results[index]
            if not isinstance(value, fx.Node):
                raise InputError(f"{node.name}: output {index} is a constant {value!r}, not a tensor")
            user.replace_all_uses_with(value)
            user.graph.erase_node(user)
        else:
            raise InputError(f"{node.name}: its result is used whole by {user.name}; expected per-output getitems")
    node.graph.erase_node(node)


def _leading(node: fx.Node, xs: list[fx.Node], kind: str) -> int:
    """The static leading size of `xs`, over which `kind` is unrolled."""
    sizes = [x.meta["val"].shape[0] for x in xs]
    dynamic = [str(n) for n in sizes if not isinstance(n, int)]
    if dynamic:
        raise InputError(
            f"{kind} (node {node.name}{_where(node)}) runs over a dynamic leading dim ({dynamic[0]}); it is unrolled "
            "at conversion, so that dim must be static",
            hint="make the mapped/scanned dim static in dynamic_shapes",
        )
    if len(set(sizes)) != 1:
        raise InputError(f"{kind} (node {node.name}): its inputs have different leading sizes {sizes}")
    return sizes[0]


def inline_control_flow(gm: fx.GraphModule) -> list[dict[str, Any]]:
    """Inline every cond / map / scan of `gm` (and of its bodies, innermost first) in place.

    Returns one record per inlined operator: {"node", "kind", "how"}. Raises InputError for
    while_loop and for forms that cannot be unrolled (a dynamic leading dim)."""
    records: list[dict[str, Any]] = []
    for child in list(gm.children()):
        if isinstance(child, fx.GraphModule):
            records += inline_control_flow(child)
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is _hop("cond"):
            pred, true_g, false_g, operands = node.args[:4]
            branches = [getattr(gm, g.target) for g in (true_g, false_g)]
            with graph.inserting_before(node):
                if isinstance(pred, bool) or (isinstance(pred, fx.Node) and isinstance(pred.meta.get("val"), bool)):
                    taken = pred if isinstance(pred, bool) else pred.meta["val"]
                    results = _inline(graph, branches[0 if taken else 1], list(operands))
                    how = f"predicate known at conversion ({taken}): the {'true' if taken else 'false'} branch"
                else:
                    how = "both branches inlined; each output selected by aten.where on the predicate (RLX If)"
                    if isinstance(pred, fx.Node) and isinstance(pred.meta.get("val"), torch.SymBool):
                        pred = _size_predicate(graph, pred, node)
                        how = (
                            "predicate computed from sizes: both branches inlined, each output selected by aten.where "
                            "on the predicate evaluated at each binding's sizes (RLX If)"
                        )
                    if not isinstance(pred, fx.Node) or not isinstance(pred.meta.get("val"), torch.Tensor):
                        raise InputError(
                            f"torch.cond (node {node.name}{_where(node)}) has a predicate {pred} that is neither a "
                            "tensor, a constant nor computed from sizes",
                            hint="compute the predicate as a tensor",
                        )
                    outs_t = _inline(graph, branches[0], list(operands))
                    outs_f = _inline(graph, branches[1], list(operands))
                    results = [
                        _new(graph, aten.where.self, (pred, t, f), node) for t, f in zip(outs_t, outs_f, strict=True)
                    ]
            _replace_results(node, results)
            records.append({"node": node.name, "kind": "cond", "how": how})
        elif node.target is _hop("map_impl"):
            body_g, xs, args = node.args[:3]
            body = getattr(gm, body_g.target)
            steps = _leading(node, list(xs), "map")
            with graph.inserting_before(node):
                per_step = []
                for i in range(steps):
                    sliced = [_new(graph, aten.select.int, (x, 0, i), node) for x in xs]
                    per_step.append(_inline(graph, body, [*sliced, *args]))
                results = [
                    _new(graph, aten.stack.default, (list(outs), 0), node) for outs in zip(*per_step, strict=True)
                ]
            _replace_results(node, results)
            records.append({"node": node.name, "kind": "map", "how": f"unrolled over {steps} steps, results stacked"})
        elif node.target is _hop("scan"):
            combine_g, init, xs, extra = node.args[:4]
            body = getattr(gm, combine_g.target)
            steps = _leading(node, list(xs), "scan")
            with graph.inserting_before(node):
                carry, ys = list(init), []
                for t in range(steps):
                    sliced = [_new(graph, aten.select.int, (x, 0, t), node) for x in xs]
                    outs = _inline(graph, body, [*carry, *sliced, *extra])
                    carry, step_ys = outs[: len(init)], outs[len(init) :]
                    ys.append(step_ys)
                stacked = [_new(graph, aten.stack.default, (list(y), 0), node) for y in zip(*ys, strict=True)]
            _replace_results(node, [*carry, *stacked])
            records.append({"node": node.name, "kind": "scan", "how": f"unrolled over {steps} steps, carry threaded"})
        elif node.target is _hop("while_loop"):
            raise InputError(
                f"torch.while_loop (node {node.name}{_where(node)}): its trip count depends on tensor values; RLX "
                "compiles a fixed graph and its While op returns only the first carried value, so a while_loop is "
                "not converted",
                hint="use a loop with a static trip count (a Python for loop, or torch.scan)",
            )
    for node in list(graph.nodes):  # the bodies' get_attr nodes, now unused
        if node.op == "get_attr" and not node.users:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return records
