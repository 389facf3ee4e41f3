"""The GPU check's Python part (scripts/gpu_check.sh runs it on the GPU machine).

For each conversion directory under MODELS (scripts/gpu_models.py made them and verified them on
the CPU):

1. parity on the device: `rlx_torch_import.reverify(dir, device=...)`, the same budgets and report as
   on the CPU (report-<device>.md beside the bundle), one line per model;
2. median latency of the bundle (reference inputs, after warm-up) on the device and on the CPU;
3. with `--tf32` (default on for cuda): the same bundle under RLX's default CUDA math (TF32 GEMM and
   convolution, tensor-core attention) in a child process, its largest error against the reference
   and its median latency: the measurement the strict-float32 default rests on (docs/design.md, ad);
4. PyTorch eager on the same device, for scale, when the model can be rebuilt there.

    python scripts/gpu_check.py MODELS [--device cuda|cpu] [--runs N] [--no-tf32] [--no-eager]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

START = time.perf_counter()


def say(text: str) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s] {text}", flush=True)


def _feed(directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The example's inputs and PyTorch's outputs from reference.safetensors, by name."""
    from rlx_torch_import import safetensors_io
    from rlx_torch_import.layout import INPUT, OUTPUT, REFERENCE

    ref = safetensors_io.read(directory / REFERENCE)
    inputs = {k[len(INPUT) :]: v.to_numpy() for k, v in ref.items() if k.startswith(INPUT)}
    outputs = {k[len(OUTPUT) :]: v.to_numpy() for k, v in ref.items() if k.startswith(OUTPUT)}
    return inputs, outputs


def median_ms(run: Any, runs: int, warmup: int = 3) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tools/
    from tools.bench.measure import timed_ms

    return statistics.median(timed_ms(run, runs, warmup))


def bundle_latency(directory: Path, device: str, runs: int) -> tuple[float, dict[str, Any]]:
    """The bundle on `device`: its median ms, and its parity at the example by the product's own metric
    (`verify.compare.compare_output`): the largest abs error, that output's allowed error, whether every
    output passes."""
    from rlx_torch_import import BundleModel
    from rlx_torch_import.verify.compare import compare_output

    inputs, expected = _feed(directory)
    model = BundleModel(directory / "bundle", device=device)
    got = model.run(inputs)
    rows = [compare_output(n, got[n], want, str(got[n].dtype), str(want.dtype)) for n, want in expected.items()]
    worst = max(rows, key=lambda o: o.max_abs_error)
    parity = {"max_abs": worst.max_abs_error, "allowed": worst.allowed_abs_error, "ok": all(o.ok for o in rows)}
    return median_ms(lambda: model.run(inputs), runs), parity


