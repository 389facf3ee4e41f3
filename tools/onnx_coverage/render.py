"""The summary of a run (`summarize`: totals, per op type, failure causes ranked) and the markdown
page (`render`) written from the JSON results (`bench/onnx-coverage.json`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

STATUSES = ("pass", "wrong", "unsupported", "error")
EXAMPLES = 2  # example cases shown per failure cause


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:.1f}%" if total else "-"


def _cell(text: str, width: int = 140) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def causes(cases: list[dict[str, Any]], engine: str) -> list[dict[str, Any]]:
    """Failure causes of `engine` ("rlx" or "ort") ranked by cases: each {cause, cases, both (of
    which the other engine fails too), ops (op type -> cases), examples}. A case with several causes
    (two op types not lowered) counts under each."""
    other = "ort" if engine == "rlx" else "rlx"
    found: dict[str, dict[str, Any]] = {}
    for c in cases:
        rec = c[engine]
        if rec["status"] == "pass":
            continue
        for cause in rec["causes"] or [f"{rec['status']}: {rec['reason'][:100]}"]:
            row = found.setdefault(cause, {"cause": cause, "cases": 0, "both": 0, "ops": Counter(), "first": {}})
            row["cases"] += 1
            row["both"] += c[other]["status"] != "pass"
            row["ops"][c["op_type"]] += 1
            row["first"].setdefault(c["op_type"], []).append(c["name"])
    for row in found.values():  # one example from each of the most affected op types, then the next ones
        first = row.pop("first")
        ranked = [first[op] for op, _ in row["ops"].most_common()]
        names = [names[0] for names in ranked] + [n for names in ranked for n in names[1:]]
        row["examples"] = names[:EXAMPLES]
    return sorted(found.values(), key=lambda r: (-r["cases"], r["cause"]))


def category(cause: str) -> str:
    """The kind of a failure cause (`causes`), for the summary by kind."""
    kinds = (
        ("graph input/output dtype", "a graph input/output dtype the importer route refuses"),
        ("importer: op", "an op type the importer route does not lower"),
        ("torch route:", "an op the torch route does not translate or lower"),
        ("op ", "an op of a domain the front end does not read"),
        ("importer", "the importer route fails or stubs a node"),
        ("zero-size", "a zero-size input"),
        ("convert: BundleError", "the lowered bundle does not load (BundleError)"),
        ("convert: ", "another conversion error"),
        ("from_onnx(verify=False)", "ONNX Runtime cannot run the case (from_onnx needs it)"),
        ("bundle run", "the bundle fails to run"),
        ("wrong results", "wrong results"),
    )
    return next((kind for prefix, kind in kinds if cause.startswith(prefix)), cause.split(":", 1)[0])


def categories(cases: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Our failing cases by kind of cause (a case with causes of two kinds counts under both)."""
    count: Counter[str] = Counter()
    for c in cases:
        rec = c["rlx"]
        if rec["status"] != "pass":
            count.update({category(k) for k in rec["causes"] or [rec["status"]]})
    return count.most_common()


