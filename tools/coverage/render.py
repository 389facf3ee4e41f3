"""The coverage report: per Core ATen op (and per dtype) the best verdict of the runs that exercised it
(`summarize`), and coverage.md (`render`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tools.coverage.samples import CELLS, DTYPES, NOT_NATIVE, OTHER, SHORT, SKIPPED, STATUSES, SampleResult


def _op_verdict(r: SampleResult, op: str) -> tuple[str, str]:
    """What one run says about one op of its graph."""
    if r.status.startswith("verified"):  # per op: was this one lowered natively or decomposed?
        return ("verified-decomposed" if op in r.decomposed else "verified"), ""
    if r.status == "unsupported":
        if op in r.unsupported:
            return "unsupported", r.unsupported[op]
        return "blocked", "not reached: the graph also holds " + ", ".join(sorted(r.unsupported))
    return r.status, r.reason


FAILING = ("parity-failed", "timeout", "crashed", "error")  # runs listed even when a better verdict stands


def _entry() -> dict[str, Any]:
    return {"status": "no-sample", "reason": "", "via": "", "level": "", "failed": []}


def summarize(core: list[str], results: list[SampleResult]) -> dict[str, dict[str, Any]]:
    """Core ATen op -> best status over all runs, the level it came from, and the reason (or the
    sample); under `dtypes`, the same per dtype of the runs, each with `failed`: the runs whose graph
    holds that op alone that failed parity, crashed, timed out or raised (`sample status`), whatever
    the verdict (a failing graph of several ops may be any of their doing)."""
    generic = "no sample's graph contains it, at the `core` or the `aten` level"
    table: dict[str, dict[str, Any]] = {
        op: {"status": "no-sample", "reason": generic, "via": "", "level": "", "dtypes": {}} for op in core
    }
    for r in results:
        for op in r.ops:
            if op not in table:
                continue
            status, reason = _op_verdict(r, op)
            via = f"{r.opinfo}[{r.index}]"
            new = {"status": status, "reason": reason, "via": via, "level": r.level}
            cell = table[op]["dtypes"].setdefault(r.dtype, _entry())
            if status in FAILING and len(r.ops) == 1 and f"{via} {status}" not in cell["failed"]:
                cell["failed"].append(f"{via} {status}")
            for entry in (table[op], cell):
                if STATUSES.index(status) < STATUSES.index(entry["status"]):
                    entry.update(new)
    for op, why in NOT_NATIVE.items():
        if op not in table:
            continue
        for entry in (table[op], *table[op]["dtypes"].values()):
            if entry["status"] != "verified":
                entry["reason"] = why
    for v in table.values():
        order = list(DTYPES) + sorted(set(v["dtypes"]) - set(DTYPES))
        v["dtypes"] = {d: v["dtypes"][d] for d in order if d in v["dtypes"]}
    return table


def _columns(table: dict[str, dict[str, Any]], wanted: Iterable[str]) -> list[str]:
    seen = set(wanted) | {d for v in table.values() for d in v["dtypes"]}
    return [d for d in DTYPES if d in seen] + sorted(seen - set(DTYPES))


def _cell_text(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _short_ops(ops: list[str]) -> str:
    return ", ".join(o.removeprefix("aten.") for o in ops)


def _kind(op: str, cell: dict[str, Any]) -> str:
    """A cell's status, with the unverified cells of ops that cannot verify natively here set apart."""
    status = cell["status"]
    if op in NOT_NATIVE and not status.startswith("verified") and status != "no-sample":
        return "not-native"
    return status


def _masked(cell: dict[str, Any]) -> bool:
    """Whether a run of this op x dtype failed beside the (better) verdict the cell shows."""
    return any(f != f"{cell['via']} {cell['status']}" for f in cell.get("failed", []))


@dataclass
class _View:
    """What the sections of coverage.md are drawn from: the summary, the runs, the dtype columns, and
    every (op, dtype, cell) pair with a sample."""

    table: dict[str, dict[str, Any]]
    meta: dict[str, Any]
    results: list[SampleResult]
    columns: list[str] = field(default_factory=list)
    cells: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    pair: dict[str, int] = field(default_factory=dict)  # cells per kind

    def __post_init__(self) -> None:
        self.columns = _columns(self.table, self.meta.get("dtypes", []))
        self.cells = [
            (op, d, v["dtypes"][d]) for op, v in sorted(self.table.items()) for d in self.columns if d in v["dtypes"]
        ]
        self.pair = {k: sum(1 for op, _, c in self.cells if _kind(op, c) == k) for k in KINDS}


KINDS = [*STATUSES, "not-native"]


