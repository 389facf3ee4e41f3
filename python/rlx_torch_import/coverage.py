"""Measure Core ATen coverage in every dtype: OpInfo samples, one op per module, converted and verified.

    rlx-torch-import coverage [--out docs] [--dtypes float32,int64,...] [--samples-per-op 3]
        [--samples-per-dtype 1] [--ops add,mul] [--extra-samples FILE.py] [--jobs N] [--sample-timeout S]

For each PyTorch OpInfo entry (needs the `expecttest` package) and each dtype it supports on CPU among
float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8 and bool (`--dtypes` narrows
them), the first samples (`--samples-per-op` in float32, `--samples-per-dtype` in every other dtype;
generated with a fixed seed, index-typed arguments such as gather's index as OpInfo makes them) are
wrapped in a one-op module, exported, converted with the default automatic decomposition fallback,
and verified against eager PyTorch. Samples whose generation or eager run raises, or whose eager
result is entirely NaN (a verdict would prove nothing), are skipped and counted (PyTorch's limits,
not ours). Project samples (`--extra-samples`) run once, in their own
dtypes (a sample's dtype is its first input's).

Each sample is converted at the `core` level, and also at the `aten` level when its aten-level graph
holds Core ATen ops its core-level graph does not: torch's own Core ATen decomposition table
decomposes some ops tagged core (reflection/replication pads, avg_pool1d, fill.Scalar, squeeze.dim,
var.dim, ...), so no `core` export can contain them. Each Core ATen op (ops tagged `torch.Tag.core`)
gets, per dtype and over all dtypes, the best status of the runs that exercised it, and the level
that verdict came from. An op that a sample's graph holds beside an unsupported op is `blocked` by
that sample (not reached), not unsupported itself. Ops that can never verify natively here carry
their reason (`NOT_NATIVE`).

The work fans out over `--jobs` spawned worker processes (default: one per CPU, one thread each); a
task is one OpInfo with all its dtypes, or a slice of the project samples. A sample that kills its
worker (RLX can abort the process on memory corruption) does not stop the run: the pool is
replaced, each interrupted task resumes after the samples it finished, and every sample that was in
flight is re-run at the end alone in a fresh process, where one that kills it too is recorded as
`crashed` with the process's last words. Each death is listed with the samples that worker ran just
before (heap corruption can surface later than the sample that caused it). A sample running longer
than `--sample-timeout` seconds has its worker killed and is recorded as `timeout`. `--jobs 0` runs
everything in this process instead (no isolation; for debugging and tests).

Writes `coverage.md` (headline, per-dtype summary, Core ATen op x dtype table, every parity
failure, unsupported op x dtype and crash with its reason, every failing sample, worker deaths) and
`coverage.json` (meta; per Core ATen op its best status and per dtype its best status plus the
failing runs of graphs holding that op alone; per sample opinfo, index, dtype, status, reason, ops,
level).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from .dtypes import RECORDS

# OpInfos whose output is uninitialized memory or random: no parity verdict is meaningful.
NONDETERMINISTIC = (
    "empty",
    "rand",
    "randn",
    "randint",
    "bernoulli",
    "normal",
    "multinomial",
    "dropout",
    "uniform",
    "exponential",
    "geometric",
    "cauchy",
    "log_normal",
    "poisson",
)

# Core ATen ops no sample can verify natively here, and why; this replaces the observed reason
# whenever such an op is not verified natively (each was checked to be the actual cause).
_RANDOM = "random output; no deterministic parity"
_SYMBOLIC = (
    "returns a symbolic size: appears only in graphs with data-dependent or dynamic shapes,"
    " which are unsupported (static shapes only)"
)
NOT_NATIVE = {
    "aten.rand.default": _RANDOM,
    "aten.randn.default": _RANDOM,
    "aten.randperm.default": _RANDOM,
    "aten._fft_r2c.default": "complex output: RLX has no complex dtype",
    "aten._fft_c2r.default": "complex input: RLX has no complex dtype",
    "aten.nonzero.default": "data-dependent output shape; RLX graphs have static shapes",
    "aten.sym_size.int": _SYMBOLIC,
    "aten.sym_numel.default": _SYMBOLIC,
    "aten.sym_stride.int": _SYMBOLIC,
    "aten.sym_storage_offset.default": _SYMBOLIC,
    "aten.atan2.out": (
        "out= variant: `core` export functionalizes it to atan2.default; at `aten` level it writes `out`"
        " in place, which only the decomposition fallback (which functionalizes) lowers soundly"
    ),
}

# The dtypes OpInfo samples are drawn in, in table order, with their column headers.
DTYPES: dict[str, torch.dtype] = {
    d: getattr(torch, d)
    for d in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
}
SHORT = {d: RECORDS[d].short for d in DTYPES}

# Best first: a Core ATen op (per dtype, and over all dtypes) takes the best status any run reached.
STATUSES = (
    "verified",
    "verified-decomposed",
    "parity-failed",
    "unsupported",
    "export-failed",
    "error",
    "timeout",
    "crashed",
    "blocked",
    "no-sample",
)
# One compact cell per op x dtype in coverage.md.
CELLS = {
    "verified": "ok",
    "verified-decomposed": "dec",
    "parity-failed": "FAIL",
    "unsupported": "uns",
    "export-failed": "exp",
    "error": "err",
    "timeout": "time",
    "crashed": "crash",
    "blocked": "blk",
    "no-sample": "—",
}
OTHER = ("export-failed", "error", "timeout", "crashed", "blocked")
SKIPPED = "skipped"  # a sample-level status only: generation or eager PyTorch raised, or gave only NaN
DEFAULT_SAMPLE_TIMEOUT = 300.0


@dataclass
class SampleResult:
    """One run of one sample: which ops its graph holds and how the conversion ended."""

    opinfo: str
    index: int  # the sample's index in OpInfo's generator; -1 for the (OpInfo, dtype) pair itself
    dtype: str
    status: str
    reason: str
    ops: list[str] = field(default_factory=list)  # every op of the graph converted (all, not only core)
    decomposed: list[str] = field(default_factory=list)
    level: str = "core"
    unsupported: dict[str, str] = field(default_factory=dict)  # op -> why, for status "unsupported"


def core_aten_ops() -> list[str]:
    """Every ATen overload tagged `core`, as torch prints it."""
    ops = []
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not hasattr(packet, "overloads"):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags:
                ops.append(str(op))
    return sorted(ops)


@cache
def _core_set() -> frozenset[str]:
    return frozenset(core_aten_ops())


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _OneOp(torch.nn.Module):
    """Call an OpInfo op with the sample's non-tensor arguments baked in."""

    def __init__(self, op: Any, spec: Any, leaves: list[Any]) -> None:
        super().__init__()
        self.op, self.spec, self.leaves = op, spec, leaves

    def forward(self, *tensors: torch.Tensor) -> Any:
        it = iter(tensors)
        leaves = [next(it) if isinstance(v, torch.Tensor) else v for v in self.leaves]
        inp, args, kwargs = torch.utils._pytree.tree_unflatten(leaves, self.spec)
        return self.op(inp, *args, **kwargs)


