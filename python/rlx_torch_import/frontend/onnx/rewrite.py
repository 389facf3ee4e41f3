"""ONNX-level rewrites into forms RLX's importer lowers: each rule takes one node and returns the
nodes (and constants) computing the same thing from ops the importer has, or None when the node is
already in a form it takes. Adding a rule touches this file only (and its conformance cases).
Also the whole-graph fixes `constant_outputs` and `align_ranks`. Shape-fixing input operands are
`operands.py`'s."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class _Ctx:
    """Names, element types and new constants while one model is rewritten."""

    types: dict[str, int]
    prefix: str
    opset: int = 0
    inits: dict[str, Any] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    constants: list[Any] = field(default_factory=list)
    count: int = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}/{hint}_{self.count}"

    def const(self, value: float, like: str) -> str:
        """A scalar constant of `like`'s element type."""
        from onnx import helper

        name = self.name("c")
        self.constants.append(helper.make_tensor(name, self.types.get(like, 1), [], [value]))
        return name

    def ints(self, values: list[int]) -> str:
        """A 1-D int64 constant."""
        from onnx import helper

        name = self.name("i")
        self.constants.append(helper.make_tensor(name, 7, [len(values)], values))
        return name


Rule = Callable[[Any, _Ctx], list[Any] | None]
RULES: dict[str, Rule] = {}


