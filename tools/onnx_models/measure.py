"""One model/exporter pair measured: export (or reuse the cached file), convert with
`rlx_torch_import.from_onnx` (verified against ONNX Runtime, per-node parity on), and compare the
bundle's outputs with eager PyTorch's on the same inputs. `from_onnx` tries RLX's ONNX importer
first and falls back to the torch route (the ONNX graph as a torch module, through torch.export);
where the bundle did not come from the importer, the importer route is run alone as well
(`route="importer"`), so its own gap or failure is measured precisely. The result is a `Row`; `python -m
tools.onnx_models.measure MODEL EXPORTER --json PATH` measures one pair in its own process (the
way `cli` runs every pair, so a crash or a hang costs one row, not the run)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import export
from .models import BY_NAME, Spec

# Verdicts, best first.
PASS, FAIL, UNSUPPORTED, ERROR, EXPORT_FAILED = "PASS", "FAIL", "unsupported", "error", "export failed"
TIMEOUT, CRASHED = "timeout", "crashed"
# Routes (`from_onnx`'s "route: ..." note).
IMPORTER, TORCH = "importer", "torch route"


@dataclass
class Compared:
    """One output compared: its name, max abs error, the budget's allowed abs error, the verdict
    and its reasons."""

    name: str
    max_abs: float
    allowed: float
    ok: bool
    reasons: list[str] = field(default_factory=list)


@dataclass
class Attempt:
    """One conversion: its verdict, wall time (seconds), route, each output against ONNX Runtime,
    the first divergence (per-node parity) or drift, every unsupported-op line, the error message,
    the report's notes and phase times."""

    verdict: str = ERROR
    seconds: float = 0.0
    route: str = ""
    vs_ort: list[Compared] = field(default_factory=list)
    first_divergence: dict[str, Any] | None = None
    drift: str = ""
    unsupported: list[str] = field(default_factory=list)
    error: str = ""
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        return cls(**{**data, "vs_ort": [Compared(**c) for c in data.get("vs_ort", [])]})


@dataclass
class Row:
    """Everything measured for one model/exporter pair: the export, `from_onnx` (`convert`), the
    importer route alone where `from_onnx`'s bundle came from elsewhere (`importer`), and the
    bundle against eager PyTorch."""

    model: str
    exporter: str
    verdict: str = ERROR
    export_ok: bool = False
    export_s: float = 0.0
    export_cached: bool = False
    opset: int = 0
    onnx_nodes: int = 0
    histogram: dict[str, int] = field(default_factory=dict)
    convert: Attempt = field(default_factory=Attempt)
    importer: Attempt | None = None
    vs_eager: list[Compared] = field(default_factory=list)
    eager_note: str = ""
    error: str = ""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        data = dict(data)
        data["convert"] = Attempt.from_json(data.get("convert", {}))
        data["importer"] = None if data.get("importer") is None else Attempt.from_json(data["importer"])
        data["vs_eager"] = [Compared(**c) for c in data.get("vs_eager", [])]
        return cls(**data)


def _all_nodes(graph: Any) -> Iterator[Any]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == 5 else []) + list(attr.graphs):
                yield from _all_nodes(sub)


def _op_name(node: Any) -> str:
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def onnx_stats(path: Path) -> tuple[int, int, dict[str, int]]:
    """The file's ai.onnx opset, node count (subgraphs included) and op-type histogram (`domain.Op`
    for ops outside ai.onnx), most frequent first."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(_op_name(n) for n in _all_nodes(model.graph))
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return opset, sum(ops.values()), dict(ops.most_common())


def _compared(o: Any) -> Compared:
    return Compared(o.name, float(o.max_abs_error), float(o.allowed_abs_error), bool(o.ok), list(o.reasons))


def _squeezed(shape: tuple[int, ...]) -> list[int]:
    return [d for d in shape if d != 1]


def vs_eager(bundle: Path, inputs: dict[str, np.ndarray], eager: dict[str, np.ndarray]) -> tuple[list[Compared], str]:
    """The bundle at `bundle` run on `inputs`, each output compared with eager PyTorch's (same
    name) under the conversion's parity budgets; an ONNX rank-0 output is [1] in a bundle, so an
    eager value differing from the bundle's only by size-1 axes is reshaped to it (and noted)."""
    from rlx_torch_import.bundle.model import BundleModel
    from rlx_torch_import.verify.compare import compare_output

    got = BundleModel(bundle).run(inputs)
    rows, notes = [], []
    for name, expected in eager.items():
        if name not in got:
            notes.append(f"the bundle has no output {name!r}")
            continue
        actual = np.asarray(got[name])
        if actual.shape != expected.shape and _squeezed(actual.shape) == _squeezed(expected.shape):
            notes.append(f"{name}: eager {list(expected.shape)} compared as {list(actual.shape)}")
            expected = expected.reshape(actual.shape)
        rows.append(_compared(compare_output(name, actual, expected, str(actual.dtype), str(expected.dtype))))
    return rows, "; ".join(notes)


def _divergence(report: Any) -> dict[str, Any] | None:
    d = report.first_divergence
    if d is None:
        return None
    local = d.local
    return {
        "node": d.node,
        "aten": d.aten,
        "value": d.value,
        "shape": list(d.shape),
        "kind": d.kind,
        "local_max_abs": None if local is None else float(local.max_abs),
        "allowed": None if local is None else float(local.allowed_abs),
        "note": d.note,
    }


