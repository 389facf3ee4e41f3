"""The aten -> RLX registry: `@lowers(...)` functions, the capability pass, and the driver.

The key is the exact ATen overload string as torch prints it (`aten.add.Tensor`).
A lowering may also declare `check`, which returns why a particular call's
argument values are unsupported (or None); the capability pass runs every
check before anything is lowered, so the user sees every gap at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..dtypes import NARROW_DTYPES, boundary_dtype, compute_rlx, is_complex, is_supported, to_rlx
from ..errors import LoweringError, RtiError, Unsupported, UnsupportedOpsError
from ..program import Program, Provenance, ValueDecl
from ..sizes import evaluate_shape, free_symbols, is_static, sizes, values_of
from ..torchir import TensorSpec, TorchIR, WeightSpec, size_valued, specialize
from . import complexes
from .builder import Builder
from .call import Call, Value
from .rlx.audit import audit
from .rlx.boundary import empty_outputs, pad_empty_output, protect_outputs, unbindable_weights
from .rlx.routing import RlxLimit

LowerFn = Callable[[Builder, Call], "Value | list[Value | None]"]
CheckFn = Callable[[Call], "str | None"]


@dataclass(frozen=True)
class Lowering:
    """One registered lowering."""

    target: str
    fn: LowerFn
    check: CheckFn | None
    family: str
    # int arguments the lowering also takes as a 0-d tensor (a value read from a tensor, `.item()`)
    tensor_scalars: tuple[str, ...] = ()
    # the numerical character of a float result, which picks the per-node parity budget
    # (`verify.nodes.op_kind`): one of KINDS
    kind: str = "elementwise"


REGISTRY: dict[str, Lowering] = {}

# What a float result's per-node budget follows (`verify.nodes.op_kind`): movement (data movement
# and selection, every element a copy of an input element: exact), exact (value-exact: each element
# is the correctly rounded value of an exact function of the inputs' values, with no choice left to
# the implementation: rounding to an integer, sign, negation, absolute value; torch's result is one
# bit pattern, signed zeros included), elementwise (a few ULP of the tensor's largest value),
# contraction (K the contracted length: sqrt of in0 * in1 elements over the output's) and reduction,
# normalizations included (K the reduced length: input elements over output elements, at least the
# last axis for the per-row normalizations), both eps * (16 + 2K) of their scale.
KINDS = ("movement", "exact", "elementwise", "contraction", "reduction")
# The kinds whose results are judged bit for bit (`verify/exactness.py`): their value is determined
# exactly by their inputs' values, so any difference from PyTorch, one ULP or a zero's sign, is a
# wrong answer, not rounding noise.
VALUE_EXACT_KINDS = frozenset({"movement", "exact"})


def lowers(
    *targets: str, check: CheckFn | None = None, tensor_scalars: tuple[str, ...] = (), kind: str = "elementwise"
) -> Callable[[LowerFn], LowerFn]:
    """Register `fn` as the lowering of each ATen overload in `targets`. `tensor_scalars` names the
    int arguments `fn` also lowers when they arrive as a 0-d tensor (a value read from a tensor);
    any other int/bool/float/list argument arriving so is refused by the capability pass. `kind`
    (one of KINDS) is the numerical character of the op's float results (per-node budgets)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {KINDS}")

    def register(fn: LowerFn) -> LowerFn:
        family = fn.__module__.rsplit(".", 1)[-1]
        for target in targets:
            if target in REGISTRY:
                raise RuntimeError(f"{target} is registered twice ({REGISTRY[target].fn.__name__}, {fn.__name__})")
            REGISTRY[target] = Lowering(target, fn, check, family, tuple(tensor_scalars), kind)
        return fn

    return register


@cache
def _schema(target: str) -> tuple[list[str], dict[str, Any]]:
    """Argument names and defaults of an ATen (or prims) overload, from torch's own schema."""
    import torch

    ns, packet, overload = target.split(".", 2) if target.count(".") >= 2 else ("aten", target, "default")
    if ns == "quantized_decomposed":  # defined by importing torch's module (the PT2E flow has imported it)
        import torch.ao.quantization.fx._decomposed
    op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
    names, defaults = [], {}
    for arg in op._schema.arguments:
        names.append(arg.name)
        if arg.has_default_value():
            defaults[arg.name] = _plain_default(arg.default_value)
    return names, defaults


