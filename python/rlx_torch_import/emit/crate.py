"""Write `rlx-<name>/`: a standalone Rust crate that builds, runs and checks the model.

The crate is printed from the same lowered program the bundle is built from.
`graph` and `flow` share one emitter (`crate_graph`), which prints each RLX op
through the Rust core; `tensor` uses the rlx-tensor DSL (`crate_tensor`) and
refuses up front any op the DSL cannot express. The fixed Rust files (weights
loading, boundary dtypes, parity budgets) live in `crate_files/`.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .. import __version__, _core
from ..dtypes import to_rlx
from ..errors import ExitCode, RtiError
from ..layout import REFERENCE, sweep_prefix
from ..outdir import copy_file, refused_write_in, write_bytes, write_failure, write_text
from ..program import Program
from ..symbolic import evaluate, free_symbols, line_of, values_of
from ..torchir import TorchIR
from ..verify.parity import float_budgets
from .crate_graph import CONSTANTS_FILE, Statements, graph_statements, use_lines
from .crate_lock import lock_for
from .crate_tensor import tensor_statements, unsupported_ops
from .rust_names import RustNames, code_span, comment, fill, rust_str, shorten

STYLES = ("graph", "tensor", "flow")


class CrateStyleError(RtiError):
    """The chosen crate style cannot express the model; names the op and a style that can."""

    exit_code = ExitCode.UNSUPPORTED


@dataclass(frozen=True)
class CrateNames:
    """`rlx-<name>` (package and folder) and `rlx_<name>` (library)."""

    package: str
    library: str


# Longest slug of the model name in a crate's names: the folder `rlx-<slug>` and its staging
# folder `.rlx-<slug>.partial-XXXXXXXX` stay far below every file system's 255-byte limit.
MAX_SLUG = 64


def crate_names(model_name: str) -> CrateNames:
    """Cargo-valid names from any model name: lowercase ASCII letters and digits joined by `-`
    (package and folder) or `_` (library), so no path separator, `..`, quote or keyword survives;
    at most MAX_SLUG characters of it (a longer name keeps its start and gets a hash of the whole)."""
    slug = re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_") or "model"
    slug = shorten(slug, model_name, MAX_SLUG)
    return CrateNames(package="rlx-" + slug.replace("_", "-"), library="rlx_" + slug)


def check_style(program: Program, style: str, dynamic: bool = False) -> None:
    """Fail before anything is written when `style` cannot express the program."""
    if style not in STYLES:
        raise CrateStyleError(f"crate style {style!r} is not one of {', '.join(STYLES)}")
    if dynamic and style != "graph":
        raise CrateStyleError(
            f"a model with dynamic dims is written as a graph-style crate only (asked for {style!r}): it "
            "specializes RLX's symbolic graph per binding, which the tensor DSL and rlx_flow cannot express",
            hint="use --emit-style graph, or export with static shapes for the tensor and flow styles",
        )
    if style == "tensor":
        missing = unsupported_ops(program)
        if missing:
            listed = "; ".join(f"{op} (needed by {where})" for op, where in sorted(missing.items()))
            raise CrateStyleError(
                f"the rlx_tensor DSL has no method for {len(missing)} RLX op(s) this model needs: {listed}",
                hint="use --emit-style graph (or flow), which print every op the registry emits",
            )


def _template(name: str) -> str:
    return resources.files(__package__).joinpath(f"crate_files/{name}").read_text(encoding="utf-8")


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
    return fill(_template("host.rs"), {"FLOAT_BUDGETS": "\n".join(rows)}, "host.rs")


def _header(program: Program, ir: TorchIR, style: str) -> list[str]:
    """Provenance lines: model, producer, versions, ATen histogram."""
    lines = [
        f"Model {code_span(program.name)}, converted from PyTorch by rlx-torch-import {__version__}",
        f"(torch {comment(str(ir.producer.get('torch', '?')))}, RLX {_core.rlx_version()}, "
        f"decomposition {code_span(ir.decomposition)}, style `{style}`).",
        "",
        "ATen ops in the source graph:",
    ]
    lines += [f"- {code_span(op)} x {n}" for op, n in program.aten_histogram().items()]
    lines += ["", "Generated file: regenerate it rather than editing it, or own it from here on."]
    return lines


def _doc(lines: list[str], marker: str) -> str:
    return "\n".join(f"{marker} {line}".rstrip() for line in lines)


def _dims(dims: tuple[int, ...] | list[int]) -> str:
    return f"&[{', '.join(map(str, dims))}]"


def _symbol_specs(ir: TorchIR) -> list[str]:
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
    return [
        "",
        "/// The dynamic dims' symbols: RLX symbol number, name, and inclusive range (max None: unbounded).",
        "pub const SYMBOLS: &[Symbol] = &[",
        *symbols,
        "];",
        "",
        "/// Input axes whose size is `scale * symbol + offset`: (input index, axis, symbol number, scale,",
        "/// offset); the binding is read from them.",
        "pub const SYMBOL_AXES: &[(usize, usize, u32, i64, i64)] = &[",
        *axes,
        "];",
        "",
        "/// Key prefixes of the sweep points recorded in the reference file (`check_reference_at`).",
        "pub const SWEEP: &[&str] = &[",
        *sweep,
        "];",
    ]


def _specs(program: Program, ir: TorchIR) -> str:
    """INPUTS, OUTPUTS and PARAMS constants (dims at the example sizes), and a dynamic
    program's SYMBOLS, SYMBOL_AXES and SWEEP."""
    examples = ir.bind(values_of(ir.symbols)) if ir.is_dynamic else ir
    symbolic = (
        _symbol_specs(ir)
        if ir.is_dynamic
        else ["", "/// No sweep points: every dim is static.", "pub const SWEEP: &[&str] = &[];"]
    )
    ir = examples

    def tensor_spec(name: str, dims: list[int] | tuple[int, ...], dtype: str, carrier: str) -> str:
        return (
            f"    TensorSpec {{ name: {rust_str(name)}, dims: {_dims(dims)}, dtype: {rust_str(dtype)}, "
            f"carrier: DType::{carrier} }},"
        )

    decl = {v.name: v for v in program.inputs}
    inputs = [tensor_spec(s.name, s.shape, s.dtype, decl[s.name].dtype) for s in ir.inputs]
    outputs = [
        tensor_spec(o.name, o.shape, o.dtype, "F32" if o.name in program.carried_outputs else to_rlx(o.dtype))
        for o in ir.outputs
    ]
    params = [
        f"    ParamSpec {{ name: {rust_str(p.name)}, dims: {_dims(p.dims)}, dtype: DType::{p.dtype} }},"
        for p in program.params
    ]
    return "\n".join(
        [
            "/// Graph inputs, in call order (PyTorch dtype, and the dtype that carries it into RLX).",
            "pub const INPUTS: &[TensorSpec] = &[",
            *inputs,
            "];",
            "",
            "/// Graph outputs, in order.",
            "pub const OUTPUTS: &[TensorSpec] = &[",
            *outputs,
            "];",
            "",
            "/// Parameters by `state_dict` name, in declaration order, with the dtype the graph computes them in.",
            "pub const PARAMS: &[ParamSpec] = &[",
            *params,
            "];",
            *symbolic,
        ]
    )


