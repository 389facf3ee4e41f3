"""Public entry points: from_torch (module -> verified bundle), build (torch-ir dir -> bundle) and
reverify (a bundle verified again). Each is front end -> lower -> write -> verify:
`frontend.torch.driver` (torch-ir, and the program lowered from it), then `backend` (lower, write the bundle
and crate, verify the bundle: `verify.run`), over one loaded `conversion.Conversion`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import _core, rlx_config
from .backend import lower_write_verify
from .bundle.format import META, read_meta
from .conversion import Conversion
from .crate.style import STYLES
from .devices import DEVICES, check_device, device_name
from .errors import InputError, UnsupportedOpsError
from .layout import BUNDLE, REFERENCE, REPORT, REPORT_SUFFIXES, TORCH_IR, WEIGHTS
from .outdir import staged, stranded_hint
from .progress import Progress
from .verify.randomness import judge_random
from .verify.report import ParityReport
from .verify.run import (
    add_node_parity,
    check_bundle_matches,
    check_per_node,
    new_report,
    verify_bundle,
    write_reports,
)

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
    per_node: bool | str = "auto",
    verify_inputs: Any = None,
    timeout: float | None = None,
    quantize: str | None = None,
    quantize_block: int = 32,
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
    (`frontend.torch.state.ModelState`: every buffer, the parameters the program writes, and every
    module's own attributes: caches, counters, lazily registered buffers and submodules, which
    torch.export and each eager run leave behind); buffer writes are not outputs.
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
    example's shapes, dtypes and value ranges, `frontend/torch/input_sets.py`); "auto" alone is
    `["auto"]`. Eager PyTorch runs on each set here; the sets are stored with the reference, so
    `build` verifies them again. None (the default) adds none, except to a model with sizes computed
    from tensor values (size stages), verified on the "auto" sets eager PyTorch accepts as well, so
    that such sizes are verified at several values (`[]` adds none).
    With `per_node` (and `verify`), every node's value is also compared with PyTorch's
    intermediate, cumulatively and reference-fed (`report.nodes`, `report.first_divergence`;
    `verify/nodes.py`): True always; "auto" (the default) when verification fails, and on a passing
    conversion while the graph's values hold at most `verify.run.AUTO_ELEMENTS` elements (else a
    note says it did not run); False never.
    With `timeout` (seconds; default None, no limit), torch.export and each eager PyTorch run of
    the model (reference, sweep points, input sets) may take that long, else TimeLimitError; a
    forward that calls `sys.exit()` raises ModelLoadError (`timeout.user_code`).
    With `quantize` ("int8" or "int4"; `quantize_block` elements a block, 32, the only size RLX's layouts
    have), every float32 `nn.Linear` weight whose in_features is a multiple of 32 is stored in the bundle
    packed (RLX `GgufQ8_0` / `GgufQ4_0`) and runs on RLX's `DequantMatMul` (`quant/schemes.py`); embeddings
    and other weights stay float. PyTorch's reference runs on the dequantized weights (the quantized
    model's exact reference, so the usual budgets apply; weights.safetensors holds them), and
    `report.quantization` lists what was packed and kept float (why), the bundle's weight bytes, and the
    accuracy cost against the float model (max abs error, cosine, top-1 agreement over the last axis, on
    the example and every input set). The module's own weights are given back unchanged. Another scheme
    or block size raises UnsupportedOpsError (exit 3) naming it.
    """
    from .frontend.torch.driver import TRAINING_NOTE, FrontEnd, eval_mode, with_fallback_reasons
    from .frontend.torch.input_sets import normalize
    from .frontend.torch.state import kept_state
    from .timeout import check_timeout

    set_specs = normalize(verify_inputs) if verify_inputs is not None else None  # checked before anything runs
    per_node = check_per_node(per_node)
    timeout = check_timeout(timeout)
    emit = emit_targets(emit)
    _check_options(emit, max_decompose_rounds, emit_style)
    # before anything runs: DeviceError names what is missing (without verify nothing runs on the device)
    device = check_device(device).name if verify else device_name(device)
    rlx_config.set_threads(threads)
    front = FrontEnd.check(
        model,
        example_inputs,
        kwargs,
        name,
        dynamic_shapes,
        decomposition=decomposition,
        strict=strict,
        timeout=timeout,
        rounds=max_decompose_rounds if auto_decompose else 0,
        set_specs=set_specs,
        quantize=(quantize, quantize_block),
    )
    prog = Progress(progress)
    # every eager run starts from the module's state as given (buffers, written parameters), which the
    # weights hold too; the module gets it back at the end
    with eval_mode(model) as was_training, kept_state(model) as state, staged(Path(out_dir)) as stage:
        ir, program, skipped = front.run(stage, prog, state)
        try:
            report, conv = lower_write_verify(
                stage,
                stage / BUNDLE,
                verify,
                prog,
                out_dir=Path(out_dir),
                crate=emit_style if "crate" in emit else None,
                device=device,
                program=program,
                captured=True,
            )
            if verify:
                add_node_parity(report, conv, prog, device=device, per_node=per_node)
                judge_random(report, conv, stage / BUNDLE, device)
            front.add_accuracy_cost(report, ir, stage, prog, state)
        except UnsupportedOpsError as e:
            raise with_fallback_reasons(e, skipped) from None
        _front_notes(report, TRAINING_NOTE if was_training else "", len(ir.input_sets) if not verify else 0)
        _write_reports(report, stage, prog)
    return report


