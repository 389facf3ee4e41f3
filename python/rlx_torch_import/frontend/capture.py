"""Walk an ExportedProgram into our TorchIR schema, plus its weight and reference tensors."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from .. import __version__
from ..dtypes import torch_name
from ..errors import ExportError, InputError
from ..layout import input_key, output_key, sweep_prefix
from ..symbolic import Symbol, evaluate, evaluate_shape, free_symbols, line_of, values_of
from ..torchir import LAYOUT_SENSITIVE, Node, OutputSpec, TensorSpec, TorchIR, WeightSpec, encode_float
from .control_flow import inline_control_flow
from .inputs import CONSTANT_LEAVES, ModelInputs, path_name


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


def _spec_of(name: str, val: Any, op: str = "graph input", path: str = "") -> TensorSpec:
    return TensorSpec(name, [_sym_text(d, name, op) for d in val.shape], torch_name(val.dtype), path)


def data_dependent(val: Any) -> bool:
    """A SymInt/SymFloat/SymBool whose value depends on tensor values (torch's unbacked `u0`, `zuf0`)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and bool(free_unbacked_symbols(val))


# The ops that read a tensor's one element as a Python value (`.item()`).
_ITEM_OPS = {"aten.item.default", "aten._local_scalar_dense.default"}


def _scalar_dtype(node: torch.fx.Node, val: Any) -> str:
    """The dtype of the 0-d tensor carrying a data-dependent scalar: the tensor's own dtype for
    `.item()` (its value exactly), else Python's: float64, int64 or bool."""
    if _op_name(node.target) in _ITEM_OPS:
        return torch_name(node.args[0].meta["val"].dtype)
    return "bool" if isinstance(val, torch.SymBool) else "float64" if isinstance(val, torch.SymFloat) else "int64"


def _only_checked(node: torch.fx.Node) -> bool:
    """Every use of `node` is a runtime check (`_assert_scalar`)."""
    return all(_op_name(u.target) in _SIZE_ASSERTS for u in node.users)


def _check_cone(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The runtime checks (`_SIZE_ASSERTS`) and every pure node whose values reach only them: what
    `torch._check(...)`, `torch._check_tensor_all(...)` and `_assert_async` compute (`aten._is_all_true`,
    `.item()`, `sym_ite`, comparisons). An RLX graph cannot raise, so none of it is computed; each check
    is recorded as dropped (`_dropped_check`), as torch.export's own size checks are."""
    cone: set[torch.fx.Node] = set()
    for node in reversed(graph.nodes):
        if node.op != "call_function":
            continue
        if _op_name(node.target) in _SIZE_ASSERTS:
            cone.add(node)
        elif node.users and all(u in cone for u in node.users) and _pure(node):
            cone.add(node)
    return cone


def _pure(node: torch.fx.Node) -> bool:
    """An ATen op that writes nothing, or a Python operator / function on sizes (`sym_ite`)."""
    if isinstance(node.target, torch._ops.OpOverload):
        return not node.target._schema.is_mutable
    return _op_name(node.target).startswith(("operator.", "math.", "torch.sym_"))


def _source_code(node: torch.fx.Node) -> str:
    """The user's line of code a node comes from (the line under the stack trace's last frame)."""
    lines = (node.meta.get("stack_trace") or "").rstrip().splitlines()
    return lines[-1].strip() if len(lines) >= 2 and lines[-2].strip().startswith("File") else ""


def _dropped_check(node: torch.fx.Node, target: str) -> dict[str, Any]:
    """The record of a runtime check left out of the graph, and why. A check of tensor values is
    named by the user's code and line (`torch._check_tensor_all(mask >= 0) at model.py:7`): torch
    lowers one such check into several asserts, whose records are then equal (kept once)."""
    message = next((a for a in node.args if isinstance(a, str)), "").removeprefix("Runtime assertion failed for ")
    cond = node.args[0] if node.args else None
    val = cond.meta.get("val") if isinstance(cond, torch.fx.Node) else cond
    if data_dependent(val) or re.search(r"\bu\d+\b", message):  # u0, u1: torch's unbacked (tensor-read) symbols
        reason = "checks a value read from a tensor; an RLX graph cannot raise, so the check is not made"
        where, code = _source_line(node), _source_code(node)
        if where:
            message = f"{code or 'a check of tensor values'} at {where}"
    else:
        reason = "a size check torch.export proved for the example, enforced by the symbols' ranges at each binding"
    return {"node": node.name, "target": target, "check": message, "reason": reason}


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
    if getattr(target, "__module__", None) == "math":
        return f"math.{target.__name__}"
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
            if data_dependent(val):  # a 0-d tensor (see `capture`)
                return {"tensor": arg.name}
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


def output_names(paths: list[tuple[Any, ...]]) -> list[str]:
    """Public names of the flattened outputs, from their pytree key paths: `output` for a lone
    value, `output_<i>` for position i of a returned tuple/list, dict keys and attribute names as
    they are (`logits`), nested positions and keys joined by dots (`past_key_values.0.key`)."""
    if len(paths) == 1 and not paths[0]:
        return ["output"]
    names = []
    for i, path in enumerate(paths):
        parts = [re.sub(r"[^A-Za-z0-9_-]+", "_", p).strip("_") or "_" for p in path_name(path).split(".")]
        if path and isinstance(path[0], torch.utils._pytree.SequenceKey):
            parts[0] = f"output_{parts[0]}"
        names.append(".".join(parts) if path else f"output_{i}")
    if len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(paths))]
    return names


