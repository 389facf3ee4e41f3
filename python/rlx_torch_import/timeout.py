"""Run the user's code (the model file, torch.export of its forward, eager runs) under a time
limit, and turn its `sys.exit()` into an error that says so.

A limit of `seconds` works in three layers:

1. In the main thread, SIGALRM fires after `seconds` and raises an internal BaseException
   wherever Python code is running (so `except Exception:` in the model or in torch does not
   swallow it), again every second until the phase ends; the phase then raises TimeLimitError
   naming itself, the limit and the user's line it stopped at. The previous SIGALRM handler and
   any alarm already set are restored afterwards (the alarm less the time spent).
2. Off the main thread (from_torch called from a worker thread), signal handlers cannot be set;
   the same exception is delivered to the calling thread with CPython's
   `PyThreadState_SetAsyncExc`. Like a signal handler it runs only between Python bytecodes:
   a thread blocked in one C call is stopped when that call returns.
3. The CLI (which owns its process) also starts a watchdog thread (`enable_watchdog`): if the
   phase is still running `GRACE_S` seconds after the limit (stuck in C code that never comes
   back to the interpreter, or code that swallows the interrupt), it prints the error, removes
   the staging folders being written and ends the process with exit code 6
   (ExitCode.TIMED_OUT). A C call that holds the GIL forever blocks that thread too; `os._exit()`
   in the model file cannot be intercepted at all.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from .errors import InputError, ModelLoadError, TimeLimitError

# Seconds the watchdog waits after the limit before it ends the process.
GRACE_S = 5.0
# Seconds between repeated interrupts once the limit has passed.
REPEAT_S = 1.0
HINT = (
    "the model file or its forward() may loop forever or wait on something that never comes; if it is "
    "only slow, raise the limit (--timeout SECONDS, or from_torch(timeout=...))"
)

_watchdog = False


def enable_watchdog(on: bool = True) -> None:
    """Let time limits end the whole process when the user's code does not come back to Python
    (layer 3 of the module docstring). For the CLI only: a library must not exit its caller."""
    global _watchdog
    _watchdog = on


def check_timeout(seconds: Any, what: str = "timeout") -> float | None:
    """`seconds` as a float, or None for no limit. Raises InputError naming `what` and the value
    unless it is None or a finite number above zero."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InputError(f"{what} must be a number of seconds or None, got {type(seconds).__name__} {seconds!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"{what} must be a finite number of seconds above 0, got {seconds!r}")
    return float(seconds)


class _Deadline(BaseException):
    """Raised into the user's code when the limit has passed; never leaves this module."""


_OURS = str(Path(__file__).parent)


def user_frame(exc: BaseException, file: Path | None = None) -> str:
    """` at model.py:12 (code)` for the innermost frame of `file` in `exc`'s traceback, or (no
    `file`) of the user's own code, outside torch, site-packages, the standard library and this
    package; "" when there is none."""
    frames: list[traceback.FrameSummary] = traceback.extract_tb(exc.__traceback__)
    if file is not None:
        wanted = str(Path(file).resolve())
        frames = [f for f in frames if not f.filename.startswith("<") and str(Path(f.filename).resolve()) == wanted]
    else:
        skip = [_OURS, *_library_dirs()]
        frames = [f for f in frames if not f.filename.startswith(("<", *skip)) and "site-packages" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {Path(f.filename).name}:{f.lineno} ({(f.line or '').strip()})"


def _library_dirs() -> list[str]:
    import sysconfig

    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    try:
        import torch

        dirs.add(str(Path(torch.__file__).parent))
    except ImportError:  # torch is always there in practice; the frames are only a courtesy
        pass
    return sorted(dirs)


def exit_error(exc: SystemExit, phase: str, file: Path | None = None) -> ModelLoadError:
    """The ModelLoadError for a `sys.exit(code)` the user's code called during `phase`."""
    return ModelLoadError(
        f"{phase}: the model called sys.exit({exc.code!r}){user_frame(exc, file)}",
        hint="forward() must return its outputs; a model that ends the process cannot be converted",
    )


class _Alarm:
    """Layer 1: SIGALRM in the main thread."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.done = False
        self._handler: Any = None
        self._timer = (0.0, 0.0)
        self._t0 = 0.0

    def _ring(self, signum: int, frame: Any) -> None:
        if self.done:
            return
        self.fired = True
        raise _Deadline()

    def arm(self) -> None:
        self._handler = signal.signal(signal.SIGALRM, self._ring)
        self._t0 = time.monotonic()
        self._timer = signal.setitimer(signal.ITIMER_REAL, self.seconds, REPEAT_S)

    def disarm(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.done = True
        signal.signal(signal.SIGALRM, self._handler if self._handler is not None else signal.SIG_DFL)
        delay, interval = self._timer
        if delay > 0:  # someone else's alarm was pending: it goes on, less the time spent here
            left = delay - (time.monotonic() - self._t0)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), interval)


class _AsyncInterrupt:
    """Layer 2: an asynchronous exception delivered to a thread that is not the main one."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.done = False
        self._tid = threading.get_ident()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlx-torch-import time limit", daemon=True)

    def _set(self, exc: Any) -> None:
        import ctypes

        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid), exc)

    def _run(self) -> None:
        wait = self.seconds
        while not self._stop.wait(wait):
            with self._lock:
                if self.done:
                    return
                self.fired = True
                import ctypes

                self._set(ctypes.py_object(_Deadline))
            wait = REPEAT_S

    def arm(self) -> None:
        self._thread.start()

    def disarm(self) -> None:
        with self._lock:
            self.done = True
            self._set(None)  # NULL: clears an exception delivered but not raised yet
        self._stop.set()


