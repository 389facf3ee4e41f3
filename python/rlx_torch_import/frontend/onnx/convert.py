"""`from_onnx`'s steps: the importer route first (`frontend/onnx`: RLX's own ONNX importer, the
pre-pass, the defect layer) through the shared back half (`backend`); where RLX's importer cannot take
the model, or its bundle fails parity against ONNX Runtime, the torch route (`frontend/onnx/torch_route`:
the ONNX graph as a torch module, through `from_torch`'s front end and the ATen registry), verified
against ONNX Runtime too. The report says which route made the bundle and why (docs/design.md (ah))."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ... import torchir
from ...backend import lower_write_verify
from ...dtypes import numpy_dtype
from ...errors import BundleError, IndexRangeError, LoweringError, RtiError, Unsupported, UnsupportedOpsError
from ...layout import BUNDLE, input_key, output_key
from ...program import Program
from ...progress import Progress
from ...verify.report import ParityReport
from ...verify.run import add_node_parity, write_reports
from ..torch.to_torchir import Captured
from . import gaps


@dataclass
class Request:
    """One `from_onnx` call's settings (checked by `api.from_onnx`)."""

    path: Path
    out_dir: Path
    inputs: Any
    dims: Any
    verify: bool
    crate: str | None
    name: str | None
    device: str
    per_node: bool | str
    prog: Progress
    route: str = "auto"


# `route`: "auto" (the importer, else the torch route), "importer" or "torch" only.
ROUTES = ("auto", "importer", "torch")


def convert(req: Request, stage: Path) -> ParityReport:
    """Convert into `stage` by the importer route, else (gaps, a wrong shape, failed parity) the torch
    route. Raises UnsupportedOpsError listing the importer route's gaps and, per node, why the torch
    route could not translate it, when neither route can convert the model."""
    if req.route == "torch":
        return _finish(_torch_route(req, stage), stage)
    failed: ParityReport | None = None  # the importer's bundle, when it failed parity
    unexpected: Exception | None = None  # an error of the importer route that is no gap (a bug of ours)
    try:
        report = _importer_route(req, stage)
    # BundleError: the core refuses the importer's graph; IndexRangeError: the example holds an index the
    # importer's kernel cannot serve (a negative Gather id, which ONNX Runtime wraps and the torch route too)
    except (UnsupportedOpsError, LoweringError, BundleError, IndexRangeError) as e:
        if req.route == "importer":
            raise
        first: RtiError = e
    except RtiError:
        raise  # bad input, an unreadable file, a device: the torch route would meet it too
    except Exception as e:
        if req.route == "importer":
            raise
        unexpected = e
        first = RtiError(f"internal error ({type(e).__name__}: {str(e)[:200]})")
    else:
        if report.ok or not req.verify or req.route == "importer":
            return _finish(report, stage)
        first = RtiError(f"the bundle from RLX's ONNX importer failed parity ({_failed(report)})")
        failed = report
    second = Path(tempfile.mkdtemp(prefix=".torch-route-", dir=stage.parent))
    try:
        report = _torch_route(req, second)
        why = "; ".join(line.strip(" -") for line in first.message.splitlines())
        why = why.replace(str(stage), str(req.out_dir))  # the staging folder is gone once the output lands
        report.notes.insert(1, f"RLX's ONNX importer route: {why[:1500]}")
        _replace(stage, second)
        return _finish(report, stage)
    except UnsupportedOpsError as e:  # UntranslatableError, or a gap of the torch path
        if unexpected is not None:
            raise unexpected from None  # neither route converts it: our bug surfaces as it is
        if failed is None:
            raise _combined(first, e) from None
        # the importer's bundle stands, failing; the report says why the torch route could not help
        failed.notes.insert(0, f"the torch route could not convert it either: {e.message.splitlines()[0]}")
        return _finish(failed, stage)
    finally:
        shutil.rmtree(second, ignore_errors=True)


