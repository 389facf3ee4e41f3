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


# torch decompositions that do not compute what torch's own CPU kernel computes for some input dtypes:
# using one would convert the model into something eager PyTorch does not run, so those stay gaps.
_UINT8_RESAMPLE = (
    "torch's uint8 resampling kernel uses fixed-point weights (a CPU-dependent AVX2 path) that its float "
    "decomposition does not reproduce; convert the image to float first"
)
KERNEL_MISMATCH: dict[str, tuple[frozenset[torch.dtype], str]] = {
    f"aten.{op}": (frozenset({torch.uint8}), _UINT8_RESAMPLE)
    for op in (
        "upsample_bilinear2d.vec",
        "upsample_bilinear2d.default",
        "upsample_bicubic2d.vec",
        "upsample_bicubic2d.default",
        "_upsample_bilinear2d_aa.vec",
        "_upsample_bilinear2d_aa.default",
        "_upsample_bicubic2d_aa.vec",
        "_upsample_bicubic2d_aa.default",
    )
}


def _kernel_mismatch(ep: torch.export.ExportedProgram, target: str) -> str:
    """Why torch's decomposition of `target` would disagree with its kernel on this graph's dtypes ("" if not)."""
    dtypes, reason = KERNEL_MISMATCH.get(target, (frozenset(), ""))
    for node in ep.graph.nodes:
        if node.op == "call_function" and str(node.target) == target and node.args:
            val = getattr(node.args[0], "meta", {}).get("val")
            if isinstance(val, torch.Tensor) and val.dtype in dtypes:
                return reason
    return ""


def _resolve(target: str) -> Any:
    _, packet, overload = target.split(".", 2)
    return getattr(getattr(torch.ops.aten, packet), overload)


def _non_aten(ep: torch.export.ExportedProgram) -> list[str]:
    """Call targets that are not ATen ops and have no lowering (e.g. most prims.*): the registry cannot lower
    them. (The few prims decompositions leave behind that `lower/ops/prims.py` lowers are accepted.)"""
    from ...lower import REGISTRY

    bad = []
    for node in ep.graph.nodes:
        if node.op == "call_function":
            name = str(node.target)
            if not name.startswith("aten.") and "getitem" not in name and name not in REGISTRY:
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
        mismatch = _kernel_mismatch(ep, target)
        if mismatch:
            result.skipped[target] = mismatch
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
