"""Measure one model: convert, verify, time RLX / eager / ONNX Runtime / OpenVINO, peak memory, node counts,
profile."""

from __future__ import annotations

import gc
import json
import os
import statistics
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from rlx_torch_import import rlx_config
from rlx_torch_import.api import from_torch
from rlx_torch_import.bundle.model import BundleModel
from tools.bench import peers
from tools.bench.models import BenchModel
from tools.bench.peers import short

# RLX ops (as we emit them into the HIR, before RLX's own fusion pass) that do the
# work of several ATen ops in one kernel: attention, the normalizations, rotary
# embedding, softmax, and convolution (whose bias and activation RLX fuses into
# the kernel), plus every `Fused*` op. Plain activations (Gelu, Silu, ...) are one
# ATen op each and are deliberately not counted.
FUSED_OP_KINDS: frozenset[str] = frozenset(
    {
        "Attention",
        "LayerNorm",
        "RmsNorm",
        "Rope",
        "Softmax",
        "Conv",
        "GroupNorm",
        "BatchNormInference",
        "FusedMatMulBiasAct",
    }
)
FUSED_OP_PREFIX = "Fused"

# Phases of `report.timings_s` that are not our own conversion stages.
NOT_OURS = ("export", "reference", "verify")

PROFILE_RUNS = 5
NOISY = 2.0  # a median above this multiple of the fastest run gets a footnote
BUSY_OTHERS = 0.25  # cores other processes may keep busy during a timing before it gets a footnote


# ---------------------------------------------------------------- analysis


def _op_name(op: Any) -> str:
    """HIR op -> name: {"Mir": "MatMul"} -> "MatMul", {"Mir": {"Activation": "Gelu"}} -> "Activation.Gelu"."""
    if isinstance(op, Mapping) and len(op) == 1 and "Mir" in op:
        op = op["Mir"]
    if isinstance(op, str):
        return op
    if isinstance(op, Mapping) and len(op) == 1:
        ((variant, payload),) = op.items()
        return f"{variant}.{payload}" if isinstance(payload, str) else str(variant)
    return str(op)


def is_fused(op_name: str) -> bool:
    """Whether an RLX op name (as `_op_name` writes it) is one of the fused kinds."""
    return op_name.split(".", 1)[0] in FUSED_OP_KINDS or op_name.startswith(FUSED_OP_PREFIX)


def _label(prov: Mapping[str, Any]) -> str:
    """The HIR node name a provenance entry gets: "<torch-ir node> <- <aten> @ module"."""
    module = prov.get("module_path") or ""
    return f"{prov['node']} <- {prov['aten']}" + (f" @ {module}" if module else "")


@dataclass
class NodeCounts:
    """RLX nodes emitted, ATen nodes lowered, and the ATen nodes that became fused RLX ops."""

    rlx: int
    aten: int
    aten_on_fused: int
    fused_ops: dict[str, int] = field(default_factory=dict)  # fused RLX op name -> RLX nodes
    join: str = "provenance order"  # how provenance was matched to HIR nodes


def node_counts(meta: Mapping[str, Any], hir: Mapping[str, Any]) -> NodeCounts:
    """Count nodes from a bundle's meta.json and model.hir.json (as parsed dicts).

    The HIR holds the graph inputs and parameters, then one `Mir` node per entry
    of meta's `provenance`, in the same order, each named with the entry's label
    ("<torch-ir node> <- <aten> @ module"). Entries are matched to HIR nodes in
    that order and the labels checked; if they disagree (an older or newer bundle
    layout), the torch-ir node is read from each HIR node's name instead.
    """
    mir = [n for n in hir.get("nodes", []) if isinstance(n.get("op"), Mapping) and "Mir" in n["op"]]
    prov = list(meta.get("provenance", {}).values())
    fused_ops: dict[str, int] = {}
    sources: set[str] = set()
    aligned = len(mir) == len(prov) and all(n.get("name") == _label(p) for n, p in zip(mir, prov, strict=False))
    for i, node in enumerate(mir):
        name = _op_name(node["op"])
        if not is_fused(name):
            continue
        fused_ops[name.split(".", 1)[0]] = fused_ops.get(name.split(".", 1)[0], 0) + 1
        if aligned:
            sources.add(prov[i]["node"])
        elif node.get("name"):
            sources.add(str(node["name"]).split(" <- ", 1)[0])
    op_hist = meta.get("op_histogram") or {}
    return NodeCounts(
        rlx=sum(op_hist.values()) if op_hist else len(mir),
        aten=sum((meta.get("aten_histogram") or {}).values()),
        aten_on_fused=len(sources),
        fused_ops=dict(sorted(fused_ops.items())),
        join="provenance order" if aligned else "HIR node names",
    )


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the model's state_dict tensors (parameters and buffers; shared tensors once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in model.state_dict(keep_vars=False).values():
        if not isinstance(t, torch.Tensor):
            continue
        key = (t.data_ptr(), t.numel())
        if key in seen and t.numel():
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