class _Watchdog:
    """Layer 3: end the process when the phase outlives its limit by GRACE_S."""

    def __init__(self, seconds: float, message: str) -> None:
        self._message = message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(seconds + GRACE_S,), daemon=True)
        self._thread.name = "rlx-torch-import watchdog"

    def _run(self, wait: float) -> None:
        if self._stop.wait(wait):
            return
        from . import outdir

        os.write(2, self._message.encode("utf-8", "replace"))
        outdir.discard_active()
        os._exit(TimeLimitError.exit_code)

    def arm(self) -> None:
        self._thread.start()

    def disarm(self) -> None:
        self._stop.set()


class user_code:  # a context manager used like a function, hence the lowercase name
    """`with user_code(phase, seconds):` runs the user's code for `phase` (module docstring).

    Raises TimeLimitError (exit 6) naming `phase`, the limit and the line it stopped at when the
    block runs past `seconds` (None: no limit), and ModelLoadError (exit 2) when the block calls
    `sys.exit()`. Any other exception passes through, unless the limit had passed when it was
    raised (torch wraps the interrupt in its own errors): that is a TimeLimitError too."""

    def __init__(self, phase: str, seconds: float | None, *, file: Path | None = None) -> None:
        self.phase = phase
        self.seconds = check_timeout(seconds)
        self.file = file
        self._limit: _Alarm | _AsyncInterrupt | None = None
        self._watch: _Watchdog | None = None

    def _message(self) -> str:
        return f"{self.phase} did not finish within the time limit of {self.seconds:g} s"

    def __enter__(self) -> user_code:
        if self.seconds is None:
            return self
        main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        self._limit = _Alarm(self.seconds) if main else _AsyncInterrupt(self.seconds)
        if _watchdog:
            note = (
                f"error: {self._message()}, and it did not stop within {GRACE_S:g} s more (stuck in C code, or "
                f"code that catches the interrupt): the process was ended\nhint: {HINT}\n"
            )
            self._watch = _Watchdog(self.seconds, note)
            self._watch.arm()
        self._limit.arm()
        return self

    def _disarm(self) -> bool:
        """Stop every layer; True when the limit had passed (an interrupt that arrives while
        stopping is caught here too)."""
        limit, fired = self._limit, False
        if limit is None:
            return False
        while True:
            try:
                limit.disarm()
                if self._watch is not None:
                    self._watch.disarm()
                return fired or limit.fired
            except _Deadline:
                fired = True

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        fired = self._disarm()
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C stays Ctrl-C (exit 130)
            return False
        if fired or isinstance(exc, _Deadline):
            where = user_frame(exc, self.file) if exc is not None else ""
            where = where.replace(" at ", " (stopped at ", 1) + ")" if where else ""
            error = TimeLimitError(f"{self._message()}{where}", hint=HINT)
            if isinstance(exc, _Deadline) or exc is None:
                raise error from None
            raise error from exc
        if isinstance(exc, SystemExit):
            raise exit_error(exc, self.phase, self.file) from None
        return False