def _constants_helper(body: Statements) -> list[str]:
    if not body.constants:
        return []
    return [
        "",
        f"/// Constant tables too large to print inline (`{CONSTANTS_FILE}`, written with this file).",
        f'static CONSTANTS: &[u8] = include_bytes!("{CONSTANTS_FILE}");',
        "",
        "fn constant(offset: usize, len: usize) -> Vec<u8> {",
        "    CONSTANTS[offset..offset + len].to_vec()",
        "}",
    ]


def _graph_rs(program: Program, ir: TorchIR, style: str) -> tuple[str, bytes]:
    """graph.rs for the `graph`/`flow` styles (identical text), and its constants."""
    body = graph_statements(program, RustNames())
    uses = use_lines(body.types)
    ins = "inputs" if "inputs" in body.reads else "_inputs"
    prm = "params" if "params" in body.reads else "_params"
    lines = [
        _doc(_header(program, ir, style), "//!"),
        "//!",
        "//! The graph on RLX's HIR builder: one `add_node` per RLX node, each under a",
        "//! comment naming the ATen op, module path and source line it came from.",
        "",
        "use rlx_ir::hir::{HirGraphExt, HirModule, HirMut, HirNodeId};",
        *uses,
        "",
        "use crate::{INPUTS, NAME, PARAMS};",
        *_constants_helper(body),
        "",
        "/// The whole model as a HIR module: inputs, parameters, nodes and outputs.",
        "pub fn build() -> HirModule {",
        "    let mut hir = HirModule::new(NAME);",
        "    let mut g = HirMut::new(&mut hir);",
        "    let inputs: Vec<HirNodeId> = INPUTS",
        "        .iter()",
        "        .map(|s| g.input(s.name, Shape::new(s.dims, s.carrier)))",
        "        .collect();",
        "    let params: Vec<HirNodeId> = PARAMS",
        "        .iter()",
        "        .map(|s| g.param(s.name, Shape::new(s.dims, s.dtype)))",
        "        .collect();",
        "    let outputs = emit(&mut g, &inputs, &params);",
        "    g.set_outputs(outputs);",
        "    hir",
        "}",
        "",
        "/// Emit every node onto `g`. `inputs` and `params` are the declared graph",
        "/// inputs and parameters in `INPUTS` / `PARAMS` order; returns the outputs",
        "/// in `OUTPUTS` order.",
        f"pub fn emit(g: &mut HirMut<'_>, {ins}: &[HirNodeId], {prm}: &[HirNodeId]) -> Vec<HirNodeId> {{",
        *[f"    {line}".rstrip() for line in body.lines],
        "",
        f"    vec![{', '.join(body.outputs)}]",
        "}",
        "",
    ]
    return "\n".join(lines), bytes(body.constants)


