"""`python -m tools.real_models`: every chosen model converted in a child process
(`worker.py`), the markdown table printed, the rows written as JSON (see __init__.py)."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import ultralytics_models
from .models import BY_NAME, SPECS
from .spec import Spec
from .table import compare, rows_of, table
from .worker import CRASHED, MISSING, TIMEOUT, Row

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 600
VERSIONED = ("torch", "transformers", "ultralytics")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tools.real_models", description=__doc__)
    p.add_argument("--only", default="", help="comma-separated model names (default: all; see --list)")
    p.add_argument("--json", type=Path, default=None, help="write the rows and the run's header here")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per model (default %(default)s)")
    p.add_argument("--work", type=Path, default=None, help="keep each conversion folder under this folder")
    p.add_argument("--list", action="store_true", help="print the model names and exit")
    p.add_argument("--render", type=Path, default=None, metavar="JSON", help="print the table of a saved run and exit")
    p.add_argument(
        "--compare",
        type=Path,
        nargs=2,
        default=None,
        metavar=("BEFORE", "AFTER"),
        help="print the before/after table of two saved runs (--json files) and exit",
    )
    return p.parse_args(argv)


def chosen(only: str) -> list[Spec]:
    """The specs `--only` names (all when empty); SystemExit naming an unknown one."""
    if not only:
        return list(SPECS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in names]


def importable(package: str) -> bool:
    """Whether `package` can be imported here (found, not imported: a child imports it)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def run_one(spec: Spec, args: argparse.Namespace) -> Row:
    """One model in a child process; a missing package, a timeout or a child that died without a
    result is a row of its own."""
    row = Row(spec.name, spec.source.rsplit(".", 1)[-1], spec.kind)
    if not importable(spec.package):
        row.outcome, row.detail = MISSING, f"{spec.package} is not importable"
        return row
    with tempfile.TemporaryDirectory(prefix="real-models-row-") as tmp:
        out = Path(tmp) / "row.json"
        cmd = [sys.executable, "-m", "tools.real_models.worker", spec.name, "--json", str(out)]
        cmd += ["--work", str(args.work)] if args.work else []
        env = {**os.environ, **ultralytics_models.offline_env(), "PYTHONWARNINGS": "ignore"}
        try:
            done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            row.outcome, row.detail = TIMEOUT, f"no result within {args.timeout:.0f} s (--timeout)"
            row.seconds = args.timeout
            return row
        if out.is_file():
            return Row(**json.loads(out.read_text()))
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        row.outcome, row.exit_code = CRASHED, done.returncode
        row.detail = f"the child exited {done.returncode}: {tail[:500]}"
        return row


def header(command: str) -> dict[str, Any]:
    """When, where and with what the run was made: versions and the rlx_torch_import it imports."""
    versions = {}
    for name in VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    found = importlib.util.find_spec("rlx_torch_import")
    rti = str(Path(found.origin).resolve()) if found and found.origin else "not importable"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return {"command": command, "date": when, "rti": rti, "versions": versions, "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.list:
        for s in SPECS:
            print(f"{s.name} [{s.package}; {s.kind}]: {s.description}")
        return 0
    if args.render is not None:
        print("\n".join(table(rows_of(json.loads(args.render.read_text())))))
        return 0
    if args.compare is not None:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print("\n".join(compare(before, after)))
        return 0
    specs = chosen(args.only)
    info = header("python -m tools.real_models " + " ".join(sys.argv[1:] if argv is None else argv))
    if info["rti"] == "not importable":
        raise SystemExit(
            "rlx_torch_import is not importable: put the tree to measure on PYTHONPATH (PYTHONPATH=python)"
        )
    print(f"rti: {info['rti']}; versions: {info['versions']}", file=sys.stderr)
    rows: list[Row] = []
    for spec in specs:
        t0 = time.perf_counter()
        rows.append(run_one(spec, args))
        print(f"{spec.name:>14}: {rows[-1].outcome} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    info["load_after"] = os.getloadavg()[0]
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**info, "rows": [asdict(r) for r in rows]}, indent=1) + "\n")
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
