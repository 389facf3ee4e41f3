"""The text of each file of a generated crate: the templates in `templates/` filled from the
lowered program (`rust_names.fill`).

All fixed Rust, TOML and Markdown lives in the templates; what is printed here is one line per
value (a spec row, a budget row, a dependency) and, through `graph`/`tensor`, one statement per
RLX node. A template is a whole file, or a fragment (its final newline dropped) filled into
another: `load/<style>.rs` (how `Model::load_on` binds the weights), `imports/<kind>.rs` (lib.rs's
`use` lines), `specs*.rs` (INPUTS, OUTPUTS, PARAMS, and SYMBOLS/SWEEP), `constants.rs`.
"""

from __future__ import annotations

import json
import math
import os
from importlib import resources

from .. import _core
from ..budgets import float_budgets
from ..bundle.ranges import bundle_ranges
from ..complex_edge import stored
from ..dtypes import to_rlx
from ..layout import sweep_prefix
from ..program import Program
from ..sizes import evaluate, free_symbols, line_of, sizes, values_of
from ..torchir import TorchIR, specialize
from ..version import __version__
from .graph import CONSTANTS_FILE, graph_statements, use_lines
from .rust_names import CrateNames, RustNames, code_span, comment, fill, rust_str
from .stages import STAGE_LINES, is_staged
from .tensor import tensor_statements

# A dynamic model's symbolic graph, beside graph.rs in the crate's src/.
SYMBOLIC_FILE = "model.rlxmodel"
# lib.rs's `use` lines (`imports/<kind>.rs`) by style; a dynamic model's are `imports/dynamic.rs`.
_IMPORTS = {"graph": "static", "tensor": "static", "flow": "flow"}


def template(name: str) -> str:
    """The text of `templates/<name>`."""
    return resources.files(__package__).joinpath(f"templates/{name}").read_text(encoding="utf-8")


def _fragment(name: str) -> str:
    """A template filled into another one's line: its text without the final newline."""
    return template(name).removesuffix("\n")


def rust_f64(x: float) -> str:
    """A Rust f64 literal that parses to exactly `x` (shortest round-trip digits)."""
    text = repr(float(x))
    if not math.isfinite(x):
        raise ValueError(f"budget value {x!r} is not finite")
    if "e" in text:
        mantissa, exp = text.split("e")
        return f"{mantissa}e{int(exp)}"
    return text


def host_rs() -> str:
    """`src/host.rs`, with the float budgets written from the Python verifier's table (one source)."""
    rows = [
        f"    ({rust_str(dtype)}, Budget {{ atol: {rust_f64(b.atol)}, rtol: {rust_f64(b.rtol)}, "
        f"min_cosine: {rust_f64(b.min_cosine)} }}),"
        for dtype, b in float_budgets().items()
    ]
    return fill(template("host.rs"), {"FLOAT_BUDGETS": "\n".join(rows)}, "host.rs")


def _header(program: Program, ir: TorchIR, style: str) -> str:
    """The provenance comment (`//!` lines) opening lib.rs and graph.rs: model, producer,
    versions, ATen histogram (`templates/header.md`)."""
    values = {
        "MODEL": code_span(program.name),
        "VERSION": __version__,
        "TORCH": comment(str(ir.producer.get("torch", "?"))),
        "RLX": _core.rlx_version(),
        "DECOMPOSITION": code_span(ir.made_by),
        "STYLE": style,
        "ATEN": [f"- {code_span(op)} x {n}" for op, n in program.aten_histogram().items()],
    }
    return _doc(fill(_fragment("header.md"), values, "header.md").split("\n"), "//!")


def _doc(lines: list[str], marker: str) -> str:
    return "\n".join(f"{marker} {line}".rstrip() for line in lines)


def _dims(dims: tuple[int, ...] | list[int]) -> str:
    return f"&[{', '.join(map(str, dims))}]"


def _symbol_specs(ir: TorchIR) -> str:
    """SYMBOLS, SYMBOL_AXES and SWEEP of a dynamic program."""
    symbols = [
        f"    Symbol {{ id: {s.id}, name: {rust_str(s.label)}, min: {s.min}, "
        f"max: {'None' if s.max is None else f'Some({s.max})'} }},"
        for s in ir.symbols
    ]
    ids = {s.name: s.id for s in ir.symbols}
    axes = []
    for i, spec in enumerate(ir.inputs):
        for axis, d in enumerate(spec.shape):
            if isinstance(d, str) and len(free_symbols(d)) == 1:
                sym, scale, offset = line_of(d)
                if scale > 0 and all(evaluate(d, {sym: v}) == scale * v + offset for v in (2, 3, 7)):
                    axes.append(f"    ({i}, {axis}, {ids[sym]}, {scale}, {offset}), // {comment(d)}")
    sweep = [
        f"    {rust_str(sweep_prefix(i))}, // {comment(p['label'])}" for i, p in enumerate(ir.sweep) if "error" not in p
    ]
    values = {"SYMBOLS": symbols, "AXES": axes, "SWEEP": sweep}
    return fill(_fragment("specs_dynamic.rs"), values, "specs_dynamic.rs")


