"""Dynamic bundles: the cost of a run at a new binding against a run at a cached one.

    python -m tools.dynamic_bench [--threads N] [--runs N]

One conversion per model with a dynamic sequence length (and batch); then, per
binding, in one process: the first run at that binding (specialize the symbolic
graph, compile, bind the weights, run), the median of the runs after it (the
binding cached), and eager PyTorch at the same sizes. At the example sizes the
static bundle of the same model is timed too: a dynamic bundle must run as fast
as a static one (docs/design.md, decision z). Prints a markdown table (the
`make bench` section "Dynamic shapes").
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.export import Dim

from rlx_torch_import import rlx_config
from rlx_torch_import.api import from_torch
from rlx_torch_import.bundle.model import BundleModel
from tools import child_env


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _cases() -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...], Any, list[tuple[int, ...]]]]:
    """(name, model, example inputs, dynamic_shapes, input shapes to time)."""
    from tools.bench.models import _llama

    llama, (ids,) = _llama()
    cases = [
        ("llama (6 layers, d=512)", llama, (ids,), ({1: Dim("seq", min=2, max=512)},), [(1, 64), (1, 256), (1, 512)])
    ]
    from tests import models as test_models

    torch.manual_seed(0)
    block = test_models.MaskedBlock(causal=True).eval()
    ds = {"x": {0: Dim("batch", min=1, max=16), 1: Dim("seq", min=2, max=512)}}
    cases.append(("causal transformer block", block, (torch.randn(2, 64, 64),), ds, [(1, 32, 64), (8, 256, 64)]))
    return cases


def _feed(model: BundleModel, shape: tuple[int, ...], example: torch.Tensor) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    if example.dtype == torch.int64:
        return {model.input_names[0]: rng.integers(0, 32000, shape)}
    return {model.input_names[0]: rng.standard_normal(shape).astype(np.float32)}


def rows(runs: int) -> list[str]:
    """Markdown table rows, one per (model, binding)."""
    out = [
        "| model | binding | first run at a new binding ms | cached binding ms | new / cached | static bundle ms "
        "| eager ms |",
        "|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="rti-dyn-") as tmp:
        for index, (name, model, inputs, _, shapes) in enumerate(_cases()):
            # Converted in a child process: the conversion leaves this one's memory in a state where
            # fresh pages (a new binding's weights and arena) cost several times more to fault in.
            cmd = [sys.executable, "-m", "tools.dynamic_bench", "--convert", str(index), tmp]
            subprocess.run(cmd, check=True, capture_output=True, env=child_env())
            dynamic = BundleModel(Path(tmp) / "dyn" / "bundle", flush_denormals=True)
            static = BundleModel(Path(tmp) / "static" / "bundle", flush_denormals=True)
            example = tuple(inputs[0].shape)
            measured = []
            # RLX first, PyTorch after: torch's idle OpenMP threads spin for a while and would
            # slow the compile of the next binding.
            time.sleep(1.0)
            for shape in [example, *shapes]:
                feed = _feed(dynamic, shape, inputs[0])
                start = time.perf_counter()
                dynamic.run(feed)
                first = (time.perf_counter() - start) * 1e3
                cached = _median_ms(lambda f=feed, m=dynamic: m.run(f), runs)
                static_ms = _median_ms(lambda f=feed, m=static: m.run(f), runs) if shape == example else None
                measured.append((shape, feed, first, cached, static_ms))
            for shape, feed, first, cached, static_ms in measured:
                with torch.no_grad():
                    x = torch.from_numpy(feed[dynamic.input_names[0]])
                    eager = _median_ms(lambda x=x, m=model: m(x), runs)
                binding = ", ".join(f"{k}={v}" for k, v in dynamic.binding(feed).items())
                out.append(
                    f"| {name} | {binding}{' (example)' if shape == example else ''} | {first:.1f} | {cached:.1f} | "
                    f"{first / cached:.1f}x | {'-' if static_ms is None else f'{static_ms:.1f}'} | {eager:.1f} |"
                )
    return out


def convert(index: int, directory: Path) -> None:
    """Convert case `index` into `directory`/dyn (dynamic) and `directory`/static."""
    _, model, inputs, ds, _ = _cases()[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_torch(model, inputs, directory / "dyn", dynamic_shapes=ds, verify=False)
        from_torch(model, inputs, directory / "static", verify=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.dynamic_bench", description=__doc__)
    parser.add_argument("--convert", nargs=2, metavar=("CASE", "DIR"), help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--threads", type=int, default=None, help="RLX and torch threads (default: every core)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per binding (median; default 5)")
    args = parser.parse_args(argv)
    if args.convert:
        convert(int(args.convert[0]), Path(args.convert[1]))
        return 0
    threads = rlx_config.set_threads(args.threads)
    torch.set_num_threads(threads)
    print("\n".join(rows(args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
