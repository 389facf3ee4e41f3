"""The torch-ir.json schema: our own versioned, documented record of an exported graph.

See docs/torch-ir.md. Arguments are tagged (`{"int": 3}`, `{"tensor": "x"}`, ...)
so a reader never guesses a type, and non-finite floats are spelled as strings so
the file is strict JSON.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import jsondoc
from .errors import BundleError, InputError, RtiError, TorchIRError
from .layout import TORCH_IR
from .limits import check_dtype, check_tensor_size, is_dim, short
from .outdir import write_text
from .symbolic import Dim, Symbol, evaluate, evaluate_shape, free_symbols

FORMAT = "rlx-torch-ir"
VERSION = 3
# Version 1 files (static shapes only) read as version 2 files without symbols.
READABLE_VERSIONS = (1, 2, 3)

# The export levels (`frontend.export.DECOMPOSITION_LEVELS`) and the weight kinds capture writes.
DECOMPOSITIONS = ("aten", "high", "core")
WEIGHT_KINDS = ("parameter", "buffer", "constant")

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
    # The file this program was read from (set by `parse`; never written), for error messages.
    origin: str = ""

    @property
    def is_dynamic(self) -> bool:
        return bool(self.symbols)

    def to_json(self) -> str:
        """Strict JSON text (no NaN/Infinity tokens)."""
        doc = {"format": FORMAT, "version": VERSION, **asdict(self)}
        for transient in ("symbolic_shapes", "bound_symbols", "binding", "origin"):
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

    def declared(self) -> list[tuple[str, TensorSpec | WeightSpec | OutputSpec]]:
        """Every declared tensor with its field path in the file (`nodes[3].outputs[0]`)."""
        found: list[tuple[str, TensorSpec | WeightSpec | OutputSpec]] = []
        found += [(f"inputs[{i}]", s) for i, s in enumerate(self.inputs)]
        found += [(f"weights[{i}]", w) for i, w in enumerate(self.weights)]
        for i, n in enumerate(self.nodes):
            found += [(f"nodes[{i}].outputs[{j}]", o) for j, o in enumerate(n.outputs)]
        found += [(f"outputs[{i}]", o) for i, o in enumerate(self.outputs)]
        return found

    def bind(self, values: dict[str, int]) -> TorchIR:
        """This program at one binding (torch symbol name -> size): every shape and SymInt
        argument evaluated, size-computation nodes dropped, no symbols left. Each node's
        symbolic output shapes stay readable through `symbolic_shapes` (value name -> dims).

        Raises TorchIRError naming the file, field and binding when a shape evaluates to a
        negative size or to a tensor larger than this machine's memory (`limits`), before anything
        is lowered at that binding."""
        if not self.symbols:
            return self
        at = ", ".join(f"{k}={v}" for k, v in values.items())
        checked: set[tuple[tuple[Dim, ...], str]] = set()  # each distinct shape and dtype once
        for where, declared in self.declared():
            key = (tuple(declared.shape), declared.dtype)
            if declared.dtype == "none" or all(isinstance(d, int) for d in declared.shape) or key in checked:
                continue
            checked.add(key)
            sizes = evaluate_shape(declared.shape, values)
            field_path = f"{self.origin or TORCH_IR}: {where}.shape"
            if any(d < 0 for d in sizes):
                raise TorchIRError(f"{field_path}: {short(declared.shape)} is {sizes} at {at}: a negative size")
            check_tensor_size(sizes, declared.dtype, f"{field_path} {short(declared.shape)} at {at} ({sizes})",
                              TorchIRError)  # fmt: skip

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
            origin=self.origin,
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
        path = directory / TORCH_IR
        write_text(path, self.to_json())
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
    return jsondoc.need(doc, key, kind, where, TorchIRError)


def _typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    """`value` if it has JSON type `kind` (a bool is not an int here), else a TorchIRError naming `where`."""
    return jsondoc.typed(value, kind, where, TorchIRError)


def _optional(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any) -> Any:
    return _typed(doc[key], kind, f"{where}.{key}") if key in doc else default


def _check_expr(expr: str, symbols: set[str], where: str) -> None:
    """A size expression must parse and use only declared symbols."""
    try:
        unknown = free_symbols(expr) - symbols
    except InputError as e:
        raise TorchIRError(f"{where}: {e.message}") from None
    if unknown:
        raise TorchIRError(f"{where}: size expression {expr!r} uses undeclared symbol(s) {', '.join(sorted(unknown))}")


def _spec(doc: Any, where: str, symbols: set[str] | None = None, *, none_ok: bool = False) -> TensorSpec:
    """A `{"name", "shape", "dtype", "path"?}` object: dims non-negative ints (or, with `symbols`,
    size expressions of them), a torch dtype name (`"none"` with shape [] where `none_ok`: a node's
    non-tensor result). Sizes are checked by `_check_sizes` once the symbols are known."""
    if not isinstance(doc, dict):
        raise TorchIRError(f"{where}: expected an object, found {short(doc)}")
    name = _need(doc, "name", str, where)
    shape = _need(doc, "shape", list, where)
    for k, d in enumerate(shape):
        if isinstance(d, str) and symbols:
            _check_expr(d, symbols, f"{where}.shape[{k}]")
        elif not is_dim(d):
            raise TorchIRError(
                f"{where}.shape[{k}]: {short(d)} is not a size (a non-negative int"
                + (" or a size expression of the declared symbols)" if symbols else ")")
            )
    dtype = _need(doc, "dtype", str, where)
    if dtype == "none" and none_ok:
        if shape:
            raise TorchIRError(f"{where}.shape: a non-tensor result (dtype 'none') has shape [], found {short(shape)}")
    else:
        check_dtype(dtype, f"{where}.dtype", TorchIRError)
    return TensorSpec(name, shape, dtype, _optional(doc, "path", str, where, ""))


def _symbols(doc: Any, source: str) -> list[Symbol]:
    found = []
    seen: dict[tuple[str, Any], int] = {}
    for i, d in enumerate(_typed(doc, list, f"{source}: symbols")):
        where = f"{source}: symbols[{i}]"
        if not isinstance(d, dict):
            raise TorchIRError(f"{where}: expected an object, found {short(d)}")
        hi = d.get("max")
        if hi is not None:
            _typed(hi, int, f"{where}.max")
        sym = Symbol(
            _need(d, "id", int, where), _need(d, "name", str, where), _need(d, "label", str, where),
            _need(d, "min", int, where), hi, _need(d, "example", int, where),
        )  # fmt: skip
        if (
            not sym.name.isidentifier()
            or sym.min < 0
            or not sym.min <= sym.example <= (sym.example if hi is None else hi)
        ):
            raise TorchIRError(
                f"{where}: symbol {sym.name!r} (min {sym.min}, example {sym.example}, max {hi}) is not an identifier "
                "with 0 <= min <= example <= max"
            )
        for field_name in ("id", "name", "label"):
            key = (field_name, getattr(sym, field_name))
            if key in seen:
                raise TorchIRError(
                    f"{where}.{field_name}: {short(key[1])} is already the {field_name} of symbols[{seen[key]}]"
                )
            seen[key] = i
        found.append(sym)
    return found


def _layouts(doc: Any, where: str) -> dict[str, dict[str, Any]]:
    """The optional `layouts` of a node: value name -> {"strides": [int], "storage_offset": int}."""
    if not isinstance(doc, dict):
        raise TorchIRError(f"{where}.layouts: expected an object, found {short(doc)}")
    for name, layout in doc.items():
        at = f"{where}.layouts[{name!r}]"
        if not isinstance(layout, dict):
            raise TorchIRError(f"{at}: expected an object, found {short(layout)}")
        strides = _need(layout, "strides", list, at)
        for k, s in enumerate(strides):
            _typed(s, int, f"{at}.strides[{k}]")
        _need(layout, "storage_offset", int, at)
    return doc


def _check_arg(arg: Any, where: str, symbols: set[str]) -> None:
    if not (isinstance(arg, dict) and len(arg) == 1):
        raise TorchIRError(f"{where}: argument {short(arg)} is not a tagged value like {{'int': 3}}")
    tag, payload = next(iter(arg.items()))
    if tag not in ARG_TAGS:
        raise TorchIRError(f"{where}: unknown argument tag {short(tag)}")
    if tag in ("sym", "tensor"):
        _typed(payload, str, f"{where}.{tag}")
    if tag == "sym":
        _check_expr(payload, symbols, where)
    if tag == "float" and not (
        payload in ("nan", "inf", "-inf") or (isinstance(payload, int | float) and not isinstance(payload, bool))
    ):
        raise TorchIRError(f'{where}.float: {short(payload)} is not a number, "nan", "inf" or "-inf"')
    if tag == "list":
        for i, item in enumerate(_typed(payload, list, f"{where}.list")):
            _check_arg(item, f"{where}[{i}]", symbols)


def _records(doc: dict[str, Any], key: str, source: str, fields: dict[str, type | tuple[type, ...]]) -> list[Any]:
    """An optional list of objects, each with `fields` of their types (other fields are kept)."""
    items = _optional(doc, key, list, source, [])
    for i, item in enumerate(items):
        where = f"{source}: {key}[{i}]"
        if not isinstance(item, dict):
            raise TorchIRError(f"{where}: expected an object, found {short(item)}")
        for name, kind in fields.items():
            _need(item, name, kind, where)
    return list(items)


def check_output_tree(node: Any, where: str, outputs: set[str], error: type[RtiError]) -> None:
    """An `output_tree` node (`frontend.capture.output_tree`): containers of leaves, each leaf an
    `{"output": name}` of `outputs`, a `{"constant", "name"}` or a `{"size": expression, "name"}`.
    Raises `error` naming the field path and the value."""
    if not isinstance(node, dict):
        raise error(f"{where}: expected an object, found {short(node)}")
    if not node:
        return
    for kind, holder in (("tuple", list), ("list", list), ("dict", dict)):
        if kind in node:
            children = node[kind]
            if not isinstance(children, holder):
                raise error(f"{where}.{kind}: expected a {holder.__name__}, found {short(children)}")
            items = children.items() if isinstance(children, dict) else enumerate(children)
            for k, child in items:
                check_output_tree(child, f"{where}.{kind}[{k!r}]", outputs, error)
            return
    if "output" in node:
        if not isinstance(node["output"], str) or node["output"] not in outputs:
            raise error(f"{where}.output: {short(node['output'])} is not one of the outputs")
        if node.get("python", "float") not in ("bool", "int", "float"):
            raise error(f"{where}.python: {short(node['python'])} is not bool, int or float")
        return
    if not ("constant" in node or "size" in node) or not isinstance(node.get("name"), str):
        raise error(
            f"{where}: {short(node)} is not an output-tree node (tuple/list/dict, output, or constant/size with a name)"
        )
    if "size" in node and not isinstance(node["size"], (str, int)):
        raise error(f"{where}.size: {short(node['size'])} is not a size expression")


def _safe_to_evaluate(expr: str) -> bool:
    """Whether evaluating `expr` is cheap at any binding: no power with a non-constant or large exponent."""
    for n in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow):
            exp = n.right
            if not (isinstance(exp, ast.Constant) and isinstance(exp.value, int) and 0 <= exp.value <= 64):
                return False
    return True


def _check_size(shape: list[Dim], dtype: str, where: str, bindings: list[tuple[str, dict[str, int]]]) -> None:
    """A declared value's size within `limits`: a static shape as it is, a symbolic one at each
    binding in `bindings` (label, torch symbol -> size) that gives all its symbols a size."""
    if dtype == "none":
        return
    if all(isinstance(d, int) for d in shape):
        check_tensor_size(shape, dtype, f"{where}.shape", TorchIRError)
        return
    needed = set().union(*(free_symbols(d) for d in shape))
    exprs = [d for d in shape if isinstance(d, str)]
    if not all(_safe_to_evaluate(d) for d in exprs):
        return
    for label, values in bindings:
        if not needed <= set(values):
            continue
        try:
            sizes = evaluate_shape(shape, values)
        except (InputError, ArithmeticError, ValueError):
            if label.startswith("the example"):
                raise TorchIRError(f"{where}.shape: {short(shape)} cannot be evaluated at {label}") from None
            continue
        if any(s < 0 for s in sizes) and label.startswith("the example"):
            raise TorchIRError(f"{where}.shape: {short(shape)} is {sizes} at {label}: a negative size")
        if all(s >= 0 for s in sizes):
            check_tensor_size(sizes, dtype, f"{where}.shape {short(shape)} at {label} ({sizes})", TorchIRError)


def _size_bindings(symbols: list[Symbol], sweep: list[dict[str, Any]]) -> list[tuple[str, dict[str, int]]]:
    """The bindings declared sizes are checked at: the examples, every bounded symbol at its max,
    and each sweep point."""
    if not symbols:
        return []
    at_max = {s.name: s.max for s in symbols if s.max is not None}
    found = [("the example sizes", {s.name: s.example for s in symbols})]
    if at_max:
        found.append(("the symbols' max (" + ", ".join(f"{k}={v}" for k, v in at_max.items()) + ")", at_max))
    found += [(f"sweep[{i}] ({p['label']})", dict(p["binding"])) for i, p in enumerate(sweep)]
    return found


def _check_sweep(points: list[dict[str, Any]], symbols: list[Symbol], source: str) -> None:
    names = {s.name for s in symbols}
    for i, p in enumerate(points):
        where = f"{source}: sweep[{i}]"
        binding = p["binding"]
        for k, v in binding.items():
            if k not in names:
                raise TorchIRError(f"{where}.binding: {k!r} is not a declared symbol ({', '.join(sorted(names))})")
            if not is_dim(v):
                raise TorchIRError(f"{where}.binding[{k!r}]: {short(v)} is not a size (a non-negative int)")
        if set(binding) != names:
            raise TorchIRError(f"{where}.binding: gives no size to {', '.join(sorted(names - set(binding)))}")
        if "error" in p:
            _typed(p["error"], str, f"{where}.error")


class _Names:
    """Where each name was first defined, to refuse a second definition."""

    def __init__(self, source: str, what: str) -> None:
        self.source, self.what, self.seen = source, what, {}

    def add(self, name: str, where: str) -> None:
        if name in self.seen:
            raise TorchIRError(
                f"{self.source}: {where}: {self.what} {short(name)} is defined twice (first at {self.seen[name]})"
            )
        self.seen[name] = where


def parse(doc: Any, source: str = TORCH_IR) -> TorchIR:
    """Validate a decoded torch-ir document; errors name the file, the field path and the value.

    Raises TorchIRError for: a wrong format or version; a missing field or one of the wrong JSON
    type; a dim that is not a non-negative int (or a size expression of the declared symbols); a
    dtype that is not a torch dtype name; a value larger than this machine's memory (`limits`;
    symbolic shapes at the examples, at the symbols' max where bounded, and at each sweep point);
    a `decomposition` other than aten/high/core; a weight `kind` other than parameter/buffer/constant;
    a name defined twice (node names, values across inputs/weights/node outputs, output names,
    weight keys, symbols); an untagged argument or unknown tag; a tensor used before it is
    defined; a malformed `sweep`, `input_sets`, `output_tree` or other optional list."""
    if not isinstance(doc, dict):
        raise TorchIRError(f"{source}: top level must be an object, found {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise TorchIRError(f"{source}: field 'format' is {short(doc.get('format'))}, expected {FORMAT!r}")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise TorchIRError(
            f"{source}: torch-ir version {short(version)} is not supported (this build reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))})",
            hint="re-export the model with this version of rlx-torch-import",
        )
    symbols = _symbols(doc.get("symbols", []), source)
    names = {s.name for s in symbols}
    values = _Names(source, "value")
    inputs = []
    for i, d in enumerate(_need(doc, "inputs", list, source)):
        inputs.append(_spec(d, f"{source}: inputs[{i}]", names))
        values.add(inputs[-1].name, f"inputs[{i}].name")
    weights = []
    keys = _Names(source, "weight key")
    for i, d in enumerate(_need(doc, "weights", list, source)):
        where = f"{source}: weights[{i}]"
        spec = _spec(d, where)
        w = WeightSpec(spec.name, _need(d, "key", str, where), _need(d, "kind", str, where), spec.shape, spec.dtype)
        if w.kind not in WEIGHT_KINDS:
            raise TorchIRError(f"{where}.kind: {short(w.kind)} is not one of {', '.join(WEIGHT_KINDS)}")
        values.add(w.name, f"weights[{i}].name")
        keys.add(w.key, f"weights[{i}].key")
        weights.append(w)
    nodes = []
    node_names = _Names(source, "node name")
    for i, d in enumerate(_need(doc, "nodes", list, source)):
        where = f"{source}: nodes[{i}]"
        if not isinstance(d, dict):
            raise TorchIRError(f"{where}: expected an object, found {short(d)}")
        name = _need(d, "name", str, where)
        node_names.add(name, f"nodes[{i}].name")
        args = _need(d, "args", list, where)
        kwargs = _need(d, "kwargs", dict, where)
        for j, a in enumerate(args):
            _check_arg(a, f"{where}.args[{j}]", names)
        for k, a in kwargs.items():
            _check_arg(a, f"{where}.kwargs[{k!r}]", names)
        outs = []
        for j, o in enumerate(_need(d, "outputs", list, where)):
            outs.append(_spec(o, f"{where}.outputs[{j}]", names, none_ok=True))
            values.add(outs[-1].name, f"nodes[{i}].outputs[{j}].name")
        sym = _optional(d, "sym", str, where, "")
        if sym:
            _check_expr(sym, names, f"{where}.sym")
        nodes.append(
            Node(
                name=name,
                target=_need(d, "target", str, where),
                args=args,
                kwargs=kwargs,
                outputs=outs,
                module_path=_optional(d, "module_path", str, where, ""),
                module_type=_optional(d, "module_type", str, where, ""),
                source=_optional(d, "source", str, where, ""),
                decomposed_from=_optional(d, "decomposed_from", str, where, ""),
                layouts=_layouts(d.get("layouts", {}), where),
                sym=sym,
            )
        )
    outputs = []
    output_names = _Names(source, "output name")
    for i, d in enumerate(_need(doc, "outputs", list, source)):
        where = f"{source}: outputs[{i}]"
        spec = _spec(d, where, names)
        output_names.add(spec.name, f"outputs[{i}].name")
        outputs.append(OutputSpec(spec.name, _need(d, "value", str, where), spec.shape, spec.dtype))
    sweep = _records(doc, "sweep", source, {"label": str, "binding": dict})
    _check_sweep(sweep, symbols, source)
    input_sets = _records(doc, "input_sets", source, {"label": str})
    for k, entry in enumerate(input_sets):
        if "error" in entry:
            _typed(entry["error"], str, f"{source}: input_sets[{k}].error")
    for field_name, points in (("sweep", sweep), ("input_sets", input_sets)):
        for k, point in enumerate(points):
            if "values" in point:
                _typed(point["values"], dict, f"{source}: {field_name}[{k}].values")
    constant_inputs = _records(doc, "constant_inputs", source, {"path": str})
    for k, const in enumerate(constant_inputs):
        if "value" not in const:
            raise TorchIRError(f"{source}: constant_inputs[{k}]: missing field 'value'")
    output_tree = _optional(doc, "output_tree", dict, source, {})
    check_output_tree(output_tree, f"{source}: output_tree", {o.name for o in outputs}, TorchIRError)
    producer = _optional(doc, "producer", dict, source, {})
    for key, value in producer.items():
        _typed(value, str, f"{source}: producer[{key!r}]")
    call_args = _optional(doc, "call_args", list, source, [])
    auto_decomposed = _optional(doc, "auto_decomposed", list, source, [])
    for field_name, items in (("call_args", call_args), ("auto_decomposed", auto_decomposed)):
        for k, item in enumerate(items):
            _typed(item, str, f"{source}: {field_name}[{k}]")
    decomposition = _need(doc, "decomposition", str, source)
    if decomposition not in DECOMPOSITIONS:
        raise TorchIRError(f"{source}: decomposition: {short(decomposition)} is not one of {', '.join(DECOMPOSITIONS)}")
    ir = TorchIR(
        name=_need(doc, "name", str, source),
        decomposition=decomposition,
        inputs=inputs,
        weights=weights,
        nodes=nodes,
        outputs=outputs,
        producer=producer,
        auto_decomposed=list(auto_decomposed),
        symbols=symbols,
        specialized=_records(doc, "specialized", source, {}),
        sweep=sweep,
        constant_inputs=constant_inputs,
        call_args=list(call_args),
        output_tree=dict(output_tree),
        dropped=_records(doc, "dropped", source, {"node": str, "target": str, "check": str, "reason": str}),
        control_flow=_records(doc, "control_flow", source, {"node": str, "kind": str, "how": str}),
        input_sets=input_sets,
        origin=source,
    )
    bindings = _size_bindings(symbols, sweep)
    checked: set[tuple[tuple[Dim, ...], str]] = set()  # each distinct shape and dtype once (the first place)
    for where, spec in ir.declared():
        key = (tuple(spec.shape), spec.dtype)
        if key not in checked:
            checked.add(key)
            _check_size(spec.shape, spec.dtype, f"{source}: {where}", bindings)
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
    """Read and validate `<directory>/torch-ir.json`.

    Raises TorchIRError when the file is missing, is not JSON (or repeats a key in one object),
    or fails `parse`."""
    path = Path(directory) / TORCH_IR
    if not path.exists():
        raise TorchIRError(f"{path}: not found", hint="point at a directory written by rlx-torch-import")
    return parse(jsondoc.read(path, TorchIRError), str(path))


def check_weights(ir: TorchIR, tensors: Mapping[str, Any], path: Path) -> list[str]:
    """Check weights.safetensors (`tensors`: key -> `safetensors_io.RawTensor`, read from `path`)
    against torch-ir's `weights`: each declared key must be there with the declared dtype and
    shape, so no tensor is bound under a declaration it does not match. Returns notes for tensors
    the file holds that torch-ir does not declare (nothing reads them).

    Raises BundleError naming the file, the tensor, and the declared vs found dtype and shape, or
    every declared key the file lacks."""
    source = ir.origin or TORCH_IR
    missing = [(i, w) for i, w in enumerate(ir.weights) if w.key not in tensors]
    if missing:
        listed = ", ".join(f"{w.key!r} ({w.dtype}{w.shape}, weights[{i}])" for i, w in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        raise BundleError(f"{path}: {len(missing)} weight(s) {source} declares are missing: {listed}{more}")
    for i, w in enumerate(ir.weights):
        t = tensors[w.key]
        if t.dtype != w.dtype or list(t.shape) != list(w.shape):
            raise BundleError(
                f"{path}: tensor {w.key!r} is {t.dtype}{list(t.shape)}; {source} weights[{i}] ({w.name}) declares "
                f"{w.dtype}{list(w.shape)}"
            )
    extra = sorted(set(tensors) - {w.key for w in ir.weights})
    if not extra:
        return []
    listed = ", ".join(extra[:8]) + (f" and {len(extra) - 8} more" if len(extra) > 8 else "")
    return [f"{path.name} holds {len(extra)} tensor(s) {TORCH_IR} does not declare (not used): {listed}"]
