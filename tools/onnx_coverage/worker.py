"""What a worker process does with one unit: a case through our front end (`rlx`) or through ONNX
Runtime (`ort`, the anchor), each judged against the case's expected outputs (`engines.py`).

A unit's record (`judge.py`) gets `seconds`; an `rlx` record also has `report_ok` (our own
verification against ONNX Runtime said PASS: True / False; None when it did not verify), `verify`
("ort", "none" when the conversion failed, or "skipped: ..." when ONNX Runtime cannot run the
case) and, once converted, `route` (which of the front end's routes converted it: "importer" or
"torch", from the report's `route:` note).

While a unit runs, its worker keeps `<statedir>/<pid>` holding the unit's key and start time (the
parent reads it to time units out and to know what a dead worker was doing); its stderr goes to
`<statedir>/<pid>.err`, where faulthandler and RLX write a dying process's last words.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.onnx_coverage.cases import Case
from tools.onnx_coverage.engines import run_ort, run_rlx
from tools.onnx_coverage.judge import failure, first_line

ENGINES = ("rlx", "ort")
_STATE: Path | None = None  # this worker's state directory (None: running in the parent)


@dataclass
class Unit:
    """One case through one engine (`rlx` or `ort`)."""

    case: Case
    engine: str

    @property
    def key(self) -> str:
        return f"{self.engine}:{self.case.name}"


def init_worker(statedir: str) -> None:
    """One thread for RLX, ONNX Runtime, torch and BLAS (the pool is the parallelism); stderr to a file
    of this process, where faulthandler names a fatal signal. Runs before rlx_torch_import is imported."""
    import faulthandler

    global _STATE
    _STATE = Path(statedir)
    for var in ("RLX_WORKERS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[var] = "1"
    sys.stderr.flush()
    err = os.open(_STATE / f"{os.getpid()}.err", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(err, 2)
    os.close(err)
    faulthandler.enable()
    _warm_up(_STATE / f"warm-up-{os.getpid()}")


def _warm_up(where: Path) -> None:
    """Convert and run a one-Relu model once, so that the first case's time (its time limit) does not
    include this process's one-time costs: importing torch, ONNX Runtime and the core (about 13 s on
    an idle 2-core machine). A failure here is left for the cases to meet and report."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from rlx_torch_import import from_onnx
    from rlx_torch_import.bundle.model import BundleModel

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("x", "y"))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "warm_up", [x], [y])
    where.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), where / "model.onnx")
    feed = {"x": np.array([-1.0, 0.0, 1.0], np.float32)}
    try:
        from_onnx(where / "model.onnx", where / "out", inputs=feed, per_node=False, progress=False, threads=1)
        BundleModel(where / "out" / "bundle", threads=1).run(feed)
    except Exception as e:
        print(f"warm-up failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _publish(text: str) -> None:
    if _STATE is not None:
        (_STATE / str(os.getpid())).write_text(text)


def work(unit: Unit, scratch: str) -> dict[str, Any]:
    """Run one unit; its record (module docstring). `scratch`: a directory for the conversion folders."""
    start = time.time()
    _publish(f"{unit.key}\n{start}")
    if _STATE is not None:
        print(f"\n@@ {unit.key}", file=sys.stderr, flush=True)
    try:
        rec = run_rlx(unit.case, Path(scratch)) if unit.engine == "rlx" else run_ort(unit.case)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a harness bug, or a Rust panic that escaped: recorded, not fatal
        rec = failure("error", f"harness: {first_line(e)}", causes=[f"harness {type(e).__name__}"])
    rec["seconds"] = round(time.time() - start, 3)
    _publish("")
    return rec
