"""Everything in an ONNX model RLX's importer cannot take, found all at once (UnsupportedOpsError,
exit 3): nodes of domains it does not read, dtypes a bundle's inputs and outputs cannot carry, and
every node of each op type the importer refused (with domain and opset) or stubbed. The importer
itself is the judge of which op types it lowers (its report), after the pre-pass expanded what
ONNX defines as functions (`expand`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...errors import Unsupported, UnsupportedOpsError
from .source import OnnxSource, TensorInfo, elem_name

# The hint of the ONNX door's UnsupportedOpsError: RLX's importer decides what converts.
HINT = "see docs/onnx.md for what RLX's ONNX importer takes and the pre-pass rewrites"
# The domains whose op types the importer reads ("" is ai.onnx).
KNOWN_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
# Element types the importer carries across a graph's inputs and outputs (it reads any other as
# float32, which would compute something else than the file says).
BOUNDARY_TYPES = {1: "float32", 7: "int64", 6: "int32", 9: "bool", 2: "uint8", 3: "int8"}


def _nodes(graph: Any, where: str = "") -> Iterator[tuple[Any, str]]:
    for node in graph.node:
        yield node, where
        for attr in node.attribute:
            if attr.type == 5:  # GRAPH
                yield from _nodes(attr.g, f"{where}{node.name or node.op_type}.{attr.name}/")
            for sub in attr.graphs:
                yield from _nodes(sub, f"{where}{node.name or node.op_type}.{attr.name}/")


def op_target(src: OnnxSource, op_type: str, domain: str) -> str:
    """`Add` (ai.onnx) or `com.microsoft.FusedMatMul`, with the opset the model imports."""
    d = domain or "ai.onnx"
    version = src.opsets.get(domain, src.opsets.get("ai.onnx" if not domain else domain, 0))
    return f"{op_type} ({d} opset {version})" if d == "ai.onnx" else f"{d}.{op_type} (opset {version})"


def domain_gaps(src: OnnxSource) -> list[Unsupported]:
    """Each node of a domain the importer does not know (it reads ai.onnx and com.microsoft op types
    by name alone, so a custom domain's op must not reach it)."""
    return [
        Unsupported(
            op_target(src, node.op_type, node.domain),
            f"{where}{node.name or '(unnamed)'}",
            "",
            f"domain {node.domain!r} is not one RLX's ONNX importer reads (ai.onnx, com.microsoft)",
        )
        for node, where in _nodes(src.model.graph)
        if node.domain not in KNOWN_DOMAINS
    ]


def _dtype_gap(kind: str, spec: TensorInfo) -> Unsupported | None:
    if spec.elem_type in BOUNDARY_TYPES:
        return None
    return Unsupported(
        f"<{kind} dtype {elem_name(spec.elem_type)}>",
        spec.name,
        "",
        f"graph {kind} {spec.name!r} is {elem_name(spec.elem_type)}; the importer carries only "
        + ", ".join(BOUNDARY_TYPES.values()),
    )


def dtype_gaps(src: OnnxSource) -> list[Unsupported]:
    """Each graph input and output of an element type the importer cannot carry."""
    found = [_dtype_gap("input", s) for s in src.inputs] + [_dtype_gap("output", s) for s in src.outputs]
    return [g for g in found if g is not None]


def zero_size_gaps(shapes: dict[str, tuple[int, ...]]) -> list[Unsupported]:
    """Each input with a zero-size dim (the importer reads a 0 dim as unknown)."""
    return [
        Unsupported(
            "<zero-size input>", name, "", f"input {name!r} is {list(shape)}; the importer takes no zero-size dims"
        )
        for name, shape in shapes.items()
        if 0 in shape
    ]


def importer_gaps(src: OnnxSource, model: Any, report: dict[str, Any]) -> list[Unsupported]:
    """The importer's own refusals (`_core.onnx_import`'s report on `model`, the static model it
    read): every node of each op type it counted unsupported (by name), and the other nodes it
    stubbed. Nodes of unknown domains are `domain_gaps`' and not listed again."""
    refused = {op for op, _count in report.get("unsupported", [])}
    found = []
    listed = {node.name or node.op_type for node, _where in _nodes(model.graph) if node.domain not in KNOWN_DOMAINS}
    for node, where in _nodes(model.graph):
        if node.op_type in refused and node.domain in KNOWN_DOMAINS:
            name = f"{where}{node.name or '(unnamed)'}"
            listed.add(node.name)
            found.append(
                Unsupported(
                    op_target(src, node.op_type, node.domain if node.domain != "ai.onnx" else ""),
                    name,
                    "",
                    "RLX's ONNX importer (rlx-onnx-import) has no lowering for this op type",
                )
            )
    for name in report.get("stubbed_nodes", []):  # "<node name or op type> (<why>)"
        if name.rsplit(" (", 1)[0] not in listed | refused:
            found.append(Unsupported("<stubbed>", name, "", "the importer could not lower this node"))
    return found


def failure(text: str) -> Unsupported:
    """The importer's hard failure (`_core.CheckError`'s message) as a gap naming its node."""
    node = text.split("lowering node ", 1)[1].split(":", 1)[0].strip() if "lowering node " in text else "(import)"
    return Unsupported("<importer error>", node, "", f"RLX's ONNX importer failed: {text[:400]}")


def raise_all(found: list[Unsupported]) -> None:
    """Raise UnsupportedOpsError listing every gap in `found` together (nothing if none)."""
    if found:
        raise UnsupportedOpsError(found, frontend_hint=HINT)
