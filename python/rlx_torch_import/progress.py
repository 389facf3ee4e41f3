"""Phase progress on stderr, so long conversions show where they are."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Progress:
    """Prints `[rlx-torch-import] phase ... done in 1.2s` lines; silent when disabled."""

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
            self.timings[name] = round(elapsed, 4)
        if self.enabled:
            print(f"[rlx-torch-import] {name} done in {elapsed:.2f}s", file=sys.stderr, flush=True)
