"""Generalize an example-size lowering to one symbolic RLX graph of a program with dynamic dims
(docs/design.md, decision z).

The registry lowers at concrete sizes. A dynamic program is lowered at `PROBES` probe
bindings (`probe_bindings`, chosen here) and at its sweep points (`sizes.sweep_points`); RLX's own
`generalize_many` (through the Rust core) finds which dims and shape attributes are
which symbol, and the result, checked against every one of those lowerings, is RLX's
`.rlxmodel` text. It is specialized per binding at run
time (`bundle.model.BundleModel`, the generated crate).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import _core
from ..dtypes import BY_RLX
from ..errors import DynamicShapeError, InputError, LoweringError
from ..program import Program, RlxNode
from ..sizes import Symbol, sweep_points, values_of
from ..torchir import TorchIR, specialize
from .registry import lower

_SCALAR = {r: np.dtype(BY_RLX[r].numpy).newbyteorder("<") for r in ("F32", "F64", "I64", "I32")}

# Probe sizes: each symbol steps by its own pattern, so no two step in proportion (RLX's
# `generalize` cannot tell such symbols apart) and four points tell a quotient from a line.
# Wide patterns where the range has room, else orderings of four consecutive sizes.
_WIDE = ((0, 1, 3, 7), (0, 2, 3, 8), (0, 3, 4, 5), (0, 1, 5, 6), (0, 4, 5, 9), (0, 2, 7, 9))
_NARROW = ((0, 1, 2, 3), (0, 2, 1, 3), (0, 3, 1, 2), (0, 1, 3, 2), (0, 2, 3, 1), (0, 3, 2, 1))
PROBES = 4


def probe_bindings(symbols: Sequence[Symbol]) -> list[dict[str, int]]:
    """`PROBES` bindings the symbolic graph is generalized from (docs/design.md, decision z).

    Sizes are >= 2 (torch traces a dim as "not 0 or 1"), inside the range where it has room
    (a narrow range is probed past its max where it must be: the sweep still checks every
    point in range), start a little above the minimum (sizes no weight dim or small
    constant is likely to have), differ between symbols at each probe, and step by
    patterns no two of which are proportional. A size a stage computes stays in its range where
    any start fits (it may slice a weight exactly as long as its max: past it, the graph
    differs). Raises InputError past six symbols."""
    if len(symbols) > len(_WIDE):
        raise InputError(f"{len(symbols)} dynamic symbols; this version generalizes at most {len(_WIDE)}")
    columns: list[list[int]] = []
    for i, s in enumerate(symbols):
        lo = max(s.min, 2)
        hi = s.max if s.max is not None else lo + 64
        skip = 5 + 2 * i
        if lo + skip + _WIDE[i][-1] <= hi:
            start, pattern = lo + skip, _WIDE[i]
        else:  # staggered, so two symbols never take one size at one probe (equal sizes share constants)
            start, pattern = max(lo, 3) + 4 * i, _NARROW[i]
            if s.stage and s.max is not None:  # a computed size may slice a tensor its max fits: stay below it
                used = {tuple(v - c[0] for v in c) for c in columns}
                fits = [
                    (v, p)
                    for p in (_NARROW[i], *_NARROW)
                    if p not in used
                    for v in range(max(lo, 3), s.max - 3)
                    if not _collides(v, p, columns)
                ]
                start, pattern = fits[0] if fits else (start, pattern)
        while _collides(start, pattern, columns):
            start += 1
        columns.append([start + k for k in pattern])
    return [{s.name: col[k] for s, col in zip(symbols, columns, strict=True)} for k in range(PROBES)]


def _collides(start: int, pattern: Sequence[int], columns: list[list[int]]) -> bool:
    """Whether probing at `start` + `pattern` gives a size another symbol's column has at the same probe."""
    return any(start + k in (c[j] for c in columns) for j, k in enumerate(pattern))


def _affine(values: list[int], bindings: list[dict[str, int]], symbols: list[Symbol]) -> tuple[Symbol, int, int] | None:
    """The symbol s and integers a != 0, b with value = a*s + b at every binding, if one fits."""
    for sym in symbols:
        xs = [bd[sym.name] for bd in bindings]
        if len(set(xs)) < 2:
            continue
        (x0, v0), (x1, v1) = next(
            ((xs[i], values[i]), (xs[j], values[j]))
            for i in range(len(xs))
            for j in range(i + 1, len(xs))
            if xs[i] != xs[j]
        )
        if (v1 - v0) % (x1 - x0):
            continue
        a = (v1 - v0) // (x1 - x0)
        b = v0 - a * x0
        if a != 0 and all(a * x + b == v for x, v in zip(xs, values, strict=True)):
            return sym, a, b
    return None


