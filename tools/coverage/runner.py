"""The coverage run on a standard process pool: `concurrent.futures.ProcessPoolExecutor` with spawned
workers (`worker.py`), and a new pool whenever one breaks.

A sample that kills its worker (RLX can abort the process on memory corruption) breaks the pool
(`BrokenProcessPool`; the executor ends every worker of it). The units that had begun and not finished
are suspects, any of them may be the culprit: each re-runs at the end alone, in a fresh one-worker pool,
where one that kills that process too is recorded `crashed` with the process's last words. Each death
is noted with the samples that worker ran just before (heap corruption can surface samples later).
Units not begun go to the next pool. A unit running longer than the time limit has its worker killed
and is recorded `timeout`. With `jobs` 0 everything runs in this process (no isolation; for debugging
and tests).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable, MutableMapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tools.coverage.samples import SampleResult, _brief
from tools.coverage.worker import MARK, Outcome, Unit, in_flight, init_worker, work

Shared = MutableMapping[str, dict[str, Any]]


class Runner:
    """Runs units to their results, keeping them in the order the units were made (a generation unit's
    samples right after it), and reports each task when all its units are settled."""

    def __init__(
        self,
        jobs: int,
        timeout: float,
        workdir: Path,
        log: Callable[[str], None],
        on_task_done: Callable[[str, list[SampleResult]], None],
    ) -> None:
        self.jobs, self.timeout, self.workdir, self.log, self.on_task_done = jobs, timeout, workdir, log, on_task_done
        self.deaths: list[dict[str, Any]] = []  # per unit in flight when a worker died
        self.restarts = 0  # pools replaced in the main run
        self._results: dict[str, list[SampleResult]] = {}
        self._rank: dict[str, tuple[int, int]] = {}
        self._open: dict[str, int] = {}  # task -> units not settled
        self._task_results: dict[str, list[SampleResult]] = {}
        self._suspects: list[Unit] = []
        self._crashed: set[str] = set()
        self._history: dict[int, list[tuple[float, str]]] = {}  # pid -> (start, "label key") of its samples
        self._pools = 0
        self._alone = False  # re-running suspects: their tasks were reported already

    # ----------------------------------------------------------------- bookkeeping

    def _made(self, units: Iterable[Unit], parent: Unit | None = None) -> list[Unit]:
        units = list(units)
        for n, unit in enumerate(units):
            first = self._rank[parent.name][0] if parent is not None else len(self._rank)
            self._rank[unit.name] = (first, n + 1) if parent is not None else (first, 0)
            if not self._alone:
                self._open[unit.task] = self._open.get(unit.task, 0) + 1
        return units

    def _settle(self, unit: Unit, results: list[SampleResult]) -> None:
        self._results[unit.name] = results
        self._task_results.setdefault(unit.task, []).extend(results)
        self._task_settled(unit)

    def _task_settled(self, unit: Unit) -> None:
        if self._alone:
            return
        self._open[unit.task] -= 1
        if self._open[unit.task] == 0:
            self.on_task_done(unit.task, self._task_results.get(unit.task, []))

    def results(self) -> list[SampleResult]:
        """Every result, in the order the units were made."""
        return [r for name in sorted(self._results, key=self._rank.__getitem__) for r in self._results[name]]

    # ----------------------------------------------------------------- running

    def run(self, units: list[Unit]) -> list[SampleResult]:
        """Run `units` (and the units they add) to their results."""
        queue = self._made(units)
        if self.jobs == 0:
            while queue:
                unit = queue.pop(0)
                outcome = work(unit)
                queue[0:0] = self._made(outcome.more, unit)
                self._settle(unit, outcome.results)
            return self.results()
        ctx = get_context("spawn")
        with ctx.Manager() as manager:
            shared = manager.dict()
            self._run_queue(queue, ctx, shared, alone=False)
            self.restarts = self._pools - 1
            if self._suspects:
                self.log(
                    f"re-running alone the {len(self._suspects)} unit(s) in flight when a worker died, "
                    "each in a fresh process"
                )
                self._alone = True
                for unit in self._suspects:
                    self._run_queue([unit], ctx, shared, alone=True)
        for d in self.deaths:
            d["crashed_alone"] = d["unit"] in self._crashed
        return self.results()

    def _run_queue(self, queue: list[Unit], ctx: Any, shared: Shared, alone: bool) -> None:
        idle = 0
        while queue:
            self._pools += 1
            queue, began = self._one_pool(queue, ctx, shared, alone)
            idle = 0 if began else idle + 1
            if idle >= 3:
                raise RuntimeError("coverage worker processes die before running anything (3 pools in a row)")

    def _one_pool(self, queue: list[Unit], ctx: Any, shared: Shared, alone: bool) -> tuple[list[Unit], bool]:
        """Run `queue` on a fresh pool until done or broken: the units to run again, and whether any began."""
        lost: list[Unit] = []
        killed: set[str] = set()
        began = False
        jobs = 1 if alone else self.jobs
        args = (shared, str(self.workdir))
        with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=init_worker, initargs=args) as pool:
            pending: dict[Future[Outcome], Unit] = {}
            todo = list(queue)
            while todo or pending:
                lost += _submit(pool, todo, pending)
                todo = []
                done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    unit = pending.pop(f)
                    if isinstance(f.exception(), BrokenProcessPool):
                        lost.append(unit)
                        continue
                    began = True
                    todo += self._finished(unit, f, shared)
                if self.timeout > 0 and pending:
                    self._kill_overdue(pending.values(), shared, killed)
        again, began_lost = self._broken(lost, shared, killed, alone)
        return again, began or began_lost

    def _finished(self, unit: Unit, f: Future[Outcome], shared: Shared) -> list[Unit]:
        """Settle a unit whose future completed; returns the units it adds."""
        doc = shared.pop(unit.name, None) or {}
        exc = f.exception()
        if exc is not None:  # a bug of ours in the worker, not a sample's doing: keep what it recorded
            why = f"worker raised {_brief(exc)} at {unit.key}"
            self._settle(unit, [*in_flight(doc), SampleResult(unit.task, -1, "", "error", why)])
            return []
        outcome = f.result()
        if not unit.key.endswith(":gen"):
            self._history.setdefault(outcome.pid, []).append((outcome.started, f"{outcome.label} {unit.key}"))
        more = self._made(outcome.more, unit)
        self._settle(unit, outcome.results)
        return more

    def _kill_overdue(self, units: Iterable[Unit], shared: Shared, killed: set[str]) -> None:
        now = time.time()
        snapshot = shared.copy()  # type: ignore[attr-defined]
        for unit in units:
            doc = snapshot.get(unit.name)
            if doc is None or unit.name in killed or now - doc["t"] <= self.timeout:
                continue
            killed.add(unit.name)
            self.log(f"{unit.name}: no result after {self.timeout:.0f} s, killing its worker")
            try:
                os.kill(doc["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _broken(self, lost: list[Unit], shared: Shared, killed: set[str], alone: bool) -> tuple[list[Unit], bool]:
        """Units a broken pool did not finish: those not begun run again; one killed for time is
        `timeout`; run alone, one in flight is `crashed`; otherwise it is a suspect, re-run alone later."""
        again: list[Unit] = []
        began = False
        for unit in lost:
            doc = shared.pop(unit.name, None)
            if doc is None:
                again.append(unit)
                continue
            began = True
            if unit.name in killed or alone:
                status = "timeout" if unit.name in killed else "crashed"
                if status == "timeout":
                    why = f"no result within {self.timeout:.0f} s; its worker was killed"
                else:
                    words = _last_words(self.workdir, doc["pid"])
                    why = "the worker process died running this sample alone" + (
                        f": {words}" if words else " (no message)"
                    )
                    self._crashed.add(unit.name)
                self.log(f"{unit.name}: {status} ({why})")
                self._settle(unit, [*in_flight(doc), _settled(unit, doc, status, why)])
                if status == "timeout" and not alone:
                    self._death(unit, doc, "timeout")
                continue
            self._suspects.append(replace(unit, exact_ops=True))
            self._death(unit, doc, "suspect")
            self._task_settled(unit)
            self.log(f"a worker died; {unit.name} was in flight: it re-runs alone at the end")
        return again, began

    def _death(self, unit: Unit, doc: dict[str, Any], outcome: str) -> None:
        """Note a unit in flight at a worker's death, with the last samples that worker ran before it."""
        earlier = sorted(x for x in self._history.get(doc["pid"], []) if x[0] < doc["t"])
        recent = [u for _, u in earlier[-5:]]
        self.deaths.append({"pool": self._pools, "unit": unit.name, "outcome": outcome, "recent": recent})