def _brief(e: BaseException, n: int = 200) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:n] if lines else ''}"


def _ops(ep: torch.export.ExportedProgram) -> list[str]:
    return sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)})


def _level_ops(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], level: str) -> list[str]:
    """Ops of the sample's graph at `level` (torch.export, then that level's decomposition)."""
    from .frontend.export import export_program

    return _ops(export_program(module, inputs, decomposition=level))


def _ir_ops(directory: Path) -> list[str] | None:
    """Ops of a converted torch-ir; None when the automatic fallback changed its graph (the ops that
    count are those before it, not its decomposition's products)."""
    from . import torchir

    ir = torchir.load(directory)
    return None if ir.auto_decomposed else sorted({n.target for n in ir.nodes})


def _cache_cia_op_scan() -> None:
    """Make torch.export's scan of every CompositeImplicitAutograd op a once-per-process cost.

    `run_decompositions` rescans the whole dispatcher on every call (torch does not cache it because
    Python code may register more ops later); that is a third of a coverage sample's time. In a
    coverage worker nothing registers ops after start-up, so one scan serves every sample. Only
    workers call this; a torch without these internals is left as it is."""
    try:
        from torch._export import utils
        from torch.export import decomp_utils, exported_program
    except ImportError:
        return
    scan = getattr(utils, "_collect_all_valid_cia_ops", None)
    users = [m for m in (exported_program, decomp_utils) if getattr(m, "_collect_all_valid_cia_ops", None) is scan]
    if scan is None or not users:
        return
    once = cache(lambda: frozenset(scan()))

    def cached() -> set[Any]:
        return set(once())  # callers get their own set, as from the original

    for m in users:
        m._collect_all_valid_cia_ops = cached  # type: ignore[attr-defined]