def _tensor_graph_rs(program: Program, ir: TorchIR) -> str:
    """graph.rs for the `tensor` style: a `GraphScope` traced with the Tensor DSL."""
    body = tensor_statements(program, RustNames())
    dsl = ["cat", "GraphScope"] if "cat" in body.types else ["GraphScope"]
    op_types = sorted(body.types - {"cat", "DType", "Shape"})
    lines = [
        _doc(_header(program, ir, "tensor"), "//!"),
        "//!",
        "//! The graph written with the `rlx_tensor::Tensor` DSL: one statement per RLX",
        "//! node, each under a comment naming the ATen op, module path and source line.",
        "",
        *([f"use rlx_ir::op::{{{', '.join(op_types)}}};"] if op_types else []),
        "use rlx_ir::{DType, Graph, Shape};",
        f"use rlx_tensor::{{{', '.join(dsl)}}};",
        "",
        "use crate::NAME;",
        "",
        "/// The whole model as an RLX graph.",
        "pub fn build() -> Graph {",
        "    let mut s = GraphScope::new(NAME);",
        *[f"    {line}".rstrip() for line in body.lines],
        "",
        f"    s.set_outputs([{', '.join(f'{o}.id()' for o in body.outputs)}]);",
        "    s.finish()",
        "}",
        "",
    ]
    return "\n".join(lines)


_LOAD = {
    "graph": """\
        let mut graph = Session::new(device)
            .compile_hir_with(graph::build(), &compile_options())
            .map_err(|e| format!("RLX could not compile {NAME}: {e:?}"))?;
        for (spec, t) in &tensors {
            graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
        }
        Ok(Self { graph })""",
    "tensor": """\
        let mut graph = Session::new(device).compile_with(graph::build(), &compile_options());
        for (spec, t) in &tensors {
            graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
        }
        Ok(Self { graph })""",
    "flow": """\
        let mut f32_weights = MapWeights::default();
        let mut typed = Vec::new();
        for (spec, t) in tensors {
            if spec.dtype == DType::F32 {
                let values = t.to_f64().into_iter().map(|v| v as f32).collect();
                f32_weights.insert(spec.name, values, t.dims.clone());
            } else {
                typed.push((spec, t));
            }
        }
        let built = flow::build(&mut f32_weights).map_err(|e| format!("building the flow of {NAME}: {e}"))?;
        let (hir, params) = built.into_parts().map_err(|e| format!("{NAME}: {e}"))?;
        let mut graph = Session::new(device)
            .compile_hir_with(hir, &compile_options())
            .map_err(|e| format!("RLX could not compile {NAME}: {e:?}"))?;
        for (name, data) in &params {
            graph.set_param(name, data);
        }
        for (spec, t) in &typed {
            graph.set_param_typed(spec.name, &t.data, host::rlx_dtype(&t.dtype).expect("checked on load"));
        }
        Ok(Self { graph })""",
}