def _failed(report: ParityReport) -> str:
    """Which outputs failed, and the first diverging ONNX node when per-node parity found one."""
    bad = [o.name for o in report.outputs if not o.ok]
    text = f"output(s) {', '.join(bad[:4])}" if bad else "verification"
    first = report.first_divergence
    return text + (f"; first diverging ONNX node {first.node} ({first.aten})" if first is not None else "")


def _finish(report: ParityReport, stage: Path) -> ParityReport:
    """Write the reports of the route that made the bundle (its route note comes from torch-ir's
    `producer["route"]`, `door.ROUTES`)."""
    write_reports(report, stage)
    return report


def _replace(stage: Path, other: Path) -> None:
    """Make `stage` hold what `other` holds (the route that won)."""
    for item in stage.iterdir():
        shutil.rmtree(item) if item.is_dir() else item.unlink()
    for item in other.iterdir():
        shutil.move(str(item), str(stage / item.name))


def _importer_route(req: Request, stage: Path) -> ParityReport:
    from .driver import convert as importer_convert

    _ir, program = importer_convert(
        req.path, stage, req.prog, inputs=req.inputs, dims=req.dims, name=req.name, verify=req.verify
    )
    return _back_half(req, stage, program)


def _back_half(req: Request, stage: Path, program: Program, captured: bool = False) -> ParityReport:
    """The one back half on the front end's program (`captured`: torch-ir from `from_torch`'s front end)."""
    report, conv = lower_write_verify(
        stage, stage / BUNDLE, req.verify, req.prog, out_dir=req.out_dir, crate=req.crate, device=req.device,
        program=program, captured=captured,
    )  # fmt: skip
    if req.verify:
        add_node_parity(report, conv, req.prog, device=req.device, per_node=req.per_node)
    return report


class UntranslatableError(UnsupportedOpsError):
    """The torch route's refusal: every node it cannot translate (exit 3 like any gap)."""


def _combined(first: RtiError, second: UnsupportedOpsError) -> UnsupportedOpsError:
    items = list(first.items) if isinstance(first, UnsupportedOpsError) else [
        Unsupported("<importer route>", "(graph)", "", first.message.splitlines()[0])
    ]  # fmt: skip
    by_node = {i.node: i.reason for i in second.items}
    merged = [
        Unsupported(i.target, i.node, i.module_path, f"{i.reason}; torch route: {by_node[i.node]}")
        if i.node in by_node
        else i
        for i in items
    ]
    merged += [i for i in second.items if i.node not in {m.node for m in items}]
    return UnsupportedOpsError(merged, frontend_hint=gaps.HINT)


