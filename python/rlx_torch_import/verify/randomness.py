"""The "random" verdict: outputs that depend on random draws are named, not compared as failures.

RLX draws with its own generator (Philox, a fixed seed per bundle: `lower/ops/random.py`), torch with
its own (mt19937 under the global seed), so an output whose values depend on the draws cannot equal
eager PyTorch's. The front end records which outputs changed when torch's seed did (torch-ir
`random_outputs`, `frontend/torch/randomness.py`); here a verified report names them, notes how to verify
them, and says RANDOM instead of FAIL when every other output passed (`ParityReport.verdict`, CLI exit 9).
Per-node parity does not compare a random node's draws (`random_node`) and says the failing outputs
depend on the draws instead of reporting drift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..conversion import Conversion
from ..layout import output_key
from ..torchir import Node
from .report import ParityReport

HOW_TO_VERIFY = (
    "they depend on random draws, and RLX draws other values than torch (its own generator, the same "
    'values on every run of the bundle: docs/usage.md "Random ops"); to verify them, fix the draws in '
    "the model (eval() for dropout, pass the random values in as inputs, or take the random op out) or "
    "compare statistics (mean/std over many runs of each side) instead of values"
)
OUTPUT_NOTE = "depends on random draws (torch-ir random_outputs): not comparable value for value"
NODE_NOTE = "a random draw: RLX's generator is not torch's, so its values are not compared"
DRIFT = "the failing outputs depend on random draws (the random nodes' values are not compared): no divergence"

# Dropout overloads: random only in training mode (argument 2, `train`) with 0 < p (argument 1).
_DROPOUTS = frozenset(
    {
        "aten.dropout.default",
        "aten.native_dropout.default",
        "aten.feature_dropout.default",
        "aten.alpha_dropout.default",
        "aten.feature_alpha_dropout.default",
    }
)


def random_target(target: str) -> bool:
    """Whether ATen overload `target` ("aten.randint.low") draws from torch's generator (its schema is
    tagged `nondeterministic_seeded`)."""
    import torch

    parts = target.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return False
    op = getattr(getattr(torch.ops.aten, parts[1], None), parts[2], None)
    return op is not None and torch.Tag.nondeterministic_seeded in getattr(op, "tags", ())


def _literal(arg: dict[str, Any] | None) -> Any:
    if not arg:
        return None
    ((tag, payload),) = arg.items()
    return None if tag in ("tensor", "none") else payload


def random_node(node: Node) -> bool:
    """Whether torch-ir `node` draws random values: a random op, except dropout in eval mode or with p = 0."""
    if not random_target(node.target):
        return False
    if node.target in _DROPOUTS:
        p = _literal(node.args[1]) if len(node.args) > 1 else None
        train = _literal(node.args[2]) if len(node.args) > 2 else None
        return train is not False and p not in (0, 0.0)
    return True


def judge_random(report: ParityReport, conv: Conversion, bundle: Path, device: str = "cpu") -> None:
    """Name `conv.ir.random_outputs` in a verified `report`: a note on each of their rows (the example, sweep
    points, input sets) and on the example's the draws' statistics (`draw_statistics`, the bundle at `bundle` run
    on `device`), `report.random_outputs`, the how-to-verify note, and no accumulated-drift claim about them.
    The verdict (`ParityReport.verdict`) follows: RANDOM when only these outputs failed."""
    ir = conv.ir
    names = [o.name for o in ir.outputs if o.name in set(ir.random_outputs)]
    if not names or not report.verified:
        return
    report.random_outputs = names
    for row in report.output_rows():
        if row.name in names and OUTPUT_NOTE not in row.notes:
            row.notes.append(OUTPUT_NOTE)
    stats = draw_statistics(conv, bundle, names, device)
    for row in report.outputs:
        if row.name in stats:
            row.notes.append(stats[row.name])
    report.ok = False  # a value RLX drew is never "the same numbers as PyTorch"
    report.notes.append(f"random outputs {', '.join(names)}: {HOW_TO_VERIFY}")
    if report.first_divergence is None and report.drift and not report.failed_beyond_random():
        report.drift = DRIFT


def draw_statistics(conv: Conversion, bundle: Path, names: list[str], device: str = "cpu") -> dict[str, str]:
    """Output name -> "statistics over its N elements: RLX mean/std, PyTorch mean/std" for the random outputs
    `names` with two or more elements, at the example inputs (the bundle at `bundle` run once more on `device`).
    Evidence, not judged; a run that fails gives no statistics (a note says why)."""
    from ..bundle.model import BundleModel

    try:
        got = BundleModel(bundle, device=device).run(conv.feed())
    except Exception as e:  # extra evidence only: the verdict stands without it
        return {n: f"draw statistics not computed ({type(e).__name__})" for n in names}
    notes = {}
    for name in names:
        ours = np.asarray(got.get(name, np.zeros(0)), dtype=np.float64)
        theirs = conv.reference[output_key(name)].to_numpy().astype(np.float64)
        if ours.size < 2 or ours.size != theirs.size:
            continue
        notes[name] = (
            f"statistics over its {ours.size} elements: RLX mean {ours.mean():.4g} std {ours.std():.4g}, "
            f"PyTorch mean {theirs.mean():.4g} std {theirs.std():.4g} (not judged: one draw each)"
        )
    return notes
