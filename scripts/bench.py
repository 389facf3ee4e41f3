"""Conversion cost per phase, RLX vs eager latency, and peak memory, as a table.

    make bench            (or: python scripts/bench.py [--runs N])

Speed and memory targets live here, not in timed tests.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import rlx_torch_import as rti
from models import MODEL_NAMES, make


def _latency(fn: object, runs: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - start) / runs * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    header = ("model", "export s", "capture s", "lower s", "bundle s", "verify s", "RLX ms/run", "torch ms/run", "ok")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in MODEL_NAMES:
        model, inputs = make(name)
        with tempfile.TemporaryDirectory() as tmp:
            report = rti.from_torch(model, inputs, Path(tmp) / name)
            bundle = rti.BundleModel(Path(tmp) / name / "bundle")
            feed = [t.numpy() for t in inputs]
            rlx_ms = _latency(lambda b=bundle, f=feed: b.run(f), args.runs)
        with torch.no_grad():
            torch_ms = _latency(lambda m=model, x=inputs: m(*x), args.runs)
        t = report.timings_s
        cells = [name, *(f"{t.get(p, 0):.3f}" for p in ("export", "capture", "lower", "bundle", "verify"))]
        cells += [f"{rlx_ms:.3f}", f"{torch_ms:.3f}", str(report.ok)]
        print("| " + " | ".join(cells) + " |")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process: {peak_mb:.0f} MiB (torch {torch.__version__})")


if __name__ == "__main__":
    main()
