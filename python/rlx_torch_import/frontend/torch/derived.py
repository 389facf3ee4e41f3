"""Sizes derived from sizes that depend on tensor values (docs/design.md, decision bb).

A shape may use a staged size (torch's unbacked `u0`, `lower.stages`) through a function that is not
a line: Reformer's axial position embeddings slice `ceil((max_id + 1) / 8)` columns, which torch
prints `(u0//8) + 1`, and reshape to `8*(u0//8) + 8` rows. RLX generalizes a graph over sizes that
are lines of its symbols only (`lower.generalize`), so each such sub-expression (`u0//8`) becomes a
*derived* staged symbol of its own (`d0`), computed by the size stage of its symbols from theirs
(`Symbol.derived` holds the expression); every shape is then a line of the symbols it uses.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

from ...errors import InputError
from ...sizes import Dim, Symbol, evaluate, free_symbols
from ...torchir import Node, TensorSpec, TorchIR

# A range is found by evaluating the expression at every value of its one symbol up to this many.
_ENUMERABLE = 1 << 16


class _Deriver:
    """Replaces each non-line sub-expression of staged symbols by a derived symbol (found by its text)."""

    def __init__(self, symbols: list[Symbol]) -> None:
        self.symbols = symbols
        self.staged = {s.name: s for s in symbols if s.stage and not s.derived}
        self.found: dict[str, Symbol] = {}  # the expression replaced -> its symbol
        self.next_id = max((s.id for s in symbols), default=-1) + 1

    def dim(self, expr: Dim) -> Dim:
        if isinstance(expr, int) or not free_symbols(expr) & set(self.staged):
            return expr
        tree = ast.parse(expr, mode="eval")
        return ast.unparse(self._walk(tree.body))

    def _walk(self, node: ast.expr) -> ast.expr:
        """`node` with its largest parts that are not lines of staged symbols replaced by derived ones."""
        names = free_symbols(ast.unparse(node))
        if not names & set(self.staged) or isinstance(node, (ast.Name, ast.Constant)):
            return node
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node.operand = self._walk(node.operand)
            inner = node.operand
            if isinstance(node.op, ast.USub) and isinstance(inner, ast.UnaryOp) and isinstance(inner.op, ast.USub):
                return inner.operand  # -(-d0): d0
            return node
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            sized = [bool(free_symbols(ast.unparse(side))) for side in (node.left, node.right)]
            if not isinstance(node.op, ast.Mult) or not all(sized):  # a sum, or a product with a constant
                node.left, node.right = self._walk(node.left), self._walk(node.right)
                return node
        if not names <= set(self.staged):
            return node  # mixed with an input dim: left as it is (generalize names the node if it must)
        return self._replacement(ast.unparse(node), sorted(names))

    def _replacement(self, text: str, bases: list[str]) -> ast.expr:
        """The derived symbol standing for `text` (a function of staged `bases`), as an expression: the
        symbol, or minus it where `text` is never positive (torch prints ceil(n/8) as -((-n)//8), whose
        inner part is negative; a size is not)."""
        if text not in self.found:
            self.found[text] = self._symbol(text, bases)
        sym = self.found[text]
        name = ast.Name(id=sym.name, ctx=ast.Load())
        return name if sym.derived == text else ast.UnaryOp(op=ast.USub(), operand=name)

    def _symbol(self, text: str, bases: list[str]) -> Symbol:
        used = {s.name for s in self.symbols} | {s.name for s in self.found.values()}
        name = next(f"d{i}" for i in range(len(used) + 1) if f"d{i}" not in used)
        syms = [self.staged[b] for b in bases]
        stage = max(s.stage for s in syms)
        if any(s.stage != stage for s in syms):
            raise InputError(
                f"the size {text} combines sizes computed by different size stages "
                f"({', '.join(f'{s.name}: stage {s.stage}' for s in syms)}); not supported yet",
                hint="compute it from one value read from the tensors",
            )
        values = _values(text, syms)
        if max(values) <= 0 < -min(values):
            text, values = f"-({text})", [-v for v in values]
        if min(values) < 0:
            raise InputError(
                f"the size expression {text} of sizes that depend on tensor values ({', '.join(bases)}) takes "
                "both signs over their ranges; not supported",
                hint="bound the value read from the tensors with torch._check so that the expression is a size",
            )
        exact = len(syms) == 1 and syms[0].max is not None and syms[0].max - syms[0].min < _ENUMERABLE
        example = evaluate(text, {s.name: s.example for s in syms})
        sym = Symbol(self.next_id, name, text, min(values), max(values) if exact else None, example, stage)
        self.next_id += 1
        return replace(sym, defined_by=syms[0].defined_by, derived=text)


def _values(text: str, bases: list[Symbol]) -> list[int]:
    """Values of `text` over its symbols' ranges: every one for one bounded symbol, else at the
    examples, the least values and 4096 values up from them (one symbol at a time)."""
    b = bases[0]
    if len(bases) == 1 and b.max is not None and b.max - b.min < _ENUMERABLE:
        return [evaluate(text, {b.name: v}) for v in range(b.min, b.max + 1)]
    points = [{s.name: s.example for s in bases}, {s.name: s.min for s in bases}]
    for s in bases:
        points += [{**points[1], s.name: v} for v in range(s.min, s.min + 4096)]
    return [evaluate(text, p) for p in points]


def derive_sizes(ir: TorchIR) -> TorchIR:
    """`ir` with every non-line function of staged sizes in its shapes and size arguments made a
    derived staged symbol (module docstring); `ir` itself when there is none. Raises InputError for
    a function of sizes computed by different stages."""
    deriver = _Deriver(ir.symbols)
    if not deriver.staged:
        return ir

    def spec(t: TensorSpec) -> TensorSpec:
        return replace(t, shape=[deriver.dim(d) for d in t.shape])

    def arg(a: Any) -> Any:
        if isinstance(a, dict) and "sym" in a:
            return {"sym": deriver.dim(a["sym"])}
        if isinstance(a, dict) and "list" in a:
            return {"list": [arg(x) for x in a["list"]]}
        return a

    def node(n: Node) -> Node:
        return replace(
            n,
            args=[arg(a) for a in n.args],
            kwargs={k: arg(v) for k, v in n.kwargs.items()},
            outputs=[spec(o) for o in n.outputs],
            sym=str(deriver.dim(n.sym)) if n.sym else n.sym,
        )

    nodes = [node(n) for n in ir.nodes]
    outputs = [replace(o, shape=[deriver.dim(d) for d in o.shape]) for o in ir.outputs]
    if not deriver.found:
        return ir
    return replace(ir, nodes=nodes, outputs=outputs, symbols=[*ir.symbols, *deriver.found.values()])
