"""The torch-ir.json schema: our own versioned, documented record of an exported graph.

See docs/torch-ir.md. Arguments are tagged (`{"int": 3}`, `{"tensor": "x"}`, ...)
so a reader never guesses a type, and non-finite floats are spelled as strings so
the file is strict JSON.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .errors import InputError, TorchIRError
from .symbolic import Dim, Symbol, evaluate, evaluate_shape, free_symbols

FORMAT = "rlx-torch-ir"
VERSION = 3
# Version 1 files (static shapes only) read as version 2 files without symbols.
READABLE_VERSIONS = (1, 2, 3)
FILENAME = "torch-ir.json"
WEIGHTS = "weights.safetensors"
REFERENCE = "reference.safetensors"

ARG_TAGS = (
    "tensor", "int", "float", "bool", "str", "none", "dtype", "list", "device", "layout", "memory_format", "sym",
)  # fmt: skip


@dataclass
class TensorSpec:
    """A named value: its shape (each dim a size, or an expression of symbols such as
    `"s0*8"`; `symbolic.py`) and a torch dtype name."""

    name: str
    shape: list[Dim]
    dtype: str
    # A graph input's place in the model's call: the forward argument, then keys/positions
    # inside it, dot-joined (`attention_mask`, `d.a`, `xs.1`); empty for other values.
    path: str = ""


@dataclass
class WeightSpec:
    """A parameter, buffer or lifted constant; `key` is its `state_dict` name."""

    name: str
    key: str
    kind: str
    shape: list[int]
    dtype: str


@dataclass
class Node:
    """One ATen call. `outputs` has one entry per tensor it returns (tuples flattened)."""

    name: str
    target: str
    args: list[Any]
    kwargs: dict[str, Any]
    outputs: list[TensorSpec]
    module_path: str = ""
    module_type: str = ""
    source: str = ""
    decomposed_from: str = ""
    # Memory layout of tensor arguments, by value name, for ops whose result depends on it
    # (`LAYOUT_SENSITIVE`): {"strides": [...], "storage_offset": n}. Omitted from the file when empty.
    layouts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A size computation (`aten.sym_size.int`, `operator.mul`, ...): the SymInt it gives, as an
    # expression of symbols. Such a node has no tensor outputs; its uses carry `{"sym": expr}`.
    # Omitted from the file when empty.
    sym: str = ""


# Ops that read their input's storage rather than its logical elements; capture records their layouts.
LAYOUT_SENSITIVE = ("aten.as_strided.default", "aten.as_strided_copy.default", "aten.as_strided_scatter.default")


@dataclass
class OutputSpec:
    """A graph output: its public name and the value that carries it."""

    name: str
    value: str
    shape: list[Dim]
    dtype: str


@dataclass
class TorchIR:
    """A whole exported program in our schema."""

    name: str
    decomposition: str
    inputs: list[TensorSpec]
    weights: list[WeightSpec]
    nodes: list[Node]
    outputs: list[OutputSpec]
    producer: dict[str, str] = field(default_factory=dict)
    auto_decomposed: list[str] = field(default_factory=list)
    # The dynamic dims' symbols (empty: every shape is static).
    symbols: list[Symbol] = field(default_factory=list)
    # Dims the user asked to be dynamic that torch.export made static: {"input", "axis", "size", "reason"}.
    specialized: list[dict[str, Any]] = field(default_factory=list)
    # The sweep points verification runs at: {"label", "binding" (torch symbol name -> size),
    # "error" (eager PyTorch's error there, if it raised)}; their inputs and eager outputs are
    # `sweep.<i>.input.<name>` / `sweep.<i>.output.<name>` in reference.safetensors.
    sweep: list[dict[str, Any]] = field(default_factory=list)
    # Leaves of the model's call that are not tensors (Python scalars, strings): torch.export
    # baked them into the graph. {"path", "value"}.
    constant_inputs: list[dict[str, Any]] = field(default_factory=list)
    # The example call's positional arguments, by forward's parameter names; the first part of
    # an input's `path` names one of them or a keyword argument.
    call_args: list[str] = field(default_factory=list)
    # The structure `forward` returns (`frontend.capture.output_tree`): leaves are
    # {"output": name} (an entry of `outputs`), {"constant": value} (a Python value torch.export
    # baked in) or {"size": expr} (an int computed from the input sizes). Empty: a flat list.
    output_tree: dict[str, Any] = field(default_factory=dict)
    # Graph nodes left out of `nodes` because they compute nothing RLX needs: runtime checks
    # torch.export proved or that the binding checks make ({"node", "target", "reason"}).
    dropped: list[dict[str, Any]] = field(default_factory=list)
    # Control-flow operators inlined before capture (`frontend.control_flow`): {"node", "kind", "how"}.
    control_flow: list[dict[str, Any]] = field(default_factory=list)
    # Extra input sets verification runs besides the example (`verify_inputs`): {"label",
    # "description", "error" (eager PyTorch's error on it, or why it cannot run), "values"
    # (Python-value outputs eager PyTorch gave)}; their inputs and eager outputs are
    # `set.<k>.input.<name>` / `set.<k>.output.<name>` in reference.safetensors.
    input_sets: list[dict[str, Any]] = field(default_factory=list)
    # Set by `bind` on the program it returns (never written to the file): the symbolic
    # program's value shapes, its symbols, and the binding.
    symbolic_shapes: dict[str, list[Dim]] = field(default_factory=dict)
    bound_symbols: list[Symbol] = field(default_factory=list)
    binding: dict[str, int] = field(default_factory=dict)

    @property
    def is_dynamic(self) -> bool:
        return bool(self.symbols)

    def to_json(self) -> str:
        """Strict JSON text (no NaN/Infinity tokens)."""
        doc = {"format": FORMAT, "version": VERSION, **asdict(self)}
        for transient in ("symbolic_shapes", "bound_symbols", "binding"):
            del doc[transient]
        for spec in [*doc["inputs"], *(o for node in doc["nodes"] for o in node["outputs"])]:
            if not spec["path"]:
                del spec["path"]
        for node in doc["nodes"]:
            if not node["layouts"]:
                del node["layouts"]
            if not node["sym"]:
                del node["sym"]
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"

    def bind(self, values: dict[str, int]) -> TorchIR:
        """This program at one binding (torch symbol name -> size): every shape and SymInt
        argument evaluated, size-computation nodes dropped, no symbols left. Each node's
        symbolic output shapes stay readable through `symbolic_shapes` (value name -> dims)."""
        if not self.symbols:
            return self

        def arg(a: dict[str, Any]) -> dict[str, Any]:
            tag, payload = next(iter(a.items()))
            if tag == "sym":
                return {"int": evaluate(payload, values)}
            if tag == "list":
                return {"list": [arg(x) for x in payload]}
            return a

        def spec(t: TensorSpec) -> TensorSpec:
            return TensorSpec(t.name, evaluate_shape(t.shape, values), t.dtype, t.path)

        nodes = [
            Node(
                n.name,
                n.target,
                [arg(a) for a in n.args],
                {k: arg(a) for k, a in n.kwargs.items()},
                [spec(o) for o in n.outputs],
                n.module_path,
                n.module_type,
                n.source,
                n.decomposed_from,
                n.layouts,
            )
            for n in self.nodes
            if not n.sym
        ]
        bound = TorchIR(
            name=self.name,
            decomposition=self.decomposition,
            inputs=[spec(s) for s in self.inputs],
            weights=self.weights,
            nodes=nodes,
            outputs=[OutputSpec(o.name, o.value, evaluate_shape(o.shape, values), o.dtype) for o in self.outputs],
            producer=self.producer,
            auto_decomposed=self.auto_decomposed,
            constant_inputs=self.constant_inputs,
            call_args=self.call_args,
            output_tree=self.output_tree,
            dropped=self.dropped,
            control_flow=self.control_flow,
            input_sets=self.input_sets,
            symbolic_shapes=self.value_shapes(),
            bound_symbols=list(self.symbols),
            binding=dict(values),
        )
        return bound

    def value_shapes(self) -> dict[str, list[Dim]]:
        """Every tensor value's shape (inputs, weights, node outputs) by name."""
        shapes: dict[str, list[Dim]] = {s.name: list(s.shape) for s in self.inputs}
        shapes.update({w.name: list(w.shape) for w in self.weights})
        for n in self.nodes:
            shapes.update({o.name: list(o.shape) for o in n.outputs})
        return shapes

    def save(self, directory: Path) -> Path:
        path = directory / FILENAME
        path.write_text(self.to_json())
        return path


