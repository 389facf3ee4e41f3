"""Size stages: the part of a program that computes its sizes that depend on tensor values
(docs/design.md, decision ax).

A symbol with `stage` k > 0 (`frontend.torch.unbacked.stage_symbols`) is the size of one node's result
(nonzero's row count, `.item()`'s value, ...), or a function of such sizes (`derived`, decision bb).
Its *size stage* is a torch-ir program of its own: the nodes that node's inputs are computed from,
plus a few nodes that compute the size as an int64 scalar output (`stage.<symbol>`). It is lowered
like any program, symbolic over the input dims and the sizes of stages before k (a chain); at run
time its outputs bind the symbols, and the main program (lowered at concrete sizes and generalized
as for dynamic dims, `lower.generalize`) runs at that binding.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import LoweringError
from ..program import Program
from ..sizes import Symbol
from ..torchir import Node, OutputSpec, TensorSpec, TorchIR
from .registry import lower


def stage_symbols(ir: TorchIR) -> list[Symbol]:
    """The symbols of `ir` that a size stage computes."""
    return [s for s in ir.symbols if s.stage]


def output_name(sym: Symbol) -> str:
    """The stage program's output that carries `sym`'s value."""
    return f"stage.{sym.name}"


@dataclass
class StageProgram:
    """One size stage: its lowered program and, for each output in order, the symbol it binds."""

    program: Program
    symbols: list[Symbol]


def _tensor(arg: dict[str, Any]) -> str:
    if "tensor" not in arg:
        raise LoweringError(f"expected a tensor argument, found {arg}")
    return str(arg["tensor"])


class _Nodes:
    """Synthetic torch-ir nodes computing one size (names prefixed by the symbol)."""

    def __init__(self, prefix: str, shapes: dict[str, list[Any]], dtypes: dict[str, str]) -> None:
        self.prefix, self.shapes, self.dtypes = prefix, shapes, dtypes
        self.nodes: list[Node] = []

    def add(self, target: str, args: list[Any], shape: list[Any], out: str, **kwargs: Any) -> str:
        name = f"{self.prefix}_{len(self.nodes)}"
        dtype = out
        self.nodes.append(Node(name, target, args, kwargs, [TensorSpec(name, shape, dtype)]))
        self.shapes[name], self.dtypes[name] = shape, dtype
        return name

    def count_true(self, value: str, dims: list[Any] | None = None) -> str:
        """The number of nonzero elements of `value` (expanded to `dims` first), int64."""
        if dims is not None and list(dims) != list(self.shapes[value]):
            value = self.add("aten.expand.default", [{"tensor": value}, _ints(dims)], dims, self.dtypes[value])
        if self.dtypes[value] != "bool":
            value = self.add("aten.ne.Scalar", [{"tensor": value}, {"int": 0}], self.shapes[value], "bool")
        return self.total(value, "float32")  # a count of at most 2**23 (the lowerings' limit): exact

    def total(self, value: str, through: str) -> str:
        """sum(value) as int64, summed in float dtype `through` (RLX's exact int64 sum is a tree whose
        shape follows the length, so it would not generalize over a dynamic dim; float32 holds integers
        below 2**24 exactly, float64 below 2**53)."""
        total = self.add("aten.sum.default", [{"tensor": value}], [], through, dtype={"dtype": through})
        return self.add("aten._to_copy.default", [{"tensor": total}], [], "int64", dtype={"dtype": "int64"})


def _ints(dims: list[Any]) -> dict[str, Any]:
    return {"list": [{"int": d} if isinstance(d, int) else {"sym": d} for d in dims]}


def _size_nodes(node: Node, sym: Symbol, make: _Nodes) -> str:
    """Nodes computing `sym` (the size `node` gives) from `node`'s inputs; the name of the int64 scalar."""
    args = node.args
    t = node.target
    if t in ("aten.nonzero.default", "aten.argwhere.default"):
        return make.count_true(_tensor(args[0]))
    if t == "aten.index.Tensor":
        masks = [a for a in args[1]["list"] if "tensor" in a]
        if len(masks) != 1 or make.dtypes[_tensor(masks[0])] not in ("bool", "uint8"):
            raise LoweringError(f"{t} (node {node.name}): only one boolean mask gives a data-dependent size here")
        return make.count_true(_tensor(masks[0]))
    if t == "aten.masked_select.default":
        return make.count_true(_tensor(args[1]), _broadcast(make, args))
    if t in ("aten.repeat_interleave.Tensor", "aten.repeat_interleave.self_Tensor"):
        return make.total(_tensor(args[0] if t == "aten.repeat_interleave.Tensor" else args[1]), "float64")
    if t in ("aten._local_scalar_dense.default", "aten.item.default"):
        value = node.outputs[0].name
        if make.dtypes.get(value, node.outputs[0].dtype) == "int64":
            return value
        return make.add("aten._to_copy.default", [{"tensor": value}], [], "int64", dtype={"dtype": "int64"})
    if t == "aten.slice.Tensor":
        return _slice_size(node, make)
    if t == "aten.bincount.default":
        return _bincount_size(node, make)
    if t == "aten._unique2.default":
        return _unique_size(node, make)
    raise LoweringError(f"{t} (node {node.name}) gives {sym.name}, which no size stage computes")


