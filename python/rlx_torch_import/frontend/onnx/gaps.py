"""Everything in an ONNX model RLX's importer cannot take, found all at once (UnsupportedOpsError,
exit 3): op types it does not lower (with domain and opset), dtypes a bundle's inputs and outputs
cannot carry, and the nodes the importer itself refused or stubbed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ... import _core
from ...errors import Unsupported, UnsupportedOpsError
from .source import OnnxSource, TensorInfo, elem_name

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


def op_gaps(src: OnnxSource) -> list[Unsupported]:
    """Each node whose op type the importer does not lower (`_core.onnx_op_types`), by name."""
    known = set(_core.onnx_op_types())
    found = []
    for node, where in _nodes(src.model.graph):
        domain = node.domain if node.domain not in ("ai.onnx",) else ""
        if domain in ("", "com.microsoft") and node.op_type in known:
            continue
        found.append(
            Unsupported(
                op_target(src, node.op_type, domain),
                f"{where}{node.name or '(unnamed)'}",
                "",
                "RLX's ONNX importer (rlx-onnx-import) has no lowering for this op type",
            )
        )
    return found


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


def importer_gaps(src: OnnxSource, report: dict[str, Any], listed: set[str]) -> list[Unsupported]:
    """The importer's own refusals (`_core.onnx_import`'s report): op types it counted unsupported
    that the registry check did not already list, and the nodes it stubbed."""
    found = []
    for op_type, count in report.get("unsupported", []):
        if not any(t.startswith(f"{op_type} ") or t.endswith(f".{op_type} ") for t in listed):
            found.append(
                Unsupported(op_target(src, op_type, ""), f"{count} node(s)", "", "the importer refused this op type")
            )
    for name in report.get("stubbed_nodes", []):
        found.append(Unsupported("<stubbed>", name, "", "the importer could not lower this node (it would be a stub)"))
    return found


def check(src: OnnxSource) -> None:
    """Raise UnsupportedOpsError listing every op-type and dtype gap together (nothing if none)."""
    gaps = op_gaps(src) + dtype_gaps(src)
    if gaps:
        raise UnsupportedOpsError(gaps, decomposition="onnx")
