"""`python -m tools.onnx_coverage`: the command line, the run, and the JSON results / markdown page.

Nothing here imports rlx_torch_import at module level: spawned workers import this module (as the
`-m` main module) before their initializer sets their thread counts, which RLX reads on import.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from tools.onnx_coverage import cases as case_source
from tools.onnx_coverage.render import render, totals
from tools.onnx_coverage.runner import Runner
from tools.onnx_coverage.worker import ENGINES, Unit

DEFAULT_OUT = Path("docs/onnx-coverage.md")
DEFAULT_JSON = Path("bench/onnx-coverage.json")
DEFAULT_TIMEOUT = 60.0


def _parser() -> argparse.ArgumentParser:
    doc = (sys.modules["tools.onnx_coverage"].__doc__ or "").strip().splitlines()[0]
    p = argparse.ArgumentParser(prog="python -m tools.onnx_coverage", description=doc)
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="worker processes (default 2; 0: in this process)")
    p.add_argument("--only", metavar="OPTYPE,...", help="only the cases of these op types (case-insensitive)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N in-scope cases (by op type, name)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the markdown page (default {DEFAULT_OUT})")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"the JSON results (default {DEFAULT_JSON})")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="start from the JSON results: alone, run nothing and render the page again; with --only, "
        "run those op types again and merge them into the JSON",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"per-case limit in seconds, per engine (default {DEFAULT_TIMEOUT:.0f}; 0: none)",
    )
    p.add_argument(
        "--tasks-per-worker",
        type=int,
        default=0,
        metavar="N",
        help="replace a worker after N units (bounds memory a long run may leak; default 0: never)",
    )
    return p


def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime

    import rlx_torch_import
    from rlx_torch_import import _core

    return {
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "rlx": _core.rlx_version(),
        "rlx_torch_import": getattr(rlx_torch_import, "__version__", "?"),
    }


def _run(args: argparse.Namespace, selected: list[case_source.Case]) -> tuple[dict[str, dict[str, Any]], Runner]:
    """Every selected case through both engines, under a progress bar; records by case name and engine."""
    records: dict[str, dict[str, Any]] = {c.name: {} for c in selected}
    units = [Unit(c, e) for c in selected for e in ENGINES]
    ours: Counter[str] = Counter()
    with tqdm(total=len(units), desc="onnx-coverage", unit="run", file=sys.stderr, disable=None) as bar:

        def log(msg: str) -> None:
            bar.write(f"[onnx-coverage] {msg}", file=sys.stderr)

        def done(unit: Unit, rec: dict[str, Any]) -> None:
            records[unit.case.name][unit.engine] = rec
            if unit.engine == "rlx":
                ours[rec["status"]] += 1
                if rec["status"] == "wrong" and rec.get("report_ok") is True:
                    log(f"WRONG REPORTED AS PASS: {unit.case.name}: {rec['reason'][:200]}")
            counts = ", ".join(f"{k} {v}" for k, v in sorted(ours.items()))
            bar.set_postfix_str(counts, refresh=False)
            bar.update()
            settled = sum(len(r) for r in records.values())
            if bar.disable and settled % 250 == 0:  # no bar (not a terminal): a line now and then
                print(f"[onnx-coverage] {settled}/{len(units)} runs; ours: {counts}", file=sys.stderr, flush=True)

        with tempfile.TemporaryDirectory(prefix="onnx-coverage-") as tmp:
            runner = Runner(args.jobs, args.timeout, Path(tmp), done, log, args.tasks_per_worker or None)
            runner.run(units)
    return records, runner


def _selection(args: argparse.Namespace) -> str:
    parts = [f"--only {args.only}"] if args.only else []
    return " ".join([*parts, f"--limit {args.limit}"] if args.limit else parts)


def _document(args: argparse.Namespace, wall: float) -> dict[str, Any]:
    only = set(filter(None, (args.only or "").split(","))) or None
    return {
        "meta": {
            "date": datetime.date.today().isoformat(),
            **_versions(),
            "jobs": args.jobs,
            "timeout": args.timeout,
            "wall_s": round(wall, 1),
            "selection": _selection(args),
            "only": sorted(only) if only else None,
        },
        "cases": [],
        "out_of_scope": [],
    }


def _slowest(cases: list[dict[str, Any]], count: int = 10) -> list[str]:
    """The `count` slowest runs (`case engine seconds`); the records' own times are dropped, so that
    the JSON changes between runs only where results do."""
    runs = [(c[e].pop("seconds", 0.0), c["name"], e) for c in cases for e in ENGINES]
    return [f"{name} {e} {t:.1f} s" for t, name, e in sorted(runs, reverse=True)[:count]]


def _merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`old` with the op types `new` ran replaced by `new`'s cases (meta: new versions, old totals)."""
    ops = {o.lower() for o in new["meta"]["only"] or []}
    keep = [c for c in old["cases"] if c["op_type"].lower() not in ops]
    left = [x for x in old["out_of_scope"] if x["op_type"].lower() not in ops]
    meta = {**old["meta"], **{k: new["meta"][k] for k in ("date", "onnx", "onnxruntime", "rlx", "rlx_torch_import")}}
    meta["merged"] = [*old["meta"].get("merged", []), f"{new['meta']['date']}: {', '.join(sorted(ops))}"]

    def order(x: dict[str, Any]) -> tuple[str, str]:
        return x["op_type"].lower(), x["name"]

    return {
        "meta": meta,
        "cases": sorted(keep + new["cases"], key=order),
        "out_of_scope": sorted(left + new["out_of_scope"], key=order),
    }