_RUNTIME_USES = "use rlx_ir::DType;\nuse rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};"
_IMPORTS = {
    "graph": _RUNTIME_USES,
    "tensor": _RUNTIME_USES,
    "flow": "use rlx_flow::MapWeights;\n" + _RUNTIME_USES,
}


_DYNAMIC_IMPORTS = (
    "use rlx_ir::{DType, Graph};\nuse rlx_runtime::{CompileOptions, CompiledGraph, Device, FusionOptions, Session};"
)


def _lib_rs(program: Program, ir: TorchIR, style: str) -> str:
    header = [
        *_header(program, ir, style),
        "",
        "`Model::load(weights)` builds and compiles the graph and binds the weights;",
        "`Model::run` runs it. `cargo test --release` checks the outputs against PyTorch.",
    ]
    if ir.is_dynamic:
        model = fill(_template("model_dynamic.rs"), {}, "model_dynamic.rs")
    else:
        model = fill(_template("model_static.rs"), {"LOAD": _LOAD[style]}, "model_static.rs")
    # The core's CUDA check of this graph (float64, integer constants float32 cannot hold), made now
    # so the crate refuses `Device::Cuda` with the same message `--device cuda` gives.
    refusal = _core.cuda_refusal(_core.program_to_hir_json(program.to_core_json()))
    values = {
        "HEADER": _doc(header, "//!"),
        "CUDA_REFUSAL": f"Some({rust_str(refusal)})" if refusal else "None",
        # the core's strict float32 settings (src/device.rs), so the crate computes what the bundle verified
        "CUDA_STRICT": "[" + ", ".join(f"({rust_str(k)}, {rust_str(v)})" for k, v in _core.CUDA_STRICT_SETTINGS) + "]",
        "MODS": "pub mod flow;\n" if style == "flow" else "",
        "IMPORTS": _DYNAMIC_IMPORTS if ir.is_dynamic else _IMPORTS[style],
        "NAME": rust_str(program.name),
        "SPECS": _specs(program, ir),
        "MODEL": model,
    }
    return fill(_template("lib.rs"), values, "lib.rs")


def _cargo_toml(names: CrateNames, program: Program, ir: TorchIR, style: str) -> str:
    rlx = _core.rlx_version()
    deps = [
        f'rlx-ir = "={rlx}"',
        f'rlx-runtime = {{ version = "={rlx}", default-features = false, features = ["cpu"] }}',
        f'rlx-cuda = {{ version = "={rlx}", optional = true }}',
        'serde_json = "1"',
    ]
    if style == "flow":
        deps += [f'rlx-flow = "={rlx}"', 'anyhow = "1"']
    if style == "tensor":
        deps.append(f'rlx-tensor = {{ version = "={rlx}", default-features = false }}')
    return "\n".join(
        [
            f"# Generated by rlx-torch-import {__version__} from `{comment(program.name)}` "
            f"(torch {comment(str(ir.producer.get('torch', '?')))}, RLX {rlx}, style {style}).",
            "# RLX crates are pinned exactly: RLX changes its API between patch releases.",
            "[package]",
            f'name = "{names.package}"',
            'version = "0.1.0"',
            'edition = "2024"',
            'rust-version = "1.89"',
            "publish = false",
            "",
            "[features]",
            "# RLX's CUDA backend: `Model::load_on(weights, Device::Cuda)`, or RLX_TORCH_IMPORT_DEVICE=cuda",
            "# (needs the NVIDIA driver where it runs; no CUDA toolkit to build).",
            'cuda = ["rlx-runtime/cuda", "dep:rlx-cuda"]',
            "",
            "[dependencies]",
            *sorted(deps),
            "",
            "[profile.release]",
            "debug = false",
            "",
        ]
    )


def _readme(names: CrateNames, program: Program, style: str) -> str:
    values = {
        "PACKAGE": names.package,
        "LIB": names.library,
        "MODEL": code_span(program.name),
        "STYLE": style,
        "RLX": _core.rlx_version(),
        "INPUTS": ", ".join(code_span(v.name) for v in program.inputs) or "none",
    }
    return fill(_template("README.md"), values, "README.md")