def _torch_route(req: Request, stage: Path) -> ParityReport:
    """The ONNX graph as a torch module (`torch_route.to_module`) through `from_torch`'s front end; the
    reference's outputs are ONNX Runtime's. Raises UntranslatableError for what it cannot translate."""
    from . import bind, prepass, reference
    from .driver import read_and_bind, route_producer
    from .operands import bake_inputs
    from .torch_route import Untranslatable, to_module

    src, given, sizes, shapes = read_and_bind(req.path, req.inputs, req.dims)
    static, baked = prepass.prepare(src.model, shapes, given)
    feed, notes = bind.make_inputs(src, sizes, given)
    for _ in range(3):  # inputs a shape needs (through values computed from them) become constants too
        try:
            module, args, names = to_module(static, {k: v for k, v in feed.items() if k not in baked})
            break
        except Untranslatable as e:
            more = [n for n in e.inputs_needed_constant if n not in baked and given and n in given]
            if not more or len(more) < len(e.inputs_needed_constant):
                raise UntranslatableError(
                    [Unsupported(target, node, "", reason) for node, target, reason in e.items], frontend_hint=gaps.HINT
                ) from None
            bake_inputs(static, more, feed)
            baked.update({n: "a shape computed from it" for n in more})
    out = reference.run(src.path, feed) if req.verify else {}
    if sizes:
        notes.append("symbolic dims specialized: " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
    constants = [{"path": n, "value": feed[n].tolist()} for n in baked]
    producer = {**src.producer(), **route_producer("torch", src), **{f"note.{k}": n for k, n in enumerate(notes)}}
    boundary = _Boundary(names, [o.name for o in src.outputs], out, constants, producer)
    program = _torch_front(module, args, boundary, stage, req)
    return _back_half(req, stage, program, captured=True)


@dataclass
class _Boundary:
    """What the torch route settles on each capture of the translated module (`FrontEnd.settle`), so the
    one torch-ir and reference written, and the program lowered from them, carry the ONNX graph's boundary:
    its input names (in order), its output names, ONNX Runtime's outputs (`out`; empty without
    verification: eager PyTorch's stay), the inputs baked in and the producer entries (route, notes)."""

    inputs: list[str]
    outputs: list[str]
    out: dict[str, Any]
    constants: list[dict[str, Any]]
    producer: dict[str, str]

    def __call__(self, cap: Captured) -> None:
        import torch

        ir = cap.ir
        renamed = dict(zip((s.name for s in ir.inputs), self.inputs, strict=True))
        old_outputs = [o.name for o in ir.outputs]
        cap.ir = ir = _onnx_names(ir, renamed, self.outputs)
        ir.producer.update(self.producer)
        ir.constant_inputs = list(self.constants)  # they fix shapes: the bundle may be given them, unchanged
        ref = cap.reference
        tensors = {input_key(new): ref[input_key(old)] for old, new in renamed.items()}
        for spec, old in zip(ir.outputs, old_outputs, strict=True):
            if spec.name not in self.out:  # without verification: eager PyTorch's, as the torch path keeps
                tensors[output_key(spec.name)] = ref[output_key(old)]
                continue
            arr = self.out[spec.name]
            if arr.dtype != numpy_dtype(spec.dtype) or list(arr.shape) != [int(d) for d in spec.shape]:
                raise LoweringError(
                    f"torch route: output {spec.name!r} is {spec.dtype}{list(spec.shape)}, ONNX Runtime gives "
                    f"{arr.dtype}{list(arr.shape)}"
                )
            value = torch.from_numpy(np.array(arr, order="C", copy=True))
            tensors[output_key(spec.name)] = value.view(torch.bfloat16) if spec.dtype == "bfloat16" else value
        cap.reference = tensors


def _onnx_names(ir: torchir.TorchIR, inputs: dict[str, str], outputs: list[str]) -> torchir.TorchIR:
    """`ir` with its inputs renamed by `inputs` (torch-ir name -> ONNX name; node arguments follow) and
    its outputs named as the ONNX graph's, in order."""
    from dataclasses import replace

    def arg(a: dict[str, Any]) -> dict[str, Any]:
        ((tag, payload),) = a.items()
        if tag == "tensor":
            return {"tensor": inputs.get(payload, payload)}
        return {"list": [arg(x) for x in payload]} if tag == "list" else a

    nodes = [
        replace(n, args=[arg(a) for a in n.args], kwargs={k: arg(v) for k, v in n.kwargs.items()}) for n in ir.nodes
    ]
    specs = [replace(s, name=inputs.get(s.name, s.name), path=inputs.get(s.name, s.name)) for s in ir.inputs]
    outs = [
        replace(o, name=name, value=inputs.get(o.value, o.value)) for o, name in zip(ir.outputs, outputs, strict=True)
    ]
    return replace(ir, inputs=specs, nodes=nodes, outputs=outs, output_tree={})


def _torch_front(module: Any, args: tuple[Any, ...], boundary: _Boundary, stage: Path, req: Request) -> Program:
    """`from_torch`'s front end on the translated module into `stage`, each capture's boundary settled by
    `boundary` before it is lowered and written: returns the program it lowered, which the back half uses."""
    from ..torch.driver import FrontEnd, eval_mode
    from ..torch.state import kept_state

    front = FrontEnd.check(
        module, args, None, req.name or req.path.stem, None,
        decomposition="high", strict=False, timeout=None, rounds=4, set_specs=[],
    )  # fmt: skip
    front.settle = boundary
    with eval_mode(module), kept_state(module) as state:
        _ir, program, _skipped = front.run(stage, req.prog, state)
    return program
