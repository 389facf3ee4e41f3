"""The back half every front end shares: a conversion folder's torch-ir lowered (or the program the
front end already lowered from it), the bundle and crate written, the bundle verified against the
reference; meta.json written last. `api.from_torch` runs it after the front end (`frontend.torch.driver`),
`api.build` on a folder as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .bundle.format import META, write_meta
from .bundle.write import write_bundle
from .conversion import Conversion
from .door import front_end
from .errors import InputError
from .layout import REFERENCE, WEIGHTS
from .lower import registry
from .outdir import staged
from .program import Program
from .progress import Progress
from .quant import report as quant_report
from .torchir import TorchIRError
from .verify.report import ParityReport
from .verify.run import new_report, verify_bundle


def lower_program(conv: Conversion, program: Program | None) -> tuple[Program, str | None, dict[str, Any]]:
    """The bundle's program, a dynamic one's `.rlxmodel` graph and the sizes it was lowered at. `program`:
    the one the front end lowered from this torch-ir (`registry.try_lower`), used as it is (static) or
    as the example-size lowering `lower_symbolic` generalizes (dynamic); without it, `lower` runs here."""
    ir = conv.ir
    if ir.boundary_only:  # the program is the front end's (RLX's ONNX importer's, from source.onnx)
        hook = front_end(ir).program
        assert hook is not None  # `front_end` refuses a boundary-only door without one
        return (program if program is not None else hook(conv)), None, {}
    if not ir.is_dynamic:
        return (program if program is not None else registry.lower(ir)), None, {}
    from .lower.generalize import lower_symbolic  # dynamic dims only

    symbolic = lower_symbolic(ir, example=program)
    labels = {s.name: s.label for s in ir.symbols}
    lowered_at = {
        kind: [{labels[k]: v for k, v in b.items()} for b in found]
        for kind, found in (("probes", symbolic.probes), ("unreproduced", symbolic.unreproduced))
    }
    return symbolic.program, symbolic.rlxmodel, lowered_at


def lower_write_verify(
    src: Path,
    bundle_dir: Path,
    verify: bool,
    prog: Progress,
    *,
    out_dir: Path,
    crate: str | None = None,
    device: str = "cpu",
    program: Program | None = None,
    captured: bool = False,
) -> tuple[ParityReport, Conversion]:
    """Lower the torch-ir in `src` (unless the front end did: `program`), write the bundle (and the
    crate in style `crate`), verify the bundle on RLX's `device`; meta.json is written last, once
    verification decided its `flush_denormals`. Returns the report and the conversion as loaded.

    `captured`: the torch-ir was captured in this process from torch.export's graph (`from_torch`), so
    its nodes' shapes and dtypes are the ones torch's meta kernels gave, and checking each node against
    them again (`Conversion.check_ops`, for a folder read from disk: `build`) is skipped."""
    with prog.phase("lower" if program is None else "read and check"):  # the front end lowered `program`
        conv = Conversion.load(src)
        if captured:
            conv.mark_ops_checked()
        conv.check_ops(registry.REGISTRY)  # each node against torch's schema and meta kernels (TorchIRError, exit 2)
        # The files are checked against torch-ir before anything is lowered (BundleError, exit 2).
        weights = conv.weights
        if (verify or crate is not None) and conv.has_reference:
            conv.check_reference()
        program, rlxmodel, lowered_at = lower_program(conv, program)
        if crate is not None:
            from .crate.style import check_style  # the crate writer loads only when a crate is asked for

            check_style(program, crate, conv.ir.is_dynamic, staged=any(s.stage for s in conv.ir.symbols))
            if not conv.has_reference:
                raise InputError(f"{src / REFERENCE}: not found; a crate checks itself against it")
    with prog.phase("bundle"):
        missing = sorted(program.weight_sources() - set(weights))
        if missing:
            raise TorchIRError(f"{src / WEIGHTS}: missing weights {', '.join(missing)}")
        meta = write_bundle(program, conv.ir, weights, bundle_dir, rlxmodel, lowered_at, with_meta=False)
        if any(s.stage for s in conv.ir.symbols):  # sizes that depend on tensor values (decision ax)
            from .lower.stages import write_stages

            meta["stages"] = write_stages(conv.ir, program, bundle_dir)
    if crate is not None:
        from .crate.rust_names import crate_names
        from .crate.write import write_crate

        with prog.phase(f"crate ({crate} style)"):
            with staged(bundle_dir.parent / crate_names(program.name).package) as crate_dir:
                write_crate(program, conv.ir, src / REFERENCE, crate_dir, crate, rlxmodel)
    report = new_report(conv.ir, out_dir, device if verify else None, program.op_histogram(), program.aten_histogram())
    report.notes += conv.weight_notes
    quant_report.add_to(report, program, conv.ir)  # a weight-only quantized conversion's section
    if verify and conv.has_reference:
        verify_bundle(report, conv, bundle_dir, prog, device, meta=meta)
    elif verify:
        raise InputError(f"{src / REFERENCE}: not found, cannot verify", hint="pass verify=False / --no-verify")
    write_meta(bundle_dir / META, meta)
    report.timings_s = dict(prog.timings)
    return report, conv