def dumps(doc: dict[str, Any]) -> str:
    """The JSON document with one case per line (diffs between runs show the cases that changed)."""
    parts = [f'{{"meta": {json.dumps(doc["meta"], indent=1)}']
    for key in ("cases", "out_of_scope"):
        rows = ",\n".join(f"  {json.dumps(x, ensure_ascii=False)}" for x in doc[key])
        parts.append(f'"{key}": [\n{rows}\n ]')
    return ",\n ".join(parts) + "\n}\n"


def _write(doc: dict[str, Any], args: argparse.Namespace) -> None:
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(dumps(doc))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(doc))
    t = totals(doc["cases"])
    n, ours, ort = t["cases"], t["rlx"], t["ort"]
    print(
        f"{n} in-scope cases: ours pass {ours['pass']}, wrong {ours['wrong']}, unsupported {ours['unsupported']}, "
        f"error {ours['error']}; ONNX Runtime pass {ort['pass']}; wrong reported as PASS: "
        f"{len(t['wrong_reported_pass'])}\nwrote {args.out} and {args.json}"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.reuse and not args.json.is_file():
        print(f"--reuse: no results at {args.json}; run without --reuse first", file=sys.stderr)
        return 2
    if args.reuse and not args.only:
        _write(json.loads(args.json.read_text()), args)
        return 0
    start = time.perf_counter()
    only = set(filter(None, (args.only or "").split(","))) or None
    print("collecting onnx's node test cases ...", file=sys.stderr)
    selected, left = case_source.load(only)
    collected = len(selected) + len(left)
    if args.limit:
        selected = selected[: args.limit]
        ops = {c.op_type for c in selected}
        left = [x for x in left if x.op_type in ops]
    if not selected:
        print("no in-scope case matches the selection", file=sys.stderr)
        return 2
    print(f"{collected} cases: {len(selected)} to run, {len(left)} out of scope", file=sys.stderr)
    records, runner = _run(args, selected)
    doc = _document(args, time.perf_counter() - start)
    doc["cases"] = [{"name": c.name, "op_type": c.op_type, "expanded": c.expanded, **records[c.name]} for c in selected]
    doc["out_of_scope"] = [asdict(x) for x in left]
    doc["meta"]["pools"] = runner.pools
    doc["meta"]["worker_deaths"] = runner.deaths
    doc["meta"]["busy_s"] = {e: round(sum(c[e].get("seconds", 0.0) for c in doc["cases"]), 1) for e in ENGINES}
    doc["meta"]["slowest"] = _slowest(doc["cases"])
    if args.reuse:
        doc = _merge(json.loads(args.json.read_text()), doc)
    _write(doc, args)
    return 0