def _broadcast(make: _Nodes, args: list[Any]) -> list[Any]:
    import numpy as np

    a, b = make.shapes[_tensor(args[0])], make.shapes[_tensor(args[1])]
    return list(np.broadcast_shapes(tuple(a), tuple(b)))


def _slice_size(node: Node, make: _Nodes) -> str:
    """The length of x[start:end] along `dim` (step 1, `start` a number, `end` a value read from a tensor):
    end wrapped when negative, clamped into [start, size], minus start (torch's slice clamps so)."""
    names = ("self", "dim", "start", "end", "step")
    given = dict(zip(names, node.args, strict=False)) | node.kwargs
    size_of = make.shapes[_tensor(given["self"])]
    dim = given.get("dim", {"int": 0})["int"]
    size = size_of[dim % len(size_of)]
    start = (given.get("start") or {"none": None}).get("int", 0)
    step = (given.get("step") or {"int": 1}).get("int")
    if "tensor" not in given.get("end", {}) or not isinstance(start, int) or step != 1 or not isinstance(size, int):
        raise LoweringError(f"slice (node {node.name}): only x[start:n] with n read from a tensor (step 1) is staged")
    start = max(0, min(size, start + size if start < 0 else start))
    end = make.add("aten._to_copy.default", [given["end"]], [], "int64", dtype={"dtype": "int64"})
    negative = make.add("aten.lt.Scalar", [{"tensor": end}, {"int": 0}], [], "bool")
    wrap = make.add("aten.mul.Tensor", [{"tensor": negative}, {"int": size}], [], "int64")
    end = make.add("aten.add.Tensor", [{"tensor": end}, {"tensor": wrap}], [], "int64")
    end = make.add("aten.clamp.default", [{"tensor": end}, {"int": start}, {"int": size}], [], "int64")
    return make.add("aten.sub.Tensor", [{"tensor": end}, {"int": start}], [], "int64")


def _bincount_size(node: Node, make: _Nodes) -> str:
    """max(x) + 1, at least minlength (torch: minlength for an empty x)."""
    x = _tensor(node.args[0])
    minlength = node.args[2]["int"] if len(node.args) > 2 else node.kwargs.get("minlength", {"int": 0})["int"]
    if 0 in make.shapes[x]:
        raise LoweringError(
            f"bincount (node {node.name}) of an empty tensor: its size is minlength, not data-dependent"
        )
    top = make.add("aten.max.default", [{"tensor": x}], [], make.dtypes[x])
    top = make.add("aten._to_copy.default", [{"tensor": top}], [], "int64", dtype={"dtype": "int64"})
    top = make.add("aten.add.Tensor", [{"tensor": top}, {"int": 1}], [], "int64")
    return make.add("aten.clamp_min.default", [{"tensor": top}, {"int": int(minlength)}], [], "int64")


