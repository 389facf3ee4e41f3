"""Automatic decomposition fallback: decompose exactly the ops the registry cannot lower.

torch's decomposition table turns an op into simpler ATen ops. Some decompositions
emit `prims.*` ops (not lowerable) or fail; those are found and skipped one at a
time, so one un-decomposable op ends as a reported gap instead of a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class FallbackRound:
    """What one round decomposed, and why the rest was left alone."""

    decomposed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _resolve(target: str) -> Any:
    _, packet, overload = target.split(".", 2)
    return getattr(getattr(torch.ops.aten, packet), overload)


def _non_aten(ep: torch.export.ExportedProgram) -> list[str]:
    """Call targets that are not ATen ops (e.g. prims.*), which the registry can never lower."""
    bad = []
    for node in ep.graph.nodes:
        if node.op == "call_function":
            name = str(node.target)
            if not name.startswith("aten.") and "getitem" not in name:
                bad.append(name)
    return bad


def _try(ep: torch.export.ExportedProgram, table: dict[Any, Any]) -> tuple[torch.export.ExportedProgram | None, str]:
    try:
        out = ep.run_decompositions(table)
    except Exception as e:  # a decomposition that cannot re-trace
        return None, f"decomposition failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    bad = _non_aten(out)
    if bad:
        return None, f"decomposition emits {', '.join(sorted(set(bad)))}"
    return out, ""


def decompose_targets(
    ep: torch.export.ExportedProgram, targets: list[str]
) -> tuple[torch.export.ExportedProgram, FallbackRound]:
    """Decompose `targets` (ATen overload strings) in `ep`; unusable decompositions are skipped."""
    result = FallbackRound()
    candidates: dict[str, Any] = {}
    export_table = torch.export.default_decompositions()
    for target in targets:
        if not target.startswith("aten."):
            result.skipped[target] = "not an ATen op"
            continue
        try:
            op = _resolve(target)
        except AttributeError:
            result.skipped[target] = "unknown to this torch"
            continue
        fn = torch._decomp.decomposition_table.get(op) or (export_table[op] if op in export_table else None)
        if fn is None:
            result.skipped[target] = "torch has no decomposition for it"
            continue
        candidates[target] = (op, fn)
    if not candidates:
        return ep, result
    together, _ = _try(ep, {op: fn for op, fn in candidates.values()})
    if together is not None:
        result.decomposed = sorted(candidates)
        return together, result
    usable = {}
    for target, (op, fn) in sorted(candidates.items()):
        out, reason = _try(ep, {op: fn})
        if out is None:
            result.skipped[target] = reason
        else:
            usable[target] = (op, fn)
    if usable:
        combined, reason = _try(ep, {op: fn for op, fn in usable.values()})
        if combined is not None:
            result.decomposed = sorted(usable)
            return combined, result
        for target in usable:
            result.skipped[target] = f"fine alone, but not together with the others ({reason})"
    return ep, result