def _plain_default(value: Any) -> Any:
    """Schema defaults as plain Python (dtype/layout defaults are None in practice)."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def unlowered_quantization(target: str) -> str | None:
    """Why a PyTorch quantization op without a lowering cannot run, naming its scheme (None for other ops)."""
    if not target.startswith("quantized_decomposed."):
        return None
    packet = target.split(".")[1]
    scheme = next((s for key, s in _QUANT_SCHEMES.items() if key in packet), packet)
    return (
        f"quantization scheme {scheme} ({packet}) is not supported: the lowered schemes are per-tensor and "
        "per-channel int8/uint8/int16 with dynamic per-tensor parameters (lower/ops/quantized.py)"
    )


_QUANT_SCHEMES = {
    "per_channel_group": "per-channel-group (grouped int4/int8 weights)",
    "per_token": "per-token (dynamic per-row activations)",
    "affine_quantized": "affine (torchao tensor subclass)",
    "fake_quant": "fake-quantize (QAT)",
}


def value_exact(target: str) -> bool:
    """Whether the op overload `target` is value-exact (its kind is in VALUE_EXACT_KINDS): its results
    are exactly determined by its inputs' values (False for an unregistered op)."""
    lowering = REGISTRY.get(target)
    return lowering is not None and lowering.kind in VALUE_EXACT_KINDS


def make_call(node: Any, values: dict[str, Value]) -> Call:
    names, defaults = (
        _schema(node.target) if node.target.startswith(("aten.", "prims.", "quantized_decomposed.")) else ([], {})
    )
    return Call(node, values, names, defaults)


def _check_calls(ir: TorchIR) -> list[Unsupported]:
    """Capability pass: every op overload, argument value and dtype the checks reject."""
    items: list[Unsupported] = []
    # Checks see shapes and dtypes of tensor args; build placeholder values from specs.
    values: dict[str, Value] = {}
    declared: list[TensorSpec | WeightSpec] = [*ir.inputs, *ir.weights]
    for spec in declared:
        values[spec.name] = complexes.carried(spec.name, sizes(spec.shape), spec.dtype)
    for node in ir.nodes:
        for out in node.outputs:
            values[out.name] = complexes.carried(out.name, sizes(out.shape), out.dtype)

    def report(target: str, reason: str) -> None:
        items.append(Unsupported(target, node.name, node.module_path, reason, node.source, node.decomposed_from))

    for spec in declared:
        if not is_supported(spec.dtype) and not is_complex(spec.dtype):  # complex: carried as float pairs
            items.append(Unsupported("<input>", spec.name, "", f"dtype {spec.dtype} has no RLX counterpart"))
    items.extend(unbindable_weights(ir.weights))
    for node in ir.nodes:
        lowering = REGISTRY.get(node.target)
        if lowering is None:
            report(node.target, unlowered_quantization(node.target) or "no lowering for this op overload")
            continue
        bad = [o for o in node.outputs if o.dtype != "none" and not is_supported(o.dtype) and not is_complex(o.dtype)]
        if bad:
            report(node.target, f"output dtype {bad[0].dtype} has no RLX counterpart")
            continue
        data = _scalars_from_tensors(node, lowering)
        if data:
            report(node.target, data)
            continue
        reason, call = complexes.checked_call(node, values, lowering, make_call)
        if reason:
            report(node.target, reason)
            continue
        if lowering.check is not None:
            try:
                reason = lowering.check(call)
            except Exception as e:  # a check that cannot read the call is a gap, not a crash
                reason = f"arguments could not be checked ({type(e).__name__}: {e})"
            if reason:
                report(node.target, reason)
    return items


@cache
def _plain_arguments(target: str) -> tuple[tuple[str, str], ...]:
    """(name, type) of the arguments an ATen overload's schema types neither Tensor nor Scalar
    (ints, bools, floats and lists of them: sizes, indices, flags)."""
    import torch

    _, packet, overload = target.split(".", 2)
    schema = getattr(getattr(torch.ops.aten, packet), overload)._schema
    return tuple(
        (a.name, str(a.type)) for a in schema.arguments if "Tensor" not in str(a.type) and "Scalar" not in str(a.type)
    )