def rule(*op_types: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for op in op_types:
            RULES[op] = fn
        return fn

    return register


def _node(op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, inputs, outputs, **attrs)


def _chain(op: str, inputs: list[str], out: str, ctx: _Ctx) -> list[Any]:
    """`op` folded left over `inputs` (one input: Identity)."""
    if len(inputs) == 1:
        return [_node("Identity", inputs, [out])]
    nodes, acc = [], inputs[0]
    for k, x in enumerate(inputs[1:]):
        target = out if k == len(inputs) - 2 else ctx.name(op)
        nodes.append(_node(op, [acc, x], [target]))
        acc = target
    return nodes


@rule("Sum")
def _sum(node: Any, ctx: _Ctx) -> list[Any]:
    return _chain("Add", list(node.input), node.output[0], ctx)


@rule("Max", "Min")
def _variadic(node: Any, ctx: _Ctx) -> list[Any] | None:
    return None if len(node.input) == 2 else _chain(node.op_type, list(node.input), node.output[0], ctx)


@rule("Mean")
def _mean(node: Any, ctx: _Ctx) -> list[Any]:
    total = ctx.name("sum")
    n = ctx.const(float(len(node.input)), node.input[0])
    return [*_chain("Add", list(node.input), total, ctx), _node("Div", [total, n], [node.output[0]])]


def _unary(ctx: _Ctx, x: str, steps: list[tuple[str, list[str]]], out: str) -> list[Any]:
    """A straight chain of nodes; "$" in an input list is the previous result, "x" the input."""
    nodes, prev = [], x
    for k, (op, ins) in enumerate(steps):
        target = out if k == len(steps) - 1 else ctx.name(op)
        nodes.append(_node(op, [prev if i == "$" else x if i == "x" else i for i in ins], [target]))
        prev = target
    return nodes


@rule("Tan")
def _tan(node: Any, ctx: _Ctx) -> list[Any]:
    x, out = node.input[0], node.output[0]
    s, c = ctx.name("sin"), ctx.name("cos")
    return [_node("Sin", [x], [s]), _node("Cos", [x], [c]), _node("Div", [s, c], [out])]


@rule("Sinh", "Cosh")
def _hyperbolic(node: Any, ctx: _Ctx) -> list[Any]:
    x, out = node.input[0], node.output[0]
    e, n, en, sum_, half = ctx.name("exp"), ctx.name("neg"), ctx.name("expneg"), ctx.name("sum"), ctx.const(0.5, x)
    combine = "Sub" if node.op_type == "Sinh" else "Add"
    return [
        _node("Exp", [x], [e]),
        _node("Neg", [x], [n]),
        _node("Exp", [n], [en]),
        _node(combine, [e, en], [sum_]),
        _node("Mul", [sum_, half], [out]),
    ]


@rule("Asinh", "Acosh")
def _area(node: Any, ctx: _Ctx) -> list[Any]:
    """asinh x = log(x + sqrt(x^2 + 1)); acosh x = log(x + sqrt(x^2 - 1))."""
    x = node.input[0]
    one = ctx.const(1.0, x)
    inner = "Add" if node.op_type == "Asinh" else "Sub"
    return _unary(
        ctx,
        x,
        [("Mul", ["x", "x"]), (inner, ["$", one]), ("Sqrt", ["$"]), ("Add", ["$", "x"]), ("Log", ["$"])],
        node.output[0],
    )


@rule("Atanh")
def _atanh(node: Any, ctx: _Ctx) -> list[Any]:
    """atanh x = 0.5 * log((1 + x) / (1 - x))."""
    x = node.input[0]
    one, half = ctx.const(1.0, x), ctx.const(0.5, x)
    a, b, q, lg = ctx.name("a"), ctx.name("b"), ctx.name("q"), ctx.name("log")
    return [
        _node("Add", [one, x], [a]),
        _node("Sub", [one, x], [b]),
        _node("Div", [a, b], [q]),
        _node("Log", [q], [lg]),
        _node("Mul", [lg, half], [node.output[0]]),
    ]


@rule("Asin", "Acos")
def _arc(node: Any, ctx: _Ctx) -> list[Any]:
    """asin x = atan(x / sqrt(1 - x^2)); acos x = pi/2 - asin x."""
    x = node.input[0]
    one = ctx.const(1.0, x)
    asin = node.output[0] if node.op_type == "Asin" else ctx.name("asin")
    nodes = _unary(
        ctx, x, [("Mul", ["x", "x"]), ("Sub", [one, "$"]), ("Sqrt", ["$"]), ("Div", ["x", "$"]), ("Atan", ["$"])], asin
    )
    if node.op_type == "Acos":
        nodes.append(_node("Sub", [ctx.const(math.pi / 2, x), asin], [node.output[0]]))
    return nodes


@rule("GlobalMaxPool")
def _global_max(node: Any, ctx: _Ctx) -> list[Any] | None:
    rank = ctx.types.get(f"rank:{node.input[0]}")
    if not rank:
        return None
    axes = list(range(2, rank))
    if ctx.opset >= 18:  # ReduceMax's axes became an input in opset 18
        return [_node("ReduceMax", [node.input[0], ctx.ints(axes)], [node.output[0]], keepdims=1)]
    return [_node("ReduceMax", [node.input[0]], [node.output[0]], axes=axes, keepdims=1)]


@rule("HardSigmoid", "HardSwish")
def _hard_sigmoid(node: Any, ctx: _Ctx) -> list[Any]:
    """HardSigmoid x = max(0, min(1, alpha * x + beta)) (alpha 0.2, beta 0.5 by default; HardSwish is
    x * HardSigmoid x with alpha 1/6): written out, since ONNX defines no function body for them
    before opset 18."""
    x, out = node.input[0], node.output[0]
    attrs = {a.name: a.f for a in node.attribute}
    swish = node.op_type == "HardSwish"
    alpha, beta = (1.0 / 6.0, 0.5) if swish else (attrs.get("alpha", 0.2), attrs.get("beta", 0.5))
    scaled, shifted, low = ctx.name("scaled"), ctx.name("shifted"), ctx.name("low")
    sigmoid = ctx.name("hardsigmoid") if swish else out
    nodes = [
        _node("Mul", [x, ctx.const(alpha, x)], [scaled]),
        _node("Add", [scaled, ctx.const(beta, x)], [shifted]),
        _node("Max", [shifted, ctx.const(0.0, x)], [low]),
        _node("Min", [low, ctx.const(1.0, x)], [sigmoid]),
    ]
    return nodes + ([_node("Mul", [x, sigmoid], [out])] if swish else [])


@rule("IsInf")
def _isinf(node: Any, ctx: _Ctx) -> list[Any]:
    """x == +inf (detect_positive), x == -inf (detect_negative), |x| == inf (both, the default)."""
    x, out = node.input[0], node.output[0]
    attrs = {a.name: a.i for a in node.attribute}
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if pos and neg:
        a = ctx.name("abs")
        return [_node("Abs", [x], [a]), _node("Equal", [a, ctx.const(math.inf, x)], [out])]
    return [_node("Equal", [x, ctx.const(math.inf if pos else -math.inf if neg else math.nan, x)], [out])]


@rule("Ceil")
def _ceil(node: Any, ctx: _Ctx) -> list[Any]:
    """-floor(-x): the importer's Ceil, round(x) + (round(x) < x), gives +0.0 where ONNX gives -0.0
    (ceil(-0.5), ceil(-0.0)); its Floor, round(x) - (round(x) > x), keeps the zero's sign."""
    return _unary(ctx, node.input[0], [("Neg", ["x"]), ("Floor", ["$"]), ("Neg", ["$"])], node.output[0])


@rule("MatMul")
def _matmul_1d(node: Any, ctx: _Ctx) -> list[Any] | None:
    """A 1-D operand (numpy's matmul: a vector is a row on the left, a column on the right, and that
    axis is dropped from the result): made 2-D, multiplied, the result reshaped to ONNX's shape."""
    a, b = node.input[0], node.input[1]
    ra, rb = ctx.types.get(f"rank:{a}"), ctx.types.get(f"rank:{b}")
    out_shape = ctx.shapes.get(node.output[0])
    if ra is None or rb is None or (ra > 1 and rb > 1) or not out_shape:
        return None
    nodes = []
    if ra == 1:
        a2 = ctx.name("row")
        nodes.append(_node("Unsqueeze", [a, ctx.ints([0])], [a2]))
        a = a2
    if rb == 1:
        b2 = ctx.name("col")
        nodes.append(_node("Unsqueeze", [b, ctx.ints([1])], [b2]))
        b = b2
    product = ctx.name("matmul")
    nodes.append(_node("MatMul", [a, b], [product]))
    nodes.append(_node("Reshape", [product, ctx.ints(list(out_shape))], [node.output[0]]))
    return nodes


@rule("Transpose")
def _transpose(node: Any, ctx: _Ctx) -> list[Any] | None:
    """No `perm`: the axes reversed (ONNX's default), made explicit."""
    rank = ctx.types.get(f"rank:{node.input[0]}")
    if rank is None or any(a.name == "perm" for a in node.attribute):
        return None
    return [_node("Transpose", [node.input[0]], [node.output[0]], perm=list(reversed(range(rank))))]


@rule("Clip")
def _clip(node: Any, ctx: _Ctx) -> list[Any] | None:
    """min / max given as computed values (not constants): Max with min, then Min with max."""
    bounds = [(op, node.input[k]) for op, k in (("Max", 1), ("Min", 2)) if len(node.input) > k and node.input[k]]
    if not bounds or all(name in ctx.inits for _op, name in bounds):
        return None
    nodes, acc = [], node.input[0]
    for k, (op, bound) in enumerate(bounds):
        target = node.output[0] if k == len(bounds) - 1 else ctx.name("clip")
        nodes.append(_node(op, [acc, bound], [target]))
        acc = target
    return nodes


_REDUCES = tuple(
    f"Reduce{r}" for r in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp", "SumSquare")
)


@rule(*_REDUCES)
def _reduce_axes(node: Any, ctx: _Ctx) -> list[Any] | None:
    """Empty (or absent) axes in the input form: every axis, or Identity with noop_with_empty_axes."""
    rank = ctx.types.get(f"rank:{node.input[0]}")
    if rank is None or any(a.name == "axes" for a in node.attribute):
        return None
    axes_in = node.input[1] if len(node.input) > 1 else ""
    if axes_in and (axes_in not in ctx.inits or len(ctx.inits[axes_in].dims) != 1 or ctx.inits[axes_in].dims[0] != 0):
        return None  # axes given (or not a constant): as it is
    if not axes_in and ((ctx.opset < 18 and node.op_type != "ReduceSum") or ctx.opset < 13):
        return None  # the attribute form: no axes means every axis already
    noop = next((a.i for a in node.attribute if a.name == "noop_with_empty_axes"), 0)
    if noop:
        return [_node("Identity", [node.input[0]], [node.output[0]])]
    new = _node(node.op_type, [node.input[0], ctx.ints(list(range(rank)))], list(node.output))
    new.attribute.extend(a for a in node.attribute if a.name != "noop_with_empty_axes")
    return [new]


@rule("Resize")
def _resize_empty(node: Any, ctx: _Ctx) -> list[Any] | None:
    """An empty constant for `roi` or `scales` (what torch 1.x and paddle2onnx write at opsets 11-12 for
    "not given") as the absent input ONNX also allows: the importer re-encodes an empty constant as one
    element, so its bundle's weights would not match."""
    empty = {k for k in (1, 2) if len(node.input) > k and 0 in list(getattr(ctx.inits.get(node.input[k]), "dims", [1]))}
    if not empty:
        return None
    new = _node("Resize", ["" if k in empty else x for k, x in enumerate(node.input)], list(node.output))
    new.attribute.extend(node.attribute)
    return [new]


_INTS = {2, 3, 4, 5, 6, 7, 12, 13}  # ONNX element types of the integers


@rule("Mod")
def _int_mod(node: Any, ctx: _Ctx) -> list[Any] | None:
    """Integer Mod as `r = a - (a / b) * b` (ONNX's integer Div truncates), the sign of `b` where `fmod`
    is 0 (`r + b` where r and b have opposite signs): the importer's own Mod panics on int32 (its kernel
    takes float32) and gives int64 the wrong sign with fmod 0."""
    if ctx.types.get(node.input[0]) not in _INTS:
        return None
    a, b, out = node.input[0], node.input[1], node.output[0]
    fmod = next((x.i for x in node.attribute if x.name == "fmod"), 0)
    q, qb, r = ctx.name("q"), ctx.name("qb"), out if fmod else ctx.name("r")
    nodes = [_node("Div", [a, b], [q]), _node("Mul", [q, b], [qb]), _node("Sub", [a, qb], [r])]
    if fmod:
        return nodes
    sr, sb, p, neg, rb = (ctx.name(h) for h in ("sr", "sb", "p", "neg", "rb"))
    zero = ctx.const(0, a)
    return [
        *nodes,
        *(_node("Sign", [x], [y]) for x, y in ((r, sr), (b, sb))),
        _node("Mul", [sr, sb], [p]),
        _node("Less", [p, zero], [neg]),
        _node("Add", [r, b], [rb]),
        _node("Where", [neg, rb, r], [out]),
    ]


def _shapes(model: Any) -> dict[str, tuple[int, ...]]:
    """Each value's static shape, where every dim is known."""
    found = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            found[vi.name] = tuple(int(d.dim_value) for d in t.shape.dim)
    return found


def _rank_types(model: Any) -> dict[str, int]:
    """Element type of each typed value, and `rank:<name>` -> its rank."""
    g = model.graph
    found: dict[str, int] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        t = vi.type.tensor_type
        found[vi.name] = t.elem_type
        if t.HasField("shape"):
            found[f"rank:{vi.name}"] = len(t.shape.dim)
    for init in g.initializer:
        found[init.name] = init.data_type
        found[f"rank:{init.name}"] = len(init.dims)
    return found


def rewrite(model: Any, op_types: set[str] | None = None) -> Counter[str]:
    """Apply the rules to every node of `op_types` (default: every op type with a rule), in place.
    Returns how many nodes of each op type were rewritten."""
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    ctx = _Ctx(_rank_types(model), "rlx_rewrite", opset, {t.name: t for t in model.graph.initializer}, _shapes(model))
    done: Counter[str] = Counter()
    out = []
    for node in model.graph.node:
        fn = RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        new = fn(node, ctx) if fn is not None and (op_types is None or node.op_type in op_types) else None
        if new is None:
            out.append(node)
            continue
        for n in new:
            n.name = ctx.name(node.name or node.op_type) if not n.name else n.name
        out.extend(new)
        done[node.op_type] += 1
    if done:
        del model.graph.node[:]
        model.graph.node.extend(out)
        model.graph.initializer.extend(ctx.constants)
    return done


def _static_value(node: Any, model: Any) -> np.ndarray | None:
    """The value of a node computing a graph output that the importer folds at import instead of
    making a node (Constant; Shape and Size of a value whose shape is static), else None."""
    from onnx import numpy_helper

    if node.op_type == "Constant":
        from onnx.reference import ReferenceEvaluator

        try:
            results: Any = ReferenceEvaluator(_single(node, model)).run(None, {})
        except Exception:
            return None
        return np.asarray(results[0])
    if node.op_type not in ("Shape", "Size"):
        return None
    infos = {vi.name: vi for vi in [*model.graph.input, *model.graph.value_info]}
    inits = {t.name: t for t in model.graph.initializer}
    name = node.input[0]
    if name in inits:
        dims = list(numpy_helper.to_array(inits[name]).shape)
    elif name in infos and infos[name].type.tensor_type.HasField("shape"):
        found = infos[name].type.tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in found):
            return None
        dims = [int(d.dim_value) for d in found]
    else:
        return None
    if node.op_type == "Size":
        return np.asarray(math.prod(dims), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    return np.asarray(dims[slice(attrs.get("start", 0), attrs.get("end"))], dtype=np.int64)


def _single(node: Any, model: Any) -> Any:
    from onnx import helper

    graph = helper.make_graph(
        [node],
        "constant",
        [],
        [helper.make_value_info(o, helper.make_empty_tensor_value_info(o).type) for o in node.output],
    )
    return helper.make_model(graph, opset_imports=list(model.opset_import))


def constant_outputs(model: Any) -> int:
    """Each graph output that no node computes at run time (an initializer after constant folding, a
    Constant, the Shape or Size of a static shape: the importer folds those) made the output of an
    Identity of a constant holding its value, in place (the importer reads outputs from its nodes)."""
    from onnx import helper, numpy_helper

    producers = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: t for t in model.graph.initializer}
    count = 0
    for out in model.graph.output:
        node = producers.get(out.name)
        if node is None and out.name in inits:
            inits[out.name].name = f"{out.name}/constant"
        elif node is not None and (value := _static_value(node, model)) is not None:
            model.graph.node.remove(node)
            model.graph.initializer.append(numpy_helper.from_array(value, f"{out.name}/constant"))
        else:
            continue
        model.graph.node.append(
            helper.make_node("Identity", [f"{out.name}/constant"], [out.name], name=f"{out.name}/identity")
        )
        count += 1
    return count


