"""bench/onnx-models.md from the measured rows: a header (date, machine, versions, method), the
table (model, exporter, ONNX nodes, verdict, max abs error vs ONNX Runtime, vs eager, time,
gap or failure reason) and per-pair details (op histogram, conversion phases, notes)."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import export
from .measure import FAIL, PASS, Attempt, Compared, Row
from .models import BY_NAME

REPO = Path(__file__).resolve().parents[2]
COLUMNS = (
    "model",
    "exporter",
    "ONNX nodes",
    "verdict",
    "route",
    "max abs err vs ORT",
    "vs eager",
    "time (s)",
    "gap / failure reason",
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _errors(rows: Sequence[Compared]) -> str:
    if not rows:
        return "—"
    if len(rows) == 1:
        return f"{rows[0].max_abs:.2g}" + ("" if rows[0].ok else " ✗")
    return ", ".join(f"{c.name} {c.max_abs:.2g}" + ("" if c.ok else " ✗") for c in rows)


def _eager(row: Row) -> str:
    if not row.vs_eager:
        return "—" if not row.eager_note else f"— ({row.eager_note})"
    verdict = PASS if all(c.ok for c in row.vs_eager) else FAIL
    return f"{verdict} {_errors(row.vs_eager).replace(' ✗', '')}"


def grouped(lines: Sequence[str]) -> list[str]:
    """UnsupportedOpsError lines (`TARGET: REASON [node NAME]`) grouped by target and reason:
    `TARGET: REASON [N nodes: first, second, ...]`."""
    groups: dict[str, list[str]] = {}
    for line in lines:
        head, sep, where = line.partition(" [")
        groups.setdefault(head, []).append(where.rstrip("]").removeprefix("node ") if sep else "")
    found = []
    for head, nodes in groups.items():
        named = [n for n in nodes if n]
        shown = ", ".join(named[:3]) + (", ..." if len(named) > 3 else "")
        found.append(f"{head} [{len(nodes)} node{'s' if len(nodes) > 1 else ''}: {shown}]" if named else head)
    return found


def failure(a: Attempt) -> list[str]:
    """Why an attempt did not pass: the first divergence (or drift) and the failing outputs (FAIL),
    every unsupported op grouped (unsupported), the message (error); nothing for a PASS."""
    if a.verdict == FAIL:
        lines = []
        d = a.first_divergence
        if d is not None:
            local = "" if d["local_max_abs"] is None else f": local err {d['local_max_abs']:.3g} > {d['allowed']:.3g}"
            lines.append(f"first divergence {d['node']} ({d['aten']}, {d['shape']}){local}")
        elif a.drift:
            lines.append(f"no local divergence; {a.drift}")
        return lines + [f"{c.name}: {'; '.join(c.reasons)}" for c in a.vs_ort if not c.ok]
    if a.unsupported:
        return grouped(a.unsupported)
    return [a.error] if a.error else []


def reason(row: Row) -> str:
    """The gap or failure: the importer route's (run alone where `from_onnx`'s bundle came from the
    torch route or from nowhere), then `from_onnx`'s own when it did not pass either."""
    if not row.export_ok or row.error:
        return row.error
    own = failure(row.importer) if row.importer is not None else []
    lines = [f"importer route: {line}" for line in own]
    if row.convert.verdict != PASS:
        after = failure(row.convert)
        if after == own and own:
            lines.append("from_onnx raised the same (the torch route was not tried)")
        else:
            lines += [("from_onnx: " if lines else "") + line for line in after]
    return "\n".join(lines)


def table(rows: Sequence[Row]) -> list[str]:
    """The markdown table, one line per row."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        nodes = f"{r.onnx_nodes} ({len(r.histogram)} ops)" if r.export_ok else "—"
        took = f"{r.convert.seconds:.2f}" if r.convert.seconds else "—"
        route = r.convert.route or "—"
        cells = [r.model, r.exporter, nodes, r.verdict, route, _errors(r.convert.vs_ort), _eager(r), took, reason(r)]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return lines


def _rlx_versions() -> str:
    from rlx_torch_import import _core
    from rlx_torch_import.version import __version__

    return f"rlx-torch-import {__version__}, RLX {_core.rlx_version()}, rlx-onnx-import {_locked('rlx-onnx-import')}"


def _locked(crate: str) -> str:
    """The version of `crate` in the repository's Cargo.lock (the one the core was built with)."""
    try:
        text = (REPO / "Cargo.lock").read_text()
    except OSError:
        return "?"
    _, found, rest = text.partition(f'name = "{crate}"\nversion = "')
    return rest.split('"', 1)[0] if found else "?"


