"""Conversion time as a CLI user sees it: `rlx-torch-import MODEL.py -o OUT` in a fresh process, phase by
phase, against a fresh process doing what torch alone does for the same model.

    python -m tools.bench.cli_wall [--models a,b] [--threads N] [--runs N]

Per benchmark model (`tools/bench/models.py`) a model file is written to a temporary folder (`get_model()`
builds the model as the benchmark does). Then, each in a fresh `python -X importtime` process (both pay the
log's cost, ~15% of `import torch`), `--runs` timed runs (medians; before the first model's, one untimed run
of each fills the compiled-module cache) of:

- **CLI**: `rlx_torch_import.cli.main()` on `MODEL.py -o OUT --threads N` (every default: verification and
  per-node parity as a user gets them), after the imports the console script makes before it runs the model
  file, timed. Phases: `import torch` (the first import's whole subtree in the import-time log; torch modules
  imported later belong to the phase that imports them); the package import (those imports, less torch if
  they brought it); the others from the CLI's progress lines (`[rlx-torch-import] PHASE done in S`): the
  model file (running MODEL.py and `get_model()`, less torch if it brought it), export (torch.export and
  its decomposition), reference (the eager run), ours (capture, lowering, torch-ir and weight files, the
  checks, the bundle), verify, per-node parity, write (report.json/.md/.html); "other" is the rest of the
  wall time (interpreter start and exit, argument parsing, the move of the staged folder).
- **baseline**: the same MODEL.py, then `torch.export.export` and `run_decompositions` with the table our
  export uses (`decomposition="high"`; taking it from rlx_torch_import is not counted), then one eager
  forward under `torch.no_grad()`: what the conversion would cost if only torch did work.

Columns: **ratio** = CLI wall / baseline wall (target ≤ `RATIO_TARGET`), **ours/export** = (ours +
per-node + write) / export (target ≤ `OURS_TARGET`, as `make bench`'s "ours/export", which counts per-node
parity and the reports too). Python caches compiled modules for the children (PYTHONDONTWRITEBYTECODE is
dropped for them, the warm-up writes the cache), as an installed package has them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools import ROOT, child_env

RATIO_TARGET = 1.3
OURS_TARGET = 0.25
DEFAULT_MODELS = ("mlp", "resnet18", "mobilenet_v3_small", "vit_b_16", "bert", "llama")
# Progress phases that are not our own conversion stages (everything else the CLI times is).
NOT_OURS = ("export", "reference", "verify", "per-node parity", "write reports")

MODEL_FILE = '''"""cli_wall: benchmark model {name!r} (tools/bench/models.py)."""
import sys

sys.path.insert(0, {root!r})
from tools.bench.models import registry


def get_model():
    return registry()[0][{name!r}].make()
'''

BASELINE = """import json, runpy, sys, time
start = time.perf_counter()
import torch
t_torch = time.perf_counter()
model, inputs = runpy.run_path(sys.argv[1])["get_model"]()
t_model = time.perf_counter()
from rlx_torch_import.frontend.torch.export import decomposition_table  # the table only: not counted
table = decomposition_table("high")
t_table = time.perf_counter()
with torch.no_grad():
    ep = torch.export.export(model.eval(), tuple(inputs)).run_decompositions(table)
t_export = time.perf_counter()
with torch.no_grad():
    model(*inputs)
t_eager = time.perf_counter()
json.dump({"torch import": t_torch - start, "model file": t_model - t_torch, "export": t_export - t_table,
           "reference": t_eager - t_export, "not counted": t_table - t_model}, open(sys.argv[2], "w"))