def _unique_size(node: Node, make: _Nodes) -> str:
    """The number of distinct values: 1 + the number of neighbours that differ in the sorted values."""
    x = _tensor(node.args[0])
    n = 1
    for d in make.shapes[x]:
        n *= int(d)
    if n == 0:
        raise LoweringError(f"unique (node {node.name}) of an empty tensor: its size is 0, not data-dependent")
    dtype = make.dtypes[x]
    flat = make.add("aten.view.default", [{"tensor": x}, _ints([n])], [n], dtype)
    if n == 1:
        return make.total(
            make.add("aten.ones_like.default", [{"tensor": flat}], [n], "bool", dtype={"dtype": "bool"}), "float32"
        )
    ordered = make.add("aten.sort.default", [{"tensor": flat}], [n], dtype)
    make.nodes[-1].outputs.append(TensorSpec(f"{ordered}.indices", [n], "int64"))
    head = make.add("aten.slice.Tensor", [{"tensor": ordered}, {"int": 0}, {"int": 1}, {"int": n}], [n - 1], dtype)
    tail = make.add("aten.slice.Tensor", [{"tensor": ordered}, {"int": 0}, {"int": 0}, {"int": n - 1}], [n - 1], dtype)
    differ = make.add("aten.ne.Tensor", [{"tensor": head}, {"tensor": tail}], [n - 1], "bool")
    return make.add("aten.add.Tensor", [{"tensor": make.total(differ, "float32")}, {"int": 1}], [], "int64")


