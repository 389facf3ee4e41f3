"""The benchmark driver: one fresh child process per model, the extra tables, bench/results.md.

The columns and options are described in `tools/bench/__init__.py`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from rlx_torch_import import rlx_config
from tools import child_env
from tools.bench.measure import ModelResult, _loadavg, measure
from tools.bench.models import BenchModel, registry
from tools.bench.peers import short
from tools.bench.tables import render

DEFAULT_OUT = Path("bench") / "results.md"


def _child_env() -> dict[str, str]:
    """The environment for a child: without the OpenBLAS core type this process chose itself
    (the child chooses again, and `describe()` there says who did)."""
    env = child_env()  # the repository root on PYTHONPATH: the child is `python -m tools.bench`
    if rlx_config.describe().get("openblas_coretype_chosen_by") == "rlx-torch-import":
        env.pop("OPENBLAS_CORETYPE", None)
    env.pop("RLX_WORKERS", None)  # the child sets it from --threads
    return env


def run_child(spec: BenchModel, args: argparse.Namespace) -> ModelResult:
    """Measure one model in a fresh `python -m tools.bench --one NAME` process."""
    with tempfile.TemporaryDirectory(prefix="rti-bench-json-") as tmp:
        path = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "tools.bench",
            "--one",
            spec.name,
            "--json",
            str(path),
            "--runs",
            str(args.runs),
            "--warmup",
            str(args.warmup),
            "--threads",
            str(args.threads),
        ]
        if args.no_onnx:
            cmd.append("--no-onnx")
        if args.no_openvino:
            cmd.append("--no-openvino")
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=_child_env())
        except subprocess.TimeoutExpired:
            return ModelResult(name=spec.name, description=spec.description, error=f"timed out after {args.timeout} s")
        elapsed = time.perf_counter() - start
        if path.is_file():
            data = json.loads(path.read_text())
            result = ModelResult(**data)
            result.child_s = elapsed
            return result
        tail = [line for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()][-1:]
        why = tail[0] if tail else "no output"
        return ModelResult(
            name=spec.name,
            description=spec.description,
            error=f"the child process exited with {proc.returncode} and wrote no result: {short(why)}",
        )


def _parse(argv: Sequence[str] | None, names: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description="RLX vs PyTorch eager vs ONNX Runtime vs OpenVINO latency, conversion cost and peak memory, "
        "as a table.",
    )
    parser.add_argument("--models", help=f"comma-separated subset of: {', '.join(names)} (default: all)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per runtime (median reported; default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=rlx_config.available_cpus(),
        help="threads for RLX, PyTorch, ONNX Runtime and OpenVINO (default: every core available, %(default)s here)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results file (default: %(default)s)")
    parser.add_argument("--no-onnx", action="store_true", help="skip ONNX Runtime")
    parser.add_argument("--no-openvino", action="store_true", help="skip OpenVINO")
    parser.add_argument("--no-kernels", action="store_true", help="skip the RLX-kernels-alone table")
    parser.add_argument("--no-dynamic", action="store_true", help="skip the dynamic-bundle table")
    parser.add_argument("--no-per-node", action="store_true", help="skip the per-node parity cost table")
    parser.add_argument("--no-threads", action="store_true", help="skip the threads table")
    parser.add_argument("--no-blas", action="store_true", help="skip the BLAS provider table")
    parser.add_argument("--no-decode", action="store_true", help="skip the LLM decode table")
    parser.add_argument("--no-quantized", action="store_true", help="skip the quantized (int8/int4) table")
    parser.add_argument("--no-cli-wall", action="store_true", help="skip the fresh-process CLI wall time table")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per model (default %(default)s)")
    parser.add_argument("--list", action="store_true", help="list the model names and exit")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # child mode: measure one model...
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)  # ...and write its result here
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0 or args.threads < 1:
        parser.error("--runs and --threads must be at least 1, --warmup at least 0")
    selected = [n.strip() for n in (args.models or "").split(",") if n.strip()] or list(names)
    if args.one:
        selected = [args.one]
    unknown = [n for n in selected if n not in names]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; available: {', '.join(names)}")
    args.selected = selected
    return args


KERNELS_NOTE = (
    "Each kernel alone, at a shape from a benchmark model, in RLX (same core and settings as a bundle) and in "
    "PyTorch, same data and threads (`python -m tools.kernel_bench`; rows listed in "
    "docs/rlx-defects.md). These are the gaps that remain RLX's own."
)


def _child_table(args: argparse.Namespace, module: str, tag: str, what: str) -> str | None:
    """The markdown table `python -m tools.<module>` prints, measured in a fresh process."""
    tqdm.write(f"[{tag}] {what} ...", file=sys.stderr)
    cmd = [sys.executable, "-m", f"tools.{module}", "--threads", str(args.threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), check=False, timeout=args.timeout)
    if done.returncode != 0:
        tqdm.write(f"[{tag}] failed: {short(done.stderr)}", file=sys.stderr)
        return None
    return done.stdout.strip()


DYNAMIC_NOTE = (
    "A dynamic bundle compiles each binding once (`dynamic_bench.py`): the first run at a new binding "
    "specializes RLX's symbolic graph, compiles it and binds the weights; later runs at that binding are "
    "cached. At the example sizes the static bundle of the same model is timed beside it. Flush-to-zero on."
)


PER_NODE_NOTE = (
    "`from_torch` with and without full per-node parity (`verify_bench.py`), medians of 5 conversions each in "
    "one process: per-node parity runs PyTorch's intermediates from torch-ir, compiles and runs two debug builds "
    "of the graph (every intermediate an output; every node alone, fed PyTorch's inputs). By default "
    '(`per_node="auto"`) it runs when verification fails or when the graph\'s values hold at most 2^20 '
    'elements ("by default" column); `--per-node` / `--no-per-node` force it on or off.'
)


BLAS_NOTE = (
    "RLX on each BLAS provider the core can load (`blas_bench.py`; docs/design.md decision (ai)): "
    "single-threaded sgemm at the GEMM shapes of the benchmark models, then each model's bundle in a fresh "
    "process per provider (`RTI_BLAS=<name>`), providers interleaved round by round."
)


DECODE_NOTE = (
    "The workload LLM users run (`bench/decode.py`): the benchmark Llama exported as a decode step that takes "
    "and returns its KV cache (dynamic cache length), run token by token on the bundle "
    "(`rlx_torch_import.decode.generate`), in eager PyTorch and in ONNX Runtime, same threads; runtimes interleaved."
)


CLI_WALL_NOTE = (
    "What a CLI user waits for (`bench/cli_wall.py`): `rlx-torch-import model.py -o out` in a fresh process, "
    "with its phases, against a fresh process doing only `import torch` + `torch.export` + one eager reference run "
    "of the same model."
)


QUANTIZED_NOTE = (
    "PT2E static int8 (torchao, X86 Inductor quantizer) of the CNNs, weight-only int8/int4 (`quantize=`) of the "
    "benchmark Llama and BERT (`bench/quantized.py`): bundle weight bytes, latency and accuracy cost against the "
    "float bundle and the float model; parity is each conversion's own verdict against the quantized model's "
    "eager outputs. Targets: weight-only int8 <= 0.3x the float weight bytes and faster than float on the Llama, "
    "int4 <= 0.16x (✗ marks a miss)."
)


THREADS_NOTE = (
    "One `BundleModel` run by 1 thread, then by 4 (`thread_bench.py`), each run on its own input; calls on one "
    "compiled graph are serialised inside (RLX has one arena per graph and each run already uses its whole pool), "
    "so 4 threads gain only what overlaps a run (input checks and output copies, done without the GIL). Every "
    "threaded result is compared with the single-threaded one."
)


def _extra_tables(args: argparse.Namespace) -> list[tuple[str, str, str, str, str]]:
    """The sections measured by the other benches, each in a fresh process: (module, tag, what it
    measures, section title, note), those not switched off."""
    every = [
        (args.no_kernels, "kernel_bench", "kernels", "RLX kernels alone vs PyTorch"),
        (args.no_dynamic, "dynamic_bench", "dynamic", "new binding vs cached binding"),
        (args.no_per_node, "verify_bench", "per-node", "per-node parity cost"),
        (args.no_threads, "thread_bench", "threads", "one bundle, 4 threads vs 1"),
        (args.no_blas, "blas_bench", "blas", "RLX on each BLAS provider"),
        (args.no_decode, "bench.decode", "decode", "LLM decode loop with a KV cache"),
        (args.no_cli_wall, "bench.cli_wall", "cli-wall", "fresh-process CLI wall time"),
        (args.no_quantized, "bench.quantized", "quantized", "int8/int4 bundles against float"),
    ]
    titles = {
        "kernel_bench": ("RLX kernels alone vs PyTorch", KERNELS_NOTE),
        "dynamic_bench": ("Dynamic shapes: a new binding vs a cached one", DYNAMIC_NOTE),
        "verify_bench": ("Per-node parity: what it adds to a conversion", PER_NODE_NOTE),
        "thread_bench": ("Threads: one bundle shared by 4 threads against 1", THREADS_NOTE),
        "blas_bench": ("BLAS provider", BLAS_NOTE),
        "bench.decode": ("LLM decode: token by token with a KV cache", DECODE_NOTE),
        "bench.cli_wall": ("CLI wall time in a fresh process", CLI_WALL_NOTE),
        "bench.quantized": ("Quantized: int8 and int4 against float", QUANTIZED_NOTE),
    }
    return [(module, tag, what, *titles[module]) for off, module, tag, what in every if not off]


def _run_all(
    args: argparse.Namespace, models: dict[str, BenchModel]
) -> tuple[list[ModelResult], list[tuple[str, str, str]]]:
    """Every selected model, then every extra table, each in a fresh child process, under one progress bar
    (shown on a terminal): the models' results and the (title, note, table) sections measured."""
    extras = _extra_tables(args)
    results: list[ModelResult] = []
    sections: list[tuple[str, str, str]] = []
    total = len(args.selected)
    with tqdm(total=total + len(extras), desc="bench", unit="step", file=sys.stderr, disable=None) as bar:
        for i, name in enumerate(args.selected, start=1):
            bar.set_postfix_str(name)
            tqdm.write(f"[{i}/{total}] {name} ...", file=sys.stderr)
            result = run_child(models[name], args)
            status = result.error or ("ok" if result.ok else "parity FAIL")
            tqdm.write(f"[{i}/{total}] {name}: {status} ({result.child_s or 0:.0f} s)", file=sys.stderr)
            results.append(result)
            bar.update()
        for module, tag, what, title, note in extras:
            bar.set_postfix_str(tag)
            body = _child_table(args, module, tag, what)
            if body:
                sections.append((title, note, body))
            bar.update()
    return results, sections


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with --one, measure one model as a child); returns the exit status."""
    models, notes = registry()
    args = _parse(argv, list(models))
    if args.list:
        print("\n".join(f"{m.name}: {m.description}" for m in models.values()))
        return 0
    if args.one:
        result = measure(
            models[args.one],
            runs=args.runs,
            warmup=args.warmup,
            threads=args.threads,
            onnx=not args.no_onnx,
            openvino=not args.no_openvino,
        )
        text = json.dumps(asdict(result), indent=1)
        if args.json:
            args.json.write_text(text)
        else:
            print(text)
        return 0
    args.load_start = _loadavg()
    results, sections = _run_all(args, models)
    printed, full = render(args, results, notes)
    for title, note, body in sections:
        section = [f"## {title}", "", note, "", body, ""]
        printed += "\n" + "\n".join(section)
        full += "\n" + "\n".join(section)
    print(printed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(full)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