def from_onnx(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    inputs: Any = None,
    dims: dict[str, int] | Sequence[str] | None = None,
    verify: bool = True,
    emit: str | Sequence[str] = ("bundle",),
    emit_style: str = "graph",
    name: str | None = None,
    device: str = "cpu",
    progress: bool = False,
    threads: int | None = None,
    per_node: bool | str = "auto",
    route: str = "auto",
) -> ParityReport:
    """Convert the ONNX file at `path` (external data beside it is read) into `out_dir/` and verify
    it against ONNX Runtime; the same report, folder layout and exit codes as `from_torch`.

    Through RLX's own importer (rlx-onnx-import, the core's `onnx` feature) after an ONNX-level
    pre-pass (`frontend/onnx/prepass.py`). `out_dir` gets torch-ir.json (the graph's boundary:
    inputs, outputs, weights; no nodes), source.onnx (the static model the importer read),
    weights.safetensors (keyed by ONNX initializer name), reference.safetensors (ONNX Runtime's
    outputs, CPU provider, graph optimizations off), bundle/ and report.json/md/html; with "crate"
    in `emit`, rlx-<name>/ in `emit_style` (graph or tensor). `build`, `reverify`, `run` and
    `diagnose` take the folder as they take `from_torch`'s.

    `inputs`: the inputs to run and verify on, a mapping of input name to array (numpy or torch)
    or a .safetensors / .npz file keyed by input name; inputs left out are random of the declared
    dtype and shape (floats standard normal, integers in [0, 4), bools 0/1; seeded; the report says
    which). `dims`: a size for each symbolic input dim (`{"batch": 2}` or `["batch=2"]`); a dim the
    given inputs size needs none. The bundle is static at those sizes (the report says so).
    With `per_node` (and `verify`), every ONNX node's value is compared with ONNX Runtime's
    intermediate, cumulatively and reference-fed (`report.nodes`, `report.first_divergence`); True,
    False or "auto" as in `from_torch`.

    Raises InputError (no such file, a symbolic dim without a size, inputs that do not fit),
    ModelLoadError (not an ONNX model, missing external data, ONNX Runtime cannot run it),
    UnsupportedOpsError (exit 3: every op type, dtype and node the importer cannot take, listed
    together), DeviceError (exit 7), WriteError (exit 8). Parity failure is reported, not raised."""
    from .frontend.onnx.convert import ROUTES, Request, convert

    if route not in ROUTES:
        raise InputError(f"route {route!r} is not one of {', '.join(ROUTES)}")
    per_node = check_per_node(per_node)
    emit = emit_targets(emit)
    _check_options(emit, 0, emit_style)
    if "crate" in emit and not verify:
        raise InputError(
            "--emit crate needs verification: the crate tests itself against ONNX Runtime's outputs, which "
            "--no-verify (verify=False) does not compute",
            hint="drop --no-verify, or emit the bundle only",
        )
    if "crate" in emit and emit_style == "flow":
        raise InputError("an ONNX bundle's crate is graph or tensor style (flow needs torch-ir's nodes)")
    if not _core.ONNX_BUILT:
        raise InputError(
            "this build of the core has no ONNX importer (built without the `onnx` cargo feature)",
            hint="run `make setup` (the default build enables it)",
        )
    device = check_device(device).name if verify else device_name(device)
    rlx_config.set_threads(threads)
    crate = emit_style if "crate" in emit else None
    req = Request(
        Path(path), Path(out_dir), inputs, dims, verify, crate, name, device, per_node, Progress(progress), route
    )
    with staged(Path(out_dir)) as stage:
        return convert(req, stage)