def _symbolic_graph_rs(program: Program, ir: TorchIR) -> str:
    """graph.rs of a dynamic model: RLX's symbolic graph, specialized per binding."""
    return "\n".join(
        [
            _doc(_header(program, ir, "graph"), "//!"),
            "//!",
            "//! The model has dynamic dims, so the graph is RLX's symbolic graph (`model.rlxmodel`,",
            "//! written at conversion: one node per RLX op, each named after its ATen op and",
            "//! module path), made static for one binding of the symbols by `build`.",
            "",
            "use rlx_ir::Graph;",
            "",
            "/// The symbolic graph as RLX's `.rlxmodel` text.",
            f'pub const SYMBOLIC: &str = include_str!("{SYMBOLIC_FILE}");',
            "",
            "/// The symbolic graph, read from [`SYMBOLIC`].",
            "pub fn symbolic() -> Result<Graph, String> {",
            '    rlx_ir::rlxmodel::from_text(SYMBOLIC).map_err(|e| format!("{}: {e}", crate::NAME))',
            "}",
            "",
            "/// The static graph at `binding` (symbol number, size): every dim and shape attribute",
            "/// evaluated (`rlx_ir::dynamic::specialize`).",
            "pub fn build(symbolic: &Graph, binding: &[(u32, usize)]) -> Result<Graph, String> {",
            "    let sizes: rlx_ir::DimBinding = binding.iter().copied().collect();",
            "    let graph = rlx_ir::dynamic::specialize(symbolic, &sizes);",
            "    match graph.nodes().iter().find(|n| !n.shape.is_static()) {",
            '        Some(n) => Err(format!("node {} keeps a dynamic dim at {binding:?}", n.id)),',
            "        None => Ok(graph),",
            "    }",
            "}",
            "",
        ]
    )


SYMBOLIC_FILE = "model.rlxmodel"


def write_crate(
    program: Program, ir: TorchIR, reference: Path, root: Path, style: str = "graph", rlxmodel: str | None = None
) -> Path:
    """Write the crate into `root` (conventionally `OUT/rlx-<name>/`) and return it. A dynamic
    program (`ir.symbols`) needs its symbolic graph, `rlxmodel`, and the graph style."""
    check_style(program, style, ir.is_dynamic)
    if ir.is_dynamic and rlxmodel is None:
        raise RtiError("a dynamic program's crate needs its symbolic graph (rlxmodel)")
    names = crate_names(program.name)
    (root / "src").mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {
        "Cargo.toml": _cargo_toml(names, program, ir, style),
        "Cargo.lock": lock_for(style, names.package),
        "README.md": _readme(names, program, style),
        "src/lib.rs": _lib_rs(program, ir, style),
        "src/host.rs": host_rs(),
        "src/weights.rs": _template("weights.rs"),
        "examples/run.rs": fill(_template("run_example.rs"), {"LIB": names.library}, "run_example.rs"),
        "tests/parity.rs": fill(_template("parity_test.rs"), {"LIB": names.library}, "parity_test.rs"),
    }
    if rlxmodel is not None:
        files["src/graph.rs"] = _symbolic_graph_rs(program, ir)
        files[f"src/{SYMBOLIC_FILE}"] = rlxmodel
    elif style == "tensor":
        files["src/graph.rs"] = _tensor_graph_rs(program, ir)
    else:
        files["src/graph.rs"], constants = _graph_rs(program, ir, style)
        if constants:
            write_bytes(root / "src" / CONSTANTS_FILE, constants)
    if style == "flow":
        files["src/flow.rs"] = _template("flow.rs")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
    (root / "testdata").mkdir(exist_ok=True)
    copy_file(reference, root / "testdata" / REFERENCE)
    if not rustfmt(root):
        warnings.warn("rustfmt is not installed: the generated crate is valid but not formatted", stacklevel=2)
    return root


def rustfmt(root: Path) -> bool:
    """Format the crate's sources with rustfmt when it is installed; returns whether it ran."""
    exe = shutil.which("rustfmt")
    if exe is None:
        return False
    sources = sorted(str(p) for p in root.rglob("*.rs"))
    result = subprocess.run([exe, "--edition", "2024", *sources], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        refused = refused_write_in(result.stderr)  # rustfmt rewrites the files in place
        if refused is not None:
            raise write_failure(root, refused)
        raise RtiError(f"rustfmt rejected the generated crate in {root}: {result.stderr.strip()}")
    return True
