"""The audit of a finished program against the defect catalogue: a raw op on a known-defect path
is an internal error, never a wrong number."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ...errors import LoweringError
from ...program import Program, op_name
from . import defects


def audit(program: Program, nan_free: Collection[str] = (), compensated: Mapping[str, str] | None = None) -> None:
    """Raise LoweringError if any node of `program` is a raw op on a known-defect path.

    `nan_free`: value ids that cannot hold NaN (NaN-only defects do not concern them);
    `compensated`: node id -> the defect the layer corrects right after that node."""
    compensated = compensated or {}
    dtypes = {v.name: v.dtype for v in (*program.inputs, *program.params)}
    found = []
    for node in program.nodes:
        ins = [dtypes[i] for i in node.inputs]
        dtypes[node.id] = node.dtype
        may_nan = any(i not in nan_free for i in node.inputs)
        for defect in defects.DEFECTS:
            if (defect.nan_only and not may_nan) or compensated.get(node.id) == defect.key:
                continue
            if not defect.accepted and defect.hits(node.op, ins, node.dtype):
                found.append(
                    f"{node.provenance.label()}: {op_name(node.op)}({', '.join(ins)}) -> {node.dtype} "
                    f"meets RLX defect {defect.key!r}"
                )
    if found:
        raise LoweringError(
            "internal error: raw RLX ops on known-defect paths (an op family bypassed lower/rlx/workarounds.py):\n  "
            + "\n  ".join(found[:20])
        )