def totals(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over the in-scope cases: ours and ONNX Runtime's per status, and the verification checks."""
    ours = Counter(c["rlx"]["status"] for c in cases)
    ort = Counter(c["ort"]["status"] for c in cases)
    return {
        "cases": len(cases),
        "rlx": {s: ours.get(s, 0) for s in STATUSES},
        "ort": {s: ort.get(s, 0) for s in ("pass", "wrong", "error")},
        "wrong_reported_pass": [c["name"] for c in cases if wrong_reported_pass(c)],
        "right_reported_fail": [
            c["name"] for c in cases if c["rlx"]["status"] == "pass" and c["rlx"].get("report_ok") is False
        ],
        "verify_skipped": [c["name"] for c in cases if str(c["rlx"].get("verify", "")).startswith("skipped")],
        "routes": Counter(c["rlx"].get("route") or "?" for c in cases if c["rlx"]["status"] == "pass"),
        "shape_noted": [
            c["name"]
            for c in cases
            if c["rlx"]["status"] == "pass" and any("compared as" in n for n in c["rlx"]["notes"])
        ],
    }


def wrong_reported_pass(case: dict[str, Any]) -> bool:
    """Our verification (against ONNX Runtime) said PASS, but the bundle is wrong against the expected outputs."""
    return case["rlx"]["status"] == "wrong" and case["rlx"].get("report_ok") is True


def per_op(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per op type: case counts by our status, ONNX Runtime's passes, the most common failure cause."""
    rows: dict[str, dict[str, Any]] = {}
    for c in cases:
        row = rows.setdefault(c["op_type"], {"op": c["op_type"], "cases": 0, **dict.fromkeys(STATUSES, 0), "ort": 0})
        row["cases"] += 1
        row[c["rlx"]["status"]] += 1
        row["ort"] += c["ort"]["status"] == "pass"
    for op, row in rows.items():
        ranked = causes([c for c in cases if c["op_type"] == op], "rlx")
        row["reason"] = f"{ranked[0]['cause']} ({ranked[0]['cases']})" if ranked else ""
    return [rows[k] for k in sorted(rows, key=str.lower)]


def _header(doc: dict[str, Any], t: dict[str, Any]) -> list[str]:
    m, n = doc["meta"], t["cases"]
    ours, ort = t["rlx"], t["ort"]
    lines = [
        "# ONNX node conformance",
        "",
        "Generated by `python -m tools.onnx_coverage` (see `tools/onnx_coverage/__init__.py`); do not edit by hand.",
        "Each in-scope case of the onnx wheel's node test suite is converted by `from_onnx` (verified against",
        "ONNX Runtime), its bundle run on the case's inputs, and every output compared with the case's",
        "expected output by `compare_output` (our parity budgets). ONNX Runtime (CPU, graph optimizations",
        "off) runs the same cases against the same expected outputs as the anchor.",
        "",
        f"- date: {m['date']}; onnx {m['onnx']}, onnxruntime {m['onnxruntime']}, RLX {m['rlx']},"
        f" rlx-torch-import {m['rlx_torch_import']}",
        f"- run: {m['wall_s']:.0f} s with {m['jobs']} worker(s), {m['timeout']:.0f} s per-case limit"
        + "".join(f"; {e} runs {s:.0f} s in all" for e, s in m.get("busy_s", {}).items())
        + (f"; selection: {m['selection']}" if m.get("selection") else "")
        + (f"; op types re-run since (--reuse --only): {'; '.join(m['merged'])}" if m.get("merged") else ""),
        f"- slowest runs: {', '.join(m.get('slowest', [])[:3]) or '-'}",
        f"- cases: {n + len(doc['out_of_scope'])} collected, **{n} in scope**, {len(doc['out_of_scope'])} out of"
        " scope (listed at the end)",
        "",
        "| | cases | pass | wrong | unsupported | error | pass rate |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| **RLX (ours)** | {n} | {ours['pass']} | {ours['wrong']} | {ours['unsupported']} | {ours['error']} |"
        f" **{_pct(ours['pass'], n)}** |",
        f"| ONNX Runtime | {n} | {ort['pass']} | {ort['wrong']} | - | {ort['error']} | {_pct(ort['pass'], n)} |",
        "",
        "- our passes by route: " + ", ".join(f"{r} {k}" for r, k in sorted(t["routes"].items())),
        f"- **wrong results our verification reported as PASS: {len(t['wrong_reported_pass'])}**"
        + (" (must be 0; listed below)" if t["wrong_reported_pass"] else ""),
        f"- right results our verification reported as FAIL (where ONNX Runtime itself is off):"
        f" {len(t['right_reported_fail'])}",
        f"- converted without verification (ONNX Runtime cannot run the case): {len(t['verify_skipped'])}",
        f"- passes whose outputs differ from the expected shape only by size-1 axes (ONNX [] is [1]):"
        f" {len(t['shape_noted'])}",
        f"- worker processes that died (their cases re-run alone): {len(m.get('worker_deaths', []))}"
        + "".join(f"; in flight: {d}" for d in m.get("worker_deaths", []) if d),
        "",
    ]
    if t["wrong_reported_pass"]:
        lines += ["## ⚠ Wrong results reported as PASS", ""]
        by = {c["name"]: c for c in doc["cases"]}
        lines += [f"- `{name}`: {_cell(by[name]['rlx']['reason'], 300)}" for name in t["wrong_reported_pass"]]
        lines.append("")
    return lines


def _ops_text(ops: Counter[str]) -> str:
    top = ops.most_common(3)
    more = len(ops) - len(top)
    return ", ".join(f"{op} {n}" for op, n in top) + (f", +{more} more" if more > 0 else "")


def _causes_table(ranked: list[dict[str, Any]], title: str, other: str) -> list[str]:
    lines = [
        title,
        "",
        f"| cause | cases | {other} fails too | op types (cases) | examples |",
        "|---|---:|---:|---|---|",
    ]
    for r in ranked:
        examples = ", ".join(f"`{e}`" for e in r["examples"])
        lines.append(f"| {_cell(r['cause'], 200)} | {r['cases']} | {r['both']} | {_ops_text(r['ops'])} | {examples} |")
    return [*lines, ""]


def _kinds_table(cases: list[dict[str, Any]]) -> list[str]:
    lines = ["## Our failures by kind", "", "| kind of cause | cases |", "|---|---:|"]
    lines += [f"| {_cell(k)} | {n} |" for k, n in categories(cases)]
    return [*lines, "", "A case with causes of two kinds counts under both.", ""]


def _op_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Per op type",
        "",
        "`_expanded` cases (the op's function body) count under the op they expand.",
        "",
        "| op type | cases | pass | wrong | unsupported | error | ORT pass | most common failure cause (cases) |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        nums = " | ".join(str(r[k]) for k in ("cases", *STATUSES, "ort"))
        lines.append(f"| {r['op']} | {nums} | {_cell(r['reason'], 110)} |")
    return [*lines, ""]


def _failing(cases: list[dict[str, Any]]) -> list[str]:
    bad = [c for c in cases if c["rlx"]["status"] != "pass"]
    lines = [f"## Every failing case ({len(bad)})", "", "<details><summary>show</summary>", ""]
    lines += ["| case | op type | ours | reason | ORT |", "|---|---|---|---|---|"]
    for c in bad:
        r = c["rlx"]
        lines.append(
            f"| `{c['name']}` | {c['op_type']} | {r['status']} | {_cell(r['reason'], 220)} | {c['ort']['status']} |"
        )
    return [*lines, "", "</details>", ""]


def _out_of_scope(left: list[dict[str, Any]]) -> list[str]:
    kinds: Counter[str] = Counter()
    for x in left:
        for part in x["reason"].split("; "):
            kinds[part.split(" is ", 1)[-1]] += 1
    lines = [f"## Out of scope ({len(left)} cases)", ""]
    lines.append("Cases with a graph input or output that is not a plain tensor of a float, integer or bool type.")
    lines += ["", "| input/output type | uses |", "|---|---:|"]
    lines += [f"| {k} | {n} |" for k, n in kinds.most_common()]
    lines += ["", "<details><summary>every case</summary>", "", "| case | op type | reason |", "|---|---|---|"]
    lines += [f"| `{x['name']}` | {x['op_type']} | {_cell(x['reason'], 200)} |" for x in left]
    return [*lines, "", "</details>", ""]


def render(doc: dict[str, Any]) -> str:
    """docs/onnx-coverage.md from the JSON document (`cli.py` writes it)."""
    cases = doc["cases"]
    t = totals(cases)
    lines = _header(doc, t)
    lines += _kinds_table(cases)
    lines += _causes_table(causes(cases, "rlx"), "## Failure causes, ranked (ours)", "ORT")
    ort = causes(cases, "ort")
    if ort:
        lines += _causes_table(ort, "## ONNX Runtime's failures against the expected outputs", "ours")
    lines += _op_table(per_op(cases))
    lines += _failing(cases)
    lines += _out_of_scope(doc["out_of_scope"])
    return "\n".join(lines).rstrip() + "\n"
