"""`python -m tools.coverage`: the command line, the tasks, and coverage.md / coverage.json."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from tools.coverage.render import _opinfo_runs, render, summarize
from tools.coverage.runner import Runner
from tools.coverage.samples import (
    CELLS,
    DEFAULT_SAMPLE_TIMEOUT,
    DTYPES,
    NONDETERMINISTIC,
    SKIPPED,
    SampleResult,
    _extra_samples,
    _op_db,
    core_aten_ops,
    opinfo_label,
)
from tools.coverage.worker import Task


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.coverage", description=(sys.modules["tools.coverage"].__doc__ or "").splitlines()[0]
    )
    p.add_argument("--out", type=Path, default=Path("docs"), help="where coverage.md/.json go (default: docs)")
    p.add_argument(
        "--dtypes",
        default=",".join(DTYPES),
        help=f"comma-separated dtypes to sample OpInfos in (default: all of {', '.join(DTYPES)})",
    )
    p.add_argument("--samples-per-op", type=int, default=3, metavar="N", help="samples per OpInfo in float32")
    p.add_argument(
        "--samples-per-dtype", type=int, default=1, metavar="M", help="samples per OpInfo in every other dtype"
    )
    p.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    p.add_argument(
        "--extra-samples",
        type=Path,
        metavar="FILE.py",
        help="also run the SAMPLES list [(name, module, inputs)] of this file (e.g. tests/ops/all_samples.py)",
    )
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    p.add_argument(
        "--jobs",
        type=int,
        default=cpus,
        metavar="N",
        help=f"worker processes (default: one per CPU, {cpus} here); 0 runs everything in this process",
    )
    p.add_argument(
        "--sample-timeout",
        type=float,
        default=DEFAULT_SAMPLE_TIMEOUT,
        metavar="S",
        help=f"kill a worker whose sample runs longer than S seconds (default: {DEFAULT_SAMPLE_TIMEOUT:.0f}; "
        "0: no limit; not with --jobs 0)",
    )
    p.add_argument(
        "--render-only",
        action="store_true",
        help="run nothing: summarize OUT/coverage.json's samples again and rewrite OUT/coverage.md and the "
        "json's per-op summary (after a change to the report or to NOT_NATIVE's reasons)",
    )
    return p


def _tasks(args: Any, dtypes: list[str], extra_count: int) -> list[Task]:
    wanted = set(args.ops.split(",")) if args.ops else None
    tasks = []
    for i, o in enumerate(_op_db()):
        if (wanted is not None and o.name not in wanted) or any(word in o.name for word in NONDETERMINISTIC):
            continue
        supported = o.supported_dtypes("cpu")
        ds = tuple(d for d in dtypes if DTYPES[d] in supported)
        if not ds:
            continue
        tasks.append(Task(opinfo_label(o), i, ds, args.samples_per_op, args.samples_per_dtype))
    size = 8  # project samples per task
    for start in range(0, extra_count, size):
        idx = tuple(range(start, min(start + size, extra_count)))
        label = f"extra samples {idx[0]}-{idx[-1]}"
        tasks.append(Task(label, extra=str(args.extra_samples.resolve()), extra_indices=idx))
    return tasks


def _task_summary(results: list[SampleResult]) -> str:
    runs = [r for r in results if r.index >= 0 or r.status != SKIPPED]
    counts: dict[str, int] = {}
    for r in runs:
        word = CELLS.get(r.status, r.status)
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "no samples"


def _run(args: argparse.Namespace, tasks: list[Task], tmp: Path) -> Runner:
    """Every task's units on the pool, under a progress bar (shown on a terminal) and one log line per task."""
    start = time.perf_counter()
    finished: list[str] = []
    with tqdm(total=len(tasks), desc="coverage", unit="task", file=sys.stderr, disable=None) as bar:

        def log(msg: str) -> None:
            bar.write(f"[coverage] {msg}", file=sys.stderr)

        def on_task_done(label: str, results: list[SampleResult]) -> None:
            finished.append(label)
            log(
                f"{len(finished)}/{len(tasks)} {label}: {_task_summary(results)} "
                f"({time.perf_counter() - start:.0f} s elapsed)"
            )
            bar.update()

        runner = Runner(args.jobs, args.sample_timeout, tmp, log, on_task_done)
        runner.run([u for t in tasks for u in t.units()])
    return runner


def _meta(args: argparse.Namespace, dtypes: list[str], tasks: list[Task], runner: Runner, extra_count: int) -> dict:
    from rlx_torch_import import _core

    results = runner.results()
    ran = [r for r in _opinfo_runs(results) if r.index >= 0 and r.status != SKIPPED]
    return {
        "torch": torch.__version__,
        "rlx": _core.rlx_version(),
        "dtypes": dtypes,
        "samples": len({(r.opinfo, r.dtype, r.index) for r in ran}),
        "aten_runs": sum(1 for r in results if r.level == "aten" and r.status != SKIPPED),
        "samples_per_op": args.samples_per_op,
        "samples_per_dtype": args.samples_per_dtype,
        "opinfos": sum(1 for t in tasks if t.opinfo >= 0),
        "extra_samples": extra_count,
        "extra_source": str(args.extra_samples or ""),
        "skipped_generation": sum(1 for r in results if r.status == SKIPPED and r.index < 0),
        "skipped_eager": sum(1 for r in results if r.status == SKIPPED and r.index >= 0),
        "jobs": args.jobs,
        "pool_restarts": runner.restarts,
        "worker_deaths": runner.deaths,
    }


def _write(out: Path, core: list[str], meta: dict[str, Any], results: list[SampleResult]) -> str:
    """coverage.md and coverage.json under `out`; returns the Markdown."""
    table = summarize(core, results)
    out.mkdir(parents=True, exist_ok=True)
    text = render(table, meta, results)
    (out / "coverage.md").write_text(text)
    doc = {"meta": meta, "core_ops": table, "samples": [asdict(r) for r in results]}
    (out / "coverage.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    return text


def _render_only(out: Path) -> int:
    try:
        doc = json.loads((out / "coverage.json").read_text())
    except (OSError, ValueError) as e:
        print(f"error: cannot read {out / 'coverage.json'}: {e}", file=sys.stderr)
        return 2
    results = [SampleResult(**r) for r in doc["samples"]]
    # the recorded Core ATen op list: torch.ops.aten lists only the ops looked up so far in this process
    print(_write(out, list(doc["core_ops"]), doc["meta"], results).split("\n| dtype |")[0].strip())
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.render_only:
        return _render_only(args.out)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown or not dtypes or args.jobs < 0 or args.samples_per_op < 0 or args.samples_per_dtype < 0:
        bad = f"unknown dtype(s) {', '.join(unknown)}; choose among {', '.join(DTYPES)}" if unknown else "bad counts"
        print(f"error: {bad}", file=sys.stderr)
        return 2
    dtypes = [d for d in DTYPES if d in dtypes]
    try:
        _op_db()
    except ImportError as e:
        print(f"error: PyTorch's OpInfo database needs the `expecttest` package ({e})", file=sys.stderr)
        return 2
    core = core_aten_ops()
    extra_count = len(_extra_samples(args.extra_samples)) if args.extra_samples else 0
    tasks = _tasks(args, dtypes, extra_count)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rlx-coverage-") as tmp:
        runner = _run(args, tasks, Path(tmp))
    meta = {**_meta(args, dtypes, tasks, runner, extra_count), "seconds": time.perf_counter() - start}
    print(_write(args.out, core, meta, runner.results()).split("\n| dtype |")[0].strip())
    return 0
