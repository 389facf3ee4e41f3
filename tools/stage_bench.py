"""Bundles with size stages: what a run costs beyond the same graph at a fixed size.

    python -m tools.stage_bench [--runs N]

Two small models whose sizes depend on tensor values (docs/design.md, decision aq): a VITS-like
duration expansion (`repeat_interleave` by predicted durations, then two Linear layers) and a masked
selection (`x[mask]`, then a Linear). Per model, in one process: the first run at a new size (size
stage + specialize + compile the main graph + bind weights + run), a run at a cached size (median),
and its parts, interleaved: the size stage alone and the main graph alone at that size (the cost of the
same model without a stage). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rlx_torch_import.api import from_torch
from rlx_torch_import.bundle.model import BundleModel


class Durations(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(torch.repeat_interleave(x, d, dim=0))))


class Masked(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.a = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return self.a(x[m])


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _row(name: str, model: BundleModel, feeds: list[dict[str, np.ndarray]], runs: int) -> str:
    first = []
    for feed in feeds:  # each a new size: stage, compile, bind, run
        start = time.perf_counter()
        model.run(feed)
        first.append((time.perf_counter() - start) * 1000)
    feed = feeds[-1]
    assert model._stages is not None
    stages, arrays = model._stages, model._arrays(feed)
    labels = model.binding(feed)
    graph = model.compile_binding(labels)
    at = {s.name: labels[s.label] for s in model.symbols}
    times: dict[str, list[float]] = {"cached": [], "stage": [], "main": []}
    for _ in range(runs):  # interleaved, so the machine's load falls on all three alike
        for key, fn in (
            ("cached", lambda: model.run(feed)),
            ("stage", lambda: stages.sizes(arrays)),
            ("main", lambda: model._run_compiled(graph, arrays, at)),
        ):
            times[key].append(_median_ms(fn, 1))
    cached, stage, main = (statistics.median(times[k]) for k in ("cached", "stage", "main"))
    return (
        f"| {name} | {labels} | {statistics.median(first):.2f} | {cached:.3f} | {stage:.3f} | {main:.3f} | "
        f"{cached - main:+.3f} |"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        x = torch.randn(32, 192)
        d = torch.randint(0, 8, (32,))
        from_torch(Durations(192).eval(), (x, d), Path(tmp) / "d", verify=False)
        model = BundleModel(Path(tmp) / "d" / "bundle")
        feeds = [{"x": x.numpy(), "d": (d + k).clamp(min=0).numpy()} for k in (1, 2, 3)]
        rows.append(_row("durations: 32 frames x192 -> sum(d) frames, 2 Linear", model, feeds, args.runs))
        x = torch.randn(512, 256)
        m = torch.rand(512) > 0.5
        from_torch(Masked(256).eval(), (x, m), Path(tmp) / "m", verify=False)
        model = BundleModel(Path(tmp) / "m" / "bundle")
        feeds = [{"x": x.numpy(), "m": (torch.rand(512) > p).numpy()} for p in (0.3, 0.5, 0.7)]
        rows.append(_row("mask: x[m] of 512x256, Linear", model, feeds, args.runs))
    print(
        "| model | size | first run at a new size (ms) | cached size (ms) | stage alone | main graph alone | "
        "run - main graph (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