def _scalars_from_tensors(node: Any, lowering: Lowering) -> str | None:
    """Why a value read from a tensor (`.item()`, a 0-d tensor here) cannot be an argument that the
    ATen schema types int/bool/float (a size, an index, a flag), or None."""
    if not node.target.startswith("aten."):
        return None
    names, _ = _schema(node.target)
    given = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
    for name, kind in _plain_arguments(node.target):
        value = given.get(name)
        if isinstance(value, dict) and "tensor" in value and name not in lowering.tensor_scalars:
            return (
                f"argument {name!r} ({kind}) is a value read from a tensor (node {value['tensor']}, `.item()`); "
                "RLX needs it when the graph is compiled"
            )
    return None


def try_lower(ir: TorchIR) -> tuple[Program | None, list[Unsupported]]:
    """Capability pass and lowering in one: the program `lower(ir)` builds and no gaps, or None and
    every op overload, argument value and dtype we cannot lower (the checks' verdicts plus the ops
    the RLX workaround layer has no exact route for, found by lowering the graph). The program is
    the one the bundle is written from (a dynamic program's at its example sizes, which
    `lower.generalize.lower_symbolic` takes as its `example`)."""
    try:
        return lower(ir), []
    except UnsupportedOpsError as e:
        return None, list(e.items)


class _Refused(Value):
    """The output of a node that could not be lowered (lowering goes on to find every gap)."""


def _size_dependent(ir: TorchIR) -> set[str]:
    """The nodes of a program bound from a dynamic one (`TorchIR.bind`) that read or give a value
    whose shape depends on a symbol."""
    if not ir.symbolic_shapes:
        return set()
    dynamic = {name for name, shape in ir.symbolic_shapes.items() if not is_static(shape)}

    def reads(arg: dict[str, Any]) -> bool:
        tag, payload = next(iter(arg.items()))
        return (tag == "tensor" and payload in dynamic) or (tag == "list" and any(reads(a) for a in payload))

    return {
        n.name
        for n in ir.nodes
        if any(o.name in dynamic for o in n.outputs) or any(reads(a) for a in [*n.args, *n.kwargs.values()])
    }


def _dynamic_axes(ir: TorchIR) -> dict[str, tuple[int, ...]]:
    """Each symbolic value's axes whose size is a symbol expression (not a fixed int)."""
    return {
        name: tuple(a for a, d in enumerate(shape) if not isinstance(d, int))
        for name, shape in ir.symbolic_shapes.items()
        if not is_static(shape)
    }


def _size_bounds(ir: TorchIR) -> dict[str, list[int] | None]:
    """Each symbolic value's dims at the symbols' maxima (None when a symbol of its shape is unbounded;
    another symbol without a maximum does not matter: `arange(cache, cache + seq)` has seq's bound)."""
    top = {s.name: int(s.max) for s in ir.bound_symbols if s.max is not None}
    return {
        name: evaluate_shape(shape, top) if set().union(*map(free_symbols, shape)) <= set(top) else None
        for name, shape in ir.symbolic_shapes.items()
        if not is_static(shape)
    }


