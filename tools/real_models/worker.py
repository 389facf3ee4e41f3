"""One model in its own process: build it (torch seed 0), convert it with
`rlx_torch_import.from_torch` into a temp folder (verified against eager PyTorch), and write one
result row as JSON. `python -m tools.real_models.worker NAME --json PATH [--work DIR]`; the
runner (`__main__.py`) calls it with a timeout, so a crash or a hang costs one row."""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from .models import BY_NAME

# Outcomes, best first.
VERIFIED, RANDOM, FAIL, ERROR, BUILD_FAILED = "verified", "RANDOM", "FAIL", "error", "build failed"
TIMEOUT, CRASHED, MISSING = "timeout", "crashed", "package missing"


@dataclass
class Row:
    """What one model did: `outcome` (above), `detail` (the verdict's first divergence and failing
    outputs, or `ErrorClass: first line of its message`), `exit_code` (the CLI's exit code for
    that error, README "Exit codes"; None where no rlx-torch-import error was raised), the
    seconds `from_torch` took, the report's notes, and which rlx_torch_import ran."""

    name: str
    source: str
    kind: str
    outcome: str = ERROR
    detail: str = ""
    error_class: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    first_divergence: dict[str, Any] | None = None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rti_file: str = ""
    # Whether eager PyTorch gives the same outputs from the model after conversion as from a copy
    # taken before it (None: not checked), and why not.
    model_unchanged: bool | None = None
    model_note: str = ""
    # For an exception that is not an RtiError: the innermost frame that raised it ("file:line in f").
    where: str = ""


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (its class name where it has none)."""
    try:
        text = str(exc)
    except Exception:  # a user exception whose __str__ raises
        text = ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:400] if lines else type(exc).__name__


def from_report(row: Row, report: Any) -> None:
    """Fill `row` from a ParityReport: verified; RANDOM (only outputs that depend on random draws
    differ, where the report has that verdict) naming them; or FAIL with its first divergence."""
    row.notes = [str(n)[:300] for n in report.notes]
    if report.ok:
        row.outcome = VERIFIED
        return
    if getattr(report, "verdict", "FAIL") == "RANDOM":
        row.outcome = RANDOM
        row.detail = "outputs that depend on random draws: " + ", ".join(report.random_outputs)
        return
    row.outcome = FAIL
    row.failures = [f"{o.name}: {', '.join(o.reasons)}"[:300] for o in report.outputs if not o.ok]
    row.failures += [f"{r.label}: {r.failures()}"[:300] for r in report.sweep if not r.ok]
    row.failures += [f"input set {r.label}: {r.failures()}"[:300] for r in report.input_sets if not r.ok]
    fd = report.first_divergence
    if fd is not None:
        row.first_divergence = {"node": fd.node, "aten": fd.aten, "module_path": fd.module_path, "value": fd.value}
        where = f" ({fd.module_path})" if fd.module_path else ""
        row.detail = f"first divergence: {fd.aten} at {fd.node}{where}"
    elif report.drift:
        row.detail = f"drift: {report.drift}"[:300]
    else:
        row.detail = "no node diverges locally"
    if row.failures:
        row.detail += "; " + row.failures[0]


def convert(row: Row, out_dir: Path) -> None:
    """Build the model and convert it, filling `row` (every exception becomes a row)."""
    import rlx_torch_import as rti
    from rlx_torch_import.errors import RtiError

    row.rti_file = str(Path(rti.__file__).resolve())
    spec = BY_NAME[row.name]
    torch.manual_seed(0)
    try:
        model, args, kwargs = spec.build()
    except Exception as e:
        row.outcome, row.error_class, row.detail = BUILD_FAILED, type(e).__name__, first_line(e)
        return
    try:
        pristine = copy.deepcopy(model)
    except Exception as e:  # a model that cannot be copied is still converted
        pristine, row.model_note = None, f"not checked: deepcopy raised {type(e).__name__}: {first_line(e)}"
    start = time.perf_counter()
    try:
        sets = spec.verify_sets((model, args, kwargs)) if spec.verify_sets else None
        report = rti.from_torch(model, args, str(out_dir), kwargs=kwargs or None, verify=True, verify_inputs=sets)
    except RtiError as e:
        row.outcome, row.error_class, row.exit_code = ERROR, type(e).__name__, e.exit_code
        row.detail = first_line(e)
    except Exception as e:  # not one of ours: a bare traceback for a CLI user
        row.outcome, row.error_class, row.detail = ERROR, type(e).__name__, first_line(e)
        last = traceback.extract_tb(e.__traceback__)[-1]
        row.where = f"{last.filename}:{last.lineno} in {last.name}"
        traceback.print_exc()
    else:
        from_report(row, report)
    row.seconds = round(time.perf_counter() - start, 1)
    if pristine is not None:
        check_unchanged(row, model, pristine, (args, kwargs))


def _eager(model: torch.nn.Module, inputs: tuple[tuple[Any, ...], dict[str, Any]]) -> list[Any]:
    """The model's outputs' leaves on `inputs`, torch seeded alike for every call (random ops)."""
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        return pytree.tree_leaves(model(*inputs[0], **inputs[1]))


def _same(a: Any, b: Any) -> bool:
    """Equal leaves: tensors of one shape and dtype, bit for bit (NaN where NaN), or equal values."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point():
            return bool(torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()))
        return bool(torch.equal(a, b))
    return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) and bool(a == b)


def check_unchanged(row: Row, model: torch.nn.Module, pristine: torch.nn.Module, inputs: Any) -> None:
    """Did the conversion leave the user's model as it was? Eager outputs of the converted model
    against those of the copy taken before converting (issue 39: a forward that caches state
    must not leave export's fake tensors, or anything else, in the model)."""
    try:
        expected = _eager(pristine, inputs)
    except Exception as e:
        row.model_note = f"not checked: the copy's eager run raised {type(e).__name__}: {first_line(e)}"
        return
    try:
        got = _eager(model, inputs)
    except Exception as e:
        row.model_unchanged = False
        row.model_note = f"eager run after conversion raised {type(e).__name__}: {first_line(e)}"[:400]
        return
    differ, why = [], ""
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        try:
            same = _same(a, b)
        except Exception as e:  # e.g. export's fake tensors left in the model reach the outputs
            same, why = False, why or f" ({type(a).__name__}: comparing raised {type(e).__name__})"
        differ += [] if same else [i]
    row.model_unchanged = len(got) == len(expected) and not differ
    if not row.model_unchanged:
        row.model_note = (
            f"eager outputs after conversion differ from the copy's: leaves {differ[:5]} of {len(got)}{why}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.real_models.worker")
    p.add_argument("name", choices=sorted(BY_NAME))
    p.add_argument("--json", type=Path, required=True, help="where the row is written")
    p.add_argument("--work", type=Path, default=None, help="keep the conversion folder under this folder")
    args = p.parse_args(argv)
    spec = BY_NAME[args.name]
    row = Row(spec.name, spec.source.rsplit(".", 1)[-1], spec.kind)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        convert(row, args.work / spec.name)
    else:
        with tempfile.TemporaryDirectory(prefix=f"real-models-{spec.name}-") as tmp:
            convert(row, Path(tmp) / "out")
    args.json.write_text(json.dumps(asdict(row), indent=1) + "\n")
    print(f"{row.name}: {row.outcome} {row.detail}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
