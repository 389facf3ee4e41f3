"""Lower a program with dynamic dims to one symbolic RLX graph (docs/design.md, decision z).

The registry lowers at concrete sizes. A dynamic program is lowered at `PROBES` probe
bindings (`symbolic.probe_bindings`); RLX's own `generalize_many` (through the Rust
core) finds which dims and shape attributes are which symbol, and the result, checked
against every probe, is RLX's `.rlxmodel` text. It is specialized per binding at run
time (`runtime.BundleModel`, the generated crate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import _core
from ..errors import LoweringError
from ..program import Program
from ..symbolic import probe_bindings, values_of
from ..torchir import TorchIR
from .registry import lower


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


def lower_symbolic(ir: TorchIR, *, optimize: bool = True) -> SymbolicProgram:
    """TorchIR with symbols -> the example-size program plus the symbolic `.rlxmodel` graph.

    Raises UnsupportedOpsError as `lower` does, InputError for a symbol range too narrow
    to probe, and LoweringError naming the node when the program's RLX graph is not the
    same at every size (a constant or a structure that depends on a size)."""
    example = lower(ir.bind(values_of(ir.symbols)), optimize=optimize)
    probes = probe_bindings(ir.symbols)
    hirs = []
    for binding in probes:
        program = lower(ir.bind(binding), optimize=optimize)
        if sorted((p.name, p.dtype) for p in program.params) != sorted((p.name, p.dtype) for p in example.params):
            raise LoweringError(f"the lowering at sizes {binding} uses other weights than at the example sizes")
        hirs.append(_core.program_to_hir_json(program.to_core_json()))
    sizes = [(s.id, [b[s.name] for b in probes]) for s in ir.symbols]
    try:
        text = _core.generalize(hirs, sizes, [(s.id, _dim_name(s.label, s.id)) for s in ir.symbols])
    except RuntimeError as e:
        names = ", ".join(f"{s.label}={[b[s.name] for b in probes]}" for s in ir.symbols)
        raise LoweringError(
            f"RLX could not make one graph for every size of the dynamic dims (lowered at {names}): {e}",
            hint="an op whose lowering depends on a size; make that dim static, or report the op",
        ) from None
    return SymbolicProgram(example, text, probes)
