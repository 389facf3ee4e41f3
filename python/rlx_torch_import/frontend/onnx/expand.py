"""ONNX's own function expansion: a node whose op type RLX's importer does not lower, but which the
ONNX standard defines as a function of other ops (HardSwish, Celu, LayerNormalization, Mish, ...),
is replaced by that function body, taken from the schema of the model's opset (or built for the
node's input types, for context-dependent functions) and inlined by `onnx.inliner`, version-converted
to the model's opset. What the file computes is unchanged: the body is the op's definition."""

from __future__ import annotations

from collections import Counter
from typing import Any

# The private domain the bodies are registered under while they are inlined (removed after).
_DOMAIN = "rlx_torch_import.expand"


def _opset(model: Any) -> int:
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _body(node: Any, opset: int, types: dict[str, Any]) -> bytes | None:
    """The serialized FunctionProto defining `node` at `opset`, or None when ONNX defines none."""
    import onnx

    try:
        schema: Any = onnx.defs.get_schema(node.op_type, opset, "")  # its function accessors are untyped
    except Exception:
        return None
    versions = [v for v in schema.function_opset_versions if v <= opset] if schema.has_function else []
    if versions:
        body = schema.get_function_with_opset_version(max(versions))
        if body:
            return bytes(body)
    if schema.has_context_dependent_function:
        versions = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
        if versions:
            empty = onnx.TypeProto().SerializeToString()
            in_types = [types[i].SerializeToString() if i in types else empty for i in node.input]
            try:
                body = schema.get_context_dependent_function_with_opset_version(
                    max(versions), node.SerializeToString(), in_types
                )
            except Exception:
                return None
            return bytes(body) if body else None
    return None


def expandable(model: Any, op_type: str) -> bool:
    """Whether ONNX defines `op_type` (ai.onnx) as a function at the model's opset."""
    import onnx

    try:
        schema: Any = onnx.defs.get_schema(op_type, _opset(model), "")
    except Exception:
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)


def expand(model: Any, op_types: set[str], only: set[int] | None = None) -> Counter[str]:
    """Replace each ai.onnx node of `op_types` (or, with `only`, the nodes at those indices) by its
    function body, in place (nested function ops are expanded when a later round finds them
    unsupported too). Returns how many nodes of each op type were expanded."""
    import onnx
    import onnx.inliner

    g = model.graph
    types = {vi.name: vi.type for vi in [*g.input, *g.value_info, *g.output]}
    for t in g.initializer:
        types[t.name] = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
    opset = _opset(model)
    functions = []
    done: Counter[str] = Counter()
    for k, node in enumerate(g.node):
        wanted = k in only if only is not None else node.op_type in op_types
        if not wanted or node.domain not in ("", "ai.onnx"):
            continue
        body = _body(node, opset, types)
        if body is None:
            continue
        fn = onnx.FunctionProto()
        fn.ParseFromString(body)
        done[node.op_type] += 1
        fn.domain, fn.name = _DOMAIN, f"{node.op_type}_{k}"
        node.domain, node.op_type = _DOMAIN, fn.name
        functions.append(fn)
    if not functions:
        return done
    model.functions.extend(functions)
    model.opset_import.add(domain=_DOMAIN, version=1)
    inlined = onnx.inliner.inline_local_functions(model, convert_version=True)
    model.CopyFrom(inlined)
    keep = [o for o in model.opset_import if o.domain != _DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    del model.functions[:]
    return done
