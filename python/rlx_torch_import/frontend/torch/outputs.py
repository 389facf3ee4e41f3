"""The model's outputs in torch-ir: public names, the structure forward returns (the output
tree), Python values returned next to tensors, and the inputs the model writes in place."""

from __future__ import annotations

import math
import re
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import OutputKind
from torch.export.graph_signature import OutputSpec as ExportOutputSpec

from ...dtypes import torch_name
from ...errors import ExportError, InputError
from ...sizes import evaluate, evaluate_shape
from ...torchir import OutputSpec, TensorSpec
from .encode import ArgEncoder, data_dependent, scalar_dtype, spec_of, sym_text
from .inputs import path_name
from .provenance import op_name


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
                f"(node {value.name}, {op_name(value.target)}); RLX returns tensors only",
                hint="return it as a tensor (drop the .item() / bool(...) conversion)",
            )
        text = sym_text(val, value.name, op_name(value.target))
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


def user_outputs(
    returned: list[tuple[Any, ExportOutputSpec]], eager_outputs: Any, encode: ArgEncoder, examples: dict[str, int]
) -> tuple[list[OutputSpec], dict[str, Any], dict[str, torch.Tensor]]:
    """What forward returns, from the graph's output node (`returned`, paired with torch.export's
    output specs) and eager PyTorch's `eager_outputs`: the torch-ir output of each tensor (and of
    each Python value read from a tensor, computed as a 0-d tensor), the output tree, and eager
    PyTorch's tensor of each output by name. Raises when eager and graph disagree on the outputs."""
    user_values = [a for a, s in returned if s.kind == OutputKind.USER_OUTPUT]
    flat = torch.utils._pytree.tree_flatten_with_path(eager_outputs)[0]
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
    eager_tensors: dict[str, torch.Tensor] = {}
    for out_name, value, (_, eager_value) in zip(names, user_values, flat, strict=True):
        if isinstance(value, torch.fx.Node) and data_dependent(value.meta.get("val")):
            # a Python value read from a tensor (`.item()`): computed by RLX as a 0-d tensor
            dtype = scalar_dtype(value, value.meta["val"])
            outputs.append(OutputSpec(out_name, value.name, [], dtype))
            leaves.append({"output": out_name, "python": type(eager_value).__name__})
            eager_tensors[out_name] = torch.tensor(eager_value, dtype=getattr(torch, dtype))
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
            shape = spec_of(value.name, traced, op_name(value.target)).shape
            if evaluate_shape(shape, examples) != list(tensor.shape):
                raise ExportError(
                    f"torch.export's graph computes output {out_name!r} with shape {shape}, but eager "
                    f"PyTorch returns {list(tensor.shape)} (node {value.name}, {value.target}): the exported graph "
                    "does not compute what the model does",
                    hint="a torch decomposition disagrees with its kernel; try another --decomposition level",
                )
        outputs.append(OutputSpec(out_name, encode(value)["tensor"], shape, torch_name(tensor.dtype)))
        leaves.append({"output": out_name})
        eager_tensors[out_name] = tensor
    return outputs, output_tree(eager_outputs, leaves), eager_tensors


def written_inputs(
    returned: list[tuple[Any, ExportOutputSpec]],
    encode: ArgEncoder,
    inputs: list[TensorSpec],
    mutated: tuple[bool, ...],
    inputs_after: tuple[torch.Tensor, ...],
) -> list[tuple[OutputSpec, torch.Tensor]]:
    """An output `mutated_<input>` for each input written in place, by torch.export's signature or
    by the eager run (`mutated`), with the input's eager value after the run (`inputs_after`). The
    output is the value the graph records for the write (USER_INPUT_MUTATION), else the input
    itself as the lowering leaves it (in-place lowerings rebind it; a write RLX does not reproduce
    then fails parity)."""
    written: dict[str, str] = {}
    for value, spec in returned:
        if spec.kind == OutputKind.USER_INPUT_MUTATION and isinstance(value, torch.fx.Node):
            written[str(spec.target)] = encode(value)["tensor"]
    for input_name, wrote in zip([s.name for s in inputs], mutated, strict=True):
        if wrote:
            written.setdefault(input_name, input_name)
    found = []
    for spec_in, after in zip(inputs, inputs_after, strict=True):
        if spec_in.name in written:
            out_name = mutation_output_name(spec_in.name)
            out_spec = OutputSpec(out_name, written[spec_in.name], list(spec_in.shape), torch_name(after.dtype))
            found.append((out_spec, after))
    return found
