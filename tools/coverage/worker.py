"""The coverage run's units of work and what a worker process does with one.

A task (one OpInfo in some dtypes, or a slice of the project samples) is the unit of progress; a unit
is one job for the pool: one sample, or one (OpInfo, dtype)'s sample generation, whose outcome adds
that dtype's sample units. While a worker runs a unit it keeps the unit's state (its pid, start time,
label and dtype, the conversion level in flight with its graph's ops, the results so far) in a
dictionary shared with the parent (a `multiprocessing` manager's): the parent times units from it and
knows what a dead worker was doing. A worker's stderr goes to `<errdir>/<pid>.err`, a marker line
before each unit, so a dying process's last words (RLX's abort message, faulthandler's) can be quoted.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import torch

from tools.coverage.samples import (
    SKIPPED,
    SampleResult,
    _brief,
    _extra_samples,
    _op_db,
    dtype_name,
    one_op,
    opinfo_samples,
    run_sample,
)

MARK = "@@rlx-coverage sample "


@dataclass(frozen=True)
class Unit:
    """One job: a sample (key `dtype:index`, or `extra:i`) or one dtype's sample generation (`dtype:gen`)."""

    task: str  # the task's label
    key: str
    opinfo: int = -1  # index in op_db; -1 for a project sample
    dtype: str = ""
    limit: int = 0  # samples to generate in that dtype
    extra: str = ""  # the project samples file
    exact_ops: bool = False  # decompose the sample before converting it, so a crash names its ops

    @property
    def name(self) -> str:
        return f"{self.task} {self.key}"


@dataclass(frozen=True)
class Task:
    """One OpInfo in some dtypes, or a slice of the project samples."""

    label: str
    opinfo: int = -1  # index in op_db; -1 for project samples
    dtypes: tuple[str, ...] = ()
    per_op: int = 3  # samples in float32
    per_dtype: int = 1  # samples in every other dtype
    extra: str = ""  # the project samples file
    extra_indices: tuple[int, ...] = ()

    def units(self) -> list[Unit]:
        """The task's first units: each dtype's sample generation, or each project sample."""
        if self.opinfo >= 0:
            return [
                Unit(self.label, f"{d}:gen", self.opinfo, d, self.per_op if d == "float32" else self.per_dtype)
                for d in self.dtypes
            ]
        return [Unit(self.label, f"extra:{i}", extra=self.extra) for i in self.extra_indices]


@dataclass
class Outcome:
    """What a unit gave: its results, the units it adds (a generation's samples), who ran it and when."""

    results: list[SampleResult]
    more: list[Unit] = field(default_factory=list)
    pid: int = 0
    started: float = 0.0
    label: str = ""  # the sample's label (`extra:<name>` for a project sample)


# In a worker: the parent's shared dictionary of units in flight (None in this process with --jobs 0).
_SHARED: MutableMapping[str, dict[str, Any]] | None = None


def init_worker(shared: MutableMapping[str, dict[str, Any]], errdir: str) -> None:
    """One thread per worker (torch's and RLX's rayon pool): the pool is the parallelism. stderr goes
    to a file of this process, where faulthandler names a fatal signal."""
    import faulthandler

    global _SHARED
    _SHARED = shared
    for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = "1"
    torch.set_num_threads(1)
    sys.stderr.flush()
    err = os.open(Path(errdir) / f"{os.getpid()}.err", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(err, 2)
    os.close(err)
    faulthandler.enable()
    _cache_cia_op_scan()


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


class _State:
    """A unit's state in flight, written through to the shared dictionary at each step."""

    def __init__(self, unit: Unit, label: str, dtype: str) -> None:
        self.unit = unit
        self.doc: dict[str, Any] = {"pid": os.getpid(), "t": time.time(), "label": label, "dtype": dtype}
        self.doc.update(level="", ops=[], results=[])
        if _SHARED is not None:
            print(f"\n{MARK}{unit.name}", file=sys.stderr, flush=True)
        self._publish()

    def _publish(self) -> None:
        if _SHARED is not None:
            _SHARED[self.unit.name] = self.doc

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        """run_sample's progress: ("stage", {level, ops}) or ("result", the SampleResult as a dict)."""
        if kind == "stage":
            self.doc.update(level=data["level"], ops=data["ops"])
        else:
            self.doc["results"] = [*self.doc["results"], data]
        self._publish()

    def outcome(self, results: list[SampleResult], more: list[Unit] | None = None) -> Outcome:
        return Outcome(results, more or [], self.doc["pid"], self.doc["t"], self.doc["label"])


@cache
def _extra_samples_cached(path: str) -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    return _extra_samples(Path(path))


def work(unit: Unit) -> Outcome:
    """Run one unit, in a worker process (or in this one with --jobs 0)."""
    if unit.extra:
        name, module, inputs = _extra_samples_cached(unit.extra)[int(unit.key.split(":", 1)[1])]
        inputs = tuple(inputs)
        first = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
        dtype = dtype_name(first.dtype) if first is not None else "float32"
        state = _State(unit, f"extra:{name}", dtype)
        return state.outcome(run_sample(f"extra:{name}", 0, dtype, module, inputs, unit.exact_ops, state.emit))
    opinfo = _op_db()[unit.opinfo]
    state = _State(unit, unit.task, unit.dtype)
    if unit.key.endswith(":gen"):
        try:
            samples = opinfo_samples(opinfo, unit.dtype, unit.limit)
        except Exception as e:
            why = f"sample generation raised {_brief(e, 160)}"
            return state.outcome([SampleResult(unit.task, -1, unit.dtype, SKIPPED, why)])
        keys = [f"{unit.dtype}:{i}" for i, s in enumerate(samples) if one_op(opinfo, s) is not None]
        return state.outcome([], [replace(unit, key=k) for k in keys])
    index = int(unit.key.split(":", 1)[1])
    made = one_op(opinfo, opinfo_samples(opinfo, unit.dtype, index + 1)[index])
    if made is None:  # not so: the generation unit adds only samples with a tensor
        return state.outcome([])
    module, tensors = made
    return state.outcome(run_sample(unit.task, index, unit.dtype, module, tensors, unit.exact_ops, state.emit))


def in_flight(doc: dict[str, Any]) -> list[SampleResult]:
    """The results a unit in flight had recorded, from its shared state."""
    return [SampleResult(**r) for r in doc.get("results", [])]