@dataclass(frozen=True)
class _SizeScalar:
    """Node `index` of every lowering is a one-element constant `a * symbol + b` (`_size_scalars`):
    read from `table` (the values 0.. it takes) by a `Narrow`, or computed from the size itself when
    `table` is None (an unbounded symbol, or a value that may be negative)."""

    index: int
    symbol: Symbol
    a: int
    b: int
    table: np.ndarray | None


def _size_scalars(programs: list[Program], bindings: list[dict[str, int]], symbols: list[Symbol]) -> list[_SizeScalar]:
    """One-element constants that hold a size (an index's wrap-around length, a stride, a mean's
    divisor) differ between sizes, so RLX cannot generalize them. Those whose value is a*s + b
    of one symbol s across the probe lowerings `programs`, with the range of values they take."""
    first = programs[0]
    if any(len(p.nodes) != len(first.nodes) for p in programs):
        return []  # another structure: generalize names the node
    found = []
    for i, node in enumerate(first.nodes):
        nodes = [p.nodes[i] for p in programs]
        if not all(isinstance(n.op, dict) and "Constant" in n.op for n in nodes) or all(n.op == node.op for n in nodes):
            continue
        if math.prod(node.dims) != 1 or node.dtype not in _SCALAR:
            continue
        values = [np.frombuffer(bytes(n.op["Constant"]["data"]), _SCALAR[node.dtype])[0].item() for n in nodes]
        if not all(float(v).is_integer() for v in values):
            continue
        fit = _affine([int(v) for v in values], bindings, symbols)
        if fit is None:
            continue
        sym, a, b = fit
        table = None
        if sym.max is not None:
            # the range covers the symbol's range and the probes (a narrow range is probed past its max)
            ends = [a * x + b for x in (sym.min, sym.max, *(bd[sym.name] for bd in bindings))]
            if min(ends) >= 0:
                table = np.arange(max(ends) + 2).astype(_SCALAR[node.dtype])
        found.append(_SizeScalar(i, sym, a, b, table))
    return found


def _computed_size(n: RlxNode, size: int, s: _SizeScalar) -> list[RlxNode]:
    """RLX nodes computing value `n.id` = a * size + b from the size itself, in int64 (exact): a one
    expanded to `size` elements (`size + 1` where the symbol may be 0: no empty tensor) and summed
    (RLX's int64 Sum goes through float64, exact below 2**53), scaled and offset, cast to the node's
    dtype. The Expand's length is the symbol's dim, which `generalize` makes symbolic, so no table
    (and no maximum) is needed."""
    extra = 1 if s.symbol.min < 1 else 0
    count, offset = size + extra, s.b - s.a * extra

    def const(tag: str, value: int) -> RlxNode:
        data = np.array([value], dtype="<i8").tobytes()
        return RlxNode(f"{n.id}#{tag}", {"Constant": {"data": list(data)}}, (), (1,), "I64", n.provenance)

    nodes = [
        const("one", 1),
        RlxNode(f"{n.id}#ones", {"Expand": {"target_shape": [count]}}, (f"{n.id}#one",), (count,), "I64", n.provenance),
        RlxNode(
            f"{n.id}#count",
            {"Reduce": {"op": "Sum", "axes": [0], "keep_dim": True}},
            (f"{n.id}#ones",),
            (1,),
            "I64",
            n.provenance,
        ),
    ]
    last = f"{n.id}#count"
    for tag, op, value in (("scale", "Mul", s.a), ("offset", "Add", offset)):
        if value != (1 if op == "Mul" else 0):
            nodes += [
                const(tag, value),
                RlxNode(f"{n.id}#{op}", {"Binary": op}, (last, f"{n.id}#{tag}"), (1,), "I64", n.provenance),
            ]
            last = f"{n.id}#{op}"
    if n.dtype != "I64":
        nodes.append(RlxNode(f"{n.id}#cast", {"Cast": {"to": n.dtype}}, (last,), (1,), n.dtype, n.provenance))
        last = f"{n.id}#cast"
    return [*nodes, RlxNode(n.id, {"Reshape": {"new_shape": list(n.dims)}}, (last,), n.dims, n.dtype, n.provenance)]


def _narrow_size_scalars(program: Program, binding: dict[str, int], scalars: list[_SizeScalar]) -> None:
    """Each size scalar of `program` (lowered at `binding`) as a `Narrow` of its range at its value
    (the start becomes a symbolic attribute), or computed from the size (`_computed_size`); a
    lowering of another structure is left alone."""
    for s in sorted(scalars, key=lambda s: -s.index):
        if s.index >= len(program.nodes):
            continue
        n = program.nodes[s.index]
        value = s.a * binding[s.symbol.name] + s.b
        if not (isinstance(n.op, dict) and "Constant" in n.op) or math.prod(n.dims) != 1 or n.dtype not in _SCALAR:
            continue
        if np.frombuffer(bytes(n.op["Constant"]["data"]), _SCALAR[n.dtype])[0].item() != value:
            continue
        if s.table is None:
            program.nodes[s.index : s.index + 1] = _computed_size(n, binding[s.symbol.name], s)
            continue
        program.nodes[s.index : s.index + 1] = [
            RlxNode(
                f"{n.id}#range",
                {"Constant": {"data": list(s.table.tobytes())}},
                (),
                (len(s.table),),
                n.dtype,
                n.provenance,
            ),
            RlxNode(
                f"{n.id}#at",
                {"Narrow": {"axis": 0, "start": value, "len": 1}},
                (f"{n.id}#range",),
                (1,),
                n.dtype,
                n.provenance,
            ),
            RlxNode(n.id, {"Reshape": {"new_shape": list(n.dims)}}, (f"{n.id}#at",), n.dims, n.dtype, n.provenance),
        ]