# sympy's printed integer functions (as `sizes.evaluate` reads them) and Python's operators, as the
# int64 ops that compute them in a stage.
_CALLS = {"FloorDiv": "floordiv", "CleanDiv": "floordiv", "CeilDiv": "ceildiv", "Mod": "mod", "PythonMod": "mod"}
_CALLS |= {"Max": "max", "Min": "min"}
_BINOPS: dict[type, str] = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_PYTHON: dict[str, Any] = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv}
_PYTHON |= {"ceildiv": lambda a, b: -(-a // b), "mod": operator.mod, "max": max, "min": min}


def _derived_nodes(sym: Symbol, scalars: dict[str, str], make: _Nodes) -> str:
    """Nodes computing derived size `sym` (decision bb: `sym.derived`, an expression of staged symbols
    computed by this stage) from those symbols' int64 scalars `scalars`; the name of its scalar."""

    def scalar(v: str | int) -> str:
        if isinstance(v, str):
            return v
        return make.add("aten.full.default", [_ints([]), {"int": v}], [], "int64", dtype={"dtype": "int64"})

    def op(kind: str, a: str | int, b: str | int) -> str | int:
        if isinstance(a, int) and isinstance(b, int):
            return int(_PYTHON[kind](a, b))
        if kind in ("add", "mul") and isinstance(a, int):
            a, b = b, a
        if kind == "sub" and isinstance(a, int):
            return op("add", op("mul", b, -1), a)
        if kind == "ceildiv":
            return op("mul", op("floordiv", op("mul", a, -1), b), -1)
        right = {"int": b} if isinstance(b, int) else {"tensor": b}
        if kind in ("add", "sub", "mul"):
            return make.add(f"aten.{kind}.Tensor", [{"tensor": scalar(a)}, right], [], "int64")
        if kind == "floordiv":
            args = [{"tensor": scalar(a)}, {"tensor": scalar(b)}]
            return make.add("aten.div.Tensor_mode", args, [], "int64", rounding_mode={"str": "floor"})
        if kind == "mod":
            return make.add("aten.remainder.Tensor", [{"tensor": scalar(a)}, {"tensor": scalar(b)}], [], "int64")
        target = "aten.maximum.default" if kind == "max" else "aten.minimum.default"
        return make.add(target, [{"tensor": scalar(a)}, {"tensor": scalar(b)}], [], "int64")

    def walk(node: ast.expr) -> str | int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in scalars:
            return scalars[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = walk(node.operand)
            return op("mul", v, -1) if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return op(_BINOPS[type(node.op)], walk(node.left), walk(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS:
            kind, args = _CALLS[node.func.id], [walk(a) for a in node.args]
            value = args[0]
            for a in args[1:]:
                value = op(kind, value, a)
            return value
        raise LoweringError(f"size {sym.name} = {sym.derived}: {ast.unparse(node)!r} is not computed by a size stage")

    return scalar(walk(ast.parse(sym.derived, mode="eval").body))


def _needed(ir: TorchIR, wanted: set[str]) -> list[Node]:
    """The nodes of `ir` that values `wanted` are computed from (in order)."""
    producer = {o.name: n for n in ir.nodes for o in n.outputs}
    keep: set[str] = set()
    stack = [v for v in wanted if v in producer]
    while stack:
        node = producer[stack.pop()]
        if node.name in keep:
            continue
        keep.add(node.name)
        stack += [v for v in node.reads() if v in producer]
    return [n for n in ir.nodes if n.name in keep]


def stage_ir(ir: TorchIR, stage: int = 1) -> tuple[TorchIR, list[Symbol]]:
    """The torch-ir program of size stage `stage`: the nodes its symbols' defining nodes read from,
    and one int64 scalar output per symbol (`output_name`). Raises LoweringError when a symbol's
    defining node is not a node of `ir` or its size has no stage computation."""
    symbols = [s for s in ir.symbols if s.stage == stage]
    by_name = {n.name: n for n in ir.nodes}
    shapes = ir.value_shapes()
    dtypes = {s.name: s.dtype for s in ir.inputs} | {w.name: w.dtype for w in ir.weights}
    dtypes |= {o.name: o.dtype for n in ir.nodes for o in n.outputs}
    extra: list[Node] = []
    scalars: dict[str, str] = {}  # symbol -> the int64 scalar computing it
    for sym in sorted(symbols, key=lambda s: bool(s.derived)):  # a derived size reads the others' scalars
        node = by_name.get(sym.defined_by)
        if node is None:
            raise LoweringError(f"symbol {sym.name} is defined by node {sym.defined_by!r}, which the program lacks")
        make = _Nodes(f"stage_{sym.name}", shapes, dtypes)
        scalars[sym.name] = _derived_nodes(sym, scalars, make) if sym.derived else _size_nodes(node, sym, make)
        extra += make.nodes
    outputs = [OutputSpec(output_name(sym), scalars[sym.name], [], "int64") for sym in symbols]
    reads = {v for n in extra for v in n.reads()} | {o.value for o in outputs}
    nodes = [n for n in _needed(ir, reads) if n not in extra] + extra
    used_weights = {v for n in nodes for v in n.reads()}
    program = TorchIR(
        name=f"{ir.name}_stage{stage}",
        decomposition=ir.decomposition,
        inputs=list(ir.inputs),
        weights=[w for w in ir.weights if w.name in used_weights],
        nodes=nodes,
        outputs=outputs,
        producer=ir.producer,
        # the input dims' and the earlier stages' sizes (a chain: values sized by them feed this stage)
        symbols=[s for s in ir.symbols if s.stage < stage],
    )
    return program, symbols


def lower_stage(ir: TorchIR, stage: int = 1, *, optimize: bool = True) -> StageProgram:
    """Size stage `stage` of `ir`, lowered at the example sizes. Raises
    UnsupportedOpsError as `lower` does, LoweringError as `stage_ir` does."""
    program_ir, symbols = stage_ir(ir, stage)
    return StageProgram(lower(program_ir, optimize=optimize), symbols)


def write_stages(ir: TorchIR, main: Program, directory: Path) -> list[dict[str, Any]]:
    """Lower each size stage of `ir` and write it into the bundle folder `directory` beside the main
    program `main`; returns meta.json's `stages`. Raises as `lower_stage` and `bundle.stages.write_stage`."""
    from ..bundle.stages import write_stage

    found = []
    for k in sorted({s.stage for s in ir.symbols if s.stage}):
        program_ir, symbols = stage_ir(ir, k)
        if program_ir.is_dynamic:  # dynamic input dims: the stage is a symbolic graph too (decision z)
            from .generalize import lower_symbolic

            symbolic = lower_symbolic(program_ir)
            found.append(write_stage(symbolic.program, program_ir, symbols, main, directory, k, symbolic.rlxmodel))
        else:
            found.append(write_stage(lower(program_ir), program_ir, symbols, main, directory, k))
    return found