def internal_error(e: BaseException) -> str:
    """`Type: message (file:line in function)` of an unexpected exception, at the innermost frame
    inside rlx_torch_import (else the innermost frame)."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "rlx_torch_import" in f.filename] or frames
    where = f" ({Path(ours[-1].filename).name}:{ours[-1].lineno} in {ours[-1].name})" if ours else ""
    return f"{type(e).__name__}: {str(e)[:600]}{where}"


def _route(notes: list[str]) -> str:
    route = next((n.removeprefix("route: ") for n in notes if n.startswith("route: ")), "")
    if route.startswith("RLX's ONNX importer"):
        return IMPORTER
    return TORCH if route.startswith("the torch route") else route


def attempt(run: Callable[[], Any]) -> Attempt:
    """Run one conversion (`run` returns its ParityReport) and record it; nothing it raises escapes."""
    from rlx_torch_import.errors import RtiError, UnsupportedOpsError

    found = Attempt()
    start = time.perf_counter()
    try:
        report = run()
    except UnsupportedOpsError as e:
        found.verdict, found.unsupported = UNSUPPORTED, [i.line() for i in e.items]
        return found
    except RtiError as e:
        found.verdict, found.error = ERROR, f"{type(e).__name__}: {e.message}"
        return found
    except Exception as e:  # an internal failure is a result of this measurement, not its end
        found.verdict, found.error = ERROR, internal_error(e)
        return found
    finally:
        found.seconds = time.perf_counter() - start
    found.verdict = PASS if report.ok else FAIL
    found.timings = dict(report.timings_s)
    found.vs_ort = [_compared(o) for o in report.outputs]
    found.first_divergence = _divergence(report)
    found.drift = report.drift
    found.notes = [n for n in report.notes if not n.startswith("random inputs")]
    found.route = _route(report.notes) or IMPORTER
    return found


def importer_alone(path: Path, inputs: dict[str, np.ndarray], out: Path) -> Attempt:
    """The importer route by itself (`from_onnx(..., route="importer")`) into `out`."""
    from rlx_torch_import import from_onnx

    found = attempt(lambda: from_onnx(path, out, inputs=inputs, route="importer", progress=False))
    found.route = IMPORTER
    return found


def warm_up() -> None:
    """One untimed conversion of a one-node ONNX model, so the measured conversion's time is its
    own and not the process's first-call cost (imports, RLX's thread pool: about 6 s)."""
    import onnx
    from onnx import TensorProto, helper

    from rlx_torch_import import from_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "warm_up", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory(prefix="onnx-models-warm-") as tmp:
        onnx.save(model, f"{tmp}/relu.onnx")
        from_onnx(f"{tmp}/relu.onnx", f"{tmp}/out", progress=False)


def _measure_conversions(row: Row, exported: export.Exported, out: Path) -> None:
    from rlx_torch_import import from_onnx

    try:
        warm_up()
    except Exception as e:
        row.verdict, row.error = ERROR, "the warm-up conversion (one Relu) failed: " + internal_error(e)
        return
    row.convert = attempt(lambda: from_onnx(exported.path, out, inputs=exported.inputs, progress=False))
    row.verdict = row.convert.verdict
    if row.convert.verdict in (PASS, FAIL) and (out / "bundle").is_dir():
        try:
            row.vs_eager, row.eager_note = vs_eager(out / "bundle", exported.inputs, exported.eager)
        except Exception as e:
            row.eager_note = f"the bundle did not run: {internal_error(e)}"
    if row.convert.route != IMPORTER:
        row.importer = importer_alone(exported.path, exported.inputs, out.parent / f"{out.name}-importer")


def measure(spec: Spec, exporter: str, cache: Path, work: Path | None = None, *, refresh: bool = False) -> Row:
    """Measure one pair (module docstring). `work`: where the conversion folders are written and
    kept (`<work>/<model>-<exporter>`, and `...-importer` for the importer route alone); None: a
    temporary folder, removed after."""
    row = Row(spec.name, exporter)
    try:
        exported = export.ensure(spec, exporter, cache, refresh=refresh)
    except Exception as e:
        row.verdict, row.error = EXPORT_FAILED, f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:600]}"
        return row
    row.export_ok, row.export_s, row.export_cached = True, exported.export_s, exported.cached
    row.opset, row.onnx_nodes, row.histogram = onnx_stats(exported.path)
    tmp = None if work is not None else Path(tempfile.mkdtemp(prefix="onnx-models-"))
    base = work if work is not None else tmp
    assert base is not None
    for old in (base / f"{spec.name}-{exporter}", base / f"{spec.name}-{exporter}-importer"):
        shutil.rmtree(old, ignore_errors=True)
    try:
        _measure_conversions(row, exported, base / f"{spec.name}-{exporter}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    """Measure one pair and write its Row as JSON to `--json`."""
    p = argparse.ArgumentParser(prog="python -m tools.onnx_models.measure")
    p.add_argument("model", choices=sorted(BY_NAME))
    p.add_argument("exporter", choices=export.EXPORTERS)
    p.add_argument("--json", required=True, type=Path)
    p.add_argument("--cache", type=Path, default=export.default_cache())
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--refresh", action="store_true")
    args = p.parse_args(argv)
    row = measure(BY_NAME[args.model], args.exporter, args.cache, args.work, refresh=args.refresh)
    args.json.write_text(json.dumps(asdict(row), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
