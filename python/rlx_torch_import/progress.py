"""Phase progress on stderr, so long conversions show where they are."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


class Progress:
    """Prints `[rlx-torch-import] phase ... done in 1.2s` lines, and a tqdm bar over the items of a
    long phase (`items`: per-node parity, sweep points, input sets); silent when disabled. `timings`:
    seconds per phase name, whether printed or not (a name entered twice adds up)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.timings: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.enabled:
            print(f"[rlx-torch-import] {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.timings[name] = round(self.timings.get(name, 0.0) + elapsed, 4)  # a phase run again adds up
        if self.enabled:
            print(f"[rlx-torch-import] {name} done in {elapsed:.2f}s", file=sys.stderr, flush=True)

    def items(self, items: Sequence[T], what: str) -> Iterator[T]:
        """`items` in order; when enabled, with a progress bar on stderr counting `what`."""
        if not self.enabled:
            yield from items
            return
        from tqdm import tqdm

        with tqdm(items, desc=f"[rlx-torch-import] {what}", unit="", file=sys.stderr, leave=False) as bar:
            yield from bar
