"""Walk an ExportedProgram into our TorchIR schema, plus its weight and reference tensors."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind

from .. import __version__
from ..dtypes import torch_name
from ..errors import ExportError, InputError
from ..symbolic import Symbol, evaluate_shape, free_symbols, line_of, values_of
from ..torchir import LAYOUT_SENSITIVE, Node, OutputSpec, TensorSpec, TorchIR, WeightSpec, encode_float


@dataclass
class Captured:
    """What the front-end hands on: the IR plus tensors to write next to it."""

    ir: TorchIR
    weights: dict[str, torch.Tensor]
    reference: dict[str, torch.Tensor]


def _module_info(node: torch.fx.Node) -> tuple[str, str]:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, mtype = list(stack.values())[-1]
    path = re.sub(r"^L\['self'\]\.?", "", str(path))
    mtype = mtype if isinstance(mtype, str) else f"{mtype.__module__}.{mtype.__qualname__}"
    return path, mtype


def _source_line(node: torch.fx.Node) -> str:
    trace = node.meta.get("stack_trace") or ""
    found = re.findall(r'File "([^"]+)", line (\d+)', trace)
    if not found:
        return ""
    file, line = found[-1]
    return f"{file.rsplit('/', 1)[-1]}:{line}"


def _sym_text(value: Any, name: str, op: str) -> int | str:
    """A size as torch-ir records it: an int, or the expression of a backed SymInt.

    Raises InputError for an unbacked size (torch's `u0`: nonzero, masked_select, `.item()`)."""
    if isinstance(value, int):
        return value
    if isinstance(value, (torch.SymFloat, torch.SymBool)) or not isinstance(value, torch.SymInt):
        raise InputError(
            f"{op} (node {name}) computes a symbolic {type(value).__name__} ({value}); only integer sizes "
            "(SymInt) can be recorded"
        )
    expr = value.node.expr
    if expr.is_number:
        return int(expr)
    unbacked = sorted(str(s) for s in expr.free_symbols if str(s).startswith("u"))
    if unbacked:
        raise InputError(
            f"{op} (node {name}) has a size that depends on tensor values (torch's unbacked symbol "
            f"{', '.join(unbacked)}): RLX compiles a graph for sizes known from the input shapes before the "
            "run, so data-dependent sizes (nonzero, masked_select, unique, a tensor value used as a size) "
            "are not supported",
            hint="keep such sizes out of the graph (pad to a fixed size, or compute the mask with torch.where)",
        )
    return str(expr)


def _spec_of(name: str, val: Any, op: str = "graph input") -> TensorSpec:
    return TensorSpec(name, [_sym_text(d, name, op) for d in val.shape], torch_name(val.dtype))


# torch.export's runtime checks on sizes (`torch._check`, range asserts): the binding checks
# (`symbolic.infer_binding`) make them before a run, so they are not graph nodes here.
_SIZE_ASSERTS = {
    "aten._assert_scalar.default",
    "aten.sym_constrain_range.default",
    "aten.sym_constrain_range_for_size.default",
    "aten._assert_async.msg",
}


def _op_name(target: Any) -> str:
    """`aten.sym_size.int`, or `operator.mul` for a Python operator on SymInts."""
    if getattr(target, "__module__", None) in ("_operator", "operator"):
        return f"operator.{target.__name__}"
    if getattr(target, "__module__", "").startswith("torch") and callable(target) and not hasattr(target, "_schema"):
        return f"{target.__module__}.{target.__name__}"
    return str(target)


def _layouts(node: torch.fx.Node, aliases: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Strides and storage offset of the tensor arguments of a layout-sensitive op (as torch traced them)."""
    if str(node.target) not in LAYOUT_SENSITIVE:
        return {}
    found = {}
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            strides = [int(s) for s in val.stride()]
            found[aliases.get(arg.name, arg.name)] = {"strides": strides, "storage_offset": int(val.storage_offset())}
    return found


class _ArgEncoder:
    """Encode fx arguments as tagged torch-ir values; getitem results map to their producer's outputs."""

    def __init__(self, aliases: dict[str, str]) -> None:
        self.aliases = aliases

    def __call__(self, arg: Any) -> dict[str, Any]:
        if isinstance(arg, torch.fx.Node):
            val = arg.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                return {"sym": str(_sym_text(val, arg.name, _op_name(arg.target)))}
            return {"tensor": self.aliases.get(arg.name, arg.name)}
        if arg is None:
            return {"none": None}
        if isinstance(arg, bool):
            return {"bool": arg}
        if isinstance(arg, int):
            return {"int": arg}
        if isinstance(arg, float):
            return encode_float(arg)
        if isinstance(arg, str):
            return {"str": arg}
        if isinstance(arg, torch.dtype):
            return {"dtype": torch_name(arg)}
        if isinstance(arg, torch.device):
            return {"device": str(arg)}
        if isinstance(arg, torch.layout):
            return {"layout": str(arg).removeprefix("torch.")}
        if isinstance(arg, torch.memory_format):
            return {"memory_format": str(arg).removeprefix("torch.")}
        if isinstance(arg, (list, tuple)):
            return {"list": [self(a) for a in arg]}
        if isinstance(arg, torch.SymInt):
            text = _sym_text(arg, "argument", "a size argument")
            return {"int": text} if isinstance(text, int) else {"sym": text}
        raise InputError(f"cannot record argument {arg!r} of type {type(arg).__name__} in torch-ir")


def _output_names(flat_count: int, paths: list[str]) -> list[str]:
    if flat_count == 1:
        return ["output"]
    names = []
    for i, path in enumerate(paths):
        clean = re.sub(r"[^A-Za-z0-9_]+", "_", path).strip("_") or str(i)
        names.append(f"output_{clean}")
    if len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(flat_count)]
    return names


MUTATED_PREFIX = "mutated_"


def mutation_output_name(input_name: str) -> str:
    """The public name of the output carrying an input's value after the model wrote it in place."""
    return MUTATED_PREFIX + input_name


def clone_inputs(example_inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Private copies (same values, dtype, shape and, for dense tensors, strides)."""
    return tuple(t.detach().clone() for t in example_inputs)


@dataclass
class EagerRun:
    """PyTorch's eager run, made on copies of the example inputs (the user's tensors are never run)."""

    outputs: Any
    # The copies after the run: inputs the model writes in place hold the written values.
    inputs_after: tuple[torch.Tensor, ...]
    # Whether the run wrote each input in place (its version counter moved, or its values changed).
    mutated: tuple[bool, ...]


def eager_outputs(model: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...]) -> EagerRun:
    """The eager result that parity is judged against (computed once per conversion, on copies)."""
    copies = clone_inputs(example_inputs)
    versions = [t._version for t in copies]
    try:
        with torch.no_grad():
            outputs = model(*copies)
    except Exception as e:  # the model's own error; torch.export traced it, eager did not run
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputError(
            f"the model raised {type(e).__name__} when run eagerly on the example inputs: {first}",
            hint="forward() must run in eager PyTorch on the example inputs (the run gives the reference outputs)",
        ) from e
    mutated = tuple(
        after._version != v or not _same_values(after, before)
        for after, before, v in zip(copies, example_inputs, versions, strict=True)
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


# Side-effecting ops that only raise on bad values (torch.linalg's checks): dropped from the graph.
_ERROR_CHECKS = {torch.ops.aten._linalg_check_errors.default}


def capture(
    ep: torch.export.ExportedProgram,
    example_inputs: tuple[torch.Tensor, ...],
    eager: EagerRun,
    *,
    name: str,
    decomposition: str,
    auto_decomposed: list[str] | None = None,
    requested: dict[tuple[str, int], str] | None = None,
    shape_log: list[str] | None = None,
) -> Captured:
    """ExportedProgram + eager run -> TorchIR, state_dict-keyed weights, reference tensors.

    `example_inputs` are the inputs as they were before any run (saved as the reference
    inputs). Every user input the model writes in place (torch.export's
    `USER_INPUT_MUTATION` outputs, or an input the eager run changed) becomes an extra
    output `mutated_<input>`, checked against the input's eager value after the run.
    Buffer mutations are not outputs.
    """
    graph = ep.graph_module.graph
    sig = ep.graph_signature
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    inputs: list[TensorSpec] = []
    weights: list[WeightSpec] = []
    weight_tensors: dict[str, torch.Tensor] = {}
    kinds = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant"}
    for node, spec in zip(placeholders, sig.input_specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise InputError(f"graph input {node.name!r} is not a tensor ({type(val).__name__})")
            inputs.append(_spec_of(node.name, val))
        elif spec.kind in kinds:
            key = str(spec.target)
            tensor = ep.state_dict.get(key)
            if tensor is None:
                tensor = ep.constants[key]
            tensor = tensor.detach()
            weights.append(WeightSpec(node.name, key, kinds[spec.kind], list(tensor.shape), torch_name(tensor.dtype)))
            weight_tensors[key] = tensor
        elif spec.kind == InputKind.TOKEN:  # orders side-effecting ops (with_effects); carries no data
            continue
        else:
            raise InputError(f"graph input {node.name!r} has kind {spec.kind.name}, which is not supported")

    symbols = _symbols(ep, inputs, example_inputs, requested or {})
    examples = values_of(symbols)

    # Fold getitem into the producer: a tuple-returning node lists one output per element.
    aliases: dict[str, str] = {}
    for node in graph.nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            src, idx = node.args
            aliases[node.name] = f"{src.name}.{idx}"  # replaced below by the getitem's own name
    getitem_names: dict[tuple[str, int], str] = {}
    for node in graph.nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            src, idx = node.args
            getitem_names[(src.name, idx)] = node.name
            aliases.pop(node.name)
    encode = _ArgEncoder(aliases)

    nodes: list[Node] = []
    for node in graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        target, args = _op_name(node.target), list(node.args)
        val = node.meta.get("val")
        if target in _SIZE_ASSERTS or isinstance(val, (torch.SymBool, bool)):
            continue
        if isinstance(val, (torch.SymInt, torch.SymFloat, int)) and not isinstance(val, bool):
            # A size computation: kept as a record; its uses carry the expression ({"sym": ...}).
            text = _sym_text(val, node.name, target)
            nodes.append(
                Node(
                    name=node.name, target=target, args=[encode(a) for a in args], kwargs={}, outputs=[], sym=str(text)
                )
            )
            continue
        if node.target is torch.ops.higher_order.with_effects:
            # (token, op, *args): an op torch.export orders by a token. A pure error check (linalg's
            # singular-matrix check) has no result to compute: RLX does not raise, the values are the same.
            # Any other op is kept under its own name, so the registry reports it as unsupported.
            if args[1] in _ERROR_CHECKS:
                continue
            target, args = f"{args[1]} (with_effects)", args[2:]
        if isinstance(val, (tuple, list)):
            outs = []
            for i, v in enumerate(val):
                out_name = getitem_names.get((node.name, i), f"{node.name}.{i}")
                outs.append(
                    _spec_of(out_name, v, target) if isinstance(v, torch.Tensor) else TensorSpec(out_name, [], "none")
                )
        elif isinstance(val, torch.Tensor):
            outs = [_spec_of(node.name, val, target)]
        else:
            outs = []
        path, mtype = _module_info(node)
        original = str(node.meta.get("original_aten") or "")
        nodes.append(
            Node(
                name=node.name,
                target=target,
                args=[encode(a) for a in args],
                kwargs={k: encode(v) for k, v in node.kwargs.items()},
                outputs=outs,
                module_path=path,
                module_type=mtype,
                source=_source_line(node),
                decomposed_from=original if original and original != str(node.target) else "",
                layouts=_layouts(node, aliases),
            )
        )

    out_node = next(n for n in graph.nodes if n.op == "output")
    returned = list(zip(out_node.args[0], sig.output_specs, strict=True))
    user_values = [a for a, s in returned if s.kind == OutputKind.USER_OUTPUT]
    flat, _ = torch.utils._pytree.tree_flatten_with_path(eager.outputs)
    eager_tensors = [v for _, v in flat]
    if len(eager_tensors) != len(user_values) or not all(isinstance(t, torch.Tensor) for t in eager_tensors):
        raise InputError("the model's outputs must be tensors (or nested tuples/lists/dicts of tensors)")
    out_names = _output_names(len(flat), [torch.utils._pytree.keystr(p) for p, _ in flat])
    outputs = []
    for out_name, value, tensor in zip(out_names, user_values, eager_tensors, strict=True):
        if not isinstance(value, torch.fx.Node):
            raise InputError(f"model output {out_name!r} is a constant, not computed from the inputs")
        traced = value.meta.get("val")
        shape: list[Any] = list(tensor.shape)
        if isinstance(traced, torch.Tensor):
            shape = _spec_of(value.name, traced, _op_name(value.target)).shape
            if evaluate_shape(shape, examples) != list(tensor.shape):
                raise ExportError(
                    f"torch.export's graph computes output {out_name!r} with shape {shape}, but eager "
                    f"PyTorch returns {list(tensor.shape)} (node {value.name}, {value.target}): the exported graph "
                    "does not compute what the model does",
                    hint="a torch decomposition disagrees with its kernel; try another --decomposition level",
                )
        outputs.append(OutputSpec(out_name, encode(value)["tensor"], shape, torch_name(tensor.dtype)))

    # Inputs written in place, by torch.export's signature or by the eager run: the value the
    # graph records for the write (USER_INPUT_MUTATION), else the input itself as the lowering
    # leaves it (in-place lowerings rebind it; a write RLX does not reproduce then fails parity).
    user_names = [s.name for s in inputs]
    written: dict[str, str] = {}
    for value, spec in returned:
        if spec.kind == OutputKind.USER_INPUT_MUTATION and isinstance(value, torch.fx.Node):
            written[str(spec.target)] = encode(value)["tensor"]
    for input_name, wrote in zip(user_names, eager.mutated, strict=True):
        if wrote:
            written.setdefault(input_name, input_name)
    reference = {f"input.{s.name}": t.detach() for s, t in zip(inputs, example_inputs, strict=True)}
    reference.update({f"output.{n}": t.detach() for n, t in zip(out_names, eager_tensors, strict=True)})
    for spec_in, after in zip(inputs, eager.inputs_after, strict=True):
        if spec_in.name in written:
            out_name = mutation_output_name(spec_in.name)
            outputs.append(OutputSpec(out_name, written[spec_in.name], list(spec_in.shape), torch_name(after.dtype)))
            reference[f"output.{out_name}"] = after.detach()
    ir = TorchIR(
        name=name,
        decomposition=decomposition,
        inputs=inputs,
        weights=weights,
        nodes=nodes,
        outputs=outputs,
        producer={"name": "rlx-torch-import", "version": __version__, "torch": torch.__version__},
        auto_decomposed=list(auto_decomposed or []),
        symbols=symbols,
        specialized=_specialized(inputs, requested or {}, shape_log or []),
    )
    return Captured(ir, weight_tensors, reference)


def _symbols(
    ep: torch.export.ExportedProgram,
    inputs: list[TensorSpec],
    example_inputs: tuple[torch.Tensor, ...],
    requested: dict[tuple[str, int], str],
) -> list[Symbol]:
    """The backed symbols the inputs' shapes use, with torch's ranges, the user's labels and the
    example sizes (solved from the input dims that are a*s + b of one symbol)."""
    ranges = {str(k): v for k, v in ep.range_constraints.items()}
    labels: dict[str, str] = {}
    examples: dict[str, int] = {}
    for spec, tensor in zip(inputs, example_inputs, strict=True):
        for axis, (d, n) in enumerate(zip(spec.shape, tensor.shape, strict=True)):
            if isinstance(d, int) or len(free_symbols(d)) != 1:
                continue
            (sym,) = free_symbols(d)
            fallback = f"{spec.name}.{axis}" if d == sym else ""
            if not labels.get(sym):
                labels[sym] = requested.get((spec.name, axis), fallback)
            if sym not in examples:
                _, a, b = line_of(d)
                examples[sym] = (int(n) - b) // a
    used = list(dict.fromkeys(s for spec in inputs for d in spec.shape for s in sorted(free_symbols(d))))
    found = []
    for i, name in enumerate(used):
        if name not in examples:
            raise InputError(f"symbol {name} of the exported inputs has no example size (no input axis is it alone)")
        vr = ranges.get(name)
        lo = _finite(vr.lower) if vr is not None else None
        hi = _finite(vr.upper) if vr is not None else None
        found.append(Symbol(i, name, labels.get(name) or name, lo or 0, hi, examples[name]))
    return found


def _finite(bound: Any) -> int | None:
    """A range bound as an int; None for torch's `int_oo` (unbounded)."""
    try:
        value = int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
    return value if abs(value) < 2**62 else None


def _torch_reason(name: str, axis: int, size: int, shape_log: list[str]) -> str:
    """torch's own reason a dim became a constant, from its symbolic-shape log: the guard that fixed
    the dim's symbol and the op whose shape rule added it."""
    created = re.compile(rf"create_symbol (\w+) = {size} for L\['{re.escape(name)}'\]\.size\(\)\[{axis}\]")
    symbol = next((m[1] for line in shape_log if (m := created.search(line))), None)
    if symbol is None:
        return "torch.export traced it as a constant (an example size of 0 or 1 is always specialized)"
    guard = re.compile(rf"eval (Eq\({symbol}, \d+\)) \[guard added\] \(([^)]*)\)")
    for line in shape_log:
        m = guard.search(line)
        if m:
            return f"torch added the guard {m[1]} at {m[2]}, so the traced program only works at this size"
    return f"torch.export fixed its symbol {symbol} to {size}"


def _specialized(
    inputs: list[TensorSpec], requested: dict[tuple[str, int], str], shape_log: list[str]
) -> list[dict[str, Any]]:
    """Axes the user asked to be dynamic that torch.export traced as constants, with a warning each
    giving torch's reason."""
    import warnings

    dims = {s.name: s.shape for s in inputs}
    found = []
    for (name, axis), label in requested.items():
        shape = dims.get(name)
        if shape is None or axis >= len(shape) or not isinstance(shape[axis], int):
            continue
        reason = _torch_reason(name, axis, shape[axis], shape_log)
        found.append({"input": name, "axis": axis, "label": label, "size": shape[axis], "reason": reason})
        warnings.warn(
            f"input {name!r} axis {axis} ({label}) was asked to be dynamic, but is static at size "
            f"{shape[axis]}: {reason}",
            stacklevel=4,
        )
    return found


def _draw(example: torch.Tensor, shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """A tensor of `shape` whose values look like `example`'s: floats with its mean and spread,
    integers within its range, booleans with its share of True."""
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
    model: torch.nn.Module, ir: TorchIR, example_inputs: tuple[torch.Tensor, ...], reference: dict[str, torch.Tensor]
) -> None:
    """Record the sweep points of a dynamic program in `ir.sweep`, and each point's inputs and
    eager outputs in `reference` (`sweep.<i>.input.<name>`, `sweep.<i>.output.<name>`).

    Inputs are drawn at the point's sizes from one seed (`SWEEP_SEED`) so that they look like the
    examples (`_draw`); an input static in every dim is the example itself. An eager error at a
    point is recorded, and that point then fails verification."""
    from ..symbolic import sweep_points

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
            run = eager_outputs(model, inputs)
        except InputError as e:
            entry["error"] = e.message
            ir.sweep.append(entry)
            continue
        flat = [t for t in torch.utils._pytree.tree_leaves(run.outputs)]
        by_name = dict(zip([o.name for o in ir.outputs], flat, strict=False))
        for spec, after in zip(ir.inputs, run.inputs_after, strict=True):
            by_name.setdefault(mutation_output_name(spec.name), after)
        for spec, t in zip(ir.inputs, inputs, strict=True):
            reference[f"sweep.{i}.input.{spec.name}"] = t.detach()
        for out in ir.outputs:
            reference[f"sweep.{i}.output.{out.name}"] = by_name[out.name].detach()
        ir.sweep.append(entry)