def lower(
    ir: TorchIR,
    *,
    optimize: bool = True,
    probe_values: bool = False,
    share_scalars: bool = True,
) -> Program:
    """TorchIR -> lowered program. Raises UnsupportedOpsError listing every gap first.

    With `probe_values` (a debug build for per-node parity, `verify/nodes.py`), every tensor a
    node computes that has an RLX value is also an output, after the graph's own
    (`program.probes` names them).

    With `optimize`, the conversion-time passes of `lower/passes/` run last (weights
    stored in the layout RLX reads, constants folded, dead nodes dropped). A program with
    dynamic dims is lowered at its example sizes (`lower.generalize` makes its symbolic graph, from
    lowerings without `share_scalars`: each one-element constant its own node, `Builder`).

    Complex graph inputs, weights and outputs are their float pairs, shape + [2] (`lower/complexes.py`)."""
    if ir.is_dynamic:
        ir = specialize(ir, values_of(ir.symbols))
    checked = _check_calls(ir)
    if any(i.target == "<input>" for i in checked):
        raise UnsupportedOpsError(items=checked, decomposition=ir.decomposition)
    refused_nodes = {i.node for i in checked}
    items = list(checked)
    dependent = _size_dependent(ir)
    program = Program(
        name=ir.name,
        size_dependent=dependent,
        size_valued=size_valued(ir, dependent),
        size_bounds=_size_bounds(ir),
        dynamic_axes=_dynamic_axes(ir),
    )
    builder = Builder(program, share_scalars=share_scalars)
    if ir.quantize:
        builder.quantized = (ir.quantize["scheme"], frozenset(ir.quantize["weights"]))
    values = _declare_inputs(ir, program, builder)
    for node in ir.nodes:
        call = make_call(node, values)
        if node.name in refused_nodes or _uses_refused(call):
            _refuse(node, values)
            continue
        _require_lowered_inputs(node, call, ir.decomposition)
        _lower_node(builder, node, call, values, items)
    if items:
        raise UnsupportedOpsError(items=items, decomposition=ir.decomposition)
    unresolved = [o for o in ir.outputs if o.value not in values]
    if unresolved:  # a lowering returned None for a value that is a graph output
        raise UnsupportedOpsError(
            items=[
                Unsupported(
                    "<output>",
                    o.name,
                    "",
                    f"output {o.name!r} is {o.value!r}, an output its producer does not compute in RLX",
                )
                for o in unresolved
            ],
            decomposition=ir.decomposition,
        )
    _declare_outputs(ir, program, builder, values, probe_values)
    audit(program, builder.nan_free_ids, builder.compensated)
    if optimize:
        from .passes import optimize as run_passes

        program.rewrites = run_passes(program, ir.quantize)
    protect_outputs(program)  # after the passes, which may make an output a Transpose
    return program


def _declare_inputs(ir: TorchIR, program: Program, builder: Builder) -> dict[str, Value]:
    """The graph's inputs (bool and narrow integers carried as float32 and cast inside: boundary-narrow)
    and parameters; returns the value of each by torch-ir name."""
    values: dict[str, Value] = {}
    for spec in ir.inputs:
        if is_complex(spec.dtype):  # its float pairs (`lower/complexes.py`)
            values[spec.name] = complexes.declare(program.inputs, spec.name, sizes(spec.shape), spec.dtype)
            continue
        carrier = boundary_dtype(spec.dtype)
        program.inputs.append(ValueDecl(spec.name, sizes(spec.shape), carrier))
        if carrier != to_rlx(spec.dtype):  # carried as float32, cast to its dtype as the graph's first step
            program.carried_inputs[spec.name] = spec.dtype
        if spec.dtype in NARROW_DTYPES:
            builder.provenance = Provenance(aten="<boundary cast>", node=spec.name)
            values[spec.name] = builder.cast(Value(spec.name, sizes(spec.shape), "float32"), spec.dtype)
        else:
            values[spec.name] = Value(spec.name, sizes(spec.shape), spec.dtype)
    for w in ir.weights:
        if is_complex(w.dtype):  # its float pairs (`lower/complexes.py`)
            values[w.name] = complexes.declare(program.params, w.key, tuple(w.shape), w.dtype)
            continue
        program.params.append(ValueDecl(w.key, tuple(w.shape), compute_rlx(w.dtype)))
        values[w.name] = Value(w.key, tuple(w.shape), w.dtype)
    return values