class _Journal:
    """What a task has done so far, one JSON line per event, flushed as it happens: when the worker
    process dies, the parent reads it to keep the finished samples and find the one in flight.

    In a worker, fd 2 goes to `<journal>.err` for the task, so a dying process's last words (RLX's
    abort message, faulthandler's) can be quoted; a marker line precedes each sample's."""

    MARK = "@@rlx-coverage sample "

    def __init__(self, path: Path, redirect_stderr: bool) -> None:
        self.path, self.redirect = path, redirect_stderr
        self.results: list[SampleResult] = []
        self._saved_fd = -1

    def __enter__(self) -> _Journal:
        self._file = self.path.open("a", buffering=1)
        if self.redirect:
            sys.stderr.flush()
            self._saved_fd = os.dup(2)
            err = os.open(f"{self.path}.err", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(err, 2)
            os.close(err)
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()
        if self._saved_fd >= 0:
            sys.stderr.flush()
            os.dup2(self._saved_fd, 2)
            os.close(self._saved_fd)

    def _write(self, event: dict[str, Any]) -> None:
        self._file.write(json.dumps(event) + "\n")
        self._file.flush()

    def begin(self, key: str, label: str, dtype: str) -> None:
        if self.redirect:
            print(f"\n{self.MARK}{key}", file=sys.stderr, flush=True)
        self._write({"begin": key, "label": label, "dtype": dtype, "pid": os.getpid(), "t": time.time()})

    def stage(self, key: str, level: str, ops: list[str]) -> None:
        self._write({"stage": key, "level": level, "ops": ops})

    def record(self, key: str, result: SampleResult) -> None:
        self.results.append(result)
        self._write({"result": key, "r": asdict(result)})

    def done(self, key: str) -> None:
        self._write({"done": key})


@dataclass
class _JournalState:
    results: dict[str, list[SampleResult]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    inflight: str = ""  # the unit begun and not done, its sample's label and dtype
    label: str = ""
    dtype: str = ""
    pid: int = 0
    started: float = 0.0
    level: str = ""  # the conversion level in flight, and its graph's ops
    ops: list[str] = field(default_factory=list)


def _read_journal(path: Path) -> _JournalState:
    st = _JournalState()
    if not path.is_file():
        return st
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by the dying process
            continue
        if "begin" in event:
            st.inflight, st.label, st.dtype = event["begin"], event["label"], event["dtype"]
            st.pid, st.started, st.level, st.ops = event["pid"], event["t"], "", []
        elif "stage" in event:
            st.level, st.ops = event["level"], event["ops"]
        elif "result" in event:
            st.results.setdefault(event["result"], []).append(SampleResult(**event["r"]))
        elif "done" in event:
            st.done.add(event["done"])
            st.inflight = ""
    return st


def _last_words(path: Path) -> str:
    """The dead worker's stderr since the sample in flight began: native abort messages and
    faulthandler's `Fatal Python error` line, without the Python frames."""
    try:
        text = Path(f"{path}.err").read_text(errors="replace")
    except OSError:
        return ""
    text = text.rsplit(_Journal.MARK, 1)[-1].split("\n", 1)[-1]
    keep: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or line.startswith((" ", "\t")) or s.startswith(("Current thread", "Thread 0x", "Extension modules")):
            continue
        if s.startswith("Stack (most recent"):
            continue
        if "Warning:" in s or s.startswith("warnings.warn"):
            continue
        keep.append(s)
    return " / ".join(keep[-4:])[:300]


def _convert(
    name: str,
    index: int,
    dtype: str,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    level: str,
    ops: list[str] | None,
) -> SampleResult:
    """Convert and verify one sample at one decomposition level; never raises. The result's ops are
    those of the converted torch-ir; when conversion stops before writing it, or the automatic
    fallback decomposed some, `ops` or else those of the level's graph, decomposed again here."""
    from . import api
    from .errors import ExportError, UnsupportedOpsError

    def result(status: str, reason: str, decomposed: list[str] | None = None) -> SampleResult:
        found = ops
        if found is None:
            try:
                found = _level_ops(module, inputs, level)
            except Exception:
                found = []
        reason = re.sub(re.escape(tmp) + r"[^\s:]*: ?", "", reason)  # this run's scratch paths say nothing
        return SampleResult(name, index, dtype, status, reason, found, decomposed or [], level)

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "o"
        try:
            report = api.from_torch(module, inputs, out, decomposition=level, name="sample")
        except UnsupportedOpsError as e:
            r = result("unsupported", "; ".join(sorted({f"{i.target}: {i.reason}" for i in e.items}))[:300])
            for i in e.items:
                r.unsupported.setdefault(i.target, i.reason[:200])
            return r
        except ExportError as e:
            return result("export-failed", e.message[:200])
        except Exception as e:
            return result("error", f"{type(e).__name__}: {str(e)[:200]}")
        try:
            ops = _ir_ops(out) or ops
        except Exception:  # the report stands; the ops come from a fresh decomposition
            pass
    if not report.ok:
        why = "; ".join(r for o in report.outputs for r in o.reasons)[:300]
        return result("parity-failed", why, report.auto_decomposed_ops)
    status = "verified-decomposed" if report.auto_decomposed_ops else "verified"
    return result(status, "", report.auto_decomposed_ops)


def run_sample(
    name: str,
    index: int,
    dtype: str,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    journal: _Journal | None = None,
    key: str = "",
    exact_ops: bool = False,
) -> list[SampleResult]:
    """Convert and verify one sample at `core`, and at `aten` only when that graph has Core ATen ops
    the core-level graph lacks (ops torch's core table decomposes); never raises. A sample whose eager
    run raises is `skipped`. With a journal, each level's ops are noted before it runs (at `core`, the
    aten-level graph's unless `exact_ops` asks for the core decomposition first) and each result after."""
    results: list[SampleResult] = []

    def add(r: SampleResult) -> None:
        results.append(r)
        if journal is not None:
            journal.record(key, r)

    try:
        with torch.no_grad():
            eager = module(*inputs)
    except Exception as e:
        add(SampleResult(name, index, dtype, SKIPPED, f"eager PyTorch raised {_brief(e, 160)}"))
        return results
    leaves = [t for t in torch.utils._pytree.tree_leaves(eager) if isinstance(t, torch.Tensor)]
    if leaves and all(t.is_floating_point() and t.numel() and bool(t.isnan().all()) for t in leaves):
        # An all-NaN output passes the verdict only with a note (it proves nothing): no verdict here.
        add(SampleResult(name, index, dtype, SKIPPED, "eager PyTorch's result is entirely NaN: no verdict"))
        return results
    try:
        aten_ops = _level_ops(module, inputs, "aten")
        core_ops = _level_ops(module, inputs, "core") if exact_ops else None
    except Exception as e:
        add(SampleResult(name, index, dtype, "export-failed", _brief(e, 160)))
        return results
    if journal is not None:
        journal.stage(key, "core", core_ops if core_ops is not None else aten_ops)
    core = _convert(name, index, dtype, module, inputs, "core", core_ops)
    add(core)
    if (set(aten_ops) & _core_set()) - set(core.ops):
        if journal is not None:
            journal.stage(key, "aten", aten_ops)
        add(_convert(name, index, dtype, module, inputs, "aten", aten_ops))
    return results


# ---------------------------------------------------------------------------------------------
# Tasks and workers


@dataclass(frozen=True)
class Task:
    """One OpInfo in some dtypes, or a slice of the project samples. A unit of a task is one sample
    (key `dtype:index`, or `extra:i`) or one dtype's sample generation (`dtype:gen`)."""

    label: str
    opinfo: int = -1  # index in op_db; -1 for project samples
    dtypes: tuple[str, ...] = ()
    per_op: int = 3  # samples in float32
    per_dtype: int = 1  # samples in every other dtype
    extra: str = ""  # the project samples file
    extra_indices: tuple[int, ...] = ()
    skip: frozenset[str] = frozenset()  # units already done; `dtype:*` skips the whole dtype
    only: str = ""  # run this sample unit alone
    exact_ops: bool = False  # decompose each sample before converting it, so a crash names its ops


@cache
def _op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


@cache
def _extra_samples_cached(path: str) -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    return _extra_samples(Path(path))


def _work_opinfo(task: Task, j: _Journal) -> None:
    opinfo = _op_db()[task.opinfo]
    for dtype in task.dtypes:
        gen = f"{dtype}:gen"
        if f"{dtype}:*" in task.skip or (task.only and not task.only.startswith(f"{dtype}:")):
            continue
        limit = task.per_op if dtype == "float32" else task.per_dtype
        j.begin(gen, task.label, dtype)
        try:
            torch.manual_seed(0)  # the same samples in every process, so an interrupted task resumes exactly
            samples = list(itertools.islice(opinfo.sample_inputs("cpu", DTYPES[dtype], requires_grad=False), limit))
        except Exception as e:
            if gen not in task.skip:  # recorded once, not again by a resumed task
                j.record(
                    gen, SampleResult(task.label, -1, dtype, SKIPPED, f"sample generation raised {_brief(e, 160)}")
                )
            samples = []
        j.done(gen)
        for index, s in enumerate(samples):
            key = f"{dtype}:{index}"
            if key in task.skip or (task.only and task.only != key):
                continue
            leaves, spec = torch.utils._pytree.tree_flatten((s.input, s.args, s.kwargs))
            tensors = tuple(v for v in leaves if isinstance(v, torch.Tensor))
            if not tensors:
                continue
            j.begin(key, task.label, dtype)
            run_sample(task.label, index, dtype, _OneOp(opinfo.op, spec, leaves), tensors, j, key, task.exact_ops)
            j.done(key)


def _work_extra(task: Task, j: _Journal) -> None:
    samples = _extra_samples_cached(task.extra)
    for i in task.extra_indices:
        key = f"extra:{i}"
        if key in task.skip or (task.only and task.only != key):
            continue
        name, module, inputs = samples[i]
        inputs = tuple(inputs)
        first = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
        dtype = dtype_name(first.dtype) if first is not None else "float32"
        j.begin(key, f"extra:{name}", dtype)
        run_sample(f"extra:{name}", 0, dtype, module, inputs, j, key, task.exact_ops)
        j.done(key)


def _work(task: Task, journal: str, redirect_stderr: bool = True) -> list[SampleResult]:
    """Run a task's units (in a worker process, or here with --jobs 0), journaling as it goes."""
    with _Journal(Path(journal), redirect_stderr) as j:
        if task.opinfo >= 0:
            _work_opinfo(task, j)
        else:
            _work_extra(task, j)
        return j.results


def _init_worker() -> None:
    """One thread per worker (torch's and RLX's rayon pool): the pool is the parallelism."""
    import faulthandler

    for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = "1"
    torch.set_num_threads(1)
    faulthandler.enable()  # a fatal signal names itself in the task's .err file
    _cache_cia_op_scan()


def _unit_dtype(key: str) -> str:
    return key.split(":", 1)[0]


class _Runner:
    """Runs tasks over process pools, replacing a pool whenever a worker dies.

    Not `isolated`: the units in flight when a worker dies are returned as suspects (any of them
    may be the culprit), and each death is noted with the samples that worker ran just before (heap
    corruption can surface samples later). `isolated`: every task gets a fresh process of its own, so
    the unit in flight when it dies is the culprit; it is recorded `crashed`. Either way a unit past
    its time limit is killed and recorded `timeout`."""

    def __init__(
        self,
        jobs: int,
        timeout: float,
        workdir: Path,
        isolated: bool,
        on_done: Callable[[Task, list[SampleResult], bool], None],
        log: Callable[[str], None],
    ) -> None:
        self.jobs, self.timeout, self.workdir, self.isolated = jobs, timeout, workdir, isolated
        self.on_done, self.log = on_done, log
        self.results: list[SampleResult] = []
        self.suspects: list[Task] = []
        self.deaths: list[dict[str, Any]] = []  # per unit in flight when a worker died
        self.crashed: set[str] = set()  # `label unit` recorded crashed
        self._pools = 0

    def run(self, tasks: list[Task]) -> None:
        if not self.isolated:
            self._run_queue(tasks)
            return
        for task in tasks:
            self._run_queue([task])

    def _run_queue(self, tasks: list[Task]) -> None:
        queue = list(tasks)
        idle_breaks = 0
        while queue:
            self._pools += 1
            queue, progressed = self._one_pool(queue)
            idle_breaks = 0 if progressed else idle_breaks + 1
            if idle_breaks >= 3:
                raise RuntimeError("coverage worker processes die before running anything (3 pools in a row)")

    def _one_pool(self, queue: list[Task]) -> tuple[list[Task], bool]:
        """Run `queue` on a fresh pool until done or broken; returns what is left, and whether any unit began."""
        again: list[Task] = []
        progressed = False
        killed: dict[Path, str] = {}
        ctx = get_context("spawn")
        with ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_init_worker) as pool:
            futures: dict[Future[list[SampleResult]], tuple[Task, Path]] = {}
            for n, task in enumerate(queue):
                path = self.workdir / f"p{self._pools}-t{n}.jsonl"
                try:
                    futures[pool.submit(_work, task, str(path))] = (task, path)
                except BrokenProcessPool:  # broke while submitting: the rest waits for the next pool
                    again += queue[n:]
                    break
            pending = set(futures)
            while pending:
                finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for f in finished:
                    task, path = futures[f]
                    exc = f.exception()
                    if exc is None:
                        progressed = True
                        self.results += f.result()
                        self.on_done(task, f.result(), True)
                        continue
                    st = _read_journal(path)
                    progressed = progressed or bool(st.done or st.inflight)
                    if isinstance(exc, BrokenProcessPool):
                        again += self._broken(task, path, st, killed.get(path, ""))
                    else:  # a bug of ours in the worker, not a sample's doing: keep what it finished
                        kept = [r for k in sorted(st.done) for r in st.results.get(k, [])]
                        where = st.inflight or "?"
                        kept.append(
                            SampleResult(task.label, -1, "", "error", f"worker raised {_brief(exc)} at {where}")
                        )
                        self.results += kept
                        self.on_done(task, kept, True)
                if self.timeout > 0:
                    self._kill_overdue(futures, pending, killed)
        return again, progressed

    def _kill_overdue(
        self,
        futures: dict[Future[list[SampleResult]], tuple[Task, Path]],
        pending: Iterable[Future[list[SampleResult]]],
        killed: dict[Path, str],
    ) -> None:
        now = time.time()
        for f in pending:
            task, path = futures[f]
            if not f.running() or path in killed:
                continue
            st = _read_journal(path)
            if st.inflight and now - st.started > self.timeout:
                killed[path] = st.inflight
                self.log(f"{task.label} {st.inflight}: no result after {self.timeout:.0f} s, killing its worker")
                try:
                    os.kill(st.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _broken(self, task: Task, path: Path, st: _JournalState, killed_unit: str) -> list[Task]:
        """A task whose pool broke: keep its finished units, settle or suspect the one in flight, and
        return the rest of it to run again."""
        kept = [r for k in sorted(st.done) for r in st.results.get(k, [])]
        skip = set(task.skip) | st.done
        unit = st.inflight
        if unit:
            skip.add(unit)
            if unit.endswith(":gen"):  # the rest of that dtype goes with it
                skip.add(f"{_unit_dtype(unit)}:*")
            if unit == killed_unit or self.isolated:
                if unit == killed_unit:
                    status, why = "timeout", f"no result within {self.timeout:.0f} s; its worker was killed"
                else:
                    words = _last_words(path)
                    why = "the worker process died running this sample alone" + (
                        f": {words}" if words else " (no message)"
                    )
                    status = "crashed"
                kept += st.results.get(unit, [])
                kept.append(self._settled(unit, status, why, st))
                self.log(f"{task.label} {unit}: {status} ({why})")
                if status == "crashed":
                    self.crashed.add(f"{task.label} {unit}")
                else:
                    self._death(task, unit, st, "timeout")
            else:
                dtype = _unit_dtype(unit)
                suspect = replace(task, skip=frozenset(skip - {unit, f"{dtype}:*"}), exact_ops=True)
                if unit.endswith(":gen"):
                    suspect = replace(suspect, dtypes=(dtype,), only="")
                else:
                    suspect = replace(suspect, only=unit)
                self.suspects.append(suspect)
                self._death(task, unit, st, "suspect")
                self.log(f"a worker died; {task.label} {unit} was in flight: it re-runs alone at the end")
        self.results += kept
        finished = bool(task.only) and task.only in skip
        self.on_done(task, kept, finished)
        return [] if finished else [replace(task, skip=frozenset(skip))]

    def _death(self, task: Task, unit: str, st: _JournalState, outcome: str) -> None:
        """Note a unit in flight at a worker's death, with the last samples that worker ran before it."""
        earlier: list[tuple[float, str]] = []
        for path in self.workdir.glob(f"p{self._pools}-t*.jsonl"):
            for line in path.read_text().splitlines():
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "begin" in e and e["pid"] == st.pid and e["t"] < st.started and not e["begin"].endswith(":gen"):
                    earlier.append((e["t"], f"{e['label']} {e['begin']}"))
        recent = [u for _, u in sorted(earlier)[-5:]]
        self.deaths.append({"pool": self._pools, "unit": f"{task.label} {unit}", "outcome": outcome, "recent": recent})

    @staticmethod
    def _settled(unit: str, status: str, why: str, st: _JournalState) -> SampleResult:
        """The record of a unit that ended its process; the ops are those of the level in flight."""
        kind, _, index = unit.partition(":")
        if index == "gen":
            return SampleResult(st.label, -1, st.dtype, status, f"sample generation: {why}")
        number = 0 if kind == "extra" else int(index)
        return SampleResult(st.label, number, st.dtype, status, why, st.ops, [], st.level or "core")


# ---------------------------------------------------------------------------------------------
# Summary and report


def _op_verdict(r: SampleResult, op: str) -> tuple[str, str]:
    """What one run says about one op of its graph."""
    if r.status.startswith("verified"):  # per op: was this one lowered natively or decomposed?
        return ("verified-decomposed" if op in r.decomposed else "verified"), ""
    if r.status == "unsupported":
        if op in r.unsupported:
            return "unsupported", r.unsupported[op]
        return "blocked", "not reached: the graph also holds " + ", ".join(sorted(r.unsupported))
    return r.status, r.reason


FAILING = ("parity-failed", "timeout", "crashed", "error")  # runs listed even when a better verdict stands


def _entry() -> dict[str, Any]:
    return {"status": "no-sample", "reason": "", "via": "", "level": "", "failed": []}


def summarize(core: list[str], results: list[SampleResult]) -> dict[str, dict[str, Any]]:
    """Core ATen op -> best status over all runs, the level it came from, and the reason (or the
    sample); under `dtypes`, the same per dtype of the runs, each with `failed`: the runs whose graph
    holds that op alone that failed parity, crashed, timed out or raised (`sample status`), whatever
    the verdict (a failing graph of several ops may be any of their doing)."""
    generic = "no sample's graph contains it, at the `core` or the `aten` level"
    table: dict[str, dict[str, Any]] = {
        op: {"status": "no-sample", "reason": generic, "via": "", "level": "", "dtypes": {}} for op in core
    }
    for r in results:
        for op in r.ops:
            if op not in table:
                continue
            status, reason = _op_verdict(r, op)
            via = f"{r.opinfo}[{r.index}]"
            new = {"status": status, "reason": reason, "via": via, "level": r.level}
            cell = table[op]["dtypes"].setdefault(r.dtype, _entry())
            if status in FAILING and len(r.ops) == 1 and f"{via} {status}" not in cell["failed"]:
                cell["failed"].append(f"{via} {status}")
            for entry in (table[op], cell):
                if STATUSES.index(status) < STATUSES.index(entry["status"]):
                    entry.update(new)
    for op, why in NOT_NATIVE.items():
        if op not in table:
            continue
        for entry in (table[op], *table[op]["dtypes"].values()):
            if entry["status"] != "verified":
                entry["reason"] = why
    for v in table.values():
        order = list(DTYPES) + sorted(set(v["dtypes"]) - set(DTYPES))
        v["dtypes"] = {d: v["dtypes"][d] for d in order if d in v["dtypes"]}
    return table


def _columns(table: dict[str, dict[str, Any]], wanted: Iterable[str]) -> list[str]:
    seen = set(wanted) | {d for v in table.values() for d in v["dtypes"]}
    return [d for d in DTYPES if d in seen] + sorted(seen - set(DTYPES))


def _cell_text(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _short_ops(ops: list[str]) -> str:
    return ", ".join(o.removeprefix("aten.") for o in ops)


def _kind(op: str, cell: dict[str, Any]) -> str:
    """A cell's status, with the unverified cells of ops that cannot verify natively here set apart."""
    status = cell["status"]
    if op in NOT_NATIVE and not status.startswith("verified") and status != "no-sample":
        return "not-native"
    return status


def _masked(cell: dict[str, Any]) -> bool:
    """Whether a run of this op x dtype failed beside the (better) verdict the cell shows."""
    return any(f != f"{cell['via']} {cell['status']}" for f in cell.get("failed", []))


def render(table: dict[str, dict[str, Any]], meta: dict[str, Any], results: list[SampleResult]) -> str:
    counts = {s: sum(1 for v in table.values() if v["status"] == s) for s in STATUSES}
    total = len(table)
    columns = _columns(table, meta.get("dtypes", []))
    cells = [(op, d, v["dtypes"][d]) for op, v in sorted(table.items()) for d in columns if d in v["dtypes"]]
    kinds = [*STATUSES, "not-native"]
    pair = {k: sum(1 for op, _, c in cells if _kind(op, c) == k) for k in kinds}
    native = {op for r in _opinfo_runs(results) for op in r.ops if _op_verdict(r, op)[0] == "verified"}
    by_opinfo = len(native & set(table))
    masked = sum(1 for _, _, c in cells if _masked(c))
    per = meta.get("samples_per_op", 3), meta.get("samples_per_dtype", 1)
    extra = (
        f" plus {meta['extra_samples']} project samples from `{meta['extra_source']}` (rows marked `extra:`, each "
        "in its own dtype)"
        if meta.get("extra_samples")
        else ""
    )
    lines = [
        "# Core ATen coverage",
        "",
        f"Generated by `rlx-torch-import coverage` with torch {meta['torch']}, RLX {meta['rlx']}: "
        f"{meta['samples']} OpInfo samples in {len(meta.get('dtypes', []))} dtypes (up to {per[0]} per OpInfo in "
        f"float32, {per[1]} in each other dtype it supports){extra}, on {meta.get('jobs', 0)} worker processes in "
        f"{meta['seconds']:.0f} s. Skipped as PyTorch's limits, not ours: {meta.get('skipped_generation', 0)} "
        f"(OpInfo, dtype) pairs whose sample generation raised and {meta.get('skipped_eager', 0)} samples whose "
        "eager run raised or gave only NaN. Every sample is converted at the `core` level, and also at `aten` "
        "when its aten-level "
        f"graph holds Core ATen ops that torch's core table decomposes ({meta.get('aten_runs', 0)} such runs); "
        "`level` says which run gave the verdict.",
        "",
        f"- Core ATen ops: **{total}**",
        f"- verified natively in at least one dtype: **{counts['verified']}** "
        f"({100 * counts['verified'] / max(total, 1):.1f}%; {by_opinfo} by OpInfo samples alone)",
        f"- best status otherwise: verified through automatic decomposition {counts['verified-decomposed']}; "
        f"parity failed {counts['parity-failed']}; unsupported {counts['unsupported']}; export failed "
        f"{counts['export-failed']}; error {counts['error']}; timeout {counts['timeout']}; crashed "
        f"{counts['crashed']}; not reached {counts['blocked']}; no sample {counts['no-sample']}",
        f"- Core ATen op x dtype pairs with a sample: **{len(cells)}** of {total * len(columns)}: verified "
        f"**{pair['verified'] + pair['verified-decomposed']}** ({pair['verified']} natively, "
        f"{pair['verified-decomposed']} through decomposition), parity failed **{pair['parity-failed']}**, "
        f"unsupported **{pair['unsupported']}**, other **{sum(pair[s] for s in OTHER)}** (export failed "
        f"{pair['export-failed']}, error {pair['error']}, timeout {pair['timeout']}, crashed {pair['crashed']}, "
        f"not reached {pair['blocked']}), and {pair['not-native']} of the ops that cannot verify natively here "
        f"(`NOT_NATIVE`); in {masked} pairs a one-op graph of the op failed, crashed, timed out or raised "
        "beside the better verdict shown (marked `*`)",
    ]
    deaths = meta.get("worker_deaths", [])
    if deaths or meta.get("pool_restarts"):
        alone = sum(1 for d in deaths if d.get("crashed_alone"))
        timeouts = sum(1 for d in deaths if d["outcome"] == "timeout")
        lines.append(
            f"- worker processes lost: {meta.get('pool_restarts', 0)} times; of the {len(deaths)} samples in flight "
            f"then, {alone} kill a fresh process alone (`crashed`) and {timeouts} were killed for time (see "
            "Worker deaths)"
        )
    lines += [
        "",
        "| dtype | samples | skipped | Core ATen ops with a sample | ok | dec | FAIL | uns | other | n/a |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in columns:
        runs = [r for r in results if r.dtype == d]
        ran = {(r.opinfo, r.index) for r in runs if r.status != SKIPPED}
        skipped = sum(1 for r in runs if r.status == SKIPPED)
        dc = [_kind(op, c) for op, dd, c in cells if dd == d]
        n = {k: dc.count(k) for k in kinds}
        lines.append(
            f"| {d} | {len(ran)} | {skipped} | {len(dc)} | {n['verified']} | {n['verified-decomposed']} "
            f"| {n['parity-failed']} | {n['unsupported']} | {sum(n[s] for s in OTHER)} | {n['not-native']} |"
        )
    legend = ", ".join(f"`{c}` {s}" for s, c in CELLS.items())
    lines += [
        "",
        "## Core ATen op x dtype",
        "",
        f"`best` is the best status over every dtype; a cell is the best status of that dtype's runs ({legend}; "
        "`blk`: every run of it had another op of its graph unsupported); `*`: besides the verdict shown, a "
        "graph of that op alone failed parity, crashed, timed out or raised in that dtype (see Failing samples).",
        "",
        "| Core ATen op | best | level | sample | " + " | ".join(SHORT.get(d, d) for d in columns) + " | reason |",
        "|---|---|---|---|" + "---|" * len(columns) + "---|",
    ]
    for op, v in sorted(table.items()):
        row = " | ".join(
            CELLS[v["dtypes"][d]["status"]] + ("\\*" if _masked(v["dtypes"][d]) else "") if d in v["dtypes"] else "—"
            for d in columns
        )
        lines.append(f"| `{op}` | {v['status']} | {v['level']} | {v['via']} | {row} | {_cell_text(v['reason'])} |")
    sections = [
        ("Parity failures (Core ATen op x dtype)", ("parity-failed",)),
        ("Unsupported (Core ATen op x dtype)", ("unsupported",)),
        ("Crashes, timeouts, errors, export failures, not reached (Core ATen op x dtype)", OTHER),
    ]
    for title, wanted in sections:
        rows = [(op, d, c) for op, d, c in cells if _kind(op, c) in wanted]
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += ["| Core ATen op | dtype | status | sample | level | reason |", "|---|---|---|---|---|---|"]
        lines += [
            f"| `{op}` | {d} | {c['status']} | {c['via']} | {c['level']} | {_cell_text(c['reason'])} |"
            for op, d, c in rows
        ]
    unnative = sorted({op for op, _, c in cells if _kind(op, c) == "not-native"})
    if unnative:
        lines += [
            "",
            f"Not listed above: {pair['not-native']} pairs of ops that cannot verify natively here, for the reason "
            f"the table gives: {', '.join(f'`{op}`' for op in unnative)}.",
        ]
    bad = [r for r in results if r.status in FAILING]
    lines += [
        "",
        "## Failing samples",
        "",
        "Every run that failed parity, timed out, crashed or raised, including those whose ops another sample "
        "verified (sorted by OpInfo, dtype).",
        "",
    ]
    if not bad:
        lines.append("None.")
    else:
        lines += ["| sample | dtype | level | status | graph ops | reason |", "|---|---|---|---|---|---|"]
        for r in sorted(bad, key=lambda r: (r.opinfo, r.dtype, r.index, r.level)):
            lines.append(
                f"| {r.opinfo}[{r.index}] | {r.dtype} | {r.level} | {r.status} | {_short_ops(r.ops)} "
                f"| {_cell_text(r.reason)} |"
            )
    if deaths:
        lines += [
            "",
            "## Worker deaths",
            "",
            "Samples in flight when a worker process died, each re-run alone in a fresh process. One that does not "
            "kill that process either got its verdict there; the death it was present at then came from another "
            "sample in flight, or from heap corruption by a sample that worker ran earlier (its last ones are "
            "listed).",
            "",
            "| pool | in flight | outcome | that worker's previous samples |",
            "|---|---|---|---|",
        ]
        for d in deaths:
            outcome = (
                d["outcome"] if d["outcome"] != "suspect" else "crashes alone" if d["crashed_alone"] else "ran alone"
            )
            lines.append(f"| {d['pool']} | {d['unit']} | {outcome} | {'; '.join(d['recent'])} |")
    return "\n".join(lines) + "\n"


def _opinfo_runs(results: list[SampleResult]) -> list[SampleResult]:
    return [r for r in results if not r.opinfo.startswith("extra:")]


def _extra_samples(path: Path) -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """The SAMPLES list of a Python file (its folder goes on sys.path so its imports resolve)."""
    import runpy

    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    namespace = runpy.run_path(str(path), run_name="__rlx_coverage__")
    return list(namespace.get("SAMPLES", []))


def _task_summary(results: list[SampleResult]) -> str:
    runs = [r for r in results if r.index >= 0 or r.status != SKIPPED]
    counts: dict[str, int] = {}
    for r in runs:
        word = CELLS.get(r.status, r.status)
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "no samples"


def _tasks(args: Any, dtypes: list[str], extra_count: int) -> list[Task]:
    wanted = set(args.ops.split(",")) if args.ops else None
    tasks = []
    for i, o in enumerate(_op_db()):
        if (wanted is not None and o.name not in wanted) or any(word in o.name for word in NONDETERMINISTIC):
            continue
        supported = o.supported_dtypes("cpu")
        ds = tuple(d for d in dtypes if DTYPES[d] in supported)
        if not ds:
            continue
        label = f"{o.name}.{o.variant_test_name}" if o.variant_test_name else o.name
        tasks.append(Task(label, i, ds, args.samples_per_op, args.samples_per_dtype))
    size = 8  # project samples per task
    for start in range(0, extra_count, size):
        idx = tuple(range(start, min(start + size, extra_count)))
        label = f"extra samples {idx[0]}-{idx[-1]}"
        tasks.append(Task(label, extra=str(args.extra_samples.resolve()), extra_indices=idx))
    return tasks


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="rlx-torch-import coverage", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs"), help="where coverage.md/.json go (default: docs)")
    p.add_argument(
        "--dtypes",
        default=",".join(DTYPES),
        help=f"comma-separated dtypes to sample OpInfos in (default: all of {', '.join(DTYPES)})",
    )
    p.add_argument("--samples-per-op", type=int, default=3, metavar="N", help="samples per OpInfo in float32")
    p.add_argument(
        "--samples-per-dtype", type=int, default=1, metavar="M", help="samples per OpInfo in every other dtype"
    )
    p.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    p.add_argument(
        "--extra-samples",
        type=Path,
        metavar="FILE.py",
        help="also run the SAMPLES list [(name, module, inputs)] of this file (e.g. tests/test_ops.py)",
    )
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    p.add_argument(
        "--jobs",
        type=int,
        default=cpus,
        metavar="N",
        help=f"worker processes (default: one per CPU, {cpus} here); 0 runs everything in this process",
    )
    p.add_argument(
        "--sample-timeout",
        type=float,
        default=DEFAULT_SAMPLE_TIMEOUT,
        metavar="S",
        help=f"kill a worker whose sample runs longer than S seconds (default: {DEFAULT_SAMPLE_TIMEOUT:.0f}; "
        "0: no limit; not with --jobs 0)",
    )
    args = p.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown or not dtypes or args.jobs < 0 or args.samples_per_op < 0 or args.samples_per_dtype < 0:
        bad = f"unknown dtype(s) {', '.join(unknown)}; choose among {', '.join(DTYPES)}" if unknown else "bad counts"
        print(f"error: {bad}", file=sys.stderr)
        return 2
    dtypes = [d for d in DTYPES if d in dtypes]
    try:
        _op_db()
    except ImportError as e:
        print(f"error: PyTorch's OpInfo database needs the `expecttest` package ({e})", file=sys.stderr)
        return 2
    from . import _core

    core = core_aten_ops()
    extra_count = len(_extra_samples(args.extra_samples)) if args.extra_samples else 0
    tasks = _tasks(args, dtypes, extra_count)
    start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[coverage] {msg}", file=sys.stderr, flush=True)

    partial: dict[str, list[SampleResult]] = {}
    finished: set[str] = set()

    def on_done(task: Task, results: list[SampleResult], final: bool) -> None:
        runs = partial.setdefault(task.label, [])
        runs += results
        if not final:  # a task cut short by a dead worker; the rest of it comes later
            return
        finished.add(task.label)
        log(
            f"{len(finished)}/{len(tasks)} {task.label}: {_task_summary(runs)} "
            f"({time.perf_counter() - start:.0f} s elapsed)"
        )

    results: list[SampleResult] = []
    with tempfile.TemporaryDirectory(prefix="rlx-coverage-") as tmp:
        if args.jobs == 0:
            for n, task in enumerate(tasks):
                rs = _work(task, str(Path(tmp) / f"t{n}.jsonl"), redirect_stderr=False)
                results += rs
                on_done(task, rs, True)
            crashes = 0
            deaths = []
        else:
            runner = _Runner(args.jobs, args.sample_timeout, Path(tmp), False, on_done, log)
            runner.run(tasks)
            results += runner.results
            crashed_alone: set[str] = set()
            if runner.suspects:
                log(
                    f"re-running alone the {len(runner.suspects)} unit(s) in flight when a worker died, "
                    "each in a fresh process"
                )
                alone = _Runner(1, args.sample_timeout, Path(tmp) / "alone", True, lambda t, r, f: None, log)
                alone.workdir.mkdir()
                alone.run(runner.suspects)
                results += alone.results
                crashed_alone = alone.crashed
            crashes = runner._pools - 1
            deaths = runner.deaths
            for d in deaths:
                d["crashed_alone"] = d["unit"] in crashed_alone
    ran = [r for r in _opinfo_runs(results) if r.index >= 0 and r.status != SKIPPED]
    table = summarize(core, results)
    meta = {
        "torch": torch.__version__,
        "rlx": _core.rlx_version(),
        "dtypes": dtypes,
        "samples": len({(r.opinfo, r.dtype, r.index) for r in ran}),
        "aten_runs": sum(1 for r in results if r.level == "aten" and r.status != SKIPPED),
        "samples_per_op": args.samples_per_op,
        "samples_per_dtype": args.samples_per_dtype,
        "opinfos": sum(1 for t in tasks if t.opinfo >= 0),
        "extra_samples": extra_count,
        "extra_source": str(args.extra_samples or ""),
        "skipped_generation": sum(1 for r in results if r.status == SKIPPED and r.index < 0),
        "skipped_eager": sum(1 for r in results if r.status == SKIPPED and r.index >= 0),
        "jobs": args.jobs,
        "pool_restarts": crashes,
        "worker_deaths": deaths,
        "seconds": time.perf_counter() - start,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    text = render(table, meta, results)
    (args.out / "coverage.md").write_text(text)
    doc = {"meta": meta, "core_ops": table, "samples": [asdict(r) for r in results]}
    (args.out / "coverage.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(text.split("\n| dtype |")[0].strip())
    return 0