# ---------------------------------------------------------------- measurement


def _status_bytes(field_name: str) -> int | None:
    """A `kB` field of /proc/self/status, in bytes (None where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class PeakRss:
    """Peak resident memory over a `with` block, and the resident memory at its start.

    On Linux, writing "5" to /proc/self/clear_refs resets the high-water mark
    (VmHWM), which is then read at the end. Where that is not allowed, a thread
    samples VmRSS every 2 ms instead (`method` says which).
    """

    def __init__(self) -> None:
        self.before: int | None = None
        self.peak: int | None = None
        self.method = "unavailable"
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._sampled = 0

    def __enter__(self) -> PeakRss:
        gc.collect()
        self.before = _status_bytes("VmRSS")
        if self.before is None:
            return self
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.method = "VmHWM after clear_refs"
        except OSError:
            self.method = "VmRSS sampled every 2 ms"
            self._sampled = self.before
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()
        self.before = _status_bytes("VmRSS")
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            rss = _status_bytes("VmRSS")
            if rss is not None:
                self._sampled = max(self._sampled, rss)

    def __exit__(self, *exc: object) -> None:
        if self.before is None:
            return
        if self._sampler is not None:
            self._stop.set()
            self._sampler.join()
            self.peak = max(self._sampled, _status_bytes("VmRSS") or 0)
        else:
            self.peak = _status_bytes("VmHWM")


def timed_ms(fn: Callable[[], object], runs: int, warmup: int) -> list[float]:
    """Wall time of each of `runs` calls of `fn()` in milliseconds, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, runs)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy clock ticks of the whole machine, ticks of this process), from /proc; None without it."""
    try:
        values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        stat = Path("/proc/self/stat").read_text()
        own = stat[stat.rindex(")") + 2 :].split()
    except (OSError, ValueError, IndexError):
        return None
    # user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait (steal: the hypervisor)
    busy = sum(values[:3]) + sum(values[5:8])
    return busy, int(own[11]) + int(own[12])


class OtherLoad:
    """How many cores other processes kept busy during a `with` block (`cores`; None if unknown).

    Machine-wide busy time minus this process's own CPU time, from /proc, over the
    block's wall time. Clock ticks are coarse (10 ms), so blocks shorter than
    `MIN_S` are not judged.
    """

    MIN_S = 0.2

    def __init__(self) -> None:
        self.cores: float | None = None
        self._start: tuple[int, int] | None = None
        self._t0 = 0.0

    def __enter__(self) -> OtherLoad:
        self._start, self._t0 = _cpu_ticks(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        end = _cpu_ticks()
        if self._start is None or end is None or wall < self.MIN_S:
            return
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        others = (end[0] - self._start[0]) - (end[1] - self._start[1])
        self.cores = max(0.0, others / hz / wall)


def _loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class ModelResult:
    """Everything measured for one model (what a child process writes as JSON)."""

    name: str
    description: str = ""
    threads: int = 0
    weight_bytes: int | None = None
    ok: bool | None = None  # parity verdict; None when conversion did not finish
    error: str | None = None  # conversion (or set-up) failure, one line
    error_detail: str = ""  # its full exception text
    parity: str = ""  # report summary line(s) when parity fails
    timings_s: dict[str, float] = field(default_factory=dict)
    rss_before: int | None = None
    rss_peak: int | None = None
    rss_method: str = ""
    samples_ms: dict[str, list[float]] = field(default_factory=dict)  # runtime -> each timed run
    rlx_ms: float | None = None  # medians of samples_ms
    eager_ms: float | None = None
    ort_ms: float | None = None
    ort_note: str | None = None  # why there is no ORT number, or a remark on its output
    ov_ms: float | None = None
    ov_note: str | None = None  # why there is no OpenVINO number (an output that differs from eager: none)
    peer_errors: dict[str, float] = field(default_factory=dict)  # "ORT"/"OV" -> max abs error against eager
    peer_settings: dict[str, dict[str, str]] = field(default_factory=dict)  # runtime -> settings it reports
    peer_setup_s: dict[str, float] = field(default_factory=dict)  # runtime -> export + compile seconds
    rlx_nodes: int | None = None
    aten_nodes: int | None = None
    aten_on_fused: int | None = None
    fused_ops: dict[str, int] = field(default_factory=dict)
    profile: list[tuple[str, float, int]] = field(default_factory=list)  # kind, ms per run, calls per run
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    child_s: float | None = None
    loadavg: tuple[float | None, float | None] = (None, None)  # 1-minute load average before and after

    others_cores: dict[str, float] = field(default_factory=dict)  # runtime -> cores other processes used

    def time(self, runtime: str, fn: Callable[[], object], runs: int, warmup: int) -> float:
        """Time `fn` (`timed_ms`), keep the run times and the other processes' load; returns the median (ms)."""
        for _ in range(warmup):
            fn()
        with OtherLoad() as load:
            times = timed_ms(fn, runs, 0)
        return self.record(runtime, times, load.cores)

    def record(self, runtime: str, times: list[float], others: float | None = None) -> float:
        """Keep one runtime's run times (and the cores others used meanwhile); returns their median (ms)."""
        self.samples_ms[runtime] = times
        if others is not None:
            self.others_cores[runtime] = round(others, 3)
        return statistics.median(times)

    def contended(self) -> list[str]:
        """Runtimes timed while other processes kept more than BUSY_OTHERS cores busy."""
        return [f"{k} {v:.2f}" for k, v in self.others_cores.items() if v > BUSY_OTHERS]

    def noisy(self) -> list[str]:
        """Runtimes whose median run is more than NOISY times their fastest (the CPU was shared?)."""
        return [
            f"{k} median {statistics.median(v):.3g} ms vs fastest {min(v):.3g} ms"
            for k, v in self.samples_ms.items()
            if v and min(v) > 0 and statistics.median(v) > NOISY * min(v)
        ]

    @property
    def export_s(self) -> float | None:
        return self.timings_s.get("export")

    @property
    def ours_s(self) -> float | None:
        if not self.timings_s:
            return None
        return sum(v for k, v in self.timings_s.items() if k not in NOT_OURS)

    @property
    def peak_ratio(self) -> float | None:
        if self.rss_peak is None or self.rss_before is None or not self.weight_bytes:
            return None
        return (self.rss_peak - self.rss_before) / self.weight_bytes