def output_tree(outputs: Any, leaves: list[dict[str, Any]]) -> dict[str, Any]:
    """What `forward` returned (`outputs`), as JSON with `leaves` in torch's flattening order:
    `{"tuple": [...]}` / `{"list": [...]}` for tuples and lists, `{"dict": {key: ...}}` for dicts,
    dataclasses, named tuples and model-output classes, and each leaf as given (`{"output": name}`,
    `{"constant": value, ...}` (None too), `{"size": expr, ...}`)."""
    feed = iter(leaves)

    def walk(obj: Any) -> dict[str, Any]:
        if pytree.tree_is_leaf(obj):  # None too: torch's pytree flattens it as a leaf
            return next(feed)
        handler = pytree.SUPPORTED_NODES[pytree._get_node_type(obj)]
        if handler.flatten_with_keys_fn is not None:
            children = handler.flatten_with_keys_fn(obj)[0]
        else:
            children = [(pytree.SequenceKey(i), v) for i, v in enumerate(handler.flatten_fn(obj)[0])]
        if all(isinstance(k, pytree.SequenceKey) for k, _ in children) and isinstance(obj, (list, tuple)):
            return {"list" if isinstance(obj, list) else "tuple": [walk(v) for _, v in children]}
        return {"dict": {path_name((k,)): walk(v) for k, v in children}}

    return walk(outputs)


MUTATED_PREFIX = "mutated_"


def mutation_output_name(input_name: str) -> str:
    """The public name of the output carrying an input's value after the model wrote it in place."""
    return MUTATED_PREFIX + input_name