def _dim_name(label: str, sym: int) -> str:
    """A symbol's name in the `.rlxmodel` text: its label made an identifier, unique by number."""
    clean = re.sub(r"\W", "_", label)
    return f"{clean}_{sym}" if clean and not clean[0].isdigit() else f"sym_{sym}"


@dataclass
class SymbolicProgram:
    """`program`: the lowering at the example sizes (its params, provenance and histograms
    describe every binding); `rlxmodel`: the symbolic graph; `probes`: the bindings it
    was generalized from."""

    program: Program
    rlxmodel: str
    probes: list[dict[str, int]]
    # Sweep points whose own lowering differs from the symbolic graph there (a size that equals
    # another dim changed a lowering's choice); verification still compares them with PyTorch.
    unreproduced: list[dict[str, int]]


def lower_symbolic(ir: TorchIR, *, optimize: bool = True, example: Program | None = None) -> SymbolicProgram:
    """TorchIR with symbols -> the example-size program plus the symbolic `.rlxmodel` graph.
    `example`: the program `lower(ir)` already built at the example sizes (`registry.try_lower`),
    so it is not lowered again.

    Raises UnsupportedOpsError as `lower` does, InputError for a symbol range too narrow
    to probe, and LoweringError naming the node when the program's RLX graph is not the
    same at every size (a constant or a structure that depends on a size)."""
    if example is None:
        example = lower(specialize(ir, values_of(ir.symbols)), optimize=optimize)
    probes = probe_bindings(ir.symbols)
    lowered = list(probes)
    # The sweep points (sizes >= 2) too: four probes can fit a wrong formula (a pooled height read
    # as a function of the width, where floor divisions make both agree at every probe); every
    # point constrains the fit, and the result must reproduce each of them.
    # Not with sizes a stage computes: a sweep point gives them no value, and one that fits every op (a
    # count no larger than the elements counted) is not known here.
    for point in [] if any(s.stage for s in ir.symbols) else sweep_points(ir.symbols):
        if min(point.binding.values()) >= 2 and point.binding not in lowered:
            lowered.append(point.binding)
    programs = []
    for binding in lowered:
        program = lower(specialize(ir, binding), optimize=optimize, share_scalars=False)
        if sorted((p.name, p.dtype) for p in program.params) != sorted((p.name, p.dtype) for p in example.params):
            raise LoweringError(f"the lowering at sizes {binding} uses other weights than at the example sizes")
        programs.append(program)
    scalars = _size_scalars(programs[: len(probes)], probes, ir.symbols)
    for program, binding in zip(programs, lowered, strict=True):
        _narrow_size_scalars(program, binding, scalars)
    hirs = [_core.program_to_hir_json(program.to_core_json()) for program in programs]
    sizes = [(s.id, [b[s.name] for b in lowered]) for s in ir.symbols]
    names = [(s.id, _dim_name(s.label, s.id)) for s in ir.symbols]
    try:
        text, unreproduced = _core.generalize(hirs, sizes, names, len(probes))
    except (RuntimeError, _core.CheckError) as e:
        at = ", ".join(f"{s.label}={[b[s.name] for b in probes]}" for s in ir.symbols)
        unbounded = [s.label for s in ir.symbols if s.max is None]
        hint = (
            "the node named above lowers to a different RLX graph at different sizes (a constant or "
            "a structure that depends on a size); make that dim static, or report the op"
        )
        if unbounded:  # size-dependent tables (unfold windows, arange, pooling divisors) are cut from one at the max
            hint = (
                f"give {', '.join(unbounded)} a max (Dim(..., max=N) or --dynamic INPUT:AXIS=NAME:MIN:MAX): ops whose "
                "constants depend on a size (unfold/im2col windows, arange, pooling divisors) are built up to the "
                "max; otherwise " + hint.split("; ", 1)[0] + ": make that dim static, or report the op"
            )
        raise DynamicShapeError(
            f"RLX could not make one graph for every size of the dynamic dims (lowered at {at}): {e}", hint=hint
        ) from None
    return SymbolicProgram(example, text, probes, [lowered[k] for k in unreproduced])
