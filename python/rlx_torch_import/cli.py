"""Command line: `rlx-torch-import MODEL.py -o OUT ...`, `rlx-torch-import onnx MODEL.onnx -o OUT ...`
(`frontend/onnx/cli.py`), `rlx-torch-import build DIR`,
`rlx-torch-import verify OUT`, `rlx-torch-import run BUNDLE --inputs FILE` and
`rlx-torch-import defects`. (The Core ATen coverage run is a developer tool of the repository:
`python -m tools.coverage`.)

Exit codes: 0 ok, 1 parity failed, 2 bad input, 3 unsupported ops, 4 torch.export
failed, 5 internal error, 6 timed out (--timeout), 7 device missing or unable to run the
model (--device), 8 an output file could not be written (see README "Exit codes").
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .cli_args import (
    BUILD_EXIT_CODES,
    DEFECTS_EXIT_CODES,
    EXIT_CODES,
    RUN_EXIT_CODES,
    VERIFY_EXIT_CODES,
    add_device_arg,
    add_emit_args,
    add_per_node_arg,
    add_quantize_args,
    add_threads_arg,
    add_verify_args,
    emits,
    model_name,
    read_inputs_file,
    seconds,
    version,
)
from .errors import ExitCode, InputError, RtiError, describe

if TYPE_CHECKING:
    from .verify.report import ParityReport


def _convert_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import",
        description="Convert a PyTorch model to an RLX bundle and verify it against PyTorch. "
        "Also: `rlx-torch-import build DIR` re-lowers an existing torch-ir directory; "
        "`rlx-torch-import verify OUT [--device cuda]` verifies a conversion's bundle again; "
        "`rlx-torch-import diagnose OUT` finds the first node that diverges; "
        "`rlx-torch-import run BUNDLE --inputs FILE` runs a bundle; "
        "`rlx-torch-import defects` probes the installed RLX for the defects the lowering works around.",
        epilog=EXIT_CODES,
    )
    p.add_argument(
        "model_file",
        metavar="MODEL.py",
        help="defines `model` and `example_inputs` (and optionally `example_kwargs`), or get_model()/build() "
        "returning them",
    )
    p.add_argument("-o", "--out", required=True, metavar="OUT", help="output directory (replaced when done)")
    add_emit_args(p)
    p.add_argument(
        "--decomposition",
        choices=["aten", "high", "core"],
        default="high",
        help="how far to decompose before lowering (default: high)",
    )
    add_verify_args(p)
    p.add_argument(
        "--dynamic",
        action="append",
        metavar="INPUT:AXIS=NAME[:MIN[:MAX]]",
        help="make an input axis dynamic (repeatable): NAME is a torch.export.Dim, shared by every axis "
        "given the same NAME, with an optional range (x:0=batch:1:64); NAME auto or dynamic means "
        "Dim.AUTO / Dim.DYNAMIC. The bundle then runs at any size in range and is verified at a sweep "
        "of sizes (default: every dim static)",
    )
    p.add_argument("--name", type=model_name, help="model name (default: from the module's class)")
    p.add_argument("--strict", action="store_true", help="use torch.export strict mode")
    p.add_argument(
        "--no-auto-decompose",
        action="store_true",
        help="do not decompose unsupported ops through torch's decomposition table",
    )
    p.add_argument(
        "--max-decompose-rounds",
        type=int,
        default=4,
        metavar="N",
        help="rounds of automatic decomposition (default: 4)",
    )
    p.add_argument(
        "--verify-inputs",
        action="append",
        metavar="FILE.safetensors|auto",
        help="verify on one more input set besides the example (repeatable): a .safetensors file with one "
        "tensor per input, keyed by input name (or input.<name>; inputs it lacks are the example's), or auto: "
        "adversarial sets made from the example's shapes, dtypes and value ranges (rounding boundaries, ties, "
        "large magnitudes, zeros, negatives, a fully masked row, integer bounds). Stored with the reference, "
        "so `build DIR` verifies them again",
    )
    add_quantize_args(p)
    add_device_arg(p)
    p.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="time limit for the model's own code: running MODEL.py (and its get_model()/build()), "
        "torch.export, and each eager PyTorch run get SECONDS each; past it the conversion stops with exit "
        "code 6, naming the phase and the line it was running (code stuck outside Python is ended "
        "5 seconds later) (default: no limit)",
    )
    add_threads_arg(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--version", action="version", version=version())
    return p


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import build",
        description="Lower an existing torch-ir directory into DIR/bundle again, and verify it.",
        epilog=BUILD_EXIT_CODES,
    )
    p.add_argument("directory", metavar="DIR", help="a directory with torch-ir.json and weights.safetensors")
    add_verify_args(p)
    add_emit_args(p)
    add_device_arg(p)
    add_threads_arg(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def _verify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import verify",
        description="Verify a conversion's bundle again, as it is, against PyTorch's values in its "
        "reference.safetensors (the example, sweep points and input sets), with the same budgets and report; "
        "--device cuda re-verifies a CPU-verified bundle on the GPU. Writes OUT/report-<device>.json/.md/.html. "
        "Exit 0: every output passed; 1: parity failed.",
        epilog=VERIFY_EXIT_CODES,
    )
    p.add_argument(
        "directory", metavar="OUT", help="a conversion directory (torch-ir.json, reference.safetensors, bundle/)"
    )
    add_per_node_arg(p)
    add_device_arg(p, "runs the bundle on")
    add_threads_arg(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import run",
        description="Run a bundle on RLX with inputs from a file (a dynamic bundle: at any sizes in range).",
        epilog=RUN_EXIT_CODES,
    )
    p.add_argument("bundle", metavar="BUNDLE", help="a bundle directory (OUT/bundle)")
    p.add_argument(
        "--inputs",
        metavar="FILE",
        help="a .safetensors or .npz file with one tensor per input, keyed by input name (or input.<name>); "
        "needed unless the bundle takes no inputs",
    )
    p.add_argument("--save", metavar="FILE", help="write the outputs to this .safetensors file (output.<name> keys)")
    add_device_arg(p, "runs the bundle on")
    add_threads_arg(p, "the bundle")
    return p


def _run_bundle(argv: Sequence[str]) -> int:
    """`rlx-torch-import run`: bad inputs (a size outside a dynamic dim's range, two inputs that
    disagree on a shared dim) exit 2 before anything runs."""
    import numpy as np

    from . import safetensors_io
    from .bundle.host import check_baked
    from .bundle.model import BundleModel
    from .layout import NOT_INPUTS, input_key, output_key

    args = _run_parser().parse_args(argv)
    from .devices import check_device

    check_device(args.device)  # first, as every command does: DeviceError (exit 7) names what is missing
    save = Path(args.save) if args.save else None
    if save is not None and (save.is_dir() or not save.parent.is_dir()):
        what = "is a directory" if save.is_dir() else f"is in {save.parent}, which is no directory"
        raise InputError(f"--save {save}: {what}; give a .safetensors file path")
    tensors = read_inputs_file(args.inputs)
    model = BundleModel(args.bundle, threads=args.threads, device=args.device)
    if args.inputs is None and model.input_names:
        raise InputError(
            f"the bundle takes input(s) {', '.join(model.input_names)}: give them with --inputs FILE "
            "(a .safetensors or .npz file keyed by input name)"
        )
    feed = {}
    for name in model.input_names:
        if name in tensors and input_key(name) in tensors:
            raise InputError(f"--inputs {args.inputs} holds both {name!r} and '{input_key(name)}'; keep one")
        key = name if name in tensors else input_key(name)
        if key not in tensors:
            raise InputError(
                f"--inputs {args.inputs} has no tensor {name!r} (or input.{name}); the bundle takes "
                f"{', '.join(model.input_names)}"
            )
        feed[name] = tensors[key]
    # A reference.safetensors holds outputs (and sweep/set entries) next to the inputs: those are not inputs.
    used = set(model.input_names) | {input_key(n) for n in model.input_names}
    for const in model.meta.get("constant_inputs", []):  # baked in at conversion: may be given, unchanged
        for key in (const["path"], input_key(const["path"])):
            if key in tensors:
                check_baked(const["path"], tensors[key], const["value"])
                used.add(key)
    unknown = sorted(k for k in tensors if k not in used and not k.startswith(NOT_INPUTS))
    if unknown:
        raise InputError(
            f"--inputs {args.inputs} holds tensor(s) {', '.join(map(repr, unknown[:10]))} that are no input of the "
            f"bundle (it takes {', '.join(model.input_names) or 'no inputs'}, keyed by name or input.<name>)"
        )
    outputs = model.run(feed)
    binding = model.binding(feed)
    if binding:
        print("binding: " + ", ".join(f"{k}={v}" for k, v in binding.items()))
    for name, value in outputs.items():
        print(f"{name}: {value.dtype}{list(value.shape)}")
    for name, python_value in model.values(binding).items():  # forward's Python values: constants, sizes
        print(f"{name} = {python_value!r} (Python {type(python_value).__name__}; not in --save)")
    if save is not None:
        import torch

        found: dict[str, object] = {
            output_key(k): torch.from_numpy(np.ascontiguousarray(v)) for k, v in outputs.items()
        }
        try:
            safetensors_io.write(save, dict(safetensors_io.iter_torch(found)))
        except OSError as e:
            raise InputError(f"--save {save}: cannot write ({e.strerror or e})") from None
        print(f"outputs written to {args.save}")
    return ExitCode.OK


def _defects_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import defects",
        description="Probe the installed RLX for the defects the lowering works around (docs/rlx-defects.md); "
        "--device cuda probes how RLX's CUDA backend differs from its CPU backend (needs a GPU). "
        "Exit 0: every defect is still there; 1: one is gone (its workaround can go).",
        epilog=DEFECTS_EXIT_CODES,
    )
    add_device_arg(p, "probes")
    return p


def _diagnose_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import diagnose",
        description="Per-node parity of a conversion: the first node whose own (reference-fed) error is over its "
        "budget, and a self-contained repro folder for it. Exit 0: no divergence; 1: a divergence or "
        "accumulated drift was found.",
    )
    p.add_argument("directory", metavar="OUT", help="a conversion directory (torch-ir.json, reference.safetensors)")
    p.add_argument("--node", metavar="NAME", help="write the repro of this node instead of the first divergence")
    p.add_argument("--repro", metavar="DIR", help="where to write the repro folder (default OUT/repro-<node>)")
    p.add_argument("--all", action="store_true", help="print every node, not only the failing ones")
    add_threads_arg(p)
    return p


def _diagnose(argv: Sequence[str]) -> int:
    """`rlx-torch-import diagnose`: prints the per-node table (failing nodes) and the verdict."""
    from . import rlx_config
    from .verify.diagnose import diagnose

    args = _diagnose_parser().parse_args(argv)
    rlx_config.set_threads(args.threads)
    found = diagnose(args.directory, node=args.node, repro_dir=args.repro)
    rows = found.report.nodes
    shown = [
        r for r in rows if args.all or r.note or (r.local and not r.local.ok) or (r.cumulative and not r.cumulative.ok)
    ]
    for r in shown:
        local = (
            f"local {r.local.max_abs:.3g} / {r.local.allowed_abs:.3g} ({'ok' if r.local.ok else 'FAIL'})"
            if r.local
            else "local -"
        )
        cumulative = (
            f"cumulative {r.cumulative.max_abs:.3g} ({'ok' if r.cumulative.ok else 'FAIL'})" if r.cumulative else ""
        )
        where = ", ".join(x for x in (r.module_path, r.source) if x)
        print(
            f"[{r.index}] {r.node} {r.aten} {r.dtype}{r.shape} {local} {cumulative}{f' [{where}]' if where else ''}"
            f"{f' ({r.note})' if r.note else ''}"
        )
    n_local = sum(1 for r in rows if r.local and not r.local.ok)
    n_cumulative = sum(1 for r in rows if r.cumulative and not r.cumulative.ok)
    print(
        f"{len(rows)} node values compared: {n_local} over their local budget, {n_cumulative} over the cumulative one"
    )
    if found.node is not None:
        r = found.node
        kind = "first divergence" if args.node is None else "node"
        print(
            f"{kind}: {r.node} ({r.aten}{', ' + r.module_path if r.module_path else ''}"
            f"{', ' + r.source if r.source else ''})"
        )
        print(f"repro written to {found.repro} (python {found.repro}/repro.py)")
    if found.report.drift:
        print(found.report.drift)
    if found.report.first_divergence is None and not found.report.drift:
        print("no divergence: every node is within its local budget")
        return ExitCode.OK
    return ExitCode.PARITY_FAILED


def _run(argv: Sequence[str]) -> int:
    from . import api

    if argv and argv[0] == "run":
        return _run_bundle(argv[1:])
    if argv and argv[0] == "diagnose":
        return _diagnose(argv[1:])
    if argv and argv[0] == "coverage":
        print(
            "error: the coverage run is a developer tool of the repository now: from a checkout, run "
            '`python -m tools.coverage ...` (README "Core ATen coverage"; ONNX\'s conformance suite: '
            "`python -m tools.onnx_coverage`)",
            file=sys.stderr,
        )
        return ExitCode.BAD_INPUT
    if argv and argv[0] == "defects":
        args = _defects_parser().parse_args(argv[1:])
        if args.device == "cuda":
            from .lower.rlx.cuda_defects import main as cuda_defects_main

            return cuda_defects_main()
        from .lower.rlx.defects import main as defects_main

        return defects_main()
    if argv and argv[0] == "onnx":
        from .frontend.onnx.cli import convert

        report = convert(argv[1:])
    elif argv and argv[0] == "build":
        args = _build_parser().parse_args(argv[1:])
        report = api.build(
            args.directory,
            verify=args.verify,
            per_node=args.per_node,
            progress=not args.quiet,
            emit=emits(args),
            emit_style=args.emit_style,
            threads=args.threads,
            device=args.device,
        )
    elif argv and argv[0] == "verify":
        args = _verify_parser().parse_args(argv[1:])
        report = api.reverify(
            args.directory, device=args.device, per_node=args.per_node, progress=not args.quiet, threads=args.threads
        )
        print(report.summary())
        print(f"report: {Path(args.directory) / f'report-{args.device}.md'}")
        return verdict_code(report)
    else:
        args = _convert_parser().parse_args(argv)
        report = _convert(args)
    print(report.summary())
    return verdict_code(report)


def verdict_code(report: ParityReport) -> int:
    """The exit code of a report's verdict: 0 PASS (or not verified), 9 RANDOM, else 1."""
    if report.ok:
        return ExitCode.OK
    return ExitCode.RANDOM if report.verdict == "RANDOM" else ExitCode.PARITY_FAILED


