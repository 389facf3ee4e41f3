"""Symbolic sizes: torch.export's backed symbols, their ranges, and the bindings we infer or sweep.

A *symbol* is one of torch.export's backed size symbols (`s0`, `s77`, ...): a dim the
user declared dynamic (`torch.export.Dim`, `Dim.AUTO`, `Dim.DYNAMIC`). Shapes and SymInt
arguments in torch-ir are integers or *expressions* of symbols, spelled as sympy prints
them (`s27*s77`, `2*s27 + 1`, `((s0 + 1)//2)`). A *binding* gives every symbol a size.

This module evaluates expressions (a whitelisted `ast` walk, never `eval`), infers a
binding from input shapes (with the bound and consistency checks the runtime promises),
and lists the *sweep points* the front end runs eager PyTorch at, the lowering generalizes
over and verification checks (docs/design.md, decision z). A leaf every stage may import;
the *probe* bindings a symbolic RLX graph is generalized from are the lowering's
(`lower/generalize.py`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from .errors import InputError

Dim = int | str  # a torch-ir dim: a size, or an expression of symbols


@dataclass
class Symbol:
    """One size symbol of an exported program.

    `name` is torch's symbol (`s77`); `label` the name the user gave the dim
    (`Dim("batch")`), or `<input>.<axis>` for `Dim.AUTO` / `Dim.DYNAMIC`. `min`/`max`
    are torch's range constraints (inclusive; `max` None: unbounded); `example` is its
    size in the example inputs. `id` is the RLX symbol number (`Dim::Dynamic(id)`).

    `stage` > 0 marks a size that depends on tensor values (torch's unbacked `u0`: nonzero,
    masked_select, `.item()`): its value is computed by size stage `stage` at run time, not read
    from an input shape (docs/design.md, decision ax); `defined_by` names the torch-ir node
    (and op) it is the size of. `derived` (a staged size only): the expression of other staged
    symbols it is (`u0//8`), computed by the stage from theirs (docs/design.md, decision bb).
    """

    id: int
    name: str
    label: str
    min: int
    max: int | None
    example: int
    stage: int = 0
    defined_by: str = ""
    derived: str = ""

    def holds(self, size: int) -> bool:
        """Whether `size` is in this symbol's range."""
        return self.min <= size and (self.max is None or size <= self.max)

    def describe(self) -> str:
        hi = "inf" if self.max is None else str(self.max)
        return f"{self.label} ({self.name}, {self.min}..{hi})"


# sympy's printed functions over integers, as torch.utils._sympy.functions defines them.
def _floordiv(a: int, b: int) -> int:
    return a // b


