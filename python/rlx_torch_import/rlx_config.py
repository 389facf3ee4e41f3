"""How RLX's CPU runtime is configured in this process: threads, the BLAS provider, the OpenBLAS kernel.

RLX 0.2.19 reads these settings once, when its CPU backend starts, so they are
process-wide (docs/design.md, "Runtime configuration", has the measurements):

- **Threads.** RLX runs outer loops (GEMM tiles, attention heads, elementwise
  chunks) on its Rayon pool and pins OpenBLAS to one thread inside it. The pool
  size is `RLX_WORKERS`; RLX's own default is 3/4 of the cores (1 on a 2-core
  machine). We default to every core this process may run on, like PyTorch.
  OpenBLAS is left to RLX, which keeps it at one thread inside the pool (more
  would only oversubscribe the cores; measured in docs/design.md).
- **BLAS provider.** RLX's MatMul and im2col convolution are `cblas_sgemm` calls;
  the core forwards them to a provider it loads at run time (src/blas.rs):
  `RTI_BLAS=auto` (default) takes Intel MKL on Intel CPUs and OpenBLAS 0.3.34
  (scipy-openblas32) elsewhere, falling back to the system's `libopenblas.so.0`;
  `RTI_BLAS=mkl|openblas|system|/path/lib.so` forces one (`system` is the way back
  to Debian's OpenBLAS). `prepare_process()` tells the core where the pinned wheels
  put the libraries (`RTI_BLAS_MKL`, `RTI_BLAS_OPENBLAS`); `blas()` loads and names
  the provider, raising `InputError` when the one asked for cannot be loaded.
- **OpenBLAS kernel.** Debian 12's OpenBLAS 0.3.21 does not know recent Intel
  CPUs and falls back to its generic "Prescott" (SSE3) kernels, 3x slower than its
  AVX-512 ones. OpenBLAS reads `OPENBLAS_CORETYPE` when the library loads, so
  `prepare_process()` runs first (package import). The core type is chosen from
  the CPU's own feature flags (`/proc/cpuinfo`), never hard-coded, and only when
  the user has not set it.

Everything is overridable with the variables named above; `describe()` says what
is in effect (the benchmark prints it).
"""

from __future__ import annotations

import os
from importlib import metadata
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
    for var, (dist, pattern) in _BLAS_WHEELS.items():
        if not os.environ.get(var):
            found = _wheel_library(dist, pattern)
            if found is not None:
                os.environ[var] = found


# The pinned wheels that carry a BLAS provider: variable the core reads -> (distribution, file glob).
_BLAS_WHEELS: dict[str, tuple[str, str]] = {
    "RTI_BLAS_MKL": ("mkl", "libmkl_rt.so.*"),
    "RTI_BLAS_OPENBLAS": ("scipy-openblas32", "libscipy_openblas.so"),
}


def _wheel_library(dist: str, pattern: str) -> str | None:
    """The installed file of distribution `dist` whose name matches `pattern`, or None."""
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if Path(f.name).match(pattern):
            path = Path(str(f.locate()))
            if path.is_file():
                return str(path.resolve())
    return None


def blas() -> dict[str, str]:
    """The BLAS provider RLX computes with, loaded now if it was not yet (see module docs).

    Returns {"provider", "path", "detail", "chosen_by"}. Raises `InputError` naming `RTI_BLAS`
    when the provider asked for cannot be loaded (a BLAS call would otherwise abort the process).
    """
    from . import _core

    try:
        provider, path, detail, chosen_by = _core.blas_info()
    except _core.CheckError as err:
        raise InputError(
            f"no BLAS provider for RLX: {err}",
            hint="RTI_BLAS=auto|mkl|openblas|system|/path/to/libblas.so (docs/usage.md, 'BLAS provider')",
        ) from None
    return {"provider": provider, "path": path, "detail": detail, "chosen_by": chosen_by}


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
        blas()  # a provider that cannot load is an InputError here, not an abort in RLX
        _applied_threads = _env_threads()
    return _applied_threads


def describe() -> dict[str, object]:
    """The configuration in effect: threads, the BLAS provider, the OpenBLAS core type and who chose it."""
    info = blas()
    return {
        "threads": set_threads(None),
        "blas": info["provider"],
        "blas_detail": info["detail"],
        "blas_chosen_by": info["chosen_by"],
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        "openblas_coretype_chosen_by": "rlx-torch-import" if _forced_coretype else "OpenBLAS / user",
    }
