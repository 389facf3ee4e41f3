"""The results: the Markdown table with its footnotes, the configuration and the per-model profiles."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from rlx_torch_import import _core, rlx_config
from tools.bench.measure import BUSY_OTHERS, PROFILE_RUNS, ModelResult
from tools.bench.peers import openvino_config

# Targets from the issue; a cell above its limit is marked ✗.
TARGETS: dict[str, float] = {
    "rlx_vs_eager": 1.0,
    "rlx_vs_ort": 1.5,
    "ours_vs_export": 0.25,
    "peak_vs_weights": 1.5,
}
MISS = " ✗"
TIMES = "\N{MULTIPLICATION SIGN}"
TARGETS_LINE = (
    f"target: RLX ≤ 1.0{TIMES} eager, ≤ 1.5{TIMES} ONNX Runtime; our stages ≤ 25% of torch.export; "
    f"peak RSS ≤ 1.5{TIMES} weight bytes (✗ marks a miss)"
)
TOP_IN_TABLE = 3
TOP_IN_SECTION = 8


def _ms(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def _ratio(v: float | None, limit: float | None = None, *, percent: bool = False) -> str:
    if v is None:
        return "—"
    if percent:
        text = f"{v * 100:.1f}%"
    else:
        text = f"{v:.2f}{TIMES}" if 0.1 <= v < 100 else f"{v:.2g}{TIMES}" if v < 0.1 else f"{v:.0f}{TIMES}"
    return text + (MISS if limit is not None and v > limit else "")


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def top_kernels(profile: Sequence[Sequence[Any]], n: int) -> list[tuple[str, float | None, int, float]]:
    """The `n` kernel kinds with the most time: (kind, share of the profiled time or None, calls, ms)."""
    total = sum(float(p[1]) for p in profile)
    rows = sorted(profile, key=lambda p: -float(p[1]))[:n]
    return [(str(k), (float(ms) / total) if total > 0 else None, int(c), float(ms)) for k, ms, c in rows]


def _kernels_cell(profile: Sequence[Sequence[Any]]) -> str:
    if not profile:
        return "—"
    parts = []
    for kind, share, calls, _ms in top_kernels(profile, TOP_IN_TABLE):
        parts.append(f"{kind} {share * 100:.0f}%" if share is not None else f"{kind} {TIMES}{calls}")
    return " · ".join(parts)


HEADER = (
    "model",
    "weights MiB",
    "parity",
    "BLAS",
    "RLX ms",
    "eager ms",
    "ORT ms",
    "OV ms",
    "RLX/eager",
    "ORT/eager",
    "OV/eager",
    "RLX/ORT",
    "RLX/OV",
    "export s",
    "ours s",
    "ours/export",
    "verify s",
    "peak RSS/weights",
    "RLX nodes",
    "ATen nodes",
    "ATen on fused",
    "top RLX kernels",
)


def _peer_cell(name: str, ms: float | None, remark: str | None, note: Callable[[str], str]) -> str:
    """A peer runtime's latency cell: its median, `n/a` with a footnote saying why there is none, or
    `skipped` (not run); a remark on an output that was timed all the same becomes a footnote too."""
    if ms is None:
        return "n/a" + note(f"{name}: {remark}") if remark else "skipped"
    return _ms(ms) + (note(f"{name}: {remark}") if remark else "")


def table(results: Sequence[ModelResult]) -> tuple[list[str], list[str]]:
    """The Markdown table (lines) and its numbered footnotes."""
    notes: list[str] = []

    def note(text: str) -> str:
        notes.append(text)
        return f" [{len(notes)}]"

    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in results:
        if r.error is not None:
            parity = "error" + note(f"{r.name}: {r.error}")
        elif r.ok:
            parity = "ok"
        else:
            parity = "**FAIL**" + note(f"{r.name}: parity failed: {r.parity}")
        ort = _peer_cell(r.name, r.ort_ms, r.ort_note, note)
        ov = _peer_cell(r.name, r.ov_ms, r.ov_note, note)
        for extra in r.notes:
            parity += note(f"{r.name}: {extra}")
        noisy, contended = r.noisy(), r.contended()
        if contended:
            parity += note(
                f"{r.name}: other processes kept cores busy while timing ({'; '.join(contended)} cores): "
                "these latencies are unreliable"
            )
        if noisy:
            load = ", ".join("?" if x is None else f"{x:.2f}" for x in r.loadavg)
            parity += note(f"{r.name}: timings noisy ({'; '.join(noisy)}; load average {load} before/after)")
        cells = [
            r.name,
            f"{r.weight_bytes / 2**20:.3g}" if r.weight_bytes is not None else "—",
            parity,
            str(r.config.get("blas", "—")),
            _ms(r.rlx_ms),
            _ms(r.eager_ms),
            ort,
            ov,
            _ratio(_div(r.rlx_ms, r.eager_ms), TARGETS["rlx_vs_eager"]),
            _ratio(_div(r.ort_ms, r.eager_ms)),
            _ratio(_div(r.ov_ms, r.eager_ms)),
            _ratio(_div(r.rlx_ms, r.ort_ms), TARGETS["rlx_vs_ort"]),
            _ratio(_div(r.rlx_ms, r.ov_ms)),
            f"{r.export_s:.2f}" if r.export_s is not None else "—",
            f"{r.ours_s:.3f}" if r.ours_s is not None else "—",
            _ratio(_div(r.ours_s, r.export_s), TARGETS["ours_vs_export"], percent=True),
            f"{r.timings_s['verify']:.3f}" if "verify" in r.timings_s else "—",
            _ratio(r.peak_ratio, TARGETS["peak_vs_weights"]),
            str(r.rlx_nodes) if r.rlx_nodes is not None else "—",
            str(r.aten_nodes) if r.aten_nodes is not None else "—",
            str(r.aten_on_fused) if r.aten_on_fused is not None else "—",
            _kernels_cell(r.profile),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines, notes


def _cpu_model() -> str:
    """The CPU's model name and its widest vector extensions, from /proc/cpuinfo."""
    name, flags = platform.processor() or platform.machine(), set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == (platform.processor() or platform.machine()):
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    isa = [f for f in ("avx512f", "avx512_bf16", "amx_tile", "avx2", "fma") if f in flags]
    return f"{name} ({', '.join(isa) or 'no AVX2'})"