def build(
    directory: str | os.PathLike[str],
    *,
    verify: bool = True,
    progress: bool = False,
    emit: str | Sequence[str] = ("bundle",),
    emit_style: str = "graph",
    threads: int | None = None,
    per_node: bool | str = "auto",
    device: str = "cpu",
) -> ParityReport:
    """Lower an existing torch-ir directory again into `directory/bundle` (and
    `directory/rlx-<name>/` with "crate" in `emit`) and verify it on RLX's `device` ("cpu" or
    "cuda"; RLX's pool sized `threads`); per-node parity by `per_node` as in `from_torch`."""
    per_node = check_per_node(per_node)
    emit = emit_targets(emit)
    _check_options(emit, 0, emit_style)
    device = check_device(device).name if verify else device_name(device)
    rlx_config.set_threads(threads)
    directory = _conversion_dir(directory, "build", (TORCH_IR, WEIGHTS))
    prog = Progress(progress)
    with staged(directory / BUNDLE) as stage:
        report, conv = lower_write_verify(
            directory,
            stage,
            verify,
            prog,
            out_dir=directory,
            crate=emit_style if "crate" in emit else None,
            device=device,
        )
        if verify:
            add_node_parity(report, conv, prog, device=device, per_node=per_node)
            judge_random(report, conv, stage, device)
    _write_reports(report, directory, prog)
    for stale in directory.glob(f"{REPORT}-*.*"):  # `reverify`'s reports describe the bundle just replaced
        if stale.suffix in REPORT_SUFFIXES and stale.stem.removeprefix(f"{REPORT}-") in DEVICES:
            stale.unlink()
    return report


def reverify(
    directory: str | os.PathLike[str],
    *,
    device: str = "cpu",
    per_node: bool | str = "auto",
    progress: bool = False,
    threads: int | None = None,
) -> ParityReport:
    """Verify the bundle of an existing conversion again, as it is (nothing is lowered or
    written but the report), on RLX's `device` ("cpu" or "cuda"): the example, every sweep point
    and every input set against PyTorch's values in reference.safetensors, with the same budgets
    and report as the conversion (`report.device` says where it ran). Writes
    `directory/report-<device>.json`, `.md` and `.html`; per-node parity by `per_node` as in `from_torch`.

    Raises InputError when `directory` is no conversion directory or lacks a file, BundleError
    when its files disagree with torch-ir (a bundle from another conversion included), DeviceError
    (exit 7) when `device` is missing or cannot run the bundle (`devices.check_device`)."""
    per_node = check_per_node(per_node)
    device = check_device(device).name
    rlx_config.set_threads(threads)
    directory = _conversion_dir(directory, "verify", (TORCH_IR, REFERENCE, BUNDLE))
    missing = {
        BUNDLE: "there is no bundle to verify",
        TORCH_IR: "the bundle's inputs and outputs cannot be matched with PyTorch's",
        REFERENCE: "there are no PyTorch values to verify against",
    }
    for needed, why in missing.items():
        if not (directory / needed).exists():
            raise InputError(
                f"{directory}: {needed} is missing, so {why}",
                hint="verify takes the OUT directory of a conversion (`rlx-torch-import MODEL.py -o OUT`)",
            )
    prog = Progress(progress)
    with prog.phase("read"):
        conv = Conversion.load(directory)
        conv.check_reference()  # before the bundle is read
        meta = read_meta(directory / BUNDLE / META)
        check_bundle_matches(conv.ir, meta, directory / BUNDLE)
    histogram = meta.get("op_histogram", {})
    report = new_report(conv.ir, directory, device, dict(histogram) if isinstance(histogram, dict) else {})
    verify_bundle(report, conv, directory / BUNDLE, prog, device)
    add_node_parity(report, conv, prog, device=device, per_node=per_node)
    judge_random(report, conv, directory / BUNDLE, device)
    report.timings_s = dict(prog.timings)
    _write_reports(report, directory, prog, device)
    return report


def _front_notes(report: ParityReport, training: str, unverified_sets: int) -> None:
    """The front end's notes: the model was in training mode (`training`, the note), input sets stored but
    not verified (verify off)."""
    if training:
        report.notes.insert(0, training)
    if unverified_sets:
        report.notes.append(
            f"{unverified_sets} extra input set(s) stored with the reference but not verified "
            "(verify is off; `build` verifies them)"
        )


def _write_reports(report: ParityReport, directory: Path, prog: Progress, device: str | None = None) -> None:
    """`verify.run.write_reports` as a phase: the returned report's timings include it (the files, written
    during it, cannot)."""
    with prog.phase("write reports"):
        write_reports(report, directory, device)
    report.timings_s = dict(prog.timings)


def _conversion_dir(directory: str | os.PathLike[str], command: str, holds: Sequence[str]) -> Path:
    """`directory` as a Path, or InputError when it is not a directory (`command` takes one holding `holds`)."""
    path = Path(directory)
    if not path.is_dir():
        raise InputError(
            f"{path}: {'not a directory' if path.exists() else 'no such directory'}",
            hint=stranded_hint(path) or f"{command} takes a conversion directory ({', '.join(holds)})",
        )
    return path
