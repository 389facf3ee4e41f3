"""Every op family's `SAMPLES` (tests/ops/test_<family>.py) in one list.

For `rlx-torch-import coverage --extra-samples tests/ops/all_samples.py`, scripts/probe_cuda_kernels.py
and tests/ops/test_all_ops_sampled.py: the `SAMPLES` of every `test_*.py` here that has one, by module name.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from _samples import Sample

HERE = Path(__file__).resolve().parent  # on sys.path (tests/conftest.py; coverage adds the file's folder)

SAMPLES: list[Sample] = [
    sample
    for name in sorted(p.stem for p in HERE.glob("test_*.py"))
    for sample in getattr(importlib.import_module(name), "SAMPLES", [])
]
