"""Benchmark: RLX against PyTorch eager and ONNX Runtime, conversion cost, and peak memory.

Usage::

    make bench                                  (= python -m rlx_torch_import.bench)
    python -m rlx_torch_import.bench --models resnet18,llama --runs 50
    python -m rlx_torch_import.bench --list     (the model names)

Options: `--models a,b` (default: all), `--runs N` timed runs (default 20) after
`--warmup N` untimed ones (default 3), `--threads N` (default: every core this
process may use), `--out PATH` (default bench/results.md), `--no-onnx` (skip
ONNX Runtime), `--no-kernels` (skip the RLX-kernels-alone table), `--no-dynamic`
(skip the dynamic-bundle table, `dynamic_bench.py`), `--no-per-node` (skip the per-node
parity cost table, `verify_bench.py`), `--no-threads` (skip the 4-threads-vs-1 table,
`thread_bench.py`), `--timeout S` per model,
`--list` (the model names).

Every model runs in a fresh child process (`--one NAME --json PATH`), so memory
peaks and thread pools never leak from one model into the next; this process
only collects the children's JSON, prints the table, and writes `--out` (the
same table plus the configuration, each model's conversion phases and RLX
kernel profile, and the footnotes). In a child, RLX, PyTorch and ONNX Runtime
get the same inputs and the same thread count.

Columns (latencies in milliseconds, medians of `--runs` runs after warm-up;
ratios are plain factors: 2.00 = twice the time, below 1 = faster):

- **weights MiB**: bytes of the model's state_dict tensors (parameters and buffers).
- **parity**: `ok` when the RLX bundle verified against PyTorch (`report.ok`), `FAIL`
  otherwise, `error` when conversion raised (footnote).
- **RLX ms**: `BundleModel(bundle, threads=T).run(inputs)`, inputs as numpy arrays.
- **eager ms**: the PyTorch module under `torch.no_grad()` with `torch.set_num_threads(T)`.
- **ORT ms**: ONNX Runtime (CPUExecutionProvider, `intra_op_num_threads=T`,
  `inter_op_num_threads=1`) on `torch.onnx.export(..., dynamo=True)`; `n/a` with a
  footnote when the export or the session fails.
- **RLX/eager**, **ORT/eager**, **RLX/ORT**: latency ratios (below 1 = faster).
- **export s**: `torch.export` time inside `rti.from_torch` (seconds).
- **ours s** / **ours/export**: our own conversion stages (every phase of
  `report.timings_s` except "export", "reference" and "verify": capture, write
  torch-ir, lower, bundle, auto-decompose rounds) in seconds, and as a percentage
  of the export time.
- **verify s**: running the bundle once and comparing it with PyTorch.
- **peak RSS/weights**: (peak resident memory during conversion - resident memory
  just before it) / weight bytes.
- **RLX nodes**, **ATen nodes**: nodes we emitted (bundle meta.json `op_histogram`)
  and source ATen calls lowered (`aten_histogram`).
- **ATen on fused**: distinct source ATen nodes that produced at least one RLX node
  of a fused kind (`FUSED_OP_KINDS`).
- **top RLX kernels**: the three kernel kinds that take the most time in RLX's
  own per-thunk profiler (`BundleModel.profile`), as a share of the profiled time;
  for models too fast for its 0.1 ms resolution, their call counts (`xN`).
- **peak RSS/weights** includes `torch.export`'s own ~190 MiB, so models of a few
  MiB of weights cannot meet the 1.5x target whatever the converter does.

After the table: the RLX kernels alone against PyTorch (`kernel_bench.py`), the
gaps that remain RLX's own.

A cell that misses its target (`TARGETS`) is marked ✗.

Latencies need a quiet machine. A child measures how many cores other processes
kept busy while each runtime was timed (machine-wide busy time from /proc/stat
minus its own), and a row gets a footnote when that exceeds `BUSY_OTHERS`, or
when a median is more than `NOISY` times the fastest run. PyTorch's OpenMP
kernels suffer most when another process takes a core (10x and more on two cores).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import nn

from . import _core, rlx_config
from .api import from_torch
from .bundle.model import BundleModel

ModelFactory = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]

DEFAULT_OUT = Path("bench") / "results.md"

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

# Phases of `report.timings_s` that are not our own conversion stages.
NOT_OURS = ("export", "reference", "verify")

PROFILE_RUNS = 5
NOISY = 2.0  # a median above this multiple of the fastest run gets a footnote
BUSY_OTHERS = 0.25  # cores other processes may keep busy during a timing before it gets a footnote
TOP_IN_TABLE = 3
TOP_IN_SECTION = 8


# ---------------------------------------------------------------- models


def _randomize_bn(model: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial BatchNorm running stats and affine parameters (as tests/test_vision_models.py)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
    return model


class HFOutput(nn.Module):
    """A Hugging Face model whose forward(ids) returns one tensor: logits, or the last hidden state."""

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, **self.kwargs)
        logits = getattr(out, "logits", None)
        return logits if logits is not None else out.last_hidden_state


def _mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.LayerNorm(1024))
    return model.eval(), (torch.randn(64, 1024),)


def _torchvision(name: str, shape: tuple[int, ...], **kwargs: Any) -> ModelFactory:
    def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        head = getattr(getattr(model, "heads", None), "head", None)
        if isinstance(head, nn.Linear):  # torchvision zero-initializes the ViT head: every output would be 0
            nn.init.normal_(head.weight, std=0.02)
        return _randomize_bn(model).eval(), (torch.randn(*shape),)

    return make


def _bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HFOutput(transformers.BertModel(cfg))
    return model.eval(), (torch.randint(0, cfg.vocab_size, (2, 128)),)


def _llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=6,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1376,
        vocab_size=32000,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HFOutput(transformers.LlamaForCausalLM(cfg), use_cache=False)
    return model.eval(), (torch.randint(0, cfg.vocab_size, (1, 128)),)


@dataclass(frozen=True)
class BenchModel:
    """One benchmark entry: its name, what it is, and how to build it (model in eval mode, inputs)."""

    name: str
    description: str
    make: ModelFactory


def _tests_models() -> ModuleType | None:
    """The repository's tests/models.py, imported by path, or None outside a checkout."""
    path = Path(__file__).resolve().parents[2] / "tests" / "models.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_rti_bench_tests_models", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _test_model(module: ModuleType, name: str) -> ModelFactory:
    def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model, inputs = module.make(name)
        return model.eval(), tuple(inputs)

    return make


