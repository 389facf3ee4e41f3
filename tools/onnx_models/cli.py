"""`python -m tools.onnx_models`: every chosen model/exporter pair measured in a child process
(`measure.main`), the table printed and written (see tools/onnx_models/__init__.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from . import export, table
from .measure import CRASHED, TIMEOUT, Row
from .models import BY_NAME, SPECS

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "bench" / "onnx-models.md"
DEFAULT_TIMEOUT_S = 420
LAST_RUN = "last-run.json"  # in the cache folder: every row of the last run, for --render


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.onnx_models", description=__doc__)
    p.add_argument("--only", default="", help="comma-separated model names (default: all)")
    p.add_argument("--exporter", choices=("dynamo", "legacy", "both"), default="both")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the markdown file written (default %(default)s)")
    p.add_argument("--skip-big", action="store_true", help="leave out the big models (vit_b_16: about 4 minutes)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per pair (default %(default)s)")
    p.add_argument("--cache", type=Path, default=export.default_cache(), help="export cache (default %(default)s)")
    p.add_argument("--work", type=Path, default=None, help="keep each conversion folder under this folder")
    p.add_argument("--refresh", action="store_true", help="export again even when the cache has the file")
    p.add_argument("--list", action="store_true", help="print the model names and exit")
    p.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="JSON",
        help="write --out from the rows a run saved (<cache>/last-run.json) instead of measuring",
    )
    return p.parse_args(argv)


def chosen(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The model names to run, and a line for each model left out (big ones, with `--skip-big`).
    SystemExit on an unknown name."""
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
        return names, []
    names = [s.name for s in SPECS if not (s.big and args.skip_big)]
    skipped = [f"{s.name} (big; left out by --skip-big)" for s in SPECS if s.big and args.skip_big]
    return names, skipped


def run_pair(model: str, exporter: str, args: argparse.Namespace) -> Row:
    """One pair in a child process (`measure.main`); a timeout or a child that died without a
    result is a row of its own."""
    with tempfile.TemporaryDirectory(prefix="onnx-models-row-") as tmp:
        out = Path(tmp) / "row.json"
        cmd = [sys.executable, "-m", "tools.onnx_models.measure", model, exporter, "--json", str(out)]
        cmd += ["--cache", str(args.cache)] + (["--work", str(args.work)] if args.work else [])
        cmd += ["--refresh"] if args.refresh else []
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        try:
            done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return Row(model, exporter, verdict=TIMEOUT, error=f"no result within {args.timeout:.0f} s (--timeout)")
        if out.is_file():
            return Row.from_json(json.loads(out.read_text()))
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        return Row(model, exporter, verdict=CRASHED, error=f"the child exited {done.returncode}: {tail[:600]}")


def render_saved(args: argparse.Namespace) -> int:
    """`--render`: write `--out` from a saved run and print its table."""
    saved = json.loads(args.render.read_text())
    rows = [Row.from_json(r) for r in saved.pop("rows")]
    args.out.write_text(table.render(rows, table.RunInfo(**saved)))
    print("\n".join(table.table(rows)))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.list:
        for s in SPECS:
            print(f"{s.name}{' (big)' if s.big else ''}: {s.description}")
        return 0
    if args.render is not None:
        return render_saved(args)
    names, skipped = chosen(args)
    exporters = export.EXPORTERS if args.exporter == "both" else (args.exporter,)
    rows: list[Row] = []
    command = "python -m tools.onnx_models " + " ".join(sys.argv[1:] if argv is None else argv)
    info = table.RunInfo(command.strip(), table.RunInfo.now(), skipped=skipped)
    info.load.append(os.getloadavg()[0])
    info.trees.append(table.tree())
    start = time.perf_counter()
    for model in names:
        for exporter in exporters:
            t0 = time.perf_counter()
            row = run_pair(model, exporter, args)
            rows.append(row)
            print(f"{model:>20} {exporter:>6}: {row.verdict} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    info.total_s = time.perf_counter() - start
    info.load.append(os.getloadavg()[0])
    info.trees.append(table.tree())
    args.cache.mkdir(parents=True, exist_ok=True)
    (args.cache / LAST_RUN).write_text(json.dumps({**asdict(info), "rows": [asdict(r) for r in rows]}, indent=1) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table.render(rows, info))
    print("\n".join(table.table(rows)))
    print(f"\nwritten: {args.out} (rows: {args.cache / LAST_RUN})", file=sys.stderr)
    return 0
