"""The units on a `concurrent.futures.ProcessPoolExecutor` of spawned workers (`worker.py`), with a
per-unit time limit, and a new pool whenever one breaks.

A few units are in flight at a time (twice the workers). A unit past the time limit has its worker
killed (SIGKILL) and is recorded `error` (timeout). A worker that dies otherwise (RLX can abort the
process) breaks the pool: the units it had not begun run on the next pool; those in flight are
suspects, each re-run at the end alone in a fresh one-worker pool, where one that kills its process
again is recorded `error` with the process's last words. A pool's units in flight when we killed
a worker for time run again (they were not its cause). With `jobs` 0 everything runs in this
process (no isolation, no time limit; for debugging).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tools.onnx_coverage.judge import failure
from tools.onnx_coverage.worker import Unit, init_worker, work

Record = dict[str, Any]


class Runner:
    """Runs units to their records (`done(unit, record)` as each settles), `jobs` at a time."""

    def __init__(
        self,
        jobs: int,
        timeout: float,
        workdir: Path,
        done: Callable[[Unit, Record], None],
        log: Callable[[str], None],
        tasks_per_worker: int | None = None,
    ) -> None:
        self.jobs, self.timeout, self.workdir, self.done, self.log = jobs, timeout, workdir, done, log
        self.tasks_per_worker = tasks_per_worker
        self.state = workdir / "state"
        self.scratch = workdir / "scratch"
        self.state.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.pools = 0
        self.deaths: list[str] = []  # what each broken pool was running
        self._words: dict[str, str] = {}  # unit key -> its dead worker's last words
        self._idle = 0  # pools in a row that broke before any unit began

    def run(self, units: list[Unit]) -> None:
        """Every unit to its record."""
        if self.jobs == 0:
            for unit in units:
                self.done(unit, work(unit, str(self.scratch)))
            return
        queue, suspects = list(units), []
        while queue:
            queue, lost = self._pool_with_progress(queue, self.jobs)
            suspects += lost
        for unit in suspects:
            self.log(f"{unit.key}: in flight when a worker died; running it again alone")
            again = [unit]
            while again:
                again, lost = self._pool_with_progress(again, 1)
                for dead in lost:
                    why = self._last_words(dead)
                    self.done(dead, failure("error", f"worker process died: {why}", [why], ["worker process died"]))

    def _pool_with_progress(self, queue: list[Unit], jobs: int) -> tuple[list[Unit], list[Unit]]:
        """`_one_pool`; RuntimeError when three pools in a row broke before any unit began (workers that
        die starting up, e.g. in the warm-up: no case is to blame, and retrying would never end)."""
        before = len(queue)
        again, lost = self._one_pool(queue, jobs)
        self._idle = self._idle + 1 if again and len(again) == before and not lost else 0
        if self._idle >= 3:
            errs = sorted(self.state.glob("*.err"), key=lambda p: p.stat().st_mtime)
            words = errs[-1].read_text(errors="replace").strip()[-600:] if errs else "(no stderr)"
            raise RuntimeError(f"workers die before running any case (3 pools in a row); a worker's stderr:\n{words}")
        return again, lost

    def _in_flight(self) -> dict[str, tuple[int, float]]:
        """Unit key -> (pid, start) of the units the workers are running now."""
        found = {}
        for path in self.state.iterdir():
            if not path.name.isdigit():
                continue
            try:
                key, start = path.read_text().split("\n")
            except (OSError, ValueError):
                continue
            found[key] = (int(path.name), float(start))
        return found

    def _one_pool(self, queue: list[Unit], jobs: int) -> tuple[list[Unit], list[Unit]]:
        """Run `queue` on a fresh pool until done or broken: (units to run again, suspects)."""
        self.pools += 1
        for old in self.state.iterdir():
            if old.name.isdigit():
                old.unlink()
        ctx = get_context("spawn")
        opts: dict[str, Any] = {"mp_context": ctx, "initializer": init_worker, "initargs": (str(self.state),)}
        if self.tasks_per_worker:
            opts["max_tasks_per_child"] = self.tasks_per_worker
        pending: dict[Future[Record], Unit] = {}
        lost: list[Unit] = []
        killed: set[str] = set()
        todo = list(queue)
        with ProcessPoolExecutor(jobs, **opts) as pool:
            while todo or pending:
                while todo and len(pending) < 2 * jobs and not lost:
                    unit = todo.pop(0)
                    try:
                        pending[pool.submit(work, unit, str(self.scratch))] = unit
                    except BrokenProcessPool:
                        todo.insert(0, unit)
                        break
                finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in finished:
                    unit = pending.pop(f)
                    exc = f.exception()
                    if isinstance(exc, BrokenProcessPool):
                        lost.append(unit)
                    elif exc is not None:
                        self.done(unit, failure("error", f"worker raised {type(exc).__name__}: {exc}"))
                    else:
                        self.done(unit, f.result())
                if lost and not pending:
                    break
                self._kill_overdue(pending, killed)
        return self._broken(lost, killed, todo)

    def _kill_overdue(self, pending: dict[Future[Record], Unit], killed: set[str]) -> None:
        if self.timeout <= 0:
            return
        now, keys = time.time(), {u.key for u in pending.values()}
        for key, (pid, start) in self._in_flight().items():
            if key in keys and key not in killed and now - start > self.timeout:
                killed.add(key)
                self.log(f"{key}: no result after {self.timeout:.0f} s; killing its worker")
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _broken(self, lost: list[Unit], killed: set[str], todo: list[Unit]) -> tuple[list[Unit], list[Unit]]:
        """Sort the units a broken pool lost: timed out (recorded), suspects, or to run again."""
        if not lost:
            return todo, []
        flight = self._in_flight()
        again, suspects = [], []
        for unit in lost:
            if unit.key in killed:
                why = f"timeout: no result within {self.timeout:.0f} s; its worker was killed"
                self.done(unit, failure("error", why, [why], ["timeout"]))
            elif unit.key in flight and not killed:
                suspects.append(unit)
            else:
                again.append(unit)
        self.deaths.append(", ".join(u.key for u in lost if u.key in flight))
        self._words.update({u.key: self._read_err(flight[u.key][0]) for u in lost if u.key in flight})
        return again + todo, suspects

    def _read_err(self, pid: int) -> str:
        """A dead worker's stderr since its last unit began, without Python frames (its last words)."""
        try:
            text = (self.state / f"{pid}.err").read_text(errors="replace")
        except OSError:
            return ""
        text = text.rsplit("\n@@ ", 1)[-1].split("\n", 1)[-1]
        keep = [
            s.strip()
            for s in text.splitlines()
            if s.strip() and not s.startswith((" ", "\t")) and not s.startswith(("Current thread", "Thread 0x"))
        ]
        return " / ".join(keep[-4:])[:300]

    def _last_words(self, unit: Unit) -> str:
        return self._words.get(unit.key, "") or "no message"