def registry() -> tuple[dict[str, BenchModel], list[str]]:
    """Every benchmark model by name, and notes on what had to be left out."""
    models = [
        BenchModel("mlp", "Linear(1024,4096)-GELU-Linear(4096,1024)-LayerNorm, batch 64", _mlp),
        BenchModel("resnet18", "torchvision resnet18, 1x3x224x224", _torchvision("resnet18", (1, 3, 224, 224))),
        BenchModel(
            "mobilenet_v3_small",
            "torchvision mobilenet_v3_small, 4x3x224x224",
            _torchvision("mobilenet_v3_small", (4, 3, 224, 224)),
        ),
        BenchModel(
            "vit_b_16",
            "torchvision vit_b_16(image_size=112), 1x3x112x112",
            _torchvision("vit_b_16", (1, 3, 112, 112), image_size=112),
        ),
        BenchModel("bert", "HF BertModel (4 layers, hidden 256, 4 heads), ids 2x128", _bert),
        BenchModel("llama", "HF LlamaForCausalLM (6 layers, hidden 512, 8/4 heads, vocab 32000), ids 1x128", _llama),
    ]
    notes: list[str] = []
    tests = _tests_models()
    if tests is None:
        notes.append("the test models (tests/models.py) were skipped: no tests/ folder beside this package")
    else:
        for name in tests.MODEL_NAMES:
            models.append(BenchModel(f"tests.{name}", f"tests/models.py make({name!r})", _test_model(tests, name)))
    return {m.name: m for m in models}, notes


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


