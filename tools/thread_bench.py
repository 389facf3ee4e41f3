"""One bundle shared by threads: throughput of 4 threads against 1.

    python -m tools.thread_bench [--threads N] [--runs N]

Per model, in one process: one `BundleModel`, then `--runs` runs on 1 thread and the same number
spread over 4 threads (a `ThreadPoolExecutor`, as a web server would), each run on its own input.
Calls on one compiled graph are serialised inside (`BundleModel` docstring), so 4 threads can only
gain what overlaps with a run: Python's work before and after it (input checks, output copies),
done without the GIL. Every result is compared with the single-threaded run of the same input.
Prints a markdown table (the `make bench` section "Threads").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rlx_torch_import import rlx_config
from rlx_torch_import.api import from_torch
from rlx_torch_import.bundle.model import BundleModel

WORKERS = 4


def _cases() -> list[tuple[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]]]:
    from tools.bench.models import _llama, _mlp, _torchvision

    return [
        ("mlp (1024-4096-1024, batch 64)", _mlp),
        ("resnet18 (1x3x224x224)", _torchvision("resnet18", (1, 3, 224, 224))),
        ("llama (6 layers, d=512, seq 128)", _llama),
    ]


def _feeds(model: BundleModel, example: torch.Tensor, count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    name, shape = model.input_names[0], tuple(example.shape)
    if example.dtype == torch.int64:
        return [{name: rng.integers(0, 32000, shape)} for _ in range(count)]
    return [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]


def measure(bundle: Path, example: torch.Tensor, runs: int) -> tuple[float, float, bool]:
    """(runs per second on 1 thread, on `WORKERS` threads, every threaded result equal to its
    single-threaded one)."""
    model = BundleModel(bundle)
    feeds = _feeds(model, example, runs)
    model.run(feeds[0])  # warm-up
    start = time.perf_counter()
    alone = [model.run(f) for f in feeds]
    one = runs / (time.perf_counter() - start)
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(model.run, feeds[:WORKERS]))  # the pool's threads started
        start = time.perf_counter()
        shared = list(pool.map(model.run, feeds))
        many = runs / (time.perf_counter() - start)
    same = all(all(np.array_equal(a[k], b[k]) for k in a) for a, b in zip(alone, shared, strict=True))
    return one, many, same


def rows(runs: int) -> list[str]:
    out = [
        f"| model | 1 thread runs/s | {WORKERS} threads runs/s | {WORKERS} / 1 | results equal |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="rti-threads-") as tmp:
        for i, (name, make) in enumerate(_cases()):
            model, inputs = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from_torch(model, inputs, Path(tmp) / str(i), verify=False)
            del model
            one, many, same = measure(Path(tmp) / str(i) / "bundle", inputs[0], runs)
            out.append(f"| {name} | {one:.1f} | {many:.1f} | {many / one:.2f}x | {'yes' if same else 'NO'} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.thread_bench", description=__doc__)
    parser.add_argument("--threads", type=int, default=None, help="RLX's pool size (default: every core)")
    parser.add_argument("--runs", type=int, default=40, help="runs per measurement (default 40)")
    args = parser.parse_args(argv)
    threads = rlx_config.set_threads(args.threads)
    torch.set_num_threads(threads)
    print("\n".join(rows(args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
