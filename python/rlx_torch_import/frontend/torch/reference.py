"""Eager PyTorch runs of the model, the reference parity is judged against: the example, each
sweep point of a dynamic program (inputs drawn like the examples), and any other call."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from ...errors import ExportError, InputError
from ...layout import input_key, output_key, sweep_prefix
from ...sizes import evaluate_shape, values_of
from ...torchir import TorchIR
from .inputs import ModelInputs
from .outputs import PYTHON_OUTPUTS, mutation_output_name, output_names
from .state import ModelState


def clone_inputs(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Private copies (same values, dtype, shape and, for dense tensors, strides)."""
    return tuple(t.detach().clone() for t in tensors)


@dataclass
class EagerRun:
    """PyTorch's eager run, made on copies of the example inputs (the user's tensors are never run)."""

    outputs: Any
    # The copies of the tensor inputs after the run: inputs the model writes in place hold the written values.
    inputs_after: tuple[torch.Tensor, ...]
    # Whether the run wrote each tensor input in place (its version counter moved, or its values changed).
    mutated: tuple[bool, ...]


def eager_outputs(
    model: torch.nn.Module,
    inputs: ModelInputs,
    tensors: tuple[torch.Tensor, ...] | None = None,
    state: ModelState | None = None,
) -> EagerRun:
    """The eager result that parity is judged against (computed once per conversion, on copies):
    `model(*args, **kwargs)` of `inputs`, with `tensors` in place of its tensor leaves if given.
    The run starts from `state` (the module's buffers, written parameters and attributes as the
    conversion found them; without it, as they are now) and gives the module that state back
    afterwards. Raises InputError when the model raises, ExportError (naming the attribute) when a
    module attribute holds a fake tensor a trace left there (`ModelState.check_real`)."""
    state = ModelState(model) if state is None else state
    given = inputs.tensors if tensors is None else tensors
    copies = clone_inputs(given)
    versions = [t._version for t in copies]
    state.restore()
    try:
        state.check_real("they were there before this eager run")  # nothing a trace left reaches the model
        try:
            with torch.no_grad():
                outputs = inputs.call(model, copies)
        except Exception as e:  # the model's own error; torch.export traced it, eager did not run
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise InputError(
                f"the model raised {type(e).__name__} when run eagerly on the example inputs: {first}",
                hint="forward() must run in eager PyTorch on the example inputs (the run gives the reference outputs)",
            ) from e
        # outputs that are (views of) state the run wrote keep their values once it is given back
        if any(isinstance(v, torch.Tensor) and state.aliases(v) for v in pytree.tree_leaves(outputs)):
            outputs = pytree.tree_map(
                lambda v: v.detach().clone() if isinstance(v, torch.Tensor) and state.aliases(v) else v, outputs
            )
    finally:
        state.restore()
    state.check()
    mutated = tuple(
        after._version != v or not _same_values(after, before)
        for after, before, v in zip(copies, given, versions, strict=True)
    )
    return EagerRun(outputs, copies, mutated)


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and elements (NaN equal to NaN). Some kernels write in place without
    moving the version counter (batch norm's running statistics), so values are compared too."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _draw(example: torch.Tensor, shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """A tensor of `shape` whose values look like `example`'s: floats with its mean and spread,
    integers within its range, booleans with its share of True, complex values as their float pairs."""
    if example.is_complex():
        return torch.view_as_complex(_draw(torch.view_as_real(example), [*shape, 2], gen))
    if example.dtype == torch.bool:
        share = float(example.float().mean()) if example.numel() else 0.5
        return torch.rand(shape, generator=gen) < share
    if not example.is_floating_point():
        lo = int(example.min()) if example.numel() else 0
        hi = int(example.max()) if example.numel() else 1
        return torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int64).to(example.dtype)
    finite = example[torch.isfinite(example)].double() if example.numel() else example.double()
    mean = float(finite.mean()) if finite.numel() else 0.0
    std = float(finite.std()) if finite.numel() > 1 else 1.0
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * (std or 1.0) + mean).to(example.dtype)


SWEEP_SEED = 0


def sweep_references(
    model: torch.nn.Module,
    ir: TorchIR,
    example: ModelInputs,
    reference: dict[str, torch.Tensor],
    state: ModelState | None = None,
) -> None:
    """Record the sweep points of a dynamic program in `ir.sweep`, and each point's inputs and
    eager outputs in `reference` (`sweep.<i>.input.<name>`, `sweep.<i>.output.<name>`).

    Inputs are drawn at the point's sizes from one seed (`SWEEP_SEED`) so that they look like the
    examples (`_draw`); an input static in every dim is the example itself. Each point's run
    starts from `state` (see `eager_outputs`). An eager error at a point is recorded, and that
    point then fails verification. Raises ExportError when eager PyTorch's output at a point has
    another shape than the program's there (`_check_shapes`)."""
    from ...sizes import sweep_points

    example_inputs = example.tensors
    ir.sweep = []
    for i, point in enumerate(sweep_points(ir.symbols)):
        gen = torch.Generator().manual_seed(SWEEP_SEED)
        values = values_of(ir.symbols, point.binding)
        inputs = tuple(
            _draw(t, evaluate_shape(spec.shape, values), gen) if any(isinstance(d, str) for d in spec.shape) else t
            for spec, t in zip(ir.inputs, example_inputs, strict=True)
        )
        entry: dict[str, Any] = {"label": point.label, "binding": point.binding}
        try:
            outputs, returned = eager_point(model, ir, example, inputs, state)
            _check_shapes(ir, outputs, values, point.label)
        except InputError as e:
            entry["error"] = e.message
            ir.sweep.append(entry)
            continue
        if returned:
            entry["values"] = returned
        for spec, t in zip(ir.inputs, inputs, strict=True):
            reference[input_key(spec.name, sweep_prefix(i))] = t.detach()
        reference.update({output_key(name, sweep_prefix(i)): t for name, t in outputs.items()})
        ir.sweep.append(entry)


def _check_shapes(ir: TorchIR, outputs: dict[str, torch.Tensor], values: dict[str, int], label: str) -> None:
    """ExportError when eager PyTorch's output at a sweep point is not of the shape the exported program
    gives there (its symbolic shape at `values`): torch.export's graph does not follow the model at that
    size, so no program for the dims' range can be made from it. Outputs sized by a value read from
    tensors (a size stage's symbol) are not checked."""
    from ...sizes import free_symbols

    staged = {s.name for s in ir.symbols if s.stage}
    for out in ir.outputs:
        tensor = outputs.get(out.name)
        if tensor is None or any(free_symbols(d) & staged for d in out.shape):
            continue
        expected = evaluate_shape(out.shape, values)
        if list(tensor.shape) != expected:
            raise ExportError(
                f"at the sweep point {label}, eager PyTorch gives output {out.name!r} of shape {list(tensor.shape)} "
                f"where torch.export's program gives {expected}: the exported graph does not follow the model "
                "at other sizes of the dynamic dims",
                hint="a forward that reads a value an earlier call cached on the module, keyed on the input's "
                "shape (`if self.shape != x.shape`, as YOLO heads do), is traced with that value: convert a "
                "model whose cache is empty (not yet called), or keep the dims static",
            )


def eager_point(
    model: torch.nn.Module,
    ir: TorchIR,
    example: ModelInputs,
    tensors: tuple[torch.Tensor, ...],
    state: ModelState | None = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Eager PyTorch on the example call with `tensors` in place of its tensor leaves: each of
    `ir.outputs` as a tensor (a Python value read from a tensor, `.item()`, as a 0-d tensor; an
    input written in place as `mutated_<input>`), and the Python values forward returned by output
    name (a non-finite float as its repr, so strict JSON holds it). Raises InputError when eager
    PyTorch raises or returns no value for an output."""
    run = eager_outputs(model, example, tensors, state)
    flat = torch.utils._pytree.tree_flatten_with_path(run.outputs)[0]
    by_name = dict(zip(output_names([p for p, _ in flat]), [v for _, v in flat], strict=False))
    returned = {
        k: repr(v) if isinstance(v, float) and not math.isfinite(v) else v
        for k, v in by_name.items()
        if isinstance(v, PYTHON_OUTPUTS)
    }
    for spec, after in zip(ir.inputs, run.inputs_after, strict=True):
        by_name.setdefault(mutation_output_name(spec.name), after)
    outputs = {}
    for out in ir.outputs:
        value = by_name.get(out.name)
        if value is None:
            raise InputError(f"eager PyTorch returned no output {out.name!r} here")
        tensor = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=getattr(torch, out.dtype))
        outputs[out.name] = tensor.detach()
    return outputs, returned