# Ops that broadcast their inputs numpy-style (right-aligned). The importer aligns a lower-rank operand
# by size instead (a [N] bias against [N, N] goes to the first axis), so ranks are made equal first.
BROADCASTING = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "Greater", "LessOrEqual",
    "GreaterOrEqual", "And", "Or", "Xor", "Where", "PRelu", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})  # fmt: skip


def align_ranks(model: Any) -> int:
    """Give every operand of a broadcasting op the rank of its highest-rank operand, in place: leading
    size-1 axes added (an initializer reshaped into a new constant, a computed value through Unsqueeze).
    Rank-0 operands stay (the importer reads them as scalars). Returns how many operands changed."""
    from onnx import helper, numpy_helper

    ranks = _rank_types(model)
    inits = {t.name: t for t in model.graph.initializer}
    ctx = _Ctx(ranks, "rlx_align")
    out: list[Any] = []
    count = 0
    for node in model.graph.node:
        if node.op_type not in BROADCASTING or node.domain not in ("", "ai.onnx"):
            out.append(node)
            continue
        have = [ranks.get(f"rank:{i}") if i else None for i in node.input]
        top = max((r for r in have if r is not None), default=0)
        for k, (name, rank) in enumerate(zip(list(node.input), have, strict=True)):
            if not rank or rank >= top:
                continue
            fresh = ctx.name("aligned")
            if name in inits:
                arr = numpy_helper.to_array(inits[name])
                model.graph.initializer.append(
                    numpy_helper.from_array(arr.reshape((1,) * (top - rank) + arr.shape), fresh)
                )
            else:
                axes = ctx.ints(list(range(top - rank)))
                out.append(helper.make_node("Unsqueeze", [name, axes], [fresh], name=fresh))
            node.input[k] = fresh
            count += 1
        out.append(node)
    del model.graph.node[:]
    model.graph.node.extend(out)
    model.graph.initializer.extend(ctx.constants)
    return count