def _versions() -> dict[str, str]:
    found = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "RLX": _core.rlx_version(),
        "rlx-torch-import": _package_version(),
    }
    for name in ("onnxruntime", "onnxscript", "openvino", "torchvision", "transformers"):
        try:
            found[name] = str(__import__(name).__version__)
        except Exception:
            found[name] = "not installed"
    return found


def _package_version() -> str:
    from rlx_torch_import import __version__

    return __version__


def _peer_settings(results: Sequence[ModelResult]) -> list[str]:
    """A configuration line with what OpenVINO's compiled model reports (the first model that has it)."""
    ov = next((r.peer_settings["OV"] for r in results if "OV" in r.peer_settings), None)
    if ov is None:
        return []
    return ["- OpenVINO CPU plugin, read back from the compiled model: " + ", ".join(f"{k} {v}" for k, v in ov.items())]


def configuration(args: argparse.Namespace, results: Sequence[ModelResult]) -> list[str]:
    """The configuration section: runtime settings, CPU, versions, date, method."""
    child = next((r.config for r in results if r.config), None)
    config = child or {**rlx_config.describe(), "torch_threads": args.threads}
    rss = next((r.rss_method for r in results if r.rss_method), "unavailable")
    lines = [
        f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"- CPU: {_cpu_model()}, {os.cpu_count()} logical cores, "
        f"{rlx_config.available_cpus()} available to this process; {platform.system()} {platform.release()}",
        f"- threads: {args.threads} for everyone: RLX pool (RLX_WORKERS), torch.set_num_threads, "
        f"ONNX Runtime intra_op_num_threads (inter_op 1), OpenVINO INFERENCE_NUM_THREADS (compile_model "
        f"properties {json.dumps(openvino_config(args.threads))})",
        *_peer_settings(results),
        f"- RLX runtime (rlx_config.describe() in the child): {json.dumps(config)}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()),
        f"- latency: median of {args.runs} runs after {args.warmup} warm-up runs, same inputs, one fresh process "
        f"per model; RLX profile: {PROFILE_RUNS} runs under RLX_PROFILE_THUNKS",
        f"- peak RSS: {rss}, during rti.from_torch (export, reference run, capture, lower, bundle, verify)",
        f"- 1-minute load average when the benchmark started: {getattr(args, 'load_start', None)} "
        f"(a row gets a footnote when other processes kept more than {BUSY_OTHERS} cores busy while it was timed)",
    ]
    return lines


