"""The parity report: per-output rows (`OutputParity`, `verify/compare.py`), sweep and input-set
rows, per-node parity, and `ParityReport`, written as report.json (`to_json`), a terminal summary
(`summary`), report.md (`verify/render_md.py`) and report.html (`verify/render_html.py`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from .compare import OutputParity
from .render_md import one_line, quantization_line


@dataclass
class SweepRow:
    """Verification at one sweep point of a dynamic program: the binding (symbol label ->
    size), each output's parity against eager PyTorch at those sizes, and RLX's compile and
    run time there (milliseconds; the compile is 0 when the binding was already compiled)."""

    label: str
    binding: dict[str, int]
    ok: bool
    outputs: list[OutputParity] = field(default_factory=list)
    compile_ms: float = 0.0
    run_ms: float = 0.0

    def failures(self) -> str:
        return "; ".join(f"{o.name}: {', '.join(o.reasons)}" for o in self.outputs if not o.ok)

    def notes(self) -> list[str]:
        return [f"{o.name}: {n}" for o in self.outputs for n in o.notes]


@dataclass
class NodeError:
    """One way of comparing a node's RLX value with PyTorch's: max abs / max rel error, the
    largest error in ULP of the reference value (floats; 0 for exact dtypes), cosine, the
    budget's allowed absolute error, and the verdict. A float value judged bit for bit
    (`bit_exact`, `verify/exactness.py`) has no budget: `bits_differ` elements differ in bits."""

    max_abs: float
    max_rel: float
    ulp: float
    cosine: float
    allowed_abs: float
    ok: bool
    bit_exact: bool = False
    bits_differ: int = 0


@dataclass
class NodeParity:
    """Per-node parity of one tensor value an ATen node of the exported program produced.

    `cumulative`: RLX fed with the model inputs; `local`: the node's own RLX computation fed
    with PyTorch's values of its inputs (reference-fed), so its error is the op's alone.
    Either is None with `note` saying why there is no RLX value (fused away, not a tensor,
    ...). `kind` is the op's numerical character the budget follows ("exact", "movement",
    "elementwise", "reduction"); `reduction` the reduction length budgets scale with."""

    index: int
    node: str
    value: str
    aten: str
    module_path: str
    source: str
    shape: list[int]
    dtype: str
    kind: str
    reduction: int = 1
    local: NodeError | None = None
    cumulative: NodeError | None = None
    note: str = ""

    def failed(self) -> bool:
        """Whether the node's local or cumulative error is over its budget."""
        return any(e is not None and not e.ok for e in (self.local, self.cumulative))

    def same_value(self, other: NodeParity | None) -> bool:
        """Whether this is the same value of the graph as `other` (e.g. the first divergence)."""
        return other is not None and self.index == other.index and self.value == other.value


@dataclass
class InputSetRow:
    """Verification on one extra input set (`verify_inputs`): its label (`file:<name>`,
    `auto:<what>`), what it exercises, and each output's parity against eager PyTorch."""

    label: str
    description: str
    ok: bool
    outputs: list[OutputParity] = field(default_factory=list)

    def failures(self) -> str:
        return "; ".join(f"{o.name}: {', '.join(o.reasons)}" for o in self.outputs if not o.ok)

    def notes(self) -> list[str]:
        return [f"{o.name}: {n}" for o in self.outputs for n in o.notes]


