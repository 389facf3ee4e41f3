"""One BundleModel shared by threads: created in one thread, run from a pool, results bit-identical to
single-threaded runs (static bundles, dynamic bundles with their binding cache, and models whose
denormal modes differ)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti

THREADS = 8
RUNS = 320


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> tuple:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 16)).eval()
    root = tmp_path_factory.mktemp("threads")
    rti.from_torch(model, (torch.randn(4, 32),), root / "static", per_node=False)
    rti.from_torch(
        model,
        (torch.randn(4, 32),),
        root / "dynamic",
        dynamic_shapes=({0: Dim("batch", min=1, max=64)},),
        per_node=False,
    )
    return root / "static" / "bundle", root / "dynamic" / "bundle"


def _shared_runs(run, feeds: list, want: list) -> list[int]:
    """Run feeds[i % len] on THREADS threads RUNS times; the indices whose result differs from want."""

    def job(i: int) -> int | None:
        got = run(feeds[i % len(feeds)])
        return None if np.array_equal(got, want[i % len(feeds)]) else i

    with ThreadPoolExecutor(THREADS) as pool:
        return [i for i in pool.map(job, range(RUNS)) if i is not None]


def test_static_bundle_shared_by_threads(bundles) -> None:
    model = rti.BundleModel(bundles[0])  # created here, run from the pool's threads
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((4, 32)).astype(np.float32) for _ in range(16)]
    want = [model.run([x])["output"] for x in feeds]
    assert _shared_runs(lambda x: model.run([x])["output"], feeds, want) == []
    assert _shared_runs(lambda x: model.call(x), feeds, want) == []


def test_dynamic_bundle_and_its_binding_cache_shared_by_threads(bundles) -> None:
    # 6 batch sizes through a cache of 2: threads compile, evict and reuse bindings while others run
    model = rti.BundleModel(bundles[1], binding_cache=2)
    rng = np.random.default_rng(1)
    feeds = [rng.standard_normal((1 + i % 6, 32)).astype(np.float32) for i in range(24)]
    alone = rti.BundleModel(bundles[1])
    want = [alone.run([x])["output"] for x in feeds]
    assert _shared_runs(lambda x: model.run([x])["output"], feeds, want) == []
    assert len(model._compiled) <= 2 and model.compiles >= 6


def test_models_with_different_denormal_modes_run_side_by_side(tmp_path) -> None:
    # x * 1e-30 gives subnormals: flushed to zero by one model, kept by the other, on RLX's pool threads
    class Tiny(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1e-30

    rti.from_torch(Tiny(), (torch.rand(1 << 16) * 1e-8,), tmp_path / "c", per_node=False)
    flush = rti.BundleModel(tmp_path / "c" / "bundle", flush_denormals=True)
    keep = rti.BundleModel(tmp_path / "c" / "bundle", flush_denormals=False)
    x = (np.random.default_rng(2).random(1 << 16) * 1e-8).astype(np.float32)
    want = {True: flush.run([x])["output"], False: keep.run([x])["output"]}
    assert not want[True].any() and want[False].all()  # the two modes give different bits

    def job(i: int) -> bool:
        on = i % 2 == 0
        return np.array_equal((flush if on else keep).run([x])["output"], want[on])

    with ThreadPoolExecutor(THREADS) as pool:
        assert all(pool.map(job, range(64)))