def encode_float(value: float) -> dict[str, Any]:
    """Tag a float; non-finite values become strings so the file stays strict JSON."""
    if math.isnan(value):
        return {"float": "nan"}
    if math.isinf(value):
        return {"float": "inf" if value > 0 else "-inf"}
    return {"float": value}


def decode_float(tagged: Any) -> float:
    """Inverse of `encode_float` on the tag's payload."""
    if isinstance(tagged, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[tagged]
    return float(tagged)


def _need(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in doc:
        raise TorchIRError(f"{where}: missing field {key!r}")
    value = doc[key]
    if not isinstance(value, kind):
        raise TorchIRError(f"{where}: field {key!r} has type {type(value).__name__}")
    return value


def _check_expr(expr: str, symbols: set[str], where: str) -> None:
    """A size expression must parse and use only declared symbols."""
    try:
        unknown = free_symbols(expr) - symbols
    except InputError as e:
        raise TorchIRError(f"{where}: {e.message}") from None
    if unknown:
        raise TorchIRError(f"{where}: size expression {expr!r} uses undeclared symbol(s) {', '.join(sorted(unknown))}")


def _spec(doc: Any, where: str, symbols: set[str] | None = None) -> TensorSpec:
    if not isinstance(doc, dict):
        raise TorchIRError(f"{where}: expected an object")
    shape = _need(doc, "shape", list, where)
    for d in shape:
        if isinstance(d, str) and symbols:
            _check_expr(d, symbols, f"{where}.shape")
        elif not (isinstance(d, int) and not isinstance(d, bool) and d >= 0):
            raise TorchIRError(
                f"{where}: field 'shape' must list non-negative ints"
                + (" or size expressions of the declared symbols" if symbols else "")
            )
    path = doc.get("path", "")
    if not isinstance(path, str):
        raise TorchIRError(f"{where}: field 'path' must be a string")
    return TensorSpec(_need(doc, "name", str, where), shape, _need(doc, "dtype", str, where), path)


def _symbols(doc: Any, source: str) -> list[Symbol]:
    found = []
    for i, d in enumerate(doc):
        where = f"{source}: symbols[{i}]"
        if not isinstance(d, dict):
            raise TorchIRError(f"{where}: expected an object")
        hi = d.get("max")
        if hi is not None and not isinstance(hi, int):
            raise TorchIRError(f"{where}: field 'max' must be an int or null")
        sym = Symbol(
            _need(d, "id", int, where), _need(d, "name", str, where), _need(d, "label", str, where),
            _need(d, "min", int, where), hi, _need(d, "example", int, where),
        )  # fmt: skip
        if not sym.name.isidentifier() or (hi is not None and not sym.min <= sym.example <= hi):
            raise TorchIRError(f"{where}: symbol {sym.name!r} is not a name with min <= example <= max")
        found.append(sym)
    return found


def _layouts(doc: Any, where: str) -> dict[str, dict[str, Any]]:
    """The optional `layouts` of a node: value name -> {"strides": [int], "storage_offset": int}."""
    if not isinstance(doc, dict):
        raise TorchIRError(f"{where}: field 'layouts' must be an object")
    for name, layout in doc.items():
        at = f"{where}.layouts[{name!r}]"
        if not isinstance(layout, dict):
            raise TorchIRError(f"{at}: expected an object")
        strides = _need(layout, "strides", list, at)
        if not all(isinstance(s, int) for s in strides):
            raise TorchIRError(f"{at}: field 'strides' must be a list of ints")
        _need(layout, "storage_offset", int, at)
    return doc


def _check_arg(arg: Any, where: str, symbols: set[str]) -> None:
    if not (isinstance(arg, dict) and len(arg) == 1):
        raise TorchIRError(f"{where}: argument {arg!r} is not a tagged value like {{'int': 3}}")
    tag, payload = next(iter(arg.items()))
    if tag not in ARG_TAGS:
        raise TorchIRError(f"{where}: unknown argument tag {tag!r}")
    if tag == "sym":
        if not isinstance(payload, str):
            raise TorchIRError(f"{where}: a 'sym' argument is a size expression string")
        _check_expr(payload, symbols, where)
    if tag == "list":
        for i, item in enumerate(payload):
            _check_arg(item, f"{where}[{i}]", symbols)


def parse(doc: Any, source: str = FILENAME) -> TorchIR:
    """Validate a decoded torch-ir document; errors name the file and field."""
    if not isinstance(doc, dict):
        raise TorchIRError(f"{source}: top level must be an object")
    if doc.get("format") != FORMAT:
        raise TorchIRError(f"{source}: field 'format' is {doc.get('format')!r}, expected {FORMAT!r}")
    version = doc.get("version")
    if version not in READABLE_VERSIONS:
        raise TorchIRError(
            f"{source}: torch-ir version {version!r} is not supported (this build reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))})",
            hint="re-export the model with this version of rlx-torch-import",
        )
    symbols = _symbols(doc.get("symbols", []), source)
    names = {s.name for s in symbols}
    inputs = [_spec(d, f"{source}: inputs[{i}]", names) for i, d in enumerate(_need(doc, "inputs", list, source))]
    weights = []
    for i, d in enumerate(_need(doc, "weights", list, source)):
        spec = _spec(d, f"{source}: weights[{i}]")
        where = f"{source}: weights[{i}]"
        weights.append(
            WeightSpec(spec.name, _need(d, "key", str, where), _need(d, "kind", str, where), spec.shape, spec.dtype)
        )
    nodes = []
    for i, d in enumerate(_need(doc, "nodes", list, source)):
        where = f"{source}: nodes[{i}]"
        if not isinstance(d, dict):
            raise TorchIRError(f"{where}: expected an object")
        args = _need(d, "args", list, where)
        kwargs = _need(d, "kwargs", dict, where)
        for j, a in enumerate(args):
            _check_arg(a, f"{where}.args[{j}]", names)
        for k, a in kwargs.items():
            _check_arg(a, f"{where}.kwargs[{k!r}]", names)
        outs = [_spec(o, f"{where}.outputs[{j}]", names) for j, o in enumerate(_need(d, "outputs", list, where))]
        sym = d.get("sym", "")
        if sym:
            _check_expr(sym, names, f"{where}.sym")
        nodes.append(
            Node(
                name=_need(d, "name", str, where),
                target=_need(d, "target", str, where),
                args=args,
                kwargs=kwargs,
                outputs=outs,
                module_path=d.get("module_path", ""),
                module_type=d.get("module_type", ""),
                source=d.get("source", ""),
                decomposed_from=d.get("decomposed_from", ""),
                layouts=_layouts(d.get("layouts", {}), where),
                sym=sym,
            )
        )
    outputs = []
    for i, d in enumerate(_need(doc, "outputs", list, source)):
        spec = _spec(d, f"{source}: outputs[{i}]", names)
        outputs.append(OutputSpec(spec.name, _need(d, "value", str, f"{source}: outputs[{i}]"), spec.shape, spec.dtype))
    ir = TorchIR(
        name=_need(doc, "name", str, source),
        decomposition=_need(doc, "decomposition", str, source),
        inputs=inputs,
        weights=weights,
        nodes=nodes,
        outputs=outputs,
        producer=doc.get("producer", {}),
        auto_decomposed=list(doc.get("auto_decomposed", [])),
        symbols=symbols,
        specialized=list(doc.get("specialized", [])),
        sweep=list(doc.get("sweep", [])),
        constant_inputs=list(doc.get("constant_inputs", [])),
        call_args=list(doc.get("call_args", [])),
        output_tree=dict(doc.get("output_tree", {})),
        dropped=list(doc.get("dropped", [])),
        control_flow=list(doc.get("control_flow", [])),
        input_sets=list(doc.get("input_sets", [])),
    )
    _check_wiring(ir, source)
    return ir


def _check_wiring(ir: TorchIR, source: str) -> None:
    """Every tensor argument and output must name a value defined earlier."""
    defined = {s.name for s in ir.inputs} | {w.name for w in ir.weights}

    def walk(arg: dict[str, Any], where: str) -> None:
        tag, payload = next(iter(arg.items()))
        if tag == "tensor" and payload not in defined:
            raise TorchIRError(f"{where}: tensor {payload!r} is used before it is defined")
        if tag == "list":
            for item in payload:
                walk(item, where)

    for i, node in enumerate(ir.nodes):
        where = f"{source}: nodes[{i}] ({node.name})"
        for a in node.args:
            walk(a, where)
        for a in node.kwargs.values():
            walk(a, where)
        defined.update(o.name for o in node.outputs)
    for i, out in enumerate(ir.outputs):
        if out.value not in defined:
            raise TorchIRError(f"{source}: outputs[{i}]: value {out.value!r} is not defined")


def load(directory: Path) -> TorchIR:
    """Read and validate `<directory>/torch-ir.json`."""
    path = Path(directory) / FILENAME
    if not path.is_file():
        raise TorchIRError(f"{path}: not found", hint="point at a directory written by rlx-torch-import")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise TorchIRError(f"{path}: not valid JSON ({e})") from None
    return parse(doc, str(path))
