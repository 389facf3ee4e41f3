"""Public entry points: from_torch (module -> verified bundle) and build (torch-ir dir -> bundle)."""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from . import _core, rlx_config, safetensors_io, torchir
from .bundle.format import META, read_meta
from .bundle.model import BundleModel, tree_children
from .bundle.write import write_bundle
from .crate.rust_names import crate_names
from .crate.style import STYLES, check_style
from .crate.write import write_crate
from .devices import DEVICES, check_device, device_name
from .errors import BundleError, ExportError, InputError, RtiError, UnsupportedOpsError
from .lower import find_unsupported, lower
from .lower.symbolic import lower_symbolic
from .outdir import staged, write_text, write_texts
from .progress import Progress
from .symbolic import values_of
from .verify.compare import OutputParity, check_reference, compare_output
from .verify.judge import Judge
from .verify.report import InputSetRow, ParityReport, SweepRow

EMIT_TARGETS = ("bundle", "crate")


def emit_targets(emit: str | Sequence[str]) -> tuple[str, ...]:
    """`emit` as a tuple of targets: a sequence, or one string that may list several ("bundle,crate")."""
    items = [emit] if isinstance(emit, str) else list(emit)
    return tuple(t.strip() for item in items for t in str(item).split(",") if t.strip())


def _check_options(emit: Sequence[str], max_decompose_rounds: int = 0, emit_style: str = "graph") -> None:
    if emit_style not in STYLES:
        raise InputError(f"emit_style {emit_style!r} is not one of {', '.join(STYLES)}")
    if max_decompose_rounds < 0:
        raise InputError(f"max_decompose_rounds must be >= 0, got {max_decompose_rounds}")
    for target in emit:
        if target not in EMIT_TARGETS:
            raise InputError(
                f"emit target {target!r} is not available (this version writes: {', '.join(EMIT_TARGETS)})"
            )


