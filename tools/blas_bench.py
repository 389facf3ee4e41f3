"""RLX on each BLAS provider: sgemm micro-benchmarks and the benchmark models, side by side.

    python -m tools.blas_bench [--models a,b] [--runs N] [--threads N] [--rounds N]

The core forwards RLX's CBLAS calls to a provider loaded at run time (src/blas.rs; `RTI_BLAS`);
this table is how the `auto` default is chosen and checked on each machine (docs/design.md,
"BLAS provider"):

1. **sgemm alone**: single-threaded `cblas_sgemm` (how RLX calls it: one call per Rayon worker
   tile) on each provider found, for the GEMM shapes RLX runs in the benchmark models (the
   im2col matrices of resnet18's convolutions, vit/BERT/Llama projections, a decode step), in
   GFLOP/s, best of `--rounds` rounds taken in turn (providers interleaved, so load on the machine
   hits each alike).
2. **models**: each benchmark model converted once, then its bundle run in a fresh process per
   provider (`RTI_BLAS=<name>`), rounds interleaved across providers; median latency (ms) and the
   largest difference from PyTorch's output (parity must hold on each).

Prints markdown (the `make bench` section "BLAS provider").
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rlx_torch_import import rlx_config
from tools import child_env

PROVIDERS = ("mkl", "openblas", "system")
# (label, M, K, N) of C[M,N] = A[M,K] B[K,N], row-major, as RLX calls sgemm.
SHAPES: tuple[tuple[str, int, int, int], ...] = (
    ("resnet18 conv3x3 64ch 56x56", 64, 576, 3136),
    ("resnet18 conv3x3 256ch 14x14", 256, 2304, 196),
    ("resnet18 conv3x3 512ch 7x7", 512, 4608, 49),
    ("vit fc1 197x768x3072", 197, 768, 3072),
    ("bert qkv 256x256x256", 256, 256, 256),
    ("llama mlp 128x512x1376", 128, 512, 1376),
    ("mlp 64x1024x4096", 64, 1024, 4096),
    ("decode step 1x512x1376", 1, 512, 1376),
)


def _sgemm(provider: str) -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    """The provider's single-threaded `cblas_sgemm` through ctypes, or None when not installed."""
    path = {"mkl": os.environ.get("RTI_BLAS_MKL"), "openblas": os.environ.get("RTI_BLAS_OPENBLAS")}.get(
        provider, "libopenblas.so.0"
    )
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    if provider == "mkl":
        lib.MKL_Set_Threading_Layer(1)  # sequential, as src/blas.rs sets it
        fn = lib.cblas_sgemm
    else:
        prefix = "scipy_" if provider == "openblas" else ""
        getattr(lib, f"{prefix}openblas_set_num_threads")(1)
        fn = getattr(lib, f"{prefix}cblas_sgemm")
    fn.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    fn.argtypes += [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    return fn


def sgemm_table(rounds: int) -> list[str]:
    """Markdown: GFLOP/s of single-threaded sgemm per shape and provider."""
    fns = {p: f for p in PROVIDERS if (f := _sgemm(p)) is not None}
    rng = np.random.default_rng(0)
    best: dict[tuple[str, str], float] = {}
    for _ in range(rounds):
        for label, m, k, n in SHAPES:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            c = np.zeros((m, n), np.float32)
            reps = max(2, int(3e8 / (m * k * n)))
            for p, fn in fns.items():
                args = (101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0, c.ctypes.data, n)
                fn(*args)
                start = time.perf_counter()
                for _ in range(reps):
                    fn(*args)
                gflops = 2 * m * k * n * reps / (time.perf_counter() - start) / 1e9
                best[label, p] = max(best.get((label, p), 0.0), gflops)
    head = "| sgemm shape (MxKxN) | " + " | ".join(f"{p} GFLOP/s" for p in fns) + " | fastest |"
    lines = [head, "|---" * (len(fns) + 2) + "|"]
    for label, m, k, n in SHAPES:
        cells = [best[label, p] for p in fns]
        top = max(fns, key=lambda p: best[label, p])
        lines.append(f"| {label} ({m}x{k}x{n}) | " + " | ".join(f"{v:.1f}" for v in cells) + f" | {top} |")
    return lines


def _child(bundle: str, runs: int) -> None:
    """In a fresh process with `RTI_BLAS` set: time the bundle, print JSON."""
    from safetensors.numpy import load_file

    from rlx_torch_import.bundle.model import BundleModel

    root = Path(bundle)
    ref = load_file(str(root.parent / "reference.safetensors"))
    feeds = {k[len("input.") :]: v for k, v in ref.items() if k.startswith("input.")}
    model = BundleModel(root)
    got = model.run(feeds)
    err = 0.0
    for key, want in ref.items():
        if key.startswith("output.") and key[len("output.") :] in got:
            err = max(err, float(np.max(np.abs(np.asarray(got[key[len("output.") :]], np.float64) - want))))
    for _ in range(2):
        model.run(feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        model.run(feeds)
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"ms": statistics.median(times), "err": err, "blas": rlx_config.blas()}))