def tree() -> str:
    """The repository's commit, and whether the working tree differed from it (the front end
    measured is the working tree's)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "python"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return "unknown (no git)"
    if head.returncode != 0:
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (" with uncommitted changes under python/" if dirty.stdout.strip() else "")


@dataclass
class RunInfo:
    """What a run's header says besides the rows: the command, when it started (UTC, ISO), its
    total wall time (s), the models left out, the 1-minute load average and the front end's commit
    (`tree`) at its start and end."""

    command: str
    date: str
    total_s: float = 0.0
    skipped: list[str] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)

    @staticmethod
    def now() -> str:
        return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _front_end(trees: Sequence[str]) -> str:
    if not trees:
        return "unknown"
    if len(set(trees)) == 1:
        return f"commit {trees[0]}"
    return f"commit {trees[0]} at the start, {trees[-1]} at the end (it changed during the run)"


def header(info: RunInfo) -> list[str]:
    """The document's title and configuration lines."""
    pkgs = ", ".join(f"{k} {v}" for k, v in export.versions().items())
    load = info.load
    lines = [
        "# ONNX front end on real exported models",
        "",
        f"Generated by `{info.command}` (tools/onnx_models). Do not edit by hand.",
        "",
        f"- date: {info.date}; total run {info.total_s:.0f} s",
        f"- machine: {platform.machine()}, {os.cpu_count()} logical cores; Python {platform.python_version()}"
        + (
            f"; 1-minute load average {load[0]:.1f} at the start, {load[-1]:.1f} at the end (times are wall-clock, "
            "with whatever else ran on the machine meanwhile)"
            if load
            else ""
        ),
        f"- versions: {_rlx_versions()}; {pkgs}",
        f"- front end: {_front_end(info.trees)}",
        "- models: random weights (seeded), built from constructors and small configs, nothing downloaded; "
        "each exported with `torch.onnx.export(..., dynamo=True)` (its default opset) and the legacy "
        f"TorchScript exporter (`dynamo=False`, opset {export.LEGACY_OPSET}), both with input and output names",
        "- conversion: `from_onnx(model.onnx, out, inputs=<the example inputs>)`, verified against ONNX Runtime "
        "(CPU, graph optimizations off) with per-node parity; token ids drawn from [5, vocab), attention mask "
        "with the second row's last 2 tokens padded",
        "- **verdict**: `from_onnx`'s: PASS / FAIL (parity vs ONNX Runtime) / unsupported (UnsupportedOpsError) / "
        "error (any other error) / export failed; **route**: which route made the bundle (`importer`: RLX's ONNX "
        "importer; `torch route`: the fallback, the ONNX graph as a torch module through torch.export); "
        "**gap / failure reason**: where the bundle is not the importer's, the importer route run alone "
        '(`from_onnx(..., route="importer")`) and why it did not pass; '
        "**max abs err vs ORT**: per output (✗: over budget); **vs eager**: the bundle's "
        "outputs against eager PyTorch's on the same inputs, same budgets; **time**: `from_onnx` wall time "
        "(import, ORT reference, lower, bundle, verify, per-node parity) in a process already warmed by one tiny "
        "conversion; one child process per pair",
    ]
    if info.skipped:
        lines.append("- not run: " + "; ".join(info.skipped))
    return lines


def _attempt_lines(label: str, a: Attempt) -> list[str]:
    lines = [f"- {label}: {a.verdict} in {a.seconds:.2f} s" + (f" ({a.route})" if a.route else "")]
    if a.timings:
        lines.append("  - phases (s): " + ", ".join(f"{k} {v:.2f}" for k, v in a.timings.items()))
    lines += [f"  - {n}".replace("\n", "\n    ") for n in a.notes]
    lines += [f"  - {n}" for n in failure(a)]
    return lines


def details(rows: Sequence[Row]) -> list[str]:
    """Per pair: what the model is, the export and its op histogram, each conversion (phases,
    notes, failure), the eager comparison's note."""
    lines = ["## Details", ""]
    for r in rows:
        spec = BY_NAME.get(r.model)
        lines += [f"### {r.model} / {r.exporter}: {r.verdict}", ""]
        if spec is not None:
            lines.append(f"- model: {spec.description}")
        if r.export_ok:
            made = "cached" if r.export_cached else f"{r.export_s:.1f} s"
            lines.append(f"- export: opset {r.opset}, {r.onnx_nodes} nodes (export {made})")
            lines.append("- ONNX ops: " + ", ".join(f"{k} {v}" for k, v in r.histogram.items()))
        if r.error:
            lines.append(f"- {r.error}")
        if r.convert.seconds:
            lines += _attempt_lines("from_onnx", r.convert)
        if r.importer is not None:
            lines += _attempt_lines("importer route alone", r.importer)
        if r.eager_note:
            lines.append(f"- vs eager: {r.eager_note}")
        lines.append("")
    return lines


def render(rows: Sequence[Row], info: RunInfo) -> str:
    """The whole bench/onnx-models.md."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    body = [*header(info), "", f"{len(rows)} pairs: {summary}.", "", *table(rows), ""]
    return "\n".join(body + details(rows))