def _submit(pool: ProcessPoolExecutor, units: list[Unit], pending: dict[Future[Outcome], Unit]) -> list[Unit]:
    """Submit `units`; those a broken pool refuses are returned (they wait for the next pool)."""
    for n, unit in enumerate(units):
        try:
            pending[pool.submit(work, unit)] = unit
        except BrokenProcessPool:
            return units[n:]
    return []


def _settled(unit: Unit, doc: dict[str, Any], status: str, why: str) -> SampleResult:
    """The record of a unit that ended its process; the ops are those of the level in flight."""
    kind, _, index = unit.key.partition(":")
    if index == "gen":
        return SampleResult(doc["label"], -1, doc["dtype"], status, f"sample generation: {why}")
    number = 0 if kind == "extra" else int(index)
    return SampleResult(doc["label"], number, doc["dtype"], status, why, doc["ops"], [], doc["level"] or "core")


def _last_words(workdir: Path, pid: int) -> str:
    """The dead worker's stderr since the sample in flight began: native abort messages and
    faulthandler's `Fatal Python error` line, without the Python frames."""
    try:
        text = (workdir / f"{pid}.err").read_text(errors="replace")
    except OSError:
        return ""
    text = text.rsplit(MARK, 1)[-1].split("\n", 1)[-1]
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