def clone_inputs(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Private copies (same values, dtype, shape and, for dense tensors, strides)."""
    return tuple(t.detach().clone() for t in tensors)


class ModelState:
    """The state of a module that a forward can write, as it was when taken: every buffer (cloned:
    buffers are small next to the weights, and a forward that counts calls or keeps running
    statistics writes them), and the parameters the exported program writes (`keep_written`;
    cloning every parameter would double a large model's memory, and a forward under no_grad can
    write a parameter in place, but the exported graph shows every such write). Each eager run
    starts from this state and gives it back (`restore`), so every run is one call of the model
    from the state it was passed in, the weights read from the exported program (which shares the
    module's storage) are that state, and the caller's module is left as it was."""

    def __init__(self, model: Any) -> None:
        # (module, "_buffers" or "_parameters", name, the tensor object there, its saved values or None)
        self.slots: list[tuple[torch.nn.Module, str, str, torch.Tensor, torch.Tensor | None]] = []
        self.versions: dict[str, tuple[torch.Tensor, int]] = {}  # parameters not cloned: their version counters
        self.checked = False  # whether `keep_written` ran: unsaved parameters' versions are checked after a run
        if not isinstance(model, torch.nn.Module):
            return
        cloned: dict[int, torch.Tensor] = {}  # a buffer two modules share is cloned once
        for prefix, module in model.named_modules(remove_duplicate=False):
            for table in ("_buffers", "_parameters"):
                for key, tensor in getattr(module, table).items():
                    if tensor is None:
                        continue
                    full = f"{prefix}.{key}" if prefix else key
                    saved = cloned.setdefault(id(tensor), tensor.detach().clone()) if table == "_buffers" else None
                    self.slots.append((module, table, key, tensor, saved))
                    if table == "_parameters":
                        self.versions.setdefault(full, (tensor, tensor._version))

    def keep_written(self, ep: torch.export.ExportedProgram) -> None:
        """Clone the parameters `ep` writes as well (taken before any eager run)."""
        written = written_state(ep)
        cloned: dict[int, torch.Tensor] = {}
        for i, (module, table, key, tensor, _saved) in enumerate(self.slots):
            if table != "_parameters":
                continue
            names = [n for n, (t, _) in self.versions.items() if t is tensor]
            if any(n in written for n in names):
                copy = cloned.setdefault(id(tensor), tensor.detach().clone())
                self.slots[i] = (module, table, key, tensor, copy)
                for n in names:
                    self.versions.pop(n)
        self.checked = True

    def restore(self) -> None:
        """Put every tensor object back in its module and its saved values back into it, in place
        (tensors the caller holds stay the same objects)."""
        with torch.no_grad():
            for module, table, key, tensor, saved in self.slots:
                getattr(module, table)[key] = tensor
                if saved is not None:
                    if tensor.shape != saved.shape:
                        tensor.resize_(saved.shape)
                    tensor.copy_(saved)

    def check(self) -> None:
        """Raise InputError when a run wrote a parameter that the exported program does not show
        written (it was not cloned, so neither the weights nor the module can be given back)."""
        if not self.checked:
            return
        moved = [n for n, (t, v) in self.versions.items() if t._version != v]
        if moved:
            raise InputError(
                f"the model's forward wrote parameter(s) {', '.join(moved[:5])} in place when run eagerly, "
                "which torch.export's program does not show: the weights would not be those the model was "
                "passed in with, and the module is left changed",
                hint="keep state a forward updates in buffers (register_buffer), not parameters",
            )

    def aliases(self, value: torch.Tensor) -> bool:
        """Whether `value` shares storage with a tensor `restore` writes."""
        ptr = value.untyped_storage().data_ptr()
        return any(s is not None and t.untyped_storage().data_ptr() == ptr for _, _, _, t, s in self.slots)


@contextmanager
def kept_state(model: Any) -> Iterator[ModelState]:
    """The module's `ModelState` as it is on entry, given back to the module on exit (error or not)."""
    state = ModelState(model)
    try:
        yield state
    finally:
        state.restore()


def written_state(ep: torch.export.ExportedProgram) -> set[str]:
    """The parameter and buffer names (state_dict keys) `ep` writes: its signature's mutations (a
    functional graph, `high`/`core`), or an in-place op on a parameter or buffer, through views
    (the `aten` graph torch.export gives before decomposition)."""
    sig = ep.graph_signature
    found = {str(v) for v in (*sig.buffers_to_mutate.values(), *sig.parameters_to_mutate.values())}
    state = {
        s.arg.name: str(s.target)
        for s in sig.input_specs
        if s.kind in (InputKind.PARAMETER, InputKind.BUFFER) and hasattr(s.arg, "name")
    }

    def root(node: torch.fx.Node) -> torch.fx.Node:
        while node.op == "call_function" and node.args and isinstance(node.args[0], torch.fx.Node):
            schema = getattr(node.target, "_schema", None)
            if schema is None or not schema.returns or schema.returns[0].alias_info is None:
                break
            node = node.args[0]  # a view of, or an in-place op on, its first argument
        return node

    for node in ep.graph_module.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        for i, arg in enumerate(schema.arguments):
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.fx.Node):
                name = root(value).name
                if name in state:
                    found.add(state[name])
    return found


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
    The run starts from `state` (the module's buffers and written parameters as the conversion
    found them; without it, as they are now) and gives the module that state back afterwards."""
    state = ModelState(model) if state is None else state
    given = inputs.tensors if tensors is None else tensors
    copies = clone_inputs(given)
    versions = [t._version for t in copies]
    state.restore()
    try:
        with torch.no_grad():
            outputs = inputs.call(model, copies)
        # outputs that are (views of) state the run wrote keep their values once it is given back
        if any(isinstance(v, torch.Tensor) and state.aliases(v) for v in pytree.tree_leaves(outputs)):
            outputs = pytree.tree_map(
                lambda v: v.detach().clone() if isinstance(v, torch.Tensor) and state.aliases(v) else v, outputs
            )
    except Exception as e:  # the model's own error; torch.export traced it, eager did not run
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputError(
            f"the model raised {type(e).__name__} when run eagerly on the example inputs: {first}",
            hint="forward() must run in eager PyTorch on the example inputs (the run gives the reference outputs)",
        ) from e
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


# Side-effecting ops that only raise on bad values (torch.linalg's checks): dropped from the graph.
_ERROR_CHECKS = {torch.ops.aten._linalg_check_errors.default}


def capture(
    ep: torch.export.ExportedProgram,
    example: ModelInputs,
    eager: EagerRun,
    *,
    name: str,
    decomposition: str,
    auto_decomposed: list[str] | None = None,
    requested: dict[tuple[str, int], str] | None = None,
    shape_log: list[str] | None = None,
) -> Captured:
    """ExportedProgram + eager run -> TorchIR, state_dict-keyed weights, reference tensors.

    `example` is the example call as it was before any run: its tensor leaves are saved as
    the reference inputs, its other leaves (Python scalars, strings) were baked in by
    torch.export and are recorded as `constant_inputs`. Every user input the model writes in place (torch.export's
    `USER_INPUT_MUTATION` outputs, or an input the eager run changed) becomes an extra
    output `mutated_<input>`, checked against the input's eager value after the run.
    Buffer mutations are not outputs; `ep.state_dict` shares the module's storage, so the weights
    are the state the eager runs give back (`ModelState`).
    """
    control_flow = inline_control_flow(ep.graph_module)
    graph = ep.graph_module.graph
    sig = ep.graph_signature
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    inputs: list[TensorSpec] = []
    weights: list[WeightSpec] = []
    weight_tensors: dict[str, torch.Tensor] = {}
    kinds = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant"}
    constant_inputs: list[dict[str, Any]] = []
    leaves = iter(zip(example.paths, example.leaves, strict=True))
    for node, spec in zip(placeholders, sig.input_specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            path, leaf = next(leaves, ("", None))
            if isinstance(val, torch.Tensor):
                inputs.append(_spec_of(node.name, val, path=path))
            elif isinstance(leaf, CONSTANT_LEAVES) and not node.users:
                constant_inputs.append({"path": path, "value": leaf})  # specialized by torch.export
            else:
                raise InputError(
                    f"input {path or node.name} ({type(val).__name__}) is read by the graph as a value; only "
                    "tensors can be inputs of the converted model",
                    hint="pass it as a tensor, or make it a constant of the module",
                )
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

    constant_inputs += [{"path": k, "value": v, "default": True} for k, v in example.defaults.items()]
    example_inputs = example.tensors
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
    dropped: list[dict[str, Any]] = []
    checks = _check_cone(graph)
    for node in graph.nodes:
        try:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            target, args = _op_name(node.target), list(node.args)
            val = node.meta.get("val")
            if target in _SIZE_ASSERTS:
                record = _dropped_check(node, target)
                if not any((d["check"], d["reason"]) == (record["check"], record["reason"]) for d in dropped):
                    dropped.append(record)
                continue
            if node in checks:  # computed only for a runtime check
                continue
            if data_dependent(val) and not (isinstance(val, torch.SymBool) and _only_checked(node)):
                # A value read from a tensor (`.item()`) or computed from one: a 0-d tensor in RLX.
                # Used as a size it is refused where the size appears (an output shape with `u0`).
                nodes.append(_record(node, target, args, [TensorSpec(node.name, [], _scalar_dtype(node, val))], encode))
                continue
            if isinstance(val, (torch.SymBool, bool)):
                continue
            if isinstance(val, (torch.SymInt, torch.SymFloat, int)) and not isinstance(val, bool):
                # A size computation: kept as a record; its uses carry the expression ({"sym": ...}).
                text = _sym_text(val, node.name, target)
                nodes.append(
                    Node(
                        name=node.name,
                        target=target,
                        args=[encode(a) for a in args],
                        kwargs={},
                        outputs=[],
                        sym=str(text),
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
                        _spec_of(out_name, v, target)
                        if isinstance(v, torch.Tensor)
                        else TensorSpec(out_name, [], "none")
                    )
            elif isinstance(val, torch.Tensor):
                outs = [_spec_of(node.name, val, target)]
            else:
                outs = []
            nodes.append(_record(node, target, args, outs, encode, aliases))
        except InputError as e:
            raise _at_module(e, node) from None

    out_node = next(n for n in graph.nodes if n.op == "output")
    returned = list(zip(out_node.args[0], sig.output_specs, strict=True))
    user_values = [a for a, s in returned if s.kind == OutputKind.USER_OUTPUT]
    flat = torch.utils._pytree.tree_flatten_with_path(eager.outputs)[0]
    paths = [p for p, _ in flat]
    names = output_names(paths)
    for out_name, (_, leaf) in zip(names, flat, strict=True):
        if not isinstance(leaf, (torch.Tensor, *PYTHON_OUTPUTS)):
            raise InputError(
                f"model output {out_name!r} is a {type(leaf).__name__}; outputs must be tensors or Python "
                "bools/ints/floats/strings/None, nested in tuples, lists or dicts"
            )
    if len(flat) != len(user_values):
        raise InputError(
            f"eager PyTorch returns {len(flat)} output value(s), torch.export's graph {len(user_values)}",
            hint="the model's outputs must be tensors or Python scalars (nested tuples/lists/dicts of them)",
        )
    outputs = []
    leaves: list[dict[str, Any]] = []
    eager_tensors: list[torch.Tensor] = []
    out_names: list[str] = []
    for out_name, value, (_, eager_value) in zip(names, user_values, flat, strict=True):
        if isinstance(value, torch.fx.Node) and data_dependent(value.meta.get("val")):
            # a Python value read from a tensor (`.item()`): computed by RLX as a 0-d tensor
            dtype = _scalar_dtype(value, value.meta["val"])
            outputs.append(OutputSpec(out_name, value.name, [], dtype))
            leaves.append({"output": out_name, "python": type(eager_value).__name__})
            eager_tensors.append(torch.tensor(eager_value, dtype=getattr(torch, dtype)))
            out_names.append(out_name)
            continue
        if not isinstance(eager_value, torch.Tensor):
            leaves.append({**_python_output(out_name, value, eager_value, examples), "name": out_name})
            continue
        if not isinstance(value, torch.fx.Node):
            raise InputError(f"model output {out_name!r} is a constant, not computed from the inputs")
        tensor = eager_value
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
        leaves.append({"output": out_name})
        eager_tensors.append(tensor)
        out_names.append(out_name)
    tree = output_tree(eager.outputs, leaves)

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
    reference = {input_key(s.name): t.detach() for s, t in zip(inputs, example_inputs, strict=True)}
    reference.update({output_key(n): t.detach() for n, t in zip(out_names, eager_tensors, strict=True)})
    for spec_in, after in zip(inputs, eager.inputs_after, strict=True):
        if spec_in.name in written:
            out_name = mutation_output_name(spec_in.name)
            outputs.append(OutputSpec(out_name, written[spec_in.name], list(spec_in.shape), torch_name(after.dtype)))
            reference[output_key(out_name)] = after.detach()
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
        constant_inputs=constant_inputs,
        call_args=list(example.arg_names),
        output_tree=tree,
        dropped=dropped,
        control_flow=control_flow,
    )
    return Captured(ir, weight_tensors, reference)


def _record(
    node: torch.fx.Node,
    target: str,
    args: list[Any],
    outputs: list[TensorSpec],
    encode: _ArgEncoder,
    aliases: dict[str, str] | None = None,
) -> Node:
    """The torch-ir node of an fx call: encoded arguments, outputs, provenance (module, source line,
    the op it was decomposed from) and, with `aliases`, the layouts of layout-sensitive arguments."""
    path, mtype = _module_info(node)
    original = str(node.meta.get("original_aten") or "")
    return Node(
        name=node.name,
        target=target,
        args=[encode(a) for a in args],
        kwargs={k: encode(v) for k, v in node.kwargs.items()},
        outputs=outputs,
        module_path=path,
        module_type=mtype,
        source=_source_line(node),
        decomposed_from=original if original and original != str(node.target) else "",
        layouts=_layouts(node, aliases) if aliases is not None else {},
    )


def _at_module(err: InputError, node: torch.fx.Node) -> InputError:
    """`err` with the module path and source line of the node it arose at."""
    path, _ = _module_info(node)
    where = ", ".join(x for x in (f"module {path}" if path else "", _source_line(node)) if x)
    if not where or where in err.message:
        return err
    return InputError(f"{err.message} [{where}]", hint=err.hint)


# Python values a `forward` may return next to its tensors (torch.export keeps them as constants).
PYTHON_OUTPUTS = (bool, int, float, str, type(None))


def _python_output(name: str, value: Any, eager_value: Any, examples: dict[str, int]) -> dict[str, Any]:
    """The output-tree leaf of a non-tensor output: `{"constant": v}` for a value torch.export
    baked in, `{"size": expr, "example": v}` for an int computed from dynamic sizes. Raises
    ExportError when the graph's value is not what eager PyTorch returned (the check by equality)."""
    if isinstance(value, torch.fx.Node):
        val = value.meta.get("val")
        if not isinstance(val, (torch.SymInt, int)) or isinstance(val, bool):
            raise InputError(
                f"model output {name!r} is a {type(eager_value).__name__} computed from tensor values "
                f"(node {value.name}, {_op_name(value.target)}); RLX returns tensors only",
                hint="return it as a tensor (drop the .item() / bool(...) conversion)",
            )
        text = _sym_text(val, value.name, _op_name(value.target))
        leaf: dict[str, Any] = (
            {"constant": text} if isinstance(text, int) else {"size": str(text), "example": eager_value}
        )
        graph_value = text if isinstance(text, int) else int(evaluate(str(text), examples))
    else:
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"model output {name!r} is the float {value}, which meta.json (strict JSON) cannot hold")
        leaf, graph_value = {"constant": value}, value
    if type(graph_value) is not type(eager_value) or graph_value != eager_value:
        raise ExportError(
            f"model output {name!r}: torch.export's graph returns {graph_value!r}, eager PyTorch {eager_value!r}",
            hint="the value depends on something torch.export fixed while tracing",
        )
    return leaf


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
    point then fails verification."""
    from ..symbolic import sweep_points

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