def _run_child(bundle: Path, provider: str, runs: int, threads: int) -> dict[str, object] | None:
    env = child_env({**os.environ, "RTI_BLAS": provider, "RLX_WORKERS": str(threads)})
    cmd = [sys.executable, "-m", "tools.blas_bench", "--child", str(bundle), "--runs", str(runs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def model_table(models: Sequence[str], runs: int, threads: int, rounds: int) -> list[str]:
    """Markdown: each model's RLX latency per provider (fresh process each), parity error."""
    from rlx_torch_import.api import from_torch
    from tools.bench.models import registry

    specs, _ = registry()
    providers = [p for p in PROVIDERS if _sgemm(p) is not None]
    head = "| model | " + " | ".join(f"{p} ms" for p in providers) + " | auto picks | auto/system | max err |"
    lines = [head, "|---" * (len(providers) + 4) + "|"]
    auto = rlx_config.blas()["provider"]
    with tempfile.TemporaryDirectory(prefix="rti-blas-bench-") as tmp:
        for name in models:
            model, args = specs[name].make()
            report = from_torch(model, args, Path(tmp) / name, per_node=False)
            bundle = Path(tmp) / name / "bundle"
            ms: dict[str, list[float]] = {p: [] for p in providers}
            err = 0.0
            for _ in range(rounds):
                for p in providers:
                    out = _run_child(bundle, p, runs, threads)
                    if out is not None:
                        ms[p].append(float(out["ms"]))  # type: ignore[arg-type]
                        err = max(err, float(out["err"]))  # type: ignore[arg-type]
            best = {p: min(v) if v else None for p, v in ms.items()}
            cells = [f"{v:.2f}" if v is not None else "failed" for v in best.values()]
            picked, system = best.get(auto), best.get("system")
            ratio = f"{picked / system:.2f}x" if picked and system else "n/a"
            ok = "" if report.ok else " (parity FAILED)"
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {auto} | {ratio} | {err:.1e}{ok} |")
    return lines


def blas_section(models: Sequence[str], runs: int, threads: int, rounds: int) -> list[str]:
    """The whole section: the provider in use, the sgemm table and the model table."""
    info = rlx_config.blas()
    return [
        f"Provider in use: **{info['provider']}** ({info['detail']}; chosen by {info['chosen_by']}).",
        "",
        *sgemm_table(rounds),
        "",
        f"Models (RLX ms per provider, best of {rounds} fresh processes x median of {runs} runs, {threads} threads):",
        "",
        *model_table(models, runs, threads, rounds),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mlp,resnet18,mobilenet_v3_small,vit_b_16,bert,llama")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=rlx_config.available_cpus())
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.runs)
        return 0
    models = [m for m in args.models.split(",") if m]
    print("\n".join(blas_section(models, args.runs, args.threads, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