def _convert(args: argparse.Namespace) -> ParityReport:
    """`rlx-torch-import MODEL.py -o OUT`: the file's code runs under `--timeout` (with the
    watchdog: the CLI owns its process) and a `sys.exit()` in it is a ModelLoadError (exit 2)."""
    from . import api, timeout
    from .devices import check_device
    from .frontend.torch.dynamic import parse_cli
    from .frontend.torch.model_file import load_model_file
    from .progress import Progress

    dynamic_shapes = parse_cli(args.dynamic or [])
    if args.verify:  # a missing device is said before the model file runs (from_torch checks it again)
        check_device(args.device)
    timeout.enable_watchdog(args.timeout is not None)
    try:
        with Progress(not args.quiet).phase(f"load {Path(args.model_file).name}"):
            model, example_inputs, example_kwargs = load_model_file(args.model_file, timeout=args.timeout)
        return api.from_torch(
            model,
            example_inputs,
            args.out,
            kwargs=example_kwargs,
            verify=args.verify,
            per_node=args.per_node,
            emit=emits(args),
            decomposition=args.decomposition,
            dynamic_shapes=dynamic_shapes,
            strict=args.strict,
            name=args.name,
            device=args.device,
            progress=not args.quiet,
            auto_decompose=not args.no_auto_decompose,
            max_decompose_rounds=args.max_decompose_rounds,
            emit_style=args.emit_style,
            threads=args.threads,
            verify_inputs=args.verify_inputs,
            timeout=args.timeout,
            quantize=args.quantize,
            quantize_block=args.quantize_block,
        )
    except SystemExit as e:  # rlx-torch-import never exits from here: the model's code did
        raise timeout.exit_error(e, f"converting {args.model_file}") from None
    finally:
        timeout.enable_watchdog(False)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; never lets a bare traceback be the only message.

    From the command line (`argv` None) the process ends with the verdict even when the model
    file left non-daemon threads running (Python would wait for them forever)."""
    if argv is None:  # a SIGTERM unwinds like Ctrl-C, so no half-written staging folder is left behind
        signal.signal(signal.SIGTERM, _terminate)
    code = _main(list(sys.argv[1:] if argv is None else argv))
    if argv is None:
        _end_despite_threads(code)
    return code


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so every `finally` and staging clean-up runs."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


def _end_despite_threads(code: int) -> None:
    """Exit now with `code` when threads the model file started (not daemon) are still running."""
    import threading

    alive = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if alive:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _main(argv: list[str]) -> int:
    for stream in (sys.stdout, sys.stderr):  # a model's name need not fit an ASCII terminal's encoding
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        return _run(argv)
    except RtiError as e:
        print(f"error: {e.explain()}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        terminated = isinstance(e, _Terminated)
        print("terminated (SIGTERM)" if terminated else "interrupted", file=sys.stderr)
        return 143 if terminated else 130
    except Exception as e:
        traceback.print_exc()
        print(
            f"internal error: {describe(e)}\nThis is a bug in rlx-torch-import; please report it "
            "with the traceback above.",
            file=sys.stderr,
        )
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
