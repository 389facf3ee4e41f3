"""The size policy every declared tensor is checked against (torch-ir, safetensors headers, bundles).

A tensor's element count and byte size (for its dtype) must be computable from a shape of
non-negative ints and at most this machine's physical memory
(`os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")`): a larger tensor can never be
held, so a declaration that asks for one is refused with an error naming where it was declared,
instead of an allocation that aborts the process later.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .dtypes import TORCH_ITEMSIZE
from .errors import RtiError

# When the OS does not say (no sysconf): 1 TiB, a bound no tensor on a host here reaches.
_FALLBACK_LIMIT = 1 << 40


@lru_cache(maxsize=1)
def memory_limit() -> int:
    """The largest tensor size in bytes a declaration may ask for: this machine's physical memory
    (`SC_PHYS_PAGES * SC_PAGE_SIZE`; 1 TiB where the OS does not report it)."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_LIMIT
    return pages * page if pages > 0 and page > 0 else _FALLBACK_LIMIT


def _human(n: int) -> str:
    if n.bit_length() > 80:
        return f"about 2^{n.bit_length() - 1} B"
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _num(n: int) -> str:
    """An int for a message (a huge one as a power of two: `str` refuses ints past 4300 digits)."""
    return str(n) if n.bit_length() <= 64 else f"about 2^{n.bit_length() - 1}"


def short(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters, for error messages about arbitrary file content."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4300-digit printing limit
        return f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_dim(d: Any) -> bool:
    """Whether `d` is a static size: a non-negative int (a bool is not a size)."""
    return isinstance(d, int) and not isinstance(d, bool) and d >= 0


def check_dtype(dtype: Any, where: str, error: type[RtiError], known: Collection[str] | None = None) -> int:
    """The item size of `dtype`; `error` naming `where` and the value when it is not a name in
    `known` (default: every torch dtype, `TORCH_ITEMSIZE`)."""
    allowed = TORCH_ITEMSIZE if known is None else known
    if not isinstance(dtype, str) or dtype not in allowed or dtype not in TORCH_ITEMSIZE:
        names = ", ".join(sorted(allowed)) if len(allowed) <= 12 else "torch's: float32, bfloat16, int64, bool, ..."
        raise error(f"{where}: dtype {short(dtype)} is not a known dtype name ({names})")
    return TORCH_ITEMSIZE[dtype]


def check_tensor_size(
    shape: Sequence[Any],
    dtype: Any,
    where: str,
    error: type[RtiError],
    known: Collection[str] | None = None,
) -> int:
    """The byte size of a tensor declared `dtype` `shape` at `where` (a file and field path).

    Raises `error` (the caller's error type) naming `where` and the bad value when the dtype is
    not a name in `known` (default: any torch dtype), a dim is not a non-negative int, or the
    tensor's bytes exceed `memory_limit()` (the machine's physical memory): then the message
    gives the shape, dtype, element count, bytes and the limit."""
    itemsize = check_dtype(dtype, where, error, known)
    if not isinstance(shape, (list, tuple)):
        raise error(f"{where}: shape {short(shape)} is not a list of sizes")
    for i, d in enumerate(shape):
        if not is_dim(d):
            raise error(f"{where}: dim {i} of shape {short(list(shape))} is {short(d)}, not a non-negative int")
    count = math.prod(shape)
    size = count * itemsize
    limit = memory_limit()
    if size > limit:
        raise error(
            f"{where}: {dtype}{short(list(shape), 120)} is {_num(count)} elements, {_num(size)} bytes "
            f"({_human(size)}), more than this "
            f"machine's physical memory ({limit} bytes, {_human(limit)}), the most a tensor may declare"
        )
    return size


def regular_file(path: Path, error: type[RtiError]) -> None:
    """Raise `error` naming `path` unless it is an existing regular file (a FIFO or device would
    block a read forever; a directory cannot be read)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: not found")
    if not path.is_file():
        raise error(f"{path}: not a regular file")
