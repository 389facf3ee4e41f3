"""The repository's developer tools, not part of the installed package: the benchmarks, the Core ATen
coverage runner and the generators of docs/supported-ops.md, docs/rlx-defects.md and docs/errors.md.

Run them from the repository root (`python -m tools.bench`, `python -m tools.coverage`,
`python -m tools.opsdoc --check`, ...); they import the package (`rlx_torch_import`) and the test
suite's models (`tests/models.py`) like any other code.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) with the repository root first on PYTHONPATH, so a
    child `python -m tools.<name>` finds `tools` and `tests` whatever its working directory."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [out.get("PYTHONPATH", "")])])
    return out
