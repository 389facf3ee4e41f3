"""Run every example, one line each: `python examples/run_all.py [--out DIR] [--cargo] [NAME ...]`.

Each example runs in its own process (as a user runs it), writing into `DIR/<example>/` (default:
a new temporary folder). Prints `ok`/`FAILED`, the time and the output folder per example, and
exits 1 when any failed (the failing example's output is printed). `make examples` runs this.
NAME limits the run to those examples (`python examples/run_all.py cnn vit`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SKIP = {"run_all"}  # this runner; files starting with "_" are helpers


def examples() -> list[str]:
    """Every example's name (its file name without .py), sorted."""
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_") and p.stem not in SKIP)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="examples to run (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: a new temp folder)")
    parser.add_argument("--cargo", action="store_true", help="also build and test the generated crates (minutes)")
    args = parser.parse_args()
    names = args.names or examples()
    unknown = sorted(set(names) - set(examples()))
    if unknown:
        parser.error(f"no example {', '.join(unknown)}; there are: {', '.join(examples())}")
    root = args.out or Path(tempfile.mkdtemp(prefix="rti-examples-"))
    failed = []
    for name in names:
        out = root / name
        cmd = [sys.executable, str(HERE / f"{name}.py"), "--out", str(out)]
        if args.cargo and name == "crate_styles":
            cmd.append("--cargo")
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        took = time.perf_counter() - start
        print(f"{'ok    ' if done.returncode == 0 else 'FAILED'} {name:<22} {took:6.1f} s  {out}", flush=True)
        if done.returncode != 0:
            failed.append(name)
            print(f"--- {name} (exit {done.returncode}) ---\n{done.stdout}{done.stderr}", flush=True)
    print(f"{len(names) - len(failed)}/{len(names)} examples ok" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
