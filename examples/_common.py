"""Shared by the examples: the command line every example takes (`--out DIR`), where its files go
and the verdict it prints. Not an example itself (`run_all.py` skips files starting with `_`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any


def parse_args(doc: str | None, *, cargo: bool = False) -> argparse.Namespace:
    """`--out DIR` (default: a new temporary folder) and, for crate examples, `--cargo`."""
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: a new temp folder)")
    if cargo:
        parser.add_argument("--cargo", action="store_true", help="also build and test the crates (minutes)")
    args = parser.parse_args()
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="rti-example-"))
    return args


def show(report: Any, out: Path) -> bool:
    """Print what a user looks at after a conversion: the verdict with its per-output errors
    (`report.summary()`) and where the files went. Returns `report.ok`."""
    print(report.summary())
    print(f"  files: {out}  (bundle/, report.md, report.html, torch-ir.json, ...)")
    return bool(report.ok)


def finish(ok: bool) -> None:
    """Exit 0 when everything the example checked held, else 1 (what `run_all.py` reads)."""
    print("example: OK" if ok else "example: FAILED")
    sys.exit(0 if ok else 1)