def _specs(program: Program, ir: TorchIR) -> str:
    """INPUTS, OUTPUTS and PARAMS constants (dims at the example sizes), and a dynamic
    program's SYMBOLS, SYMBOL_AXES and SWEEP."""
    examples = specialize(ir, values_of(ir.symbols)) if ir.is_dynamic else ir
    symbolic = _symbol_specs(ir) if ir.is_dynamic else _fragment("specs_static.rs")
    ir = examples

    def tensor_spec(name: str, shape: tuple[int, ...], torch_dtype: str, carrier: str | None = None) -> str:
        # a complex value crosses as its float pairs (dims + [2], `complex_edge`), said in a comment
        dtype, dims = stored(torch_dtype, list(shape))
        note = f" // {torch_dtype} as its float pairs (view_as_real)" if dtype != torch_dtype else ""
        axis = program.padded_outputs.get(name) if name in {o.name for o in ir.outputs} else None
        padded = "None" if axis is None else f"Some({axis})"
        return (
            f"    TensorSpec {{ name: {rust_str(name)}, dims: {_dims(dims)}, dtype: {rust_str(dtype)}, "
            f"carrier: DType::{carrier or to_rlx(dtype)}, padded: {padded} }},{note}"
        )

    decl = {v.name: v for v in program.inputs}
    inputs = [tensor_spec(s.name, sizes(s.shape), s.dtype, decl[s.name].dtype) for s in ir.inputs]
    outputs = [
        tensor_spec(o.name, sizes(o.shape), o.dtype, "F32" if o.name in program.carried_outputs else None)
        for o in ir.outputs
    ]
    params = [
        f"    ParamSpec {{ name: {rust_str(p.name)}, dims: {_dims(p.dims)}, dtype: DType::{p.dtype} }},"
        for p in program.params
    ]
    values = {"INPUTS": inputs, "OUTPUTS": outputs, "PARAMS": params, "SYMBOLIC": symbolic}
    return fill(_fragment("specs.rs"), values | {"INDEX_RANGES": _index_ranges(program, ir)}, "specs.rs")


def _index_ranges(program: Program, ir: TorchIR) -> list[str]:
    """INDEX_RANGES rows (`bundle.ranges.bundle_ranges`, the check `BundleModel.run` makes). A range whose
    bound is a size expression (a dynamic axis indexed) is left to RLX: the crate checks fixed bounds."""
    position = {v.name: i for i, v in enumerate(program.inputs)}
    return [
        f"    IndexRange {{ input: {position[r['input']]}, low: {r['low']}, high: {r['high']}, "
        f"op: {rust_str(r['op'])}, node: {rust_str(r['node'])}, axis: {r['axis']} }},"
        for r in bundle_ranges(program, ir)
        if isinstance(r["low"], int) and isinstance(r["high"], int)
    ]


def lib_rs(program: Program, ir: TorchIR, style: str) -> str:
    """src/lib.rs: the specs, the device checks and `Model` (`model_static.rs` or `model_dynamic.rs`)."""
    if ir.is_dynamic:
        staged = is_staged(ir)
        lines = {k: v if staged else [] for k, v in STAGE_LINES.items()}
        model = fill(template("model_dynamic.rs"), lines, "model_dynamic.rs")
    else:
        model = fill(template("model_static.rs"), {"LOAD": _fragment(f"load/{style}.rs")}, "model_static.rs")
    # The core's CUDA check of this graph (float64, integer constants float32 cannot hold), made now
    # so the crate refuses `Device::Cuda` with the same message `--device cuda` gives.
    refusal = _core.cuda_refusal(_core.program_to_hir_json(program.to_core_json()))
    values = {
        "HEADER": _header(program, ir, style),
        "CUDA_REFUSAL": f"Some({rust_str(refusal)})" if refusal else "None",
        # the core's strict float32 settings (src/device.rs), so the crate computes what the bundle verified
        "CUDA_STRICT": "[" + ", ".join(f"({rust_str(k)}, {rust_str(v)})" for k, v in _core.CUDA_STRICT_SETTINGS) + "]",
        "MODS": "pub mod flow;\n" if style == "flow" else "pub mod stages;\n" if is_staged(ir) else "",
        "IMPORTS": _fragment(f"imports/{_IMPORTS[style] if not ir.is_dynamic else 'dynamic'}.rs"),
        "NAME": rust_str(program.name),
        "SPECS": _specs(program, ir),
        "MODEL": model,
    }
    return fill(template("lib.rs"), values, "lib.rs")