def eager_latency(name: str, device: str, runs: int) -> float | None:
    """PyTorch eager on `device` for the model of that name (rebuilt from its config), or None."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_models import models

    make = models().get(name)
    if make is None:
        return None
    model, inputs = make()
    model, inputs = model.to(device), tuple(x.to(device) for x in inputs)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def run() -> None:
        with torch.no_grad():
            model(*inputs)
        sync()

    return median_ms(run, runs)


def child_tf32(directory: Path, runs: int) -> dict[str, Any]:
    """The bundle under RLX's default CUDA math, in a child process (RLX reads it once per process)."""
    env = dict(os.environ, RLX_CUDA_PARITY="0", RLX_CUDA_ATTENTION="auto")
    found = subprocess.run(
        [sys.executable, __file__, str(directory), "--child-tf32", "--runs", str(runs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if found.returncode != 0:
        return {"error": (found.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return json.loads(found.stdout.strip().splitlines()[-1])


def _num(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _tf32_error(tf: dict[str, Any]) -> str:
    """`max_abs / allowed PASS|FAIL` of the TF32 run, its error, or `-` when it did not run."""
    if "error" in tf:
        return str(tf["error"])
    if "max_abs" not in tf:
        return "-"
    return f"{tf['max_abs']:.3g} / {tf['allowed']:.3g} {'PASS' if tf['ok'] else 'FAIL'}"


def _cells(r: dict[str, Any]) -> list[str]:
    """One table row: model, verdict, device ms, cpu ms, ratio, eager ms, ratio, TF32 error and ms."""
    tf = r.get("tf32", {})
    eager = r.get("eager_ms")
    return [
        r["model"],
        r["verdict"],
        _num(r["device_ms"]),
        _num(r["cpu_ms"]),
        _num(r["device_ms"] / r["cpu_ms"], ".2f"),
        _num(eager),
        _num(r["device_ms"] / eager if eager else None, ".2f"),
        _tf32_error(tf),
        _num(tf.get("ms")),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", type=Path)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--runs", type=int, default=20, help="timed runs per measurement (median)")
    p.add_argument("--no-tf32", dest="tf32", action="store_false")
    p.add_argument("--no-eager", dest="eager", action="store_false")
    p.add_argument("--child-tf32", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()

    import rlx_torch_import as rti

    if args.child_tf32:  # one bundle, RLX's default CUDA math: print {"ms": ..., "max_abs": ..., "allowed", "ok"}
        ms, parity = bundle_latency(args.models, "cuda", args.runs)
        print(json.dumps({"ms": ms, **parity}))
        return 0

    from rlx_torch_import import _core
    from rlx_torch_import.devices import check_device

    say(f"rlx-torch-import {rti.__version__}, RLX {_core.rlx_version()}, python {sys.version.split()[0]}")
    try:
        info = check_device(args.device)
    except rti.RtiError as e:
        print(f"error: {e.explain()}", file=sys.stderr)
        return e.exit_code
    say(f"device: {' '.join([info.description, *info.settings])}")
    dirs = sorted(d for d in args.models.iterdir() if (d / "bundle").is_dir())
    rows = []
    failed = []
    for directory in dirs:
        name = directory.name
        say(f"{name}: verifying on {args.device}")
        try:
            report = rti.reverify(directory, device=args.device, per_node=True)
        except rti.RtiError as e:
            say(f"PARITY {name}: ERROR (exit {e.exit_code}) {e.message}")
            failed.append(name)
            continue
        except Exception:  # keep going: the other models' lines are still worth having
            say(f"PARITY {name}: INTERNAL ERROR")
            traceback.print_exc()
            failed.append(name)
            continue
        floats = [o for o in report.outputs if o.allowed_abs_error > 0]
        worst = max(floats, key=lambda o: o.max_abs_error / o.allowed_abs_error, default=None)
        verdict = "PASS" if report.ok else "FAIL"
        detail = (
            f"max_abs={worst.max_abs_error:.3g} (allowed {worst.allowed_abs_error:.3g}) cosine={worst.cosine:.8f}"
            if worst
            else "exact outputs"
        )
        divergence = f"; first divergence {report.first_divergence.node}" if report.first_divergence else ""
        say(f"PARITY {name}: {verdict} on {report.device}: {len(report.outputs)} output(s), worst {detail}{divergence}")
        if not report.ok:
            failed.append(name)
            for line in report.summary().splitlines()[1:]:
                print(f"    {line}")
        row: dict[str, Any] = {"model": name, "verdict": verdict}
        row["device_ms"], _ = bundle_latency(directory, args.device, args.runs)
        row["cpu_ms"] = bundle_latency(directory, "cpu", args.runs)[0] if args.device != "cpu" else row["device_ms"]
        if args.tf32 and args.device == "cuda":
            row["tf32"] = child_tf32(directory, args.runs)
        if args.eager:
            try:
                row["eager_ms"] = eager_latency(name, args.device, args.runs)
            except Exception as e:  # the device's torch/torchvision/transformers may build the model differently
                row["eager_ms"] = None
                say(f"{name}: no eager timing ({type(e).__name__}: {str(e)[:120]})")
        say(f"{name}: {json.dumps(row)}")
        rows.append(row)

    print()
    print(
        f"| model | parity on {args.device} | RLX {args.device} ms | RLX cpu ms | {args.device}/cpu "
        "| torch eager ms | RLX/eager | TF32 max_abs / allowed | TF32 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(_cells(r)) + " |")
    failures = f"; failed: {', '.join(failed)}" if failed else ""
    say(f"{len(rows) - len(failed)}/{len(dirs)} models pass on {args.device}{failures}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
