"""Print a lowered program as Rust statements on the HIR builder (`graph` and `flow` styles).

Each RLX node becomes one `g.add_node(<op>, vec![<inputs>], <shape>)` call. The
op expression comes from the Rust core, which prints the very `rlx_ir::Op`
value the bundle is built from (`_core.op_to_rust`), so no mapping is decided
here. Large constant payloads go to `constants.bin` instead of the source.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import _core
from ..program import Program, RlxNode, op_name
from .rust_names import RustNames, comment

# Constants up to this many bytes print inline; larger ones live in constants.bin.
INLINE_CONSTANT_BYTES = 64
CONSTANTS_FILE = "constants.bin"


@dataclass
class Statements:
    """The body of `emit`, plus what the surrounding file must provide."""

    lines: list[str] = field(default_factory=list)
    types: set[str] = field(default_factory=set)
    constants: bytearray = field(default_factory=bytearray)
    outputs: list[str] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)  # "inputs" / "params" when a node reads one


def shape_text(dims: tuple[int, ...], dtype: str) -> str:
    """`F32[2, 8]`, for comments."""
    return f"{dtype}[{', '.join(map(str, dims))}]"


def shape_expr(dims: tuple[int, ...], dtype: str) -> str:
    return f"Shape::new(&[{', '.join(map(str, dims))}], DType::{dtype})"


def provenance_comment(node: RlxNode, names: dict[str, tuple[tuple[int, ...], str]]) -> list[str]:
    """Two comment lines: where the node came from in torch, and its RLX signature."""
    p = node.provenance
    where = f"`{p.node}`"
    if p.module_path:
        where += f" in {p.module_path}"
    if p.source:
        where += f" at {p.source}"
    args = ", ".join(f"{i}: {shape_text(*names[i])}" for i in node.inputs)
    return [
        f"// {comment(p.aten)} {comment(where)}",
        f"//   {comment(op_name(node.op))}({comment(args)}) -> {shape_text(node.dims, node.dtype)}",
    ]


def value_shapes(program: Program) -> dict[str, tuple[tuple[int, ...], str]]:
    """Dims and RLX dtype of every value in the program, by name."""
    shapes = {v.name: (v.dims, v.dtype) for v in (*program.inputs, *program.params)}
    shapes.update({n.id: (n.dims, n.dtype) for n in program.nodes})
    return shapes


def _constant_expr(data: list[int], out: Statements) -> str:
    if len(data) <= INLINE_CONSTANT_BYTES:
        return f"vec![{', '.join(map(str, data))}]"
    offset = len(out.constants)
    out.constants.extend(bytes(data))
    return f"constant({offset}, {len(data)})"


def declarations(program: Program, names: RustNames) -> tuple[dict[str, str], set[str]]:
    """Identifiers of the graph inputs and parameters (`w_` prefix), and the values nodes read."""
    ident = {v.name: names(v.name) for v in program.inputs}
    ident.update({p.name: names(p.name, "w_") for p in program.params})
    used = {i for n in program.nodes for i in n.inputs} | set(program.outputs)
    return ident, used


def node_statements(
    program: Program, names: RustNames, ident: dict[str, str], out: Statements, rhs: Callable[[RlxNode, list[str]], str]
) -> None:
    """One provenance-commented `let` per node; `rhs` prints the expression from the input identifiers."""
    shapes = value_shapes(program)
    for node in program.nodes:
        expr = rhs(node, [ident[i] for i in node.inputs])
        ident[node.id] = names(node.id)
        out.lines.append("")
        out.lines.extend(provenance_comment(node, shapes))
        out.lines.append(f"let {ident[node.id]} = {expr};")
    out.outputs = [ident[o] for o in program.outputs]


def graph_statements(program: Program, names: RustNames) -> Statements:
    """`let` statements for every node, reading inputs/params from the `inputs`/`params` slices."""
    out = Statements(types={"Shape", "DType"})
    ident, used = declarations(program, names)
    for slice_name, values in (("inputs", program.inputs), ("params", program.params)):
        for i, v in enumerate(values):
            if v.name not in used:  # declared (it is bound by name) but read by no node
                continue
            out.reads.add(slice_name)
            note = f"{comment(v.name)}: {shape_text(v.dims, v.dtype)}"
            out.lines.append(f"let {ident[v.name]} = {slice_name}[{i}]; // {note}")

    def add_node(node: RlxNode, args: list[str]) -> str:
        data_expr = ""
        if isinstance(node.op, dict) and "Constant" in node.op:
            data_expr = _constant_expr(node.op["Constant"]["data"], out)
        code, types = _core.op_to_rust(json.dumps(node.op), data_expr)
        out.types.update(types)
        return f"g.add_node({code}, vec![{', '.join(args)}], {shape_expr(node.dims, node.dtype)})"

    node_statements(program, names, ident, out, add_node)
    return out


# Types rlx-ir exports at its root rather than from `rlx_ir::op` (number formats live in `number_format`,
# quantization schemes in `quant`, `Op::Fft`'s norm and algorithm in `fft`).
ROOT_TYPES = frozenset(
    {
        "DType",
        "Shape",
        "FloatFormat",
        "FormatScaling",
        "QuantScheme",
        "FftAlgo",
        "FftContraction",
        "FftNorm",
        "FftTwiddles",
    }
)


def use_lines(types: set[str]) -> list[str]:
    """`use` lines for the type names the printed ops mention."""
    root = sorted(t for t in types if t in ROOT_TYPES)
    op = sorted(t for t in types if t not in ROOT_TYPES)
    lines = []
    if op:
        lines.append(f"use rlx_ir::op::{{{', '.join(op)}}};")
    if root:
        lines.append(f"use rlx_ir::{{{', '.join(root)}}};")
    return lines