def cargo_toml(names: CrateNames, program: Program, ir: TorchIR, style: str) -> str:
    """Cargo.toml: RLX's crates pinned exactly, the style's own dependencies, and a `cuda` feature."""
    rlx = _core.rlx_version()
    deps = [
        f'rlx-ir = "={rlx}"',
        f'rlx-runtime = {{ version = "={rlx}", default-features = false, features = ["cpu"] }}',
        f'rlx-cuda = {{ version = "={rlx}", optional = true }}',
        'serde_json = "1"',
        'libloading = "0.8"',  # src/blas.rs loads the BLAS provider at run time
    ]
    if style == "flow":
        deps += [f'rlx-flow = "={rlx}"', 'anyhow = "1"']
    if style == "tensor":
        deps.append(f'rlx-tensor = {{ version = "={rlx}", default-features = false }}')
    values = {
        "VERSION": __version__,
        "MODEL": comment(program.name),
        "TORCH": comment(str(ir.producer.get("torch", "?"))),
        "RLX": rlx,
        "STYLE": style,
        "PACKAGE": names.package,
        "DEPS": sorted(deps),
    }
    return fill(template("Cargo.toml"), values, "Cargo.toml")


def cargo_config() -> str:
    """.cargo/config.toml: rlx-cpu on the generic CBLAS ABI (resolved by src/blas.rs) and the
    provider libraries this process found, baked in so the crate computes with the same BLAS."""
    lines = [
        "# Written by rlx-torch-import: RLX's BLAS calls go to src/blas.rs, which loads the provider",
        "# chosen per CPU at run time (RTI_BLAS=auto|mkl|openblas|system|/path/lib.so). The paths are",
        "# where the converting environment had them; the same variables at run time override them.",
        "[env]",
        'RLX_BLAS_LINK = "dl"',
    ]
    for var in ("RTI_BLAS_MKL", "RTI_BLAS_OPENBLAS"):
        path = os.environ.get(var)
        if path:
            lines.append(f"{var} = {json.dumps(path)}")
    return "\n".join(lines) + "\n"


def readme(names: CrateNames, program: Program, style: str) -> str:
    values = {
        "PACKAGE": names.package,
        "LIB": names.library,
        "MODEL": code_span(program.name),
        "STYLE": style,
        "RLX": _core.rlx_version(),
        "INPUTS": ", ".join(code_span(v.name) for v in program.inputs) or "none",
    }
    return fill(template("README.md"), values, "README.md")


def graph_rs(program: Program, ir: TorchIR, style: str) -> tuple[str, bytes]:
    """graph.rs for the `graph`/`flow` styles (identical text), and its constants."""
    body = graph_statements(program, RustNames())
    # Constant tables too large to print inline: a helper reading them from constants.bin, after a blank line.
    constants = []
    if body.constants:
        constants = ["", *fill(_fragment("constants.rs"), {"FILE": CONSTANTS_FILE}, "constants.rs").split("\n")]
    values = {
        "HEADER": _header(program, ir, style),
        "USES": use_lines(body.types),
        "CONSTANTS": constants,
        "INPUTS_ARG": "inputs" if "inputs" in body.reads else "_inputs",
        "PARAMS_ARG": "params" if "params" in body.reads else "_params",
        "BODY": [f"    {line}".rstrip() for line in body.lines],
        "OUTPUTS": ", ".join(body.outputs),
    }
    return fill(template("graph_builder.rs"), values, "graph_builder.rs"), bytes(body.constants)


def tensor_graph_rs(program: Program, ir: TorchIR) -> str:
    """graph.rs for the `tensor` style: a `GraphScope` traced with the Tensor DSL."""
    body = tensor_statements(program, RustNames())
    dsl = ["cat", "GraphScope"] if "cat" in body.types else ["GraphScope"]
    op_types = sorted(body.types - {"cat", "DType", "Shape"})
    values = {
        "HEADER": _header(program, ir, "tensor"),
        "OP_USES": [f"use rlx_ir::op::{{{', '.join(op_types)}}};"] if op_types else [],
        "DSL": ", ".join(dsl),
        "BODY": [f"    {line}".rstrip() for line in body.lines],
        "OUTPUTS": ", ".join(f"{o}.id()" for o in body.outputs),
    }
    return fill(template("graph_tensor.rs"), values, "graph_tensor.rs")


def symbolic_graph_rs(program: Program, ir: TorchIR) -> str:
    """graph.rs of a dynamic model: RLX's symbolic graph, specialized per binding."""
    values = {"HEADER": _header(program, ir, "graph"), "SYMBOLIC_FILE": SYMBOLIC_FILE}
    return fill(template("graph_symbolic.rs"), values, "graph_symbolic.rs")
