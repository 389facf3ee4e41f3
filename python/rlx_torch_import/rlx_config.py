"""How RLX's CPU runtime is configured in this process: threads and the OpenBLAS kernel.

RLX 0.2.19 reads these settings once, when its CPU backend starts, so they are
process-wide (docs/design.md, "Runtime configuration", has the measurements):

- **Threads.** RLX runs outer loops (GEMM tiles, attention heads, elementwise
  chunks) on its Rayon pool and pins OpenBLAS to one thread inside it. The pool
  size is `RLX_WORKERS`; RLX's own default is 3/4 of the cores (1 on a 2-core
  machine). We default to every core this process may run on, like PyTorch.
  OpenBLAS is left to RLX, which keeps it at one thread inside the pool (more
  would only oversubscribe the cores; measured in docs/design.md).
- **OpenBLAS kernel.** Debian 12's OpenBLAS 0.3.21 does not know recent Intel
  CPUs and falls back to its generic "Prescott" (SSE3) kernels, 3x slower than its
  AVX-512 ones. OpenBLAS reads `OPENBLAS_CORETYPE` when the library loads, which
  happens when the Rust core is imported, so `prepare_process()` runs first
  (package import). The core type is chosen from the CPU's own feature flags
  (`/proc/cpuinfo`), never hard-coded, and only when the user has not set it.

Everything is overridable with the variables named above; `describe()` says what
is in effect (the benchmark prints it).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from .errors import InputError

_THREADS_VAR = "RLX_WORKERS"
_applied_threads: int | None = None
_forced_coretype: str | None = None

# OpenBLAS 0.3.21 DYNAMIC_ARCH core types, best first, with the CPU flags each one's kernels use.
_CORETYPES: tuple[tuple[str, frozenset[str]], ...] = (
    ("SkylakeX", frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"})),
    ("Haswell", frozenset({"avx2", "fma"})),
    ("Sandybridge", frozenset({"avx"})),
)


def available_cpus() -> int:
    """Cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cpu_flags() -> frozenset[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def openblas_coretype_for(flags: frozenset[str]) -> str | None:
    """The fastest OpenBLAS 0.3.21 core type whose instructions the CPU has, or None."""
    for name, needs in _CORETYPES:
        if needs <= flags:
            return name
    return None


def prepare_process() -> None:
    """Set the variables RLX and OpenBLAS read at start-up, unless the user set them.

    Must run before the Rust core is imported (the package's `__init__` does it).
    """
    global _forced_coretype
    if "OPENBLAS_CORETYPE" not in os.environ:
        coretype = openblas_coretype_for(_cpu_flags())
        if coretype is not None:
            os.environ["OPENBLAS_CORETYPE"] = coretype
            _forced_coretype = coretype
    os.environ.setdefault(_THREADS_VAR, str(available_cpus()))


def set_threads(threads: int | None) -> int:
    """Size RLX's thread pool (`None`: keep the current setting); returns the size in effect.

    `threads` wins over `RLX_WORKERS` (which sets the default). The pool is built once
    per process, when the first model is compiled, so a different size after that is an
    `InputError` rather than silently ignored; so is a `threads` or `RLX_WORKERS` that
    is not a positive integer.
    """
    global _applied_threads
    current = _applied_threads or _env_threads()
    if threads is None:
        return current
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise InputError(f"threads must be a positive integer, got {threads!r}")
    if _applied_threads is not None and threads != _applied_threads:
        raise InputError(
            f"threads={threads}: RLX's thread pool already runs {_applied_threads} thread(s) in this process",
            hint="set threads on the first model this process loads (or RLX_WORKERS before it starts)",
        )
    os.environ[_THREADS_VAR] = str(threads)
    return threads


def _env_threads() -> int:
    """`RLX_WORKERS` as set (by the user, or by `prepare_process` to every available core)."""
    text = os.environ.get(_THREADS_VAR) or str(available_cpus())
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(f"{_THREADS_VAR}={text!r}: the number of RLX threads must be a positive integer")
    return n


def mark_started() -> int:
    """Record that RLX has started (its pool size is now fixed); returns that size."""
    global _applied_threads
    if _applied_threads is None:
        _applied_threads = _env_threads()
    return _applied_threads


def openblas_corename() -> str | None:
    """The kernel family OpenBLAS runs (`openblas_get_corename`), or None without OpenBLAS."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0", mode=getattr(os, "RTLD_NOLOAD", 4))
    except OSError:
        return None
    fn = lib.openblas_get_corename
    fn.restype = ctypes.c_char_p
    name = fn()
    return name.decode() if name else None


def describe() -> dict[str, object]:
    """The configuration in effect: threads, OpenBLAS core type and whether we chose it."""
    return {
        "threads": set_threads(None),
        "openblas_core": openblas_corename(),
        "openblas_coretype_chosen_by": "rlx-torch-import" if _forced_coretype else "OpenBLAS / user",
    }