def render(table: dict[str, dict[str, Any]], meta: dict[str, Any], results: list[SampleResult]) -> str:
    """coverage.md: headline, per-dtype summary, the op x dtype table, the failures by kind, every failing
    sample, and the worker deaths."""
    view = _View(table, meta, results)
    lines = [*_headline(view), *_dtype_rows(view), *_op_table(view), *_op_sections(view), *_failing_samples(view)]
    lines += _worker_deaths(meta.get("worker_deaths", []))
    return "\n".join(lines) + "\n"


def _headline(view: _View) -> list[str]:
    table, meta, results, pair = view.table, view.meta, view.results, view.pair
    counts = {s: sum(1 for v in table.values() if v["status"] == s) for s in STATUSES}
    total = len(table)
    native = {op for r in _opinfo_runs(results) for op in r.ops if _op_verdict(r, op)[0] == "verified"}
    by_opinfo = len(native & set(table))
    masked = sum(1 for _, _, c in view.cells if _masked(c))
    per = meta.get("samples_per_op", 3), meta.get("samples_per_dtype", 1)
    extra = (
        f" plus {meta['extra_samples']} project samples from `{meta['extra_source']}` (rows marked `extra:`, each "
        "in its own dtype)"
        if meta.get("extra_samples")
        else ""
    )
    lines = [
        "# Core ATen coverage",
        "",
        f"Generated by `python -m tools.coverage` with torch {meta['torch']}, RLX {meta['rlx']}: "
        f"{meta['samples']} OpInfo samples in {len(meta.get('dtypes', []))} dtypes (up to {per[0]} per OpInfo in "
        f"float32, {per[1]} in each other dtype it supports){extra}, on {meta.get('jobs', 0)} worker processes in "
        f"{meta['seconds']:.0f} s. Skipped as PyTorch's limits, not ours: {meta.get('skipped_generation', 0)} "
        f"(OpInfo, dtype) pairs whose sample generation raised and {meta.get('skipped_eager', 0)} samples whose "
        "eager run raised or gave only NaN. Every sample is converted at the `core` level, and also at `aten` "
        "when its aten-level "
        f"graph holds Core ATen ops that torch's core table decomposes ({meta.get('aten_runs', 0)} such runs); "
        "`level` says which run gave the verdict.",
        "",
        f"- Core ATen ops: **{total}**",
        f"- verified natively in at least one dtype: **{counts['verified']}** "
        f"({100 * counts['verified'] / max(total, 1):.1f}%; {by_opinfo} by OpInfo samples alone)",
        f"- best status otherwise: verified through automatic decomposition {counts['verified-decomposed']}; "
        f"random (lowered; outputs depend on the draws) {counts['random']}; "
        f"parity failed {counts['parity-failed']}; unsupported {counts['unsupported']}; export failed "
        f"{counts['export-failed']}; error {counts['error']}; timeout {counts['timeout']}; crashed "
        f"{counts['crashed']}; not reached {counts['blocked']}; no sample {counts['no-sample']}",
        f"- Core ATen op x dtype pairs with a sample: **{len(view.cells)}** of {total * len(view.columns)}: verified "
        f"**{pair['verified'] + pair['verified-decomposed']}** ({pair['verified']} natively, "
        f"{pair['verified-decomposed']} through decomposition), random {pair['random']}, "
        f"parity failed **{pair['parity-failed']}**, "
        f"unsupported **{pair['unsupported']}**, other **{sum(pair[s] for s in OTHER)}** (export failed "
        f"{pair['export-failed']}, error {pair['error']}, timeout {pair['timeout']}, crashed {pair['crashed']}, "
        f"not reached {pair['blocked']}), and {pair['not-native']} of the ops that cannot verify natively here "
        f"(`NOT_NATIVE`); in {masked} pairs a one-op graph of the op failed, crashed, timed out or raised "
        "beside the better verdict shown (marked `*`)",
    ]
    deaths = meta.get("worker_deaths", [])
    if deaths or meta.get("pool_restarts"):
        alone = sum(1 for d in deaths if d.get("crashed_alone"))
        timeouts = sum(1 for d in deaths if d["outcome"] == "timeout")
        lines.append(
            f"- worker processes lost: {meta.get('pool_restarts', 0)} times; of the {len(deaths)} samples in flight "
            f"then, {alone} kill a fresh process alone (`crashed`) and {timeouts} were killed for time (see "
            "Worker deaths)"
        )
    return lines