@dataclass
class ParityReport:
    """Result of one conversion: `ok` is True only when every output passed (or verify was off).

    `outputs` is the check at the example inputs; a dynamic program also has one `sweep`
    row per sweep point (`sizes.sweep_points`), and `ok` needs every row to pass."""

    name: str
    ok: bool
    verified: bool
    out_dir: str
    outputs: list[OutputParity] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    op_histogram: dict[str, int] = field(default_factory=dict)
    aten_histogram: dict[str, int] = field(default_factory=dict)
    decomposition: str = "high"
    auto_decomposed_ops: list[str] = field(default_factory=list)
    rlx_version: str = ""
    torch_version: str = ""
    # What the outputs and node values are compared with: eager "PyTorch", or "ONNX Runtime" (`from_onnx`).
    reference: str = "PyTorch"
    # What node values are compared with when it is not `reference` (the ONNX torch route: PyTorch).
    node_reference: str = ""
    # Where RLX ran (`devices.DeviceInfo.description`: "cpu", "cuda: NVIDIA H200"; "" when nothing
    # was verified) and the RLX settings in effect for it (CUDA: strict float32, docs/design.md ad).
    device: str = "cpu"
    device_settings: list[str] = field(default_factory=list)
    # Dynamic programs: symbol label -> [min, max] (max None: unbounded), and one row per sweep point.
    symbols: dict[str, list[int | None]] = field(default_factory=dict)
    sweep: list[SweepRow] = field(default_factory=list)
    # The sizes the symbolic graph was generalized from, and sweep points whose own lowering differs.
    probes: list[dict[str, int]] = field(default_factory=list)
    unreproduced: list[dict[str, int]] = field(default_factory=list)
    # What the front end fixed or left out (torch-ir `constant_inputs`, `control_flow`, `dropped`):
    # one line each, e.g. "input scale = 3.0 baked in", "cond: both branches inlined; ...".
    notes: list[str] = field(default_factory=list)
    # Per-node parity (verify/nodes.py), in graph order; empty when not computed.
    nodes: list[NodeParity] = field(default_factory=list)
    # The first node whose local (reference-fed) error is over its budget, or None; with
    # `drift` saying where a cumulative error grows when every node is locally within budget.
    first_divergence: NodeParity | None = None
    drift: str = ""
    # Extra input sets verified beside the example (`verify_inputs`), one row each.
    input_sets: list[InputSetRow] = field(default_factory=list)
    # Weight-only quantization (`--quantize`; `quant.report.summary`): {} for a float conversion.
    quantization: dict[str, Any] = field(default_factory=dict)
    # Outputs that depend on random draws (torch-ir `random_outputs`; `verify/randomness.py`).
    random_outputs: list[str] = field(default_factory=list)

    def output_rows(self) -> list[OutputParity]:
        """Every output row: at the example, at each sweep point and on each input set."""
        rows: list[SweepRow | InputSetRow] = [*self.sweep, *self.input_sets]
        return [*self.outputs, *(o for r in rows for o in r.outputs)]

    def failed_beyond_random(self) -> bool:
        """Whether an output that does not depend on random draws failed (at the example, a sweep point or
        an input set)."""
        return any(not o.ok and o.name not in self.random_outputs for o in self.output_rows())

    @property
    def verdict(self) -> str:
        """The verdict: "PASS", "FAIL", "RANDOM" (only outputs that depend on random draws differ: CLI exit 9)
        or "NOT VERIFIED"."""
        if not self.verified:
            return "NOT VERIFIED"
        if self.ok:
            return "PASS"
        return "RANDOM" if self.random_outputs and not self.failed_beyond_random() else "FAIL"

    def to_json(self) -> str:
        """report.json: every field and the `verdict`, non-finite floats as strings ("inf", "nan")."""
        return json.dumps({**_plain(self), "verdict": self.verdict}, indent=1, allow_nan=False) + "\n"

    def summary(self) -> str:
        """A few lines for a terminal."""
        head = self.verdict
        on = f" on {one_line(self.device)}" if self.device else ""
        lines = [f"{head} {one_line(self.name)} ({self.decomposition}){on} -> {self.out_dir}"]
        if self.auto_decomposed_ops:
            lines.append(f"  auto-decomposed: {', '.join(self.auto_decomposed_ops)}")
        lines += [f"  note: {n}" for n in self.notes]
        for o in self.outputs:
            mark = "ok " if o.ok else "RND" if o.name in self.random_outputs else "BAD"
            if o.python_value is not None:
                text = f"= {o.python_value} (Python {o.expected_dtype}, {'as' if o.ok else 'not as'} eager PyTorch)"
            else:
                text = (
                    f"{o.dtype}{o.shape}: max_abs={o.max_abs_error:.3g} max_rel={o.max_rel_error:.3g} "
                    f"cosine={o.cosine:.8f} {o.mismatch_text()}"
                )
            lines.append(f"  {mark} {one_line(o.name)} {text}" + ("" if o.ok else "  <- " + "; ".join(o.reasons)))
            lines += [f"      note: {n}" for n in o.notes]
        if self.sweep:
            bad = [r for r in self.sweep if not r.ok]
            lines.append(
                f"  sweep over {', '.join(self.symbols)}: {len(self.sweep) - len(bad)}/{len(self.sweep)} points pass"
            )
            for r in bad:
                at = ", ".join(f"{k}={v}" for k, v in r.binding.items())
                lines.append(f"  BAD {r.label} ({at}): {r.failures()}")
            lines += [f"  note at {r.label}: {n}" for r in self.sweep for n in r.notes()]
        if self.input_sets:
            passed = sum(r.ok for r in self.input_sets)
            lines.append(f"  input sets: {passed}/{len(self.input_sets)} pass")
        lines += [f"  BAD input set {r.label}: {r.failures()}" for r in self.input_sets if not r.ok]
        lines += [f"  note on input set {r.label}: {n}" for r in self.input_sets for n in r.notes()]
        if self.quantization:
            lines.append(f"  {quantization_line(self.quantization)}")
        return "\n".join(lines)

    def markdown(self) -> str:
        """report.md (`verify/render_md.py`)."""
        from .render_md import markdown

        return markdown(self)


def _plain(x: Any) -> Any:
    """`x` as JSON values: dataclasses as dicts of their fields (as `dataclasses.asdict`, without its deep
    copies, which took most of report.json's time for a few hundred per-node rows), non-finite floats as
    strings."""
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in fields(x)}
    return x