def _short(err: BaseException | str, limit: int = 300) -> str:
    """One line: an exception as "Type: first line of its message", a string's first line; at most `limit`."""
    lines = str(err).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(err, BaseException):
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ort_latency(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    feed: list[np.ndarray],
    expected: np.ndarray | None,
    workdir: Path,
    threads: int,
    runs: int,
    warmup: int,
) -> tuple[list[float] | None, float | None, str | None]:
    """ONNX Runtime on the dynamo ONNX export: run times (ms; None if it failed), the cores other
    processes used meanwhile (`OtherLoad`), and why it failed or a remark on its output."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        return None, None, f"onnxruntime is not installed ({_short(e)})"
    path = workdir / "model.onnx"
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, inputs, str(path), dynamo=True, verbose=False)
    except Exception as e:
        return None, None, f"ONNX export failed: {_short(e)}"
    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        if len(names) != len(feed):
            return None, None, f"the ONNX model takes {len(names)} inputs, the module {len(feed)}"
        ort_feed = dict(zip(names, feed, strict=True))
        got = session.run(None, ort_feed)[0]  # the first warm-up run; its output is checked below
        for _ in range(warmup - 1):
            session.run(None, ort_feed)
        with OtherLoad() as load:
            times = timed_ms(lambda: session.run(None, ort_feed), runs, 0)
    except Exception as e:
        return None, None, f"ONNX Runtime failed: {_short(e)}"
    note = None
    if expected is not None:
        scale = float(np.max(np.abs(expected))) or 1.0
        if got.shape != expected.shape:
            note = f"ORT output shape {list(got.shape)} differs from eager {list(expected.shape)}"
        else:
            err = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64)))) / scale
            if not err <= 1e-3:
                note = f"ORT output differs from eager (max error {err:.2e} of the largest value)"
    return times, load.cores, note


def measure(spec: BenchModel, *, runs: int, warmup: int, threads: int, onnx: bool) -> ModelResult:
    """Convert, verify, time and profile one model in this process (meant for a fresh child)."""
    result = ModelResult(name=spec.name, description=spec.description, threads=threads)
    load_before = _loadavg()
    torch.set_num_threads(threads)
    rlx_config.set_threads(threads)  # before RLX starts (from_torch's verify compiles the bundle)
    try:
        model, inputs = spec.make()
    except Exception as e:
        result.error = f"could not build the model: {_short(e)}"
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
            result.error = _short(e)
            result.error_detail = "".join(traceback.format_exception_only(type(e), e)).strip()[:4000]
        expected: np.ndarray | None = None
        try:
            with torch.no_grad():
                out_t = model(*inputs)
                if isinstance(out_t, torch.Tensor):
                    expected = out_t.detach().numpy()
                result.eager_ms = result.time("eager", lambda: model(*inputs), runs, warmup)
        except Exception as e:
            result.notes.append(f"eager PyTorch failed: {_short(e)}")
        if onnx:
            times, others, result.ort_note = _ort_latency(model, inputs, feed, expected, workdir, threads, runs, warmup)
            if times is not None:
                result.ort_ms = result.record("ORT", times, others)
        if bundle is not None:
            try:
                prof = bundle.profile(feed, runs=PROFILE_RUNS)
                result.profile = [(k, float(ms), int(calls)) for k, (ms, calls) in prof.items()]
            except Exception as e:
                result.notes.append(f"RLX profile failed: {_short(e)}")
    result.config = {**rlx_config.describe(), "torch_threads": torch.get_num_threads()}
    result.loadavg = (load_before, _loadavg())
    return result


# ---------------------------------------------------------------- report


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
    "RLX ms",
    "eager ms",
    "ORT ms",
    "RLX/eager",
    "ORT/eager",
    "RLX/ORT",
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
        ort = _ms(r.ort_ms)
        if r.ort_ms is None:
            ort = "n/a" + note(f"{r.name}: {r.ort_note}") if r.ort_note else "skipped"
        elif r.ort_note:
            ort += note(f"{r.name}: {r.ort_note}")
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
            _ms(r.rlx_ms),
            _ms(r.eager_ms),
            ort,
            _ratio(_div(r.rlx_ms, r.eager_ms), TARGETS["rlx_vs_eager"]),
            _ratio(_div(r.ort_ms, r.eager_ms)),
            _ratio(_div(r.rlx_ms, r.ort_ms), TARGETS["rlx_vs_ort"]),
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
    name, flags = platform.processor() or platform.machine(), set()
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
    for name in ("onnxruntime", "onnxscript", "torchvision", "transformers"):
        try:
            found[name] = str(__import__(name).__version__)
        except Exception:
            found[name] = "not installed"
    return found


def _package_version() -> str:
    from . import __version__

    return __version__


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
        f"ONNX Runtime intra_op_num_threads (inter_op 1)",
        f"- RLX runtime (rlx_config.describe() in the child): {json.dumps(config)}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()),
        f"- latency: median of {args.runs} runs after {args.warmup} warm-up runs, same inputs, one fresh process "
        f"per model; RLX profile: {PROFILE_RUNS} runs under RLX_PROFILE_THUNKS",
        f"- peak RSS: {rss}, during rti.from_torch (export, reference run, capture, lower, bundle, verify)",
        f"- 1-minute load average when the benchmark started: {getattr(args, 'load_start', None)} "
        f"(a row gets a footnote when other processes kept more than {BUSY_OTHERS} cores busy while it was timed)",
    ]
    return lines


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
        "Written by `python -m rlx_torch_import.bench` (`make bench`); see the module docstring for the columns.",
        "",
        *printed,
        "## Per-model RLX kernel profiles",
        *profiles(results),
        "",
    ]
    return "\n".join(printed), "\n".join(full)


# ---------------------------------------------------------------- driver


def _child_env() -> dict[str, str]:
    """The environment for a child: without the OpenBLAS core type this process chose itself
    (the child chooses again, and `describe()` there says who did)."""
    env = dict(os.environ)
    if rlx_config.describe().get("openblas_coretype_chosen_by") == "rlx-torch-import":
        env.pop("OPENBLAS_CORETYPE", None)
    env.pop("RLX_WORKERS", None)  # the child sets it from --threads
    return env


def run_child(spec: BenchModel, args: argparse.Namespace) -> ModelResult:
    """Measure one model in a fresh `python -m rlx_torch_import.bench --one NAME` process."""
    with tempfile.TemporaryDirectory(prefix="rti-bench-json-") as tmp:
        path = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            "-m",
            "rlx_torch_import.bench",
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
            error=f"the child process exited with {proc.returncode} and wrote no result: {_short(why)}",
        )


def _parse(argv: Sequence[str] | None, names: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rlx_torch_import.bench",
        description="RLX vs PyTorch eager vs ONNX Runtime latency, conversion cost and peak memory, as a table.",
    )
    parser.add_argument("--models", help=f"comma-separated subset of: {', '.join(names)} (default: all)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per runtime (median reported; default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=rlx_config.available_cpus(),
        help="threads for RLX, PyTorch and ONNX Runtime (default: every core available, %(default)s here)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results file (default: %(default)s)")
    parser.add_argument("--no-onnx", action="store_true", help="skip ONNX Runtime")
    parser.add_argument("--no-kernels", action="store_true", help="skip the RLX-kernels-alone table")
    parser.add_argument("--no-dynamic", action="store_true", help="skip the dynamic-bundle table")
    parser.add_argument("--no-per-node", action="store_true", help="skip the per-node parity cost table")
    parser.add_argument("--no-threads", action="store_true", help="skip the threads table")
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
    "PyTorch, same data and threads (`python -m rlx_torch_import.kernel_bench`; rows listed in "
    "docs/rlx-defects.md). These are the gaps that remain RLX's own."
)


def _child_table(args: argparse.Namespace, module: str, tag: str, what: str) -> str | None:
    """The markdown table `python -m rlx_torch_import.<module>` prints, measured in a fresh process."""
    print(f"[{tag}] {what} ...", file=sys.stderr, flush=True)
    cmd = [sys.executable, "-m", f"rlx_torch_import.{module}", "--threads", str(args.threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_child_env(), check=False, timeout=args.timeout)
    if done.returncode != 0:
        print(f"[{tag}] failed: {_short(done.stderr)}", file=sys.stderr)
        return None
    return done.stdout.strip()


DYNAMIC_NOTE = (
    "A dynamic bundle compiles each binding once (`dynamic_bench.py`): the first run at a new binding "
    "specializes RLX's symbolic graph, compiles it and binds the weights; later runs at that binding are "
    "cached. At the example sizes the static bundle of the same model is timed beside it. Flush-to-zero on."
)


PER_NODE_NOTE = (
    "`from_torch` with and without per-node parity (`verify_bench.py`), medians of 5 conversions each in one "
    "process: per-node parity runs PyTorch's intermediates from torch-ir, compiles and runs two debug builds "
    "of the graph (every intermediate an output; every node alone, fed PyTorch's inputs) and draws the report's "
    "error plot. `--no-per-node` / `per_node=False` turn it off."
)


THREADS_NOTE = (
    "One `BundleModel` run by 1 thread, then by 4 (`thread_bench.py`), each run on its own input; calls on one "
    "compiled graph are serialised inside (RLX has one arena per graph and each run already uses its whole pool), "
    "so 4 threads gain only what overlaps a run (input checks and output copies, done without the GIL). Every "
    "threaded result is compared with the single-threaded one."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (or, with --one, measure one model as a child); returns the exit status."""
    models, notes = registry()
    args = _parse(argv, list(models))
    if args.list:
        print("\n".join(f"{m.name}: {m.description}" for m in models.values()))
        return 0
    if args.one:
        result = measure(
            models[args.one], runs=args.runs, warmup=args.warmup, threads=args.threads, onnx=not args.no_onnx
        )
        text = json.dumps(asdict(result), indent=1)
        if args.json:
            args.json.write_text(text)
        else:
            print(text)
        return 0
    args.load_start = _loadavg()
    results = []
    for i, name in enumerate(args.selected, start=1):
        print(f"[{i}/{len(args.selected)}] {name} ...", file=sys.stderr, flush=True)
        result = run_child(models[name], args)
        status = result.error or ("ok" if result.ok else "parity FAIL")
        print(f"[{i}/{len(args.selected)}] {name}: {status} ({result.child_s or 0:.0f} s)", file=sys.stderr, flush=True)
        results.append(result)
    kernels = None if args.no_kernels else _child_table(args, "kernel_bench", "kernels", "RLX kernels alone vs PyTorch")
    dynamic = (
        None if args.no_dynamic else _child_table(args, "dynamic_bench", "dynamic", "new binding vs cached binding")
    )
    per_node = None if args.no_per_node else _child_table(args, "verify_bench", "per-node", "per-node parity cost")
    shared = None if args.no_threads else _child_table(args, "thread_bench", "threads", "one bundle, 4 threads vs 1")
    printed, full = render(args, results, notes)
    for title, note, body in (
        ("RLX kernels alone vs PyTorch", KERNELS_NOTE, kernels),
        ("Dynamic shapes: a new binding vs a cached one", DYNAMIC_NOTE, dynamic),
        ("Per-node parity: what it adds to a conversion", PER_NODE_NOTE, per_node),
        ("Threads: one bundle shared by 4 threads against 1", THREADS_NOTE, shared),
    ):
        if body:
            section = [f"## {title}", "", note, "", body, ""]
            printed += "\n" + "\n".join(section)
            full += "\n" + "\n".join(section)
    print(printed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(full)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