def _check_name(name: object) -> str:
    """A model name given by the caller: any non-blank text a UTF-8 file can hold (emit/crate.py and
    emit/rust_names.py derive safe folder and Rust names from it); InputError otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"name must be non-blank text, got {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"name {name!r} is not valid Unicode (it holds lone surrogates)") from None
    return name


def _default_name(model: Any) -> str:
    raw = type(model).__name__
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", raw).lower() or "model"


def from_torch(
    model: Any,
    example_inputs: Any,
    out_dir: str | os.PathLike[str],
    *,
    kwargs: dict[str, Any] | None = None,
    verify: bool = True,
    emit: str | Sequence[str] = ("bundle",),
    decomposition: str = "high",
    dynamic_shapes: Any = None,
    strict: bool = False,
    name: str | None = None,
    device: str = "cpu",
    progress: bool = False,
    auto_decompose: bool = True,
    max_decompose_rounds: int = 4,
    emit_style: str = "graph",
    threads: int | None = None,
    per_node: bool = True,
    verify_inputs: Any = None,
    timeout: float | None = None,
) -> ParityReport:
    """Export `model`, lower it to RLX, write `out_dir/`, and verify against PyTorch.

    The model is called as `model(*example_inputs, **kwargs)`; each argument may be a
    tensor, a Python scalar or string, or nested tuples/lists/dicts of them, as torch.export
    takes them. Tensor leaves become the bundle's inputs (named as torch.export names them,
    `meta.json` keeps each one's path such as `d.a`); other leaves are baked in as constants
    (torch-ir `constant_inputs`).
    `out_dir` gets torch-ir.json, weights.safetensors, reference.safetensors,
    bundle/ and report.json/report.md; with "crate" in `emit` (a sequence of targets,
    or one string such as "crate" or "bundle,crate"), also rlx-<name>/,
    a Rust crate in `emit_style` ("graph", "tensor" or "flow") that loads the
    bundle's weights. The bundle is always written (the crate reads its weights).
    Parity failure is reported (`report.ok`), not raised; unsupported ops, bad
    input and export failures raise `RtiError`s; a file system that refuses a write (full,
    over quota, read-only) raises WriteError naming the file, and `out_dir` is left as it was.
    PyTorch runs on copies of `example_inputs`, which are never modified; an input
    the model writes in place becomes one more output, `mutated_<input name>`.
    A forward that writes the module's own state (a call counter, a running total) is
    converted as one call from the state the module was passed in with: every eager run
    starts from it, weights.safetensors holds it, and the module gets it back in place
    (`frontend.state.ModelState`: every buffer, and the parameters the program writes);
    buffer writes are not outputs.
    With `auto_decompose`, ops the registry cannot lower are decomposed through
    torch's decomposition table (up to `max_decompose_rounds` rounds) first.
    `threads` sizes RLX's thread pool for verification (default: every available
    core; process-wide, see `rlx_config.set_threads`).
    `device` is where verification runs: "cpu" or "cuda" (RLX's CUDA backend, strict float32;
    README "GPU"); DeviceError (exit 7) before anything runs when this build or machine lacks it.
    Without `verify` nothing runs on it and only the name is checked.
    `dynamic_shapes` is torch.export's (a dict keyed by `forward`'s argument names or
    by graph input names such as `args_0`, or a tuple; `Dim`, `Dim.AUTO`,
    `Dim.DYNAMIC`). With dynamic dims the bundle runs at every size in their ranges,
    and verification also runs at each symbol's min, 1, example, max-1 and max
    (`report.sweep`, one row per point; docs/design.md, decision z).
    `verify_inputs` adds input sets verification runs besides the example (`report.input_sets`,
    one row each; `report.ok` needs every set to pass): a list of dicts keyed by input name or
    path (inputs left out are the example's), tuples of tensors in input order, .safetensors
    files keyed by input name (or `input.<name>`), and "auto" (adversarial sets made from the
    example's shapes, dtypes and value ranges, `frontend/input_sets.py`); "auto" alone is
    `["auto"]`. Eager PyTorch runs on each set here; the sets are stored with the reference, so
    `build` verifies them again.
    With `per_node` (and `verify`), every node's value is also compared with PyTorch's
    intermediate, cumulatively and reference-fed (`report.nodes`, `report.first_divergence`;
    `verify/nodes.py`).
    With `timeout` (seconds; default None, no limit), torch.export and each eager PyTorch run of
    the model (reference, sweep points, input sets) may take that long, else TimeLimitError; a
    forward that calls `sys.exit()` raises ModelLoadError (`timeout.user_code`).
    """
    from .frontend.dynamic import parse_dynamic_shapes
    from .frontend.export import export_program
    from .frontend.fallback import decompose_targets
    from .frontend.input_sets import normalize, record_input_sets
    from .frontend.inputs import model_inputs
    from .frontend.reference import eager_outputs, sweep_references
    from .frontend.state import kept_state
    from .frontend.to_torchir import capture
    from .timeout import check_timeout, user_code

    set_specs = normalize(verify_inputs)  # checked before anything runs
    timeout = check_timeout(timeout)
    emit = emit_targets(emit)
    _check_options(emit, max_decompose_rounds, emit_style)
    # before anything runs: DeviceError names what is missing (without verify nothing runs on the device)
    device = check_device(device).name if verify else device_name(device)
    rlx_config.set_threads(threads)
    given = model_inputs(model, example_inputs, kwargs)
    pristine = given.cloned()  # the reference inputs: as given, before any run could write them
    name = _check_name(name) if name is not None else _default_name(model)
    prog = Progress(progress)
    # unknown names, missing axes, 0/1 examples: before export
    dynamic = parse_dynamic_shapes(model, dynamic_shapes, pristine)
    shape_log: list[str] = []  # torch's symbolic-shape log: why a dynamic dim was specialized
    # every eager run starts from the module's state as given (buffers, written parameters), which the
    # weights hold too; the module gets it back at the end
    with _eval_mode(model) as was_training, kept_state(model) as state, staged(Path(out_dir)) as stage:
        with prog.phase("export"), user_code("torch.export", timeout):
            try:
                ep = export_program(  # traces with fake tensors: the inputs' values are neither read nor written
                    model, pristine.args, kwargs=pristine.kwargs, decomposition=decomposition,
                    dynamic_shapes=dynamic.spec, strict=strict, shape_log=shape_log,
                )  # fmt: skip
            except ExportError:
                eager_outputs(model, pristine, state=state)  # a model that fails in eager PyTorch too is bad input
                raise
        state.keep_written(ep)  # the parameters the program writes are cloned too
        with prog.phase("reference"), user_code("the eager PyTorch run (reference outputs)", timeout):
            eager = eager_outputs(model, pristine, state=state)  # runs on its own copies
        user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        requested = dynamic.requested(user_inputs)
        with prog.phase("capture"):
            cap = capture(
                ep, pristine, eager, name=name, decomposition=decomposition, requested=requested, shape_log=shape_log
            )
        auto: list[str] = []
        skipped: dict[str, str] = {}
        for round_no in range(1, (max_decompose_rounds if auto_decompose else 0) + 1):
            targets = sorted({m.target for m in find_unsupported(cap.ir)} - set(auto) - set(skipped))
            if not targets:
                break
            with prog.phase(f"auto-decompose round {round_no} ({len(targets)} op(s))"):
                ep, rnd = decompose_targets(ep, targets)
                auto += rnd.decomposed
                skipped.update(rnd.skipped)
                if rnd.decomposed:
                    cap = capture(
                        ep, pristine, eager, name=name, decomposition=decomposition, auto_decomposed=auto,
                        requested=requested, shape_log=shape_log,
                    )  # fmt: skip
            if not rnd.decomposed:
                break
        missing = find_unsupported(cap.ir)
        if missing:  # reported before any file is written (safetensors has no complex dtype to write)
            raise _with_fallback_reasons(UnsupportedOpsError(items=missing, decomposition=decomposition), skipped)
        if cap.ir.is_dynamic:
            with prog.phase("sweep references"), user_code("the eager PyTorch runs at the sweep points", timeout):
                sweep_references(model, cap.ir, pristine, cap.reference, state)
        if set_specs:
            with prog.phase("input set references"), user_code("the eager PyTorch runs on the input sets", timeout):
                record_input_sets(model, cap.ir, pristine, cap.reference, set_specs, state)
        with prog.phase("write torch-ir"):
            cap.ir.save(stage)
            safetensors_io.write(stage / torchir.WEIGHTS, dict(safetensors_io.iter_torch(cap.weights)))
            safetensors_io.write(stage / torchir.REFERENCE, dict(safetensors_io.iter_torch(cap.reference)))
        try:
            crate_style = emit_style if "crate" in emit else None
            report = _lower_and_verify(
                stage, stage / "bundle", verify, prog, out_dir=Path(out_dir), crate=crate_style, device=device
            )
            if verify and per_node:
                add_node_parity(report, stage, prog, device=device)
        except UnsupportedOpsError as e:
            raise _with_fallback_reasons(e, skipped) from None
        if was_training:
            report.notes.insert(0, TRAINING_NOTE)
        if set_specs and not verify:
            report.notes.append(
                f"{len(cap.ir.input_sets)} extra input set(s) stored with the reference but not verified "
                "(verify is off; `build` verifies them)"
            )
        _write_reports(report, stage)
    return report


TRAINING_NOTE = (
    "the model was in training mode: it was converted and verified in eval mode (dropout off, batch norm on its "
    "running statistics); its own mode is left as it was"
)


@contextmanager
def _eval_mode(model: Any) -> Iterator[bool]:
    """Run the conversion with `model` in eval mode (inference), then give every submodule back the
    mode it had; yields whether any submodule was training."""
    import torch

    if not isinstance(model, torch.nn.Module):
        yield False
        return
    modes = [(m, m.training) for m in model.modules()]
    try:
        yield any(t for _, t in modes)
    finally:
        for m, training in modes:
            m.training = training


def add_node_parity(
    report: ParityReport, directory: Path, prog: Progress | None = None, *, device: str = "cpu"
) -> None:
    """Fill `report.nodes`, `first_divergence` and `drift` from the conversion in `directory`
    (`verify.nodes.node_parity`, RLX on `device`). Diagnostics never change the verdict: if they
    cannot be computed, a note says why."""
    from .verify.nodes import node_parity

    prog = prog or Progress(False)
    with prog.phase("per-node parity"):
        try:
            found = node_parity(directory, outputs_ok=all(o.ok for o in report.outputs), device=device)
        except RtiError as e:
            report.notes.append(f"per-node parity not computed: {e.message}")
        except Exception as e:  # a bug in the diagnostics must not cost the user the verified conversion
            report.notes.append(
                f"per-node parity not computed (internal error, please report): {type(e).__name__}: {e}"
            )
        else:
            report.nodes, report.first_divergence, report.drift = found.nodes, found.first_divergence, found.drift
    report.timings_s = dict(prog.timings)


def _with_fallback_reasons(err: UnsupportedOpsError, skipped: dict[str, str]) -> UnsupportedOpsError:
    """Say, per op, why automatic decomposition could not help."""
    items = [
        replace(i, reason=f"{i.reason}; auto-decomposition: {skipped[i.target]}") if i.target in skipped else i
        for i in err.items
    ]
    return UnsupportedOpsError(items=items, decomposition=err.decomposition)


def build(
    directory: str | os.PathLike[str],
    *,
    verify: bool = True,
    progress: bool = False,
    emit: str | Sequence[str] = ("bundle",),
    emit_style: str = "graph",
    threads: int | None = None,
    per_node: bool = True,
    device: str = "cpu",
) -> ParityReport:
    """Lower an existing torch-ir directory again into `directory/bundle` (and
    `directory/rlx-<name>/` with "crate" in `emit`) and verify it on RLX's `device` ("cpu" or
    "cuda"; RLX's pool sized `threads`)."""
    emit = emit_targets(emit)
    _check_options(emit, 0, emit_style)
    device = check_device(device).name if verify else device_name(device)
    rlx_config.set_threads(threads)
    directory = _conversion_dir(directory, "build", (torchir.FILENAME, torchir.WEIGHTS))
    prog = Progress(progress)
    with staged(directory / "bundle") as stage:
        report = _lower_and_verify(
            directory, stage, verify, prog, out_dir=directory, crate=emit_style if "crate" in emit else None,
            device=device,
        )  # fmt: skip
        if verify and per_node:
            add_node_parity(report, directory, prog, device=device)
    _write_reports(report, directory)
    for stale in directory.glob("report-*.*"):  # `reverify`'s reports describe the bundle just replaced
        if stale.suffix in (".json", ".md", ".html") and stale.stem.removeprefix("report-") in DEVICES:
            stale.unlink()
    return report


def reverify(
    directory: str | os.PathLike[str],
    *,
    device: str = "cpu",
    per_node: bool = True,
    progress: bool = False,
    threads: int | None = None,
) -> ParityReport:
    """Verify the bundle of an existing conversion again, as it is (nothing is lowered or
    written but the report), on RLX's `device` ("cpu" or "cuda"): the example, every sweep point
    and every input set against PyTorch's values in reference.safetensors, with the same budgets
    and report as the conversion (`report.device` says where it ran). Writes
    `directory/report-<device>.json`, `.md` and `.html`; with `per_node`, per-node parity too.

    Raises InputError when `directory` is no conversion directory or lacks a file, BundleError
    when its files disagree with torch-ir (a bundle from another conversion included), DeviceError
    (exit 7) when `device` is missing or cannot run the bundle (`devices.check_device`)."""
    device = check_device(device).name
    rlx_config.set_threads(threads)
    directory = _conversion_dir(directory, "verify", (torchir.FILENAME, torchir.REFERENCE, "bundle"))
    missing = {
        "bundle": "there is no bundle to verify",
        torchir.FILENAME: "the bundle's inputs and outputs cannot be matched with PyTorch's",
        torchir.REFERENCE: "there are no PyTorch values to verify against",
    }
    for needed, why in missing.items():
        if not (directory / needed).exists():
            raise InputError(
                f"{directory}: {needed} is missing, so {why}",
                hint="verify takes the OUT directory of a conversion (`rlx-torch-import MODEL.py -o OUT`)",
            )
    prog = Progress(progress)
    with prog.phase("read"):
        ir = torchir.load(directory)
        check_reference(ir, directory / torchir.REFERENCE)
        meta = read_meta(directory / "bundle" / META)
        _check_bundle_matches(ir, meta, directory / "bundle")
    histogram = meta.get("op_histogram", {})
    report = _new_report(ir, directory, device, dict(histogram) if isinstance(histogram, dict) else {})
    _verify_bundle(report, ir, directory, directory / "bundle", prog, device)
    if per_node:
        add_node_parity(report, directory, prog, device=device)
    report.timings_s = dict(prog.timings)
    _write_reports(report, directory, stem=f"report-{device}")
    return report


def _check_bundle_matches(ir: torchir.TorchIR, meta: dict[str, Any], bundle: Path) -> None:
    """BundleError unless the bundle's meta.json (`meta`) declares torch-ir's inputs and outputs (names, dtypes
    and, for a static program, shapes, in order): a bundle from another conversion would otherwise
    fail as if the inputs were wrong."""

    def seen(name: str, dtype: str, shape: Sequence[Any]) -> tuple[str, str, list[Any]]:
        return name, dtype, [] if ir.is_dynamic else [int(d) for d in shape]

    for what, declared, expected in (
        ("inputs", meta["inputs"], [seen(s.name, s.dtype, s.shape) for s in ir.inputs]),
        ("outputs", meta["outputs"], [seen(s.name, s.dtype, s.shape) for s in ir.outputs]),
    ):
        found = [seen(spec["name"], spec["dtype"], spec["shape"]) for spec in declared]
        if found != expected:
            show = lambda specs: ", ".join(f"{n}: {d}{s}" for n, d, s in specs) or "none"  # noqa: E731
            raise BundleError(
                f"{bundle}: not this conversion's bundle: its meta.json {what} are ({show(found)}), "
                f"torch-ir.json's are ({show(expected)})",
                hint="convert again, or `rlx-torch-import build OUT` to write the bundle from torch-ir.json",
            )


def _conversion_dir(directory: str | os.PathLike[str], command: str, holds: Sequence[str]) -> Path:
    """`directory` as a Path, or InputError when it is not a directory (`command` takes one holding `holds`)."""
    path = Path(directory)
    if not path.is_dir():
        raise InputError(
            f"{path}: {'not a directory' if path.exists() else 'no such directory'}",
            hint=f"{command} takes a conversion directory ({', '.join(holds)})",
        )
    return path


def _lower_and_verify(
    src: Path,
    bundle_dir: Path,
    verify: bool,
    prog: Progress,
    *,
    out_dir: Path,
    crate: str | None = None,
    device: str = "cpu",
) -> ParityReport:
    """Lower torch-ir in `src`, write the bundle (and the crate in style `crate`), verify the
    bundle on RLX's `device`."""
    with prog.phase("lower"):
        ir = torchir.load(src)
        torchir.check_ops(ir)  # each node against torch's schema and meta kernels (TorchIRError, exit 2)
        # The files are checked against torch-ir before anything is lowered (BundleError, exit 2).
        weights = safetensors_io.read(src / torchir.WEIGHTS)
        file_notes = torchir.check_weights(ir, weights, src / torchir.WEIGHTS)
        if (verify or crate is not None) and (src / torchir.REFERENCE).is_file():
            check_reference(ir, src / torchir.REFERENCE)
        rlxmodel = None
        lowered_at: dict[str, list[dict[str, int]]] = {}
        if ir.is_dynamic:
            symbolic = lower_symbolic(ir)
            program, rlxmodel = symbolic.program, symbolic.rlxmodel
            labels = {s.name: s.label for s in ir.symbols}
            lowered_at = {
                kind: [{labels[k]: v for k, v in b.items()} for b in found]
                for kind, found in (("probes", symbolic.probes), ("unreproduced", symbolic.unreproduced))
            }
        else:
            program = lower(ir)
        if crate is not None:
            check_style(program, crate, ir.is_dynamic)
            if not (src / torchir.REFERENCE).is_file():
                raise InputError(f"{src / torchir.REFERENCE}: not found; a crate checks itself against it")
    with prog.phase("bundle"):
        missing = sorted(program.weight_sources() - set(weights))
        if missing:
            raise torchir.TorchIRError(f"{src / torchir.WEIGHTS}: missing weights {', '.join(missing)}")
        write_bundle(program, ir, weights, bundle_dir, rlxmodel, lowered_at)
    if crate is not None:
        with prog.phase(f"crate ({crate} style)"):
            package = crate_names(program.name).package
            with staged(bundle_dir.parent / package) as crate_dir:
                write_crate(program, ir, src / torchir.REFERENCE, crate_dir, crate, rlxmodel)
    report = _new_report(ir, out_dir, device if verify else None, program.op_histogram(), program.aten_histogram())
    report.notes += file_notes
    ref_path = src / torchir.REFERENCE
    if verify and ref_path.is_file():
        _verify_bundle(report, ir, src, bundle_dir, prog, device, choose_denormals=True)
    elif verify:
        raise InputError(f"{ref_path}: not found, cannot verify", hint="pass verify=False / --no-verify")
    report.timings_s = dict(prog.timings)
    return report


def _new_report(
    ir: torchir.TorchIR, out_dir: Path, device: str | None, ops: dict[str, int], aten: dict[str, int] | None = None
) -> ParityReport:
    """An unverified report of the conversion of `ir` in `out_dir` that will be verified on `device`
    (None: it will not be, and the report names no device)."""
    info = check_device(device) if device is not None else None
    return ParityReport(
        name=ir.name,
        ok=True,
        verified=False,
        out_dir=str(out_dir),
        device=info.description if info else "",
        device_settings=list(info.settings) if info else [],
        op_histogram=ops,
        aten_histogram=aten if aten is not None else dict(Counter(n.target for n in ir.nodes)),
        decomposition=ir.decomposition,
        auto_decomposed_ops=list(ir.auto_decomposed),
        rlx_version=_core.rlx_version(),
        torch_version=ir.producer.get("torch", ""),
        notes=_notes(ir),
    )


def _verify_bundle(
    report: ParityReport,
    ir: torchir.TorchIR,
    src: Path,
    bundle_dir: Path,
    prog: Progress,
    device: str,
    *,
    choose_denormals: bool = False,
) -> None:
    """Run the bundle in `bundle_dir` on `device` at the example, each sweep point and each input
    set of `src`'s reference.safetensors; fill `report`'s rows and verdict. With
    `choose_denormals` (a new bundle, on the CPU) meta.json's `flush_denormals` is decided too."""
    with prog.phase(f"verify ({device})" if device != "cpu" else "verify"):
        ref = safetensors_io.read(src / torchir.REFERENCE)
        model = BundleModel(bundle_dir, device=device)
        feed = {s.name: ref[f"input.{s.name}"].to_numpy() for s in ir.inputs}
        got = model.run(feed)
        if choose_denormals and device == "cpu":
            _choose_denormal_mode(model, feed, got, bundle_dir)
        judge = Judge(ir, src, ref)
        example = values_of(ir.symbols) if ir.is_dynamic else None
        report.outputs = _compare_outputs(ir, got, ref, "", judge, example) + _compare_values(model, ir, {}, None)
        if ir.is_dynamic:
            with prog.phase(f"sweep ({len(ir.sweep)} points)"):
                _verify_sweep(model, ir, ref, report, judge)
        if ir.input_sets:
            with prog.phase(f"input sets ({len(ir.input_sets)})"):
                _verify_input_sets(model, ir, ref, report, judge)
        report.verified = True
        report.ok = all(o.ok for o in report.outputs) and all(r.ok for r in report.sweep)
        report.ok = report.ok and all(r.ok for r in report.input_sets)


def _notes(ir: torchir.TorchIR) -> list[str]:
    """What the front end baked in, inlined or left out, one line each."""
    notes = [
        f"input {c['path']} = {c['value']!r} baked in (torch.export specializes on it)"
        for c in ir.constant_inputs
        if not c.get("default")  # a default forward used: not something the caller passed
    ]
    notes += [f"{c['kind']} (node {c['node']}): {c['how']}" for c in ir.control_flow]
    notes += [f"dropped {d['target']} (node {d['node']}, {d['check']}): {d['reason']}" for d in ir.dropped]
    if not ir.outputs:
        notes.append(
            "forward returns no tensor: RLX computes nothing; its outputs are Python values (constants, and sizes "
            "computed at each binding), each checked equal to eager PyTorch's"
        )
    return notes


def _verify_sweep(
    model: BundleModel, ir: torchir.TorchIR, ref: dict[str, Any], report: ParityReport, judge: Judge
) -> None:
    """One report row per sweep point: the bundle at the point's sizes against eager PyTorch there."""
    report.symbols = {s.label: [s.min, s.max] for s in ir.symbols}
    meta = model.meta.get("lowered_at", {})
    report.probes, report.unreproduced = meta.get("probes", []), meta.get("unreproduced", [])
    labels = {s.name: s.label for s in ir.symbols}
    for i, point in enumerate(ir.sweep):
        binding = {labels[k]: v for k, v in point["binding"].items()}
        row = SweepRow(point["label"], binding, ok=False)
        report.sweep.append(row)
        if "error" in point:
            row.outputs.append(_failed("eager PyTorch", f"eager PyTorch raised at this point: {point['error']}"))
            continue
        feed = {s.name: ref[f"sweep.{i}.input.{s.name}"].to_numpy() for s in ir.inputs}
        try:
            compiles = model.compiles
            start = time.perf_counter()
            model.compile_binding(model.binding(feed))
            row.compile_ms = (time.perf_counter() - start) * 1e3 if model.compiles > compiles else 0.0
            start = time.perf_counter()
            got = model.run(feed)
            row.run_ms = (time.perf_counter() - start) * 1e3
        except (InputError, BundleError) as e:
            row.outputs.append(_failed("RLX", e.message))
            continue
        row.outputs = _compare_outputs(ir, got, ref, f"sweep.{i}.", judge, dict(point["binding"]))
        row.outputs += _compare_values(model, ir, point["binding"], point.get("values", {}))
        row.ok = all(o.ok for o in row.outputs)


def _verify_input_sets(
    model: BundleModel, ir: torchir.TorchIR, ref: dict[str, Any], report: ParityReport, judge: Judge
) -> None:
    """One report row per extra input set (torch-ir `input_sets`): the bundle on the set's inputs
    (a dynamic bundle at the sizes they give) against eager PyTorch's outputs on them."""
    for k, entry in enumerate(ir.input_sets):
        row = InputSetRow(entry["label"], entry.get("description", ""), ok=False)
        report.input_sets.append(row)
        if "error" in entry:
            row.outputs.append(_failed("input set", entry["error"]))
            continue
        feed = {s.name: ref[f"set.{k}.input.{s.name}"].to_numpy() for s in ir.inputs}
        try:
            got = model.run(feed)
            binding = model.binding(feed)
        except (InputError, BundleError) as e:
            row.outputs.append(_failed("RLX", e.message))
            continue
        row.outputs = _compare_outputs(ir, got, ref, f"set.{k}.", judge)
        row.outputs += _compare_values(model, ir, binding, entry.get("values", {}))
        row.ok = all(o.ok for o in row.outputs)


def _compare_outputs(
    ir: torchir.TorchIR,
    got: dict[str, np.ndarray],
    ref: dict[str, Any],
    prefix: str,
    judge: Judge,
    binding: dict[str, int] | None = None,
) -> list[OutputParity]:
    """Each bundle output against PyTorch's, `<prefix>output.<name>` in reference.safetensors; where
    an output has outliers (elements beyond their own magnitude's budget), PyTorch's float64 run of the
    point judges them (`verify/judge.py`)."""
    found = []
    for spec in ir.outputs:
        expected = ref[f"{prefix}output.{spec.name}"]
        actual = got[spec.name]
        dtype = _result_dtype(actual, spec.dtype)
        row = compare_output(spec.name, actual, expected.to_numpy(), dtype, expected.dtype)
        if row.wants_judge:
            wide, why = judge.outputs(prefix, binding)
            row = compare_output(
                spec.name, actual, expected.to_numpy(), dtype, expected.dtype, wide.get(spec.name),
                no_judge=why or "PyTorch's float64 run gives no float value for it",
            )  # fmt: skip
        found.append(row)
    return found


def _compare_values(
    model: BundleModel, ir: torchir.TorchIR, binding: dict[str, int], eager: dict[str, Any] | None
) -> list[OutputParity]:
    """The outputs that are Python values, by equality: the bundle's (a constant, or a size
    evaluated at `binding`) against eager PyTorch's (`eager`, or the example's, recorded in the
    output tree, when None)."""
    rows = []
    got = model.values(binding)
    leaves = [n for n in _tree_leaves(ir.output_tree) if "name" in n]
    for leaf in leaves:
        name = leaf["name"]
        expected = leaf.get("example", leaf.get("constant")) if eager is None else eager.get(name)
        ok = type(got[name]) is type(expected) and got[name] == expected
        kind = "None" if expected is None else type(expected).__name__
        row = OutputParity(
            name=name, ok=ok, shape=[], expected_shape=[], dtype=type(got[name]).__name__, expected_dtype=kind,
            count=1, nonfinite_match=True, max_abs_error=0.0 if ok else math.inf, max_rel_error=0.0 if ok else math.inf,
            cosine=1.0 if ok else 0.0, allowed_abs_error=0.0, mismatches=0 if ok else 1,
            first_mismatch=None if ok else [], first_actual=None if ok else got[name],
            first_expected=None if ok else expected,
            reasons=[] if ok else [f"a Python {kind}: the bundle gives {got[name]!r}, eager PyTorch {expected!r}"],
            python_value=repr(got[name]),
        )  # fmt: skip
        rows.append(row)
    return rows


def _tree_leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    children = tree_children(node)
    if children or any(k in node for k in ("tuple", "list", "dict")):
        return [leaf for c in children for leaf in _tree_leaves(c)]
    return [node] if node else []


def _failed(name: str, reason: str) -> OutputParity:
    """A parity row for a point that could not be compared."""
    return OutputParity(
        name=name, ok=False, shape=[], expected_shape=[], dtype="", expected_dtype="", count=0,
        nonfinite_match=False, max_abs_error=math.inf, max_rel_error=math.inf, cosine=0.0,
        allowed_abs_error=0.0, reasons=[reason], mismatches=None,
    )  # fmt: skip


def _choose_denormal_mode(model: BundleModel, feed: dict[str, Any], got: dict[str, np.ndarray], bundle: Path) -> None:
    """Record `flush_denormals` in meta.json when flushing subnormals leaves every verified output
    bit-identical: it is then invisible in the results and only saves time (subnormal operands take
    a ~100x slower path in x86 FPUs; RLX's exp makes masked attention probabilities subnormal).
    Any difference keeps IEEE subnormals, as PyTorch has them."""
    model.set_flush_denormals(True)
    flushed = model.run(feed)
    same = all(got[k].tobytes() == flushed[k].tobytes() for k in got)
    model.set_flush_denormals(same)
    meta_path = bundle / META
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["flush_denormals"] = same
    write_text(meta_path, json.dumps(meta, indent=1, allow_nan=False) + "\n")


def _result_dtype(result: np.ndarray, declared: str) -> str:
    """The torch-ir dtype of a bundle result as it came back (numpy names the rest alike; a
    bfloat16 result is a float32 array of bfloat16 values), so a wrong dtype is seen."""
    if declared == "bfloat16" and result.dtype == np.float32:
        return "bfloat16"
    return str(result.dtype)


def _write_reports(report: ParityReport, directory: Path, stem: str = "report") -> None:
    """<stem>.json (machine-readable), <stem>.md and <stem>.html (for people; the page is
    self-contained), replaced together (all three or none)."""
    from .verify.render_html import report_html

    reports = (
        (f"{stem}.json", report.to_json()),
        (f"{stem}.md", report.markdown()),
        (f"{stem}.html", report_html(report)),
    )
    write_texts({directory / fname: text for fname, text in reports})  # the set all or none