"""

# The CLI as the console script runs it (`rlx_torch_import.cli:main`), after timing the imports it makes
# before it runs the model file (the package, the API, the model-file loader).
CLI = """import sys, time
start = time.perf_counter()
import rlx_torch_import.cli as cli
from rlx_torch_import import api
from rlx_torch_import.frontend.torch import dynamic, model_file
print(f"[rlx-torch-import] package import done in {time.perf_counter() - start:.4f}s", file=sys.stderr)
sys.argv[0] = "rlx-torch-import"
sys.exit(cli.main())
"""

_PHASE = re.compile(r"^\[rlx-torch-import\] (.+) done in ([0-9.]+)s$")
_IMPORT = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


@dataclass
class Run:
    """One fresh process: its wall time and phases (seconds)."""

    wall: float
    phases: dict[str, float] = field(default_factory=dict)


def torch_import(stderr: str) -> tuple[float, bool]:
    """From `-X importtime` lines: the seconds of the first `import torch` (its whole subtree; torch's modules
    imported later, while exporting, are the export's), and whether our package made it (else the model
    file did)."""
    rows = [m.groups() for line in stderr.splitlines() if (m := _IMPORT.match(line))]
    stack: list[tuple[int, str]] = []  # the lines are printed children first: read backwards, parents first
    for _own, cumulative, indent, name in reversed(rows):
        while stack and stack[-1][0] >= len(indent):
            stack.pop()
        if name == "torch":
            return int(cumulative) / 1e6, any(n.startswith("rlx_torch_import") for _, n in stack)
        stack.append((len(indent), name))
    return 0.0, False


def _env() -> dict[str, str]:
    env = child_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled modules cached, as an installed package has them
    env.pop("RLX_WORKERS", None)  # --threads sets it
    return env


def _run_cli(model_file: Path, out: Path, threads: int, timeout: float) -> Run:
    cmd = [sys.executable, "-X", "importtime", "-c", CLI, str(model_file), "-o", str(out), "--threads", str(threads)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        tail = [line for line in done.stderr.splitlines() if not line.startswith("import time:")][-3:]
        raise RuntimeError(f"the CLI exited with {done.returncode}: {' / '.join(tail)}")
    phases: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if m := _PHASE.match(line.strip()):
            phases[m.group(1)] = phases.get(m.group(1), 0.0) + float(m.group(2))
    torch_s, by_package = torch_import(done.stderr)
    package = phases.pop("package import", 0.0)
    load = sum(v for k, v in phases.items() if k.startswith("load "))
    run = Run(wall, {"package import": package - torch_s * by_package, "torch import": torch_s})
    run.phases["model file"] = max(0.0, load - torch_s * (not by_package))
    for name in ("export", "reference", "verify", "per-node parity", "write reports"):
        run.phases[name] = phases.get(name, 0.0)
    run.phases["ours"] = sum(v for k, v in phases.items() if k not in NOT_OURS and not k.startswith("load "))
    run.phases["other"] = wall - sum(run.phases.values())
    return run


def _run_baseline(model_file: Path, work: Path, timeout: float) -> Run:
    script, result = work / "baseline.py", work / "baseline.json"
    script.write_text(BASELINE)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(script), str(model_file), str(result)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the baseline exited with {done.returncode}: {done.stderr.strip()[-300:]}")
    phases = json.loads(result.read_text())
    return Run(wall - phases.pop("not counted"), phases)


def _median(runs: Sequence[Run], key: str | None = None) -> float:
    return statistics.median(r.wall if key is None else r.phases.get(key, 0.0) for r in runs)


def measure(name: str, threads: int, runs: int, timeout: float, warmup: bool = True) -> tuple[list[Run], list[Run]]:
    """The CLI's runs and the baseline's runs of one model, interleaved (load on the machine hits both alike),
    after one untimed run of each with `warmup`."""
    with tempfile.TemporaryDirectory(prefix="rti-cli-wall-") as tmp:
        work = Path(tmp)
        model_file = work / f"{name.replace('.', '_')}.py"
        model_file.write_text(MODEL_FILE.format(name=name, root=str(ROOT)))
        cli, base = [], []
        for i in range(runs + warmup):
            c = _run_cli(model_file, work / f"out-{i}", threads, timeout)
            b = _run_baseline(model_file, work, timeout)
            if i >= warmup:
                cli.append(c)
                base.append(b)
    return cli, base


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _row(name: str, cli: Sequence[Run], base: Sequence[Run]) -> str:
    wall, baseline = _median(cli), _median(base)
    export = _median(cli, "export")
    ours = _median(cli, "ours") + _median(cli, "per-node parity") + _median(cli, "write reports")
    cells = [
        name,
        *(
            f"{_median(cli, k):.2f}"
            for k in ("package import", "torch import", "model file", "export", "reference", "ours", "verify")
        ),
        f"{_median(cli, 'per-node parity'):.2f}",
        f"{_median(cli, 'write reports'):.2f}",
        f"{_median(cli, 'other'):.2f}",
        f"{wall:.2f}",
        f"{baseline:.2f} ({_median(base, 'torch import'):.1f} + {_median(base, 'model file'):.1f} + "
        f"{_median(base, 'export'):.1f} + {_median(base, 'reference'):.2f})",
        f"{wall / baseline:.2f} {_mark(wall / baseline <= RATIO_TARGET)}",
        f"{ours / export * 100:.0f}% {_mark(ours <= OURS_TARGET * export)}" if export else "—",
        f"{(max(r.wall for r in cli) - min(r.wall for r in cli)):.2f}",
    ]
    return "| " + " | ".join(cells) + " |"


HEAD = (
    "| model | package import | torch import | model file | export | reference | ours | verify | per-node | write "
    "| other | CLI wall | baseline (torch + model + export + eager) | ratio | ours/export | CLI spread |"
)


def cli_wall_section(models: list[str], threads: int, runs: int = 2, timeout: float = 1800.0) -> list[str]:
    """The markdown table (seconds, medians of `runs` fresh processes each), one row per model of `models`;
    a model whose CLI or baseline run fails gets a row saying why. The first model gets one untimed run of
    each process first (it fills the compiled-module cache the others then find)."""
    lines = [HEAD, "|" + "---|" * (HEAD.count("|") - 1)]
    for i, name in enumerate(models):
        print(f"[cli_wall] {name} ...", file=sys.stderr, flush=True)
        try:
            cli, base = measure(name, threads, runs, timeout, warmup=i == 0)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            lines.append(f"| {name} | failed: {str(e).splitlines()[0][:200]} |")
            continue
        lines.append(_row(name, cli, base))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.cli_wall", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="bench model names, comma-separated")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)), help="--threads of the CLI")
    parser.add_argument("--runs", type=int, default=2, help="timed runs of each process (median; default 2)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per process (default %(default)s)")
    args = parser.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    print("\n".join(cli_wall_section(names, args.threads, args.runs, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