def _lower_node(builder: Builder, node: Any, call: Call, values: dict[str, Value], items: list[Unsupported]) -> None:
    """Lower one node under its provenance and bind its outputs (a use RLX has no exact route for is
    added to `items`, its outputs refused)."""
    program = builder.program
    builder.provenance = Provenance(
        aten=node.target,
        node=node.name,
        module_path=node.module_path,
        source=node.source,
        input_shapes=tuple(v.dims for v in call.positional if isinstance(v, Value)),
    )
    try:
        if complexes.touches_complex(node, values):
            result = complexes.lower_node(builder, node, call, values, REGISTRY[node.target], make_call)
        else:
            result = empty_outputs(builder, node) or REGISTRY[node.target].fn(builder, call)
    except RlxLimit as e:
        items.append(Unsupported(node.target, node.name, node.module_path, str(e), node.source, node.decomposed_from))
        _refuse(node, values)
        return
    except RtiError:
        raise
    except Exception as e:
        raise LoweringError(
            f"internal error: {REGISTRY[node.target].fn.__name__} failed on {node.target} at node "
            f"{node.name}{f' in {node.module_path}' if node.module_path else ''}: {type(e).__name__}: {e}",
            hint="this is a bug in rlx-torch-import; please report it with torch-ir.json",
        ) from e
    program.aten_counts[node.target] = program.aten_counts.get(node.target, 0) + 1
    results = result if isinstance(result, list) else [result]
    for spec, value in zip(node.outputs, results, strict=False):
        if value is None:
            continue
        if complexes.carried_spec(spec) != (value.dims, value.dtype):
            raise LoweringError(
                f"internal error: lowering {REGISTRY[node.target].fn.__name__} of {node.target} at node "
                f"{node.name} produced {value.dtype}{list(value.dims)}, torch says {spec.dtype}{spec.shape}"
            )
        value = complexes.as_carried(value, spec.dtype)
        values[spec.name] = value
        program.torch_values[spec.name] = (value.id, value.dims, value.dtype)
    _rebind_mutated(node, call, values)


def _declare_outputs(
    ir: TorchIR, program: Program, builder: Builder, values: dict[str, Value], probe_values: bool
) -> None:
    """The graph's outputs, then (`probe_values`) every intermediate value with an RLX value; bool and
    narrow integers cast to their float32 carrier, halves recorded as rounded on the host."""
    probes = [
        (o.name, values[o.name]) for n in ir.nodes for o in n.outputs if probe_values and o.name in program.torch_values
    ]
    outputs = {o.name: ir.symbolic_shapes.get(o.value) for o in ir.outputs}
    for name, value in [*((o.name, values[o.value]) for o in ir.outputs), *probes]:
        if boundary_dtype(value.dtype) != to_rlx(value.dtype):  # half: computed as F32, rounded on the host
            program.carried_outputs[name] = value.dtype
        if value.dtype in NARROW_DTYPES:
            builder.provenance = Provenance(aten="<boundary cast>", node=name)
            value = builder.cast(value, "float32")
        if outputs.get(name):  # a graph output that may be empty at run time (boundary.pad_empty_output)
            builder.provenance = Provenance(aten="<boundary pad>", node=name)
            value, axis = pad_empty_output(builder, value, list(outputs[name] or []), ir.bound_symbols)
            if axis >= 0:  # its size follows a size: never folded to a constant (`fold_constants`)
                program.padded_outputs[name] = axis
                program.size_dependent.add(name)
        program.outputs.append(value.id)
    program.probes = [name for name, _ in probes]


def _refuse(node: Any, values: dict[str, Value]) -> None:
    for out in node.outputs:
        values[out.name] = _Refused(out.name, tuple(out.shape), out.dtype)


def _uses_refused(call: Call) -> bool:
    def walk(v: Any) -> bool:
        return isinstance(v, _Refused) or (isinstance(v, list) and any(walk(i) for i in v))

    return any(walk(v) for v in call.arguments)


def _rebind_mutated(node: Any, call: Call, values: dict[str, Value]) -> None:
    """In-place writes (`Call.mutate`): later reads of the written tensor get the new value."""
    for arg, value in call.mutated.items():
        name = call.tensor_name(arg)
        old = values[name]
        if (old.dims, old.dtype) != (value.dims, value.dtype):
            raise LoweringError(
                f"internal error: {REGISTRY[node.target].fn.__name__} at node {node.name} writes "
                f"{value.dtype}{list(value.dims)} into {arg!r}, which is {old.dtype}{list(old.dims)}"
            )
        values[name] = value


def _require_lowered_inputs(node: Any, call: Call, decomposition: str) -> None:
    """A lowering may skip an output (e.g. batch-norm's saved stats); using one is an error."""
    from .call import _Unresolved

    def walk(v: Any) -> None:
        if isinstance(v, _Unresolved):
            raise UnsupportedOpsError(
                items=[
                    Unsupported(
                        node.target,
                        node.name,
                        node.module_path,
                        f"uses {v.name!r}, an output its producer does not compute in RLX",
                        node.source,
                    )
                ],
                decomposition=decomposition,
            )
        if isinstance(v, list):
            for item in v:
                walk(item)

    for v in call.positional:
        walk(v)