def measure(
    spec: BenchModel, *, runs: int, warmup: int, threads: int, onnx: bool, openvino: bool = True
) -> ModelResult:
    """Convert, verify, time and profile one model in this process (meant for a fresh child); `onnx` and
    `openvino` time those peer runtimes too (each one's failure is a note in the result, never an exception)."""
    result = ModelResult(name=spec.name, description=spec.description, threads=threads)
    load_before = _loadavg()
    torch.set_num_threads(threads)
    rlx_config.set_threads(threads)  # before RLX starts (from_torch's verify compiles the bundle)
    try:
        model, inputs = spec.make()
    except Exception as e:
        result.error = f"could not build the model: {short(e)}"
        return result
    result.weight_bytes = weight_bytes(model)
    feed = [t.detach().numpy() for t in inputs]
    with tempfile.TemporaryDirectory(prefix="rti-bench-") as tmp:
        workdir = Path(tmp)
        out = workdir / spec.name
        bundle: BundleModel | None = None
        try:
            with PeakRss() as rss:
                report = from_torch(model, inputs, out)
            result.rss_before, result.rss_peak, result.rss_method = rss.before, rss.peak, rss.method
            result.timings_s = {k: float(v) for k, v in report.timings_s.items()}
            result.ok = bool(report.ok)
            if not report.ok:
                result.parity = " / ".join(line.strip() for line in report.summary().splitlines()[:3])
            meta = json.loads((out / "bundle" / "meta.json").read_text())
            hir = json.loads((out / "bundle" / "model.hir.json").read_text())
            counts = node_counts(meta, hir)
            result.rlx_nodes, result.aten_nodes, result.aten_on_fused = counts.rlx, counts.aten, counts.aten_on_fused
            result.fused_ops = counts.fused_ops
            if counts.join != "provenance order":
                result.notes.append(f"fused-op count joined provenance to the HIR by {counts.join}")
            loaded = BundleModel(out / "bundle", threads=threads)
            result.rlx_ms = result.time("RLX", lambda: loaded.run(feed), runs, warmup)
            bundle = loaded
        except Exception as e:
            result.error = short(e)
            result.error_detail = "".join(traceback.format_exception_only(type(e), e)).strip()[:4000]
        expected: np.ndarray | None = None
        try:
            with torch.no_grad():
                out_t = model(*inputs)
                if isinstance(out_t, torch.Tensor):
                    expected = out_t.detach().numpy()
                result.eager_ms = result.time("eager", lambda: model(*inputs), runs, warmup)
        except Exception as e:
            result.notes.append(f"eager PyTorch failed: {short(e)}")
        peers.time_peers(result, model, inputs, feed, expected, workdir, runs, warmup, onnx=onnx, openvino=openvino)
        if bundle is not None:
            try:
                prof = bundle.profile(feed, runs=PROFILE_RUNS)
                result.profile = [(k, float(ms), int(calls)) for k, (ms, calls) in prof.items()]
            except Exception as e:
                result.notes.append(f"RLX profile failed: {short(e)}")
    result.config = {**rlx_config.describe(), "torch_threads": torch.get_num_threads()}
    result.loadavg = (load_before, _loadavg())
    return result
