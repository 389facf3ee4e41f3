"""The front half of `from_torch`: a module and its example inputs to a conversion folder's torch-ir.json,
weights.safetensors and reference.safetensors, plus the program lowered from that torch-ir.

    export (torch.export) -> reference (eager PyTorch) -> capture (torch-ir) -> lower, and
    auto-decompose what does not lower (re-capture, lower again) -> sweep and input-set
    references -> write the three files

The lowering here is the capability pass and the bundle's lowering in one (`lower.registry.try_lower`):
the program of the last capture that lowered is the one `api` writes (a dynamic program's at its
example sizes, which `lower.generalize.lower_symbolic` generalizes), so nothing is lowered twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ... import safetensors_io
from ...errors import ExportError, InputError, UnsupportedOpsError
from ...layout import REFERENCE, WEIGHTS
from ...lower import registry
from ...program import Program
from ...progress import Progress
from ...quant.schemes import BLOCK, Scheme, check_scheme
from ...torchir import TorchIR
from ...verify.report import ParityReport
from .dynamic import DynamicShapes, parse_dynamic_shapes
from .export import export_program
from .fallback import decompose_targets
from .input_sets import AUTO, Spec, record_input_sets
from .inputs import ModelInputs, model_inputs
from .reference import eager_outputs, sweep_references
from .state import ModelState
from .to_torchir import Captured, capture

TRAINING_NOTE = (
    "the model was in training mode: it was converted and verified in eval mode (dropout off, batch norm on its "
    "running statistics); its own mode is left as it was"
)


def check_name(name: object) -> str:
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


@contextmanager
def eval_mode(model: Any) -> Iterator[bool]:
    """Run the conversion with `model` in eval mode (inference), then give every submodule back the
    mode it had; yields whether any submodule was training."""
    import torch

    if not isinstance(model, torch.nn.Module):
        yield False
        return
    modes = [(m, m.training) for m in model.modules()]
    try:  # an exported GraphModule (a PT2E graph) holds only graphs, containers and torch.export's guard
        yield any(t for m, t in modes if type(m) is not torch.nn.Module and not _exported_part(m))
    finally:
        for m, training in modes:
            m.training = training


def _exported_part(module: Any) -> bool:
    """A module torch.fx or torch.export made (a GraphModule, the guard function): its mode flag changes nothing."""
    import torch

    return isinstance(module, torch.fx.GraphModule) or type(module).__module__.startswith("torch.export")


def with_fallback_reasons(err: UnsupportedOpsError, skipped: dict[str, str]) -> UnsupportedOpsError:
    """Say, per op, why automatic decomposition could not help."""
    items = [
        replace(i, reason=f"{i.reason}; auto-decomposition: {skipped[i.target]}") if i.target in skipped else i
        for i in err.items
    ]
    return UnsupportedOpsError(items=items, decomposition=err.decomposition)


@dataclass
class FrontEnd:
    """What `from_torch` asks of the front end, checked before anything runs (`FrontEnd.check`)."""

    model: Any
    pristine: ModelInputs  # the reference inputs: as given, before any run could write them
    name: str
    dynamic: DynamicShapes  # the user's dynamic_shapes, parsed once
    decomposition: str
    strict: bool
    timeout: float | None
    rounds: int  # auto-decompose rounds (0: none)
    set_specs: list[Spec] | None  # None: the user gave none (a staged model gets the "auto" sets)
    # torch-ir's `quantize` record (`frontend.torch.quantize.dequantized_weights`), set on every capture so the
    # lowering packs those weights ({}: a float conversion)
    quantize: dict[str, Any] = field(default_factory=dict)
    scheme: Scheme | None = None  # `--quantize`: the Linear weights' scheme (None: a float conversion)
    # Another door driving this front end (the ONNX torch route) settles the boundary of each capture here,
    # before it is lowered and written once: its names, producer entries and reference outputs.
    settle: Callable[[Captured], None] | None = None

    @classmethod
    def check(
        cls,
        model: Any,
        example_inputs: Any,
        kwargs: dict[str, Any] | None,
        name: str | None,
        dynamic_shapes: Any,
        *,
        decomposition: str,
        strict: bool,
        timeout: float | None,
        rounds: int,
        set_specs: list[Spec] | None,
        quantize: tuple[str | None, int] = (None, BLOCK),
    ) -> FrontEnd:
        """The inputs, name, dynamic shapes and `quantize` (scheme, block size) checked (InputError,
        DynamicShapeError, UnsupportedOpsError) before anything runs."""
        if quantize[0] is None and quantize[1] != BLOCK:
            raise InputError(
                f"quantize_block={quantize[1]} without quantize: a block size only applies to a quantize scheme",
                hint="add quantize='int8' (CLI --quantize int8), or drop the block size",
            )
        scheme = None if quantize[0] is None else check_scheme(quantize[0], quantize[1])
        given = model_inputs(model, example_inputs, kwargs)
        pristine = given.cloned()
        name = check_name(name) if name is not None else _default_name(model)
        dynamic = parse_dynamic_shapes(model, dynamic_shapes, pristine)  # refused here, before export
        return cls(model, pristine, name, dynamic, decomposition, strict, timeout, rounds, set_specs, scheme=scheme)

    def run(self, stage: Path, prog: Progress, state: ModelState) -> tuple[TorchIR, Program, dict[str, str]]:
        """`_run` with the chosen `Linear` weights dequantized in place (`frontend.torch.quantize`; with `scheme`),
        their float values given back after, error or not."""
        from .quantize import dequantized_weights

        with dequantized_weights(self.model, self.scheme) as self.quantize:
            return self._run(stage, prog, state)

    def add_accuracy_cost(
        self, report: ParityReport, ir: TorchIR, stage: Path, prog: Progress, state: ModelState
    ) -> None:
        """A quantized conversion's accuracy cost, the float model against the quantized one on the example and
        the input sets, into `report.quantization["accuracy_cost"]` (`frontend.torch.quantize.accuracy_cost`)."""
        from .quantize import accuracy_cost

        if report.quantization:
            with prog.phase("accuracy cost (float model)"):
                report.quantization["accuracy_cost"] = accuracy_cost(
                    self.model, ir, self.pristine, stage / REFERENCE, state
                )

    def _run(self, stage: Path, prog: Progress, state: ModelState) -> tuple[TorchIR, Program, dict[str, str]]:
        """Export, capture, lower (auto-decomposing) and write torch-ir.json, weights.safetensors and
        reference.safetensors into `stage`, every eager run from `state`. Returns the torch-ir, the program
        lowered from it and, per op auto-decomposition skipped, why. Raises UnsupportedOpsError before any
        file is written when the program does not lower."""
        from ...timeout import user_code

        model, pristine, timeout = self.model, self.pristine, self.timeout
        shape_log: list[str] = []  # torch's symbolic-shape log: why a dynamic dim was specialized
        state.check_ready()  # a lazy module's first call would change it beyond what can be given back
        state.check_real("the model holds them as passed in (an earlier torch.export or torch.compile of it left them)")
        with prog.phase("export"), user_code("torch.export", timeout):
            try:
                ep = export_program(  # traces with fake tensors: the inputs' values are neither read nor written
                    model,
                    pristine.args,
                    kwargs=pristine.kwargs,
                    decomposition=self.decomposition,
                    dynamic_shapes=self.dynamic.spec,
                    strict=self.strict,
                    shape_log=shape_log,
                )
            except ExportError:
                state.restore()  # what the trace left (fake tensors in attributes) goes
                with suppress(ExportError):  # torch.export's failure is the one to report
                    eager_outputs(model, pristine, state=state)  # a model that fails in eager PyTorch too is bad input
                raise
        state.after_export()  # the module's attributes, buffers and submodules as given, no fake tensor left
        state.keep_written(ep)  # the parameters the program writes are cloned too
        with prog.phase("reference"), user_code("the eager PyTorch run (reference outputs)", timeout):
            eager = eager_outputs(model, pristine, state=state)  # runs on its own copies
        user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
        requested = self.dynamic.requested(user_inputs)

        def recapture(auto_decomposed: list[str] | None = None) -> Any:
            extra = {} if auto_decomposed is None else {"auto_decomposed": auto_decomposed}
            found = capture(
                ep,
                pristine,
                eager,
                name=self.name,
                decomposition=self.decomposition,
                **extra,
                requested=requested,
                shape_log=shape_log,
            )
            found.ir.quantize = self.quantize
            if self.settle is not None:
                self.settle(found)
            return found

        with prog.phase("capture"):
            cap = recapture()
        with prog.phase("lower"):
            program, missing = registry.try_lower(cap.ir)
        auto: list[str] = []
        skipped: dict[str, str] = {}
        for round_no in range(1, self.rounds + 1):
            targets = sorted({m.target for m in missing} - set(auto) - set(skipped))
            if not targets:
                break
            with prog.phase(f"auto-decompose round {round_no} ({len(targets)} op(s))"):
                ep, rnd = decompose_targets(ep, targets)
                auto += rnd.decomposed
                skipped.update(rnd.skipped)
                if rnd.decomposed:
                    cap = recapture(auto)
                    program, missing = registry.try_lower(cap.ir)
            if not rnd.decomposed:
                break
        if program is None:  # reported before any file is written (safetensors has no complex dtype to write)
            raise with_fallback_reasons(UnsupportedOpsError(items=missing, decomposition=self.decomposition), skipped)
        if self._random_outputs(cap, ep, prog, state):  # self-seeded draws became constants: lower again
            program, missing = registry.try_lower(cap.ir)
            if program is None:
                raise UnsupportedOpsError(items=missing, decomposition=self.decomposition)
        self._references(cap.ir, cap.reference, prog, state)
        with prog.phase("write torch-ir"):
            cap.ir.save(stage)
            safetensors_io.write(stage / WEIGHTS, dict(safetensors_io.iter_torch(cap.weights)))
            safetensors_io.write(stage / REFERENCE, dict(safetensors_io.iter_torch(cap.reference)))
        return cap.ir, program, skipped

    def _random_outputs(self, cap: Captured, ep: Any, prog: Progress, state: ModelState) -> bool:
        """A graph with random ops: the outputs whose eager values depend on the draws, into `ir.random_outputs`
        (`frontend.torch.randomness`); where the model seeds torch's generator itself, its draws made constants
        instead (returns True: `cap.ir` changed), or where they cannot be (a draw sized by tensor values), the
        outputs computed from them."""
        from ...timeout import user_code
        from .randomness import bake_draws, drawn_outputs, random_targets, seed_dependent_outputs

        if not random_targets(ep.graph_module):
            return False
        with prog.phase("random draws"), user_code("the eager PyTorch runs under three seeds", self.timeout):
            changed, fixed = seed_dependent_outputs(self.model, self.pristine, state)
        if fixed and bake_draws(cap.ir, cap.weights, fixed):
            return True
        if fixed:  # seeded by the model, but its draws did not pair up with the graph's (a data-sized draw)
            changed = [*changed, *drawn_outputs(cap.ir)]
        cap.ir.random_outputs = [o.name for o in cap.ir.outputs if o.name in set(changed)]
        return False

    def _references(self, ir: TorchIR, reference: dict[str, Any], prog: Progress, state: ModelState) -> None:
        """Eager PyTorch's values at a dynamic program's sweep points and on the extra input sets, into
        `reference` (and `ir.sweep`, `ir.input_sets`)."""
        from ...timeout import user_code

        if ir.is_dynamic:
            with prog.phase("sweep references"), user_code("the eager PyTorch runs at the sweep points", self.timeout):
                sweep_references(self.model, ir, self.pristine, reference, state)
        # a size a stage computes is verified at several values: without verify_inputs, on the "auto" sets
        implicit = self.set_specs is None
        specs = [AUTO] if implicit and any(s.stage for s in ir.symbols) else self.set_specs or []
        if specs:
            with (
                prog.phase("input set references"),
                user_code("the eager PyTorch runs on the input sets", self.timeout),
            ):
                record_input_sets(self.model, ir, self.pristine, reference, specs, state, implicit=implicit)