def _dtype_rows(view: _View) -> list[str]:
    lines = [
        "",
        "| dtype | samples | skipped | Core ATen ops with a sample | ok | dec | FAIL | uns | other | n/a |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in view.columns:
        runs = [r for r in view.results if r.dtype == d]
        ran = {(r.opinfo, r.index) for r in runs if r.status != SKIPPED}
        skipped = sum(1 for r in runs if r.status == SKIPPED)
        dc = [_kind(op, c) for op, dd, c in view.cells if dd == d]
        n = {k: dc.count(k) for k in KINDS}
        lines.append(
            f"| {d} | {len(ran)} | {skipped} | {len(dc)} | {n['verified']} | {n['verified-decomposed']} "
            f"| {n['parity-failed']} | {n['unsupported']} | {sum(n[s] for s in OTHER)} | {n['not-native']} |"
        )
    return lines


def _op_table(view: _View) -> list[str]:
    legend = ", ".join(f"`{c}` {s}" for s, c in CELLS.items())
    columns = view.columns
    lines = [
        "",
        "## Core ATen op x dtype",
        "",
        f"`best` is the best status over every dtype; a cell is the best status of that dtype's runs ({legend}; "
        "`blk`: every run of it had another op of its graph unsupported); `*`: besides the verdict shown, a "
        "graph of that op alone failed parity, crashed, timed out or raised in that dtype (see Failing samples).",
        "",
        "| Core ATen op | best | level | sample | " + " | ".join(SHORT.get(d, d) for d in columns) + " | reason |",
        "|---|---|---|---|" + "---|" * len(columns) + "---|",
    ]
    for op, v in sorted(view.table.items()):
        row = " | ".join(
            CELLS[v["dtypes"][d]["status"]] + ("\\*" if _masked(v["dtypes"][d]) else "") if d in v["dtypes"] else "—"
            for d in columns
        )
        lines.append(f"| `{op}` | {v['status']} | {v['level']} | {v['via']} | {row} | {_cell_text(v['reason'])} |")
    return lines


def _op_sections(view: _View) -> list[str]:
    sections = [
        ("Parity failures (Core ATen op x dtype)", ("parity-failed",)),
        ("Unsupported (Core ATen op x dtype)", ("unsupported",)),
        ("Crashes, timeouts, errors, export failures, not reached (Core ATen op x dtype)", OTHER),
    ]
    lines: list[str] = []
    for title, wanted in sections:
        rows = [(op, d, c) for op, d, c in view.cells if _kind(op, c) in wanted]
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += ["| Core ATen op | dtype | status | sample | level | reason |", "|---|---|---|---|---|---|"]
        lines += [
            f"| `{op}` | {d} | {c['status']} | {c['via']} | {c['level']} | {_cell_text(c['reason'])} |"
            for op, d, c in rows
        ]
    unnative = sorted({op for op, _, c in view.cells if _kind(op, c) == "not-native"})
    if unnative:
        lines += [
            "",
            f"Not listed above: {view.pair['not-native']} pairs of ops that cannot verify natively here, for the "
            f"reason the table gives: {', '.join(f'`{op}`' for op in unnative)}.",
        ]
    return lines


def _failing_samples(view: _View) -> list[str]:
    bad = [r for r in view.results if r.status in FAILING]
    lines = [
        "",
        "## Failing samples",
        "",
        "Every run that failed parity, timed out, crashed or raised, including those whose ops another sample "
        "verified (sorted by OpInfo, dtype).",
        "",
    ]
    if not bad:
        return [*lines, "None."]
    lines += ["| sample | dtype | level | status | graph ops | reason |", "|---|---|---|---|---|---|"]
    for r in sorted(bad, key=lambda r: (r.opinfo, r.dtype, r.index, r.level)):
        lines.append(
            f"| {r.opinfo}[{r.index}] | {r.dtype} | {r.level} | {r.status} | {_short_ops(r.ops)} "
            f"| {_cell_text(r.reason)} |"
        )
    return lines


def _worker_deaths(deaths: list[dict[str, Any]]) -> list[str]:
    if not deaths:
        return []
    lines = [
        "",
        "## Worker deaths",
        "",
        "Samples in flight when a worker process died, each re-run alone in a fresh process. One that does not "
        "kill that process either got its verdict there; the death it was present at then came from another "
        "sample in flight, or from heap corruption by a sample that worker ran earlier (its last ones are "
        "listed).",
        "",
        "| pool | in flight | outcome | that worker's previous samples |",
        "|---|---|---|---|",
    ]
    for d in deaths:
        outcome = d["outcome"] if d["outcome"] != "suspect" else "crashes alone" if d["crashed_alone"] else "ran alone"
        lines.append(f"| {d['pool']} | {d['unit']} | {outcome} | {'; '.join(d['recent'])} |")
    return lines


def _opinfo_runs(results: list[SampleResult]) -> list[SampleResult]:
    return [r for r in results if not r.opinfo.startswith("extra:")]
