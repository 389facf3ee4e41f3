"""Walk an ExportedProgram into our TorchIR schema, plus its weight and reference tensors."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.export.graph_signature import InputKind

from ...dtypes import torch_name
from ...errors import InputError
from ...layout import input_key, output_key
from ...sizes import values_of
from ...torchir import Node, TensorSpec, TorchIR, WeightSpec
from ...version import __version__
from .checks import ERROR_CHECKS, SIZE_ASSERTS, check_cone, dropped_check, only_checked
from .control_flow import inline_control_flow
from .derived import derive_sizes
from .encode import ArgEncoder, data_dependent, layouts, scalar_dtype, spec_of, sym_text
from .export_dims import program_symbols, specialized_axes
from .inputs import CONSTANT_LEAVES, ModelInputs
from .outputs import user_outputs, written_inputs
from .provenance import at_module, module_info, op_name, source_line
from .reference import EagerRun


@dataclass
class Captured:
    """What the front-end hands on: the IR plus tensors to write next to it."""

    ir: TorchIR
    weights: dict[str, torch.Tensor]
    reference: dict[str, torch.Tensor]


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
    inputs, weights, weight_tensors, constant_inputs = _graph_inputs(ep, example)
    constant_inputs += [{"path": k, "value": v, "default": True} for k, v in example.defaults.items()]
    example_inputs = example.tensors
    symbols = program_symbols(ep, inputs, example_inputs, requested or {})
    examples = values_of(symbols)
    aliases, getitem_names = _getitem_names(graph)
    encode = ArgEncoder(aliases, frozenset(s.name for s in symbols if s.stage))
    nodes, dropped = _graph_nodes(graph, encode, aliases, getitem_names)

    out_node = next(n for n in graph.nodes if n.op == "output")
    returned = list(zip(out_node.args[0], ep.graph_signature.output_specs, strict=True))
    outputs, tree, eager_tensors = user_outputs(returned, eager.outputs, encode, examples)
    reference = {input_key(s.name): t.detach() for s, t in zip(inputs, example_inputs, strict=True)}
    reference.update({output_key(n): t.detach() for n, t in eager_tensors.items()})
    for spec, after in written_inputs(returned, encode, inputs, eager.mutated, eager.inputs_after):
        outputs.append(spec)
        reference[output_key(spec.name)] = after.detach()
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
        specialized=specialized_axes(inputs, requested or {}, shape_log or []),
        constant_inputs=constant_inputs,
        call_args=list(example.arg_names),
        output_tree=tree,
        dropped=dropped,
        control_flow=control_flow,
    )
    return Captured(derive_sizes(ir), weight_tensors, reference)


def _graph_inputs(
    ep: torch.export.ExportedProgram, example: ModelInputs
) -> tuple[list[TensorSpec], list[WeightSpec], dict[str, torch.Tensor], list[dict[str, Any]]]:
    """The graph's placeholders: the user's tensor inputs, the weights (parameters, buffers and
    constant tensors, keyed by state_dict name, with their tensors), and the example's Python
    values torch.export baked in (`constant_inputs`). Raises InputError for an input the graph
    reads as a value and for a kind of input RLX has no place for."""
    placeholders = [n for n in ep.graph_module.graph.nodes if n.op == "placeholder"]
    inputs: list[TensorSpec] = []
    weights: list[WeightSpec] = []
    weight_tensors: dict[str, torch.Tensor] = {}
    kinds = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant"}
    constant_inputs: list[dict[str, Any]] = []
    leaves = iter(zip(example.paths, example.leaves, strict=True))
    for node, spec in zip(placeholders, ep.graph_signature.input_specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            path, leaf = next(leaves, ("", None))
            if isinstance(val, torch.Tensor):
                inputs.append(spec_of(node.name, val, path=path))
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

    return inputs, weights, weight_tensors, constant_inputs


def _getitem_names(graph: torch.fx.Graph) -> tuple[dict[str, str], dict[tuple[str, int], str]]:
    """Fold getitem into the producer: a tuple-returning node lists one output per element, output
    i named as the getitem that reads it (`getitem_names[(producer, i)]`)."""
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
    return aliases, getitem_names


def _graph_nodes(
    graph: torch.fx.Graph, encode: ArgEncoder, aliases: dict[str, str], getitem_names: dict[tuple[str, int], str]
) -> tuple[list[Node], list[dict[str, Any]]]:
    """The torch-ir node of each call in `graph`, and the records of the runtime checks left out
    (each once). Errors name the module path and source line of the node they arose at."""
    nodes: list[Node] = []
    dropped: list[dict[str, Any]] = []
    checks = check_cone(graph)
    for node in graph.nodes:
        try:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            target, args = op_name(node.target), list(node.args)
            val = node.meta.get("val")
            if target in SIZE_ASSERTS:
                record = dropped_check(node, target)
                if not any((d["check"], d["reason"]) == (record["check"], record["reason"]) for d in dropped):
                    dropped.append(record)
                continue
            if node in checks:  # computed only for a runtime check
                continue
            # a size a size stage computes (not the `.item()` defining it): a size record below
            staged = encode.is_staged(val) and not node.meta.get("unbacked_bindings")
            if data_dependent(val) and not staged and not (isinstance(val, torch.SymBool) and only_checked(node)):
                # A value read from a tensor (`.item()`) or computed from one: a 0-d tensor in RLX.
                # Used as a size it is refused where the size appears (an output shape with `u0`).
                nodes.append(_record(node, target, args, [TensorSpec(node.name, [], scalar_dtype(node, val))], encode))
                continue
            if isinstance(val, (torch.SymBool, bool)):
                continue
            if isinstance(val, (torch.SymInt, torch.SymFloat, int)) and not isinstance(val, bool):
                # A size computation: kept as a record; its uses carry the expression ({"sym": ...}).
                text = sym_text(val, node.name, target)
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
                if args[1] in ERROR_CHECKS:
                    continue
                target, args = f"{args[1]} (with_effects)", args[2:]
            if isinstance(val, (tuple, list)):
                outs = []
                for i, v in enumerate(val):
                    out_name = getitem_names.get((node.name, i), f"{node.name}.{i}")
                    outs.append(
                        spec_of(out_name, v, target)
                        if isinstance(v, torch.Tensor)
                        else TensorSpec(out_name, [], "none")
                    )
            elif isinstance(val, torch.Tensor):
                outs = [spec_of(node.name, val, target)]
            else:
                outs = []
            nodes.append(_record(node, target, args, outs, encode, aliases))
        except InputError as e:
            raise at_module(e, node) from None
    return nodes, dropped


def _record(
    node: torch.fx.Node,
    target: str,
    args: list[Any],
    outputs: list[TensorSpec],
    encode: ArgEncoder,
    aliases: dict[str, str] | None = None,
) -> Node:
    """The torch-ir node of an fx call: encoded arguments, outputs, provenance (module, source line,
    the op it was decomposed from) and, with `aliases`, the layouts of layout-sensitive arguments."""
    path, mtype = module_info(node)
    original = str(node.meta.get("original_aten") or "")
    return Node(
        name=node.name,
        target=target,
        args=[encode(a) for a in args],
        kwargs={k: encode(v) for k, v in node.kwargs.items()},
        outputs=outputs,
        module_path=path,
        module_type=mtype,
        source=source_line(node),
        decomposed_from=original if original and original != str(node.target) else "",
        layouts=layouts(node, aliases) if aliases is not None else {},
    )