def _peers_line(r: ModelResult) -> str:
    """The peer runtimes of one model: each one's max abs error against eager and its set-up time."""
    parts = []
    for key in sorted({*r.peer_errors, *r.peer_setup_s}):
        err = r.peer_errors.get(key)
        setup = r.peer_setup_s.get(key)
        text = f"{key} max abs error {err:.2e}" if err is not None else f"{key} output not compared"
        parts.append(text + (f" (export and compile {setup:.1f} s)" if setup is not None else ""))
    return "Peer runtimes against eager: " + "; ".join(parts) + "."


def profiles(results: Sequence[ModelResult]) -> list[str]:
    """Per model: peak memory, fused ops emitted, and the RLX kernel profile (top kinds)."""
    lines: list[str] = []
    for r in results:
        lines += ["", f"### {r.name}", "", f"{r.description}."]
        if r.error is not None:
            lines += ["", "Failed:", "", "```", r.error_detail or r.error, "```"]
        lines.append("")
        if r.rss_peak is not None and r.rss_before is not None:
            lines.append(
                f"Peak RSS {r.rss_peak / 2**20:.0f} MiB, {r.rss_before / 2**20:.0f} MiB before conversion, "
                f"weights {(r.weight_bytes or 0) / 2**20:.3g} MiB."
            )
        if r.others_cores:
            busy = ", ".join(f"{k} {v:.2f}" for k, v in r.others_cores.items())
            lines.append(f"Cores other processes kept busy while timing: {busy}.")
        if r.peer_errors or r.peer_setup_s:
            lines.append(_peers_line(r))
        if r.fused_ops:
            lines.append("Fused RLX nodes emitted: " + ", ".join(f"{k} {v}" for k, v in r.fused_ops.items()) + ".")
        if r.profile:
            total = sum(p[1] for p in r.profile)
            lines += [
                "",
                f"RLX kernels (per run, {total:.3f} ms profiled in all; RLX ms above: {_ms(r.rlx_ms)}):",
                "",
                "| kernel | ms/run | share | calls/run |",
                "|---|---|---|---|",
            ]
            for kind, share, calls, ms in top_kernels(r.profile, TOP_IN_SECTION):
                pct = f"{share * 100:.1f}%" if share is not None else "—"
                lines.append(f"| {kind} | {ms:.3f} | {pct} | {calls} |")
            if len(r.profile) > TOP_IN_SECTION:
                rest = r.profile[TOP_IN_SECTION:]
                kinds = f"{len(rest)} more kind" + ("s" if len(rest) != 1 else "")
                lines.append(f"| ({kinds}) | {sum(p[1] for p in rest):.3f} | | {sum(p[2] for p in rest)} |")
        elif r.error is None:
            lines += ["", "No RLX profile."]
    return lines


def render(args: argparse.Namespace, results: Sequence[ModelResult], notes: Sequence[str]) -> tuple[str, str]:
    """(what is printed, the full results.md)."""
    rows, footnotes = table(results)
    config = configuration(args, results)
    foot = [f"{i}. {text}" for i, text in enumerate([*footnotes, *notes], start=1)]
    # footnote numbers in the table count from 1 in `table`; registry notes follow them
    printed = [
        "## Configuration",
        "",
        *config,
        "",
        "## Results",
        "",
        *rows,
        "",
        TARGETS_LINE,
        "",
    ]
    if foot:
        printed += ["Footnotes:", "", *foot, ""]
    phases = [
        f"- {r.name}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.timings_s.items()) for r in results if r.timings_s
    ]
    if phases:
        printed += ["Conversion phases (s; report.timings_s):", "", *phases, ""]
    full = [
        "# rlx-torch-import benchmark",
        "",
        "Written by `python -m tools.bench` (`make bench`); see tools/bench/__init__.py for the columns.",
        "",
        *printed,
        "## Per-model RLX kernel profiles",
        *profiles(results),
        "",
    ]
    return "\n".join(printed), "\n".join(full)