def _ceildiv(a: int, b: int) -> int:
    return -(-a // b)


_FUNCS: dict[str, Any] = {
    "Max": max,
    "Min": min,
    "FloorDiv": _floordiv,
    "CleanDiv": _floordiv,
    "CeilDiv": _ceildiv,
    "Mod": lambda a, b: a % b,
    "PythonMod": lambda a, b: a % b,
    "floor": math.floor,
    "ceiling": math.ceil,
    "FloorToInt": math.floor,
    "CeilToInt": math.ceil,
    "TruncToInt": math.trunc,
    "Abs": abs,
    "ModularIndexing": lambda a, b, c: (a // b) % c,
}
_BINOPS: dict[type, Any] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


@lru_cache(maxsize=4096)
def _parse(expr: str) -> ast.expr:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise InputError(f"size expression {expr!r} is not valid: {e.msg}") from None
    return tree.body


def free_symbols(expr: Dim) -> set[str]:
    """The symbol names an expression uses (none for an int)."""
    if isinstance(expr, int):
        return set()
    return {n.id for n in ast.walk(_parse(expr)) if isinstance(n, ast.Name) and n.id not in _FUNCS}


def evaluate(expr: Dim, values: Mapping[str, int]) -> int:
    """The size `expr` has when each symbol has its size in `values`.

    Raises InputError for a symbol `values` lacks or a construct outside sympy's integer
    printing (names, integer literals, + - * // % **, unary minus, Max/Min/FloorDiv/...).
    """
    if isinstance(expr, int):
        return expr

    def walk(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise InputError(f"size expression {expr!r} uses {node.id}, which has no size here")
            return values[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = walk(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*(walk(a) for a in node.args))
        raise InputError(f"size expression {expr!r}: {ast.unparse(node)!r} is not an integer expression")

    value = walk(_parse(expr))
    if not isinstance(value, int):
        raise InputError(f"size expression {expr!r} is not an integer ({value!r})")
    return value


def evaluate_shape(shape: Sequence[Dim], values: Mapping[str, int]) -> list[int]:
    return [evaluate(d, values) for d in shape]


def sizes(shape: Sequence[Dim]) -> tuple[int, ...]:
    """`tuple(shape)` typed as sizes: the shape of a bound program, whose dims are all sizes (a
    typing aid only; nothing is checked or converted)."""
    return cast(tuple[int, ...], tuple(shape))


class SizeInt(int):
    """A SymInt argument of a program bound at one binding (`torchir.specialize`): its size there,
    and the symbol expression it was (`expr`), so a lowering tells a size from a literal."""

    expr: str

    def __new__(cls, value: int, expr: str) -> SizeInt:
        obj = super().__new__(cls, value)
        obj.expr = expr
        return obj


def is_static(shape: Sequence[Dim]) -> bool:
    return all(isinstance(d, int) for d in shape)


def values_of(symbols: Sequence[Symbol], binding: Mapping[str, int] | None = None) -> dict[str, int]:
    """torch symbol name -> size: the examples, overridden by `binding` (by torch name or label)."""
    values = {s.name: s.example for s in symbols}
    by_label = {s.label: s.name for s in symbols}
    for key, size in (binding or {}).items():
        values[by_label.get(key, key)] = int(size)
    return values


def evaluate_known(shape: Sequence[Dim], values: Mapping[str, int]) -> list[Dim]:
    """`shape` at `values`, each dim that uses a symbol `values` lacks left as its expression (a size a
    size stage computes is in no sweep binding: it comes from the inputs' values)."""
    return [d if free_symbols(d) - set(values) else evaluate(d, values) for d in shape]


def line_of(expr: str) -> tuple[str, int, int]:
    """(s, a, b) for an expression of one symbol s: the line a*s + b through its values at
    s = 0 and s = 1 (the expression itself when it is linear; callers check where it is not)."""
    (sym,) = free_symbols(expr)
    b = evaluate(expr, {sym: 0})
    return sym, evaluate(expr, {sym: 1}) - b, b


def _solve(expr: str, size: int) -> int | None:
    """The size of the one symbol in `expr` that makes it `size`, if `expr` is a*s + b."""
    sym, a, b = line_of(expr)
    if a == 0 or (size - b) % a:
        return None
    v = (size - b) // a
    return v if evaluate(expr, {sym: v}) == size else None


def infer_binding(
    symbols: Sequence[Symbol],
    inputs: Sequence[tuple[str, Sequence[Dim]]],
    shapes: Mapping[str, Sequence[int]],
) -> dict[str, int]:
    """The binding (torch symbol name -> size) that input `shapes` give.

    `inputs` lists each input's symbolic shape. Raises InputError, before anything runs,
    naming the input, axis, symbol and range when a rank or static size is wrong, a size
    is outside its symbol's range, or two inputs give one symbol different sizes.
    """
    by_name = {s.name: s for s in symbols}
    found: dict[str, tuple[int, str]] = {}  # symbol -> (size, "input x axis 0")
    pending: list[tuple[str, int, str, int]] = []
    for name, dims in inputs:
        shape = list(shapes[name])
        if len(shape) != len(dims):
            raise InputError(f"input {name!r} has rank {len(shape)} (shape {shape}); the bundle expects {list(dims)}")
        for axis, (d, n) in enumerate(zip(dims, shape, strict=True)):
            if isinstance(d, int):
                if d != n:
                    raise InputError(
                        f"input {name!r} axis {axis} has size {n}; the bundle expects {d} (a static dim) "
                        f"in shape {list(dims)}"
                    )
                continue
            syms = free_symbols(d)
            if len(syms) == 1:
                (sym,) = syms
                v = _solve(d, n)
                where = f"input {name!r} axis {axis}"
                if v is None:
                    s = by_name[sym]
                    raise InputError(f"{where} has size {n}, which is no value of {d} (symbol {s.describe()})")
                if sym in found and found[sym][0] != v:
                    raise InputError(
                        f"{where} gives symbol {by_name[sym].label} ({sym}) size {v}, but {found[sym][1]} "
                        f"gives it {found[sym][0]}: inputs that share a dynamic dim must agree"
                    )
                found.setdefault(sym, (v, where))
            else:
                pending.append((name, axis, d, n))  # checked once every symbol is known
    for s in symbols:
        if s.name not in found:
            raise InputError(f"no input gives symbol {s.describe()} a size by itself")
        v, where = found[s.name]
        if not s.holds(v):
            raise InputError(
                f"{where} has size {v} for symbol {s.label} ({s.name}), outside its declared range "
                f"{s.min}..{'inf' if s.max is None else s.max}",
                hint="export again with a wider Dim range to run at this size",
            )
    binding = {k: v for k, (v, _) in found.items()}
    for name, axis, d, n in pending:
        if evaluate(d, binding) != n:
            raise InputError(f"input {name!r} axis {axis} has size {n}; at this binding {d} is {evaluate(d, binding)}")
    return binding


@dataclass
class SweepPoint:
    """One binding verification runs at: `label` names it in the report ("seq=max-1 (31)")."""

    label: str
    binding: dict[str, int]

    @property
    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.binding.items()))


def sweep_points(symbols: Sequence[Symbol], unbounded_max: int = 4) -> list[SweepPoint]:
    """For each symbol: its minimum, 1 if allowed, the example ("typical"), max-1 and max,
    the other symbols at their examples; with several symbols also the corners (every
    symbol at its minimum, every one at its maximum, and minimum and maximum alternating),
    so sizes are checked in combination too. Duplicates dropped. An unbounded symbol is
    swept up to `unbounded_max` times its example. Sizes computed by a size stage (`Symbol.stage`)
    are not swept: their values come from the inputs' values (verification's input sets vary them)."""
    symbols = [s for s in symbols if not s.stage]
    base = {s.name: s.example for s in symbols}
    top = {s.name: s.max if s.max is not None else max(s.example * unbounded_max, s.min + 1) for s in symbols}
    points: list[SweepPoint] = []
    seen: set[str] = set()

    def add(label: str, binding: dict[str, int]) -> None:
        point = SweepPoint(label, binding)
        if point.key not in seen:
            seen.add(point.key)
            points.append(point)

    for s in symbols:
        hi = top[s.name]
        for tag, v in (("min", s.min), ("1", 1), ("typical", s.example), ("max-1", hi - 1), ("max", hi)):
            if v < s.min or v > hi or (tag == "1" and v == s.min):
                continue
            add(f"{s.label}={tag} ({v})" if tag != "1" else f"{s.label}=1", {**base, s.name: v})
    if len(symbols) > 1:
        add("all=min", {s.name: s.min for s in symbols})
        add("all=max", {s.name: top[s.name] for s in symbols})
        add("min/max alternating", {s.name: s.min if i % 2 == 0 else top[s.name] for i, s in enumerate(symbols)})
    return points
