"""Read torch-ir.json: `load` a conversion folder's file, `parse` a decoded document. Every
field is validated (form, types, names, sizes within this machine's memory, wiring) and every
error names the file, the field path and the value."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from .. import jsondoc
from ..errors import InputError, RtiError, TorchIRError
from ..layout import TORCH_IR
from ..limits import check_dtype, check_tensor_size, is_dim, short
from ..quant.schemes import parse_record
from ..sizes import Dim, Symbol, evaluate_shape, free_symbols
from .schema import (
    ARG_TAGS,
    BOUNDARY_ONLY,
    DECOMPOSITIONS,
    FORMAT,
    READABLE_VERSIONS,
    WEIGHT_KINDS,
    Node,
    OutputSpec,
    TensorSpec,
    TorchIR,
    WeightSpec,
)
from .wiring import check_wiring


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
        hi = d.get("max") if d.get("max") is None else _typed(d.get("max"), int, f"{where}.max")
        sym = Symbol(
            _need(d, "id", int, where),
            _need(d, "name", str, where),
            _need(d, "label", str, where),
            _need(d, "min", int, where),
            hi,
            _need(d, "example", int, where),
            _typed(d.get("stage", 0), int, f"{where}.stage"),
            _typed(d.get("defined_by", ""), str, f"{where}.defined_by"),
            _typed(d.get("derived", ""), str, f"{where}.derived"),
        )
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
    """An `output_tree` node (`frontend.torch.outputs.output_tree`): containers of leaves, each leaf an
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


def _check_size(shape: Sequence[Dim], dtype: str, where: str, bindings: list[tuple[str, dict[str, int]]]) -> None:
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
    names = {s.name for s in symbols if not s.stage}  # a size a stage computes comes from the values
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
        self.source, self.what = source, what
        self.seen: dict[str, str] = {}

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
    _check_format(doc, source)
    symbols = _symbols(doc.get("symbols", []), source)
    names = {s.name for s in symbols}
    values = _Names(source, "value")
    inputs = []
    for i, d in enumerate(_need(doc, "inputs", list, source)):
        inputs.append(_spec(d, f"{source}: inputs[{i}]", names))
        values.add(inputs[-1].name, f"inputs[{i}].name")
    weights = _weights(doc, source, values)
    nodes = _nodes(doc, source, names, values)
    outputs = []
    output_names = _Names(source, "output name")
    for i, d in enumerate(_need(doc, "outputs", list, source)):
        where = f"{source}: outputs[{i}]"
        spec = _spec(d, where, names)
        output_names.add(spec.name, f"outputs[{i}].name")
        outputs.append(OutputSpec(spec.name, _need(d, "value", str, where), spec.shape, spec.dtype))
    extras = _optional_fields(doc, source, symbols, outputs)
    decomposition = _need(doc, "decomposition", str, source)
    old = doc["version"] < 4
    if decomposition == "onnx" and old:  # the ONNX front end, once spelled as a decomposition
        decomposition = BOUNDARY_ONLY
        extras["producer"].setdefault("frontend", "onnx")
    elif decomposition not in DECOMPOSITIONS and (decomposition != BOUNDARY_ONLY or old):
        raise TorchIRError(
            f"{source}: decomposition: {short(decomposition)} is not one of {', '.join(DECOMPOSITIONS)} "
            '(or "": the boundary only, the front end\'s program)'
        )
    ir = TorchIR(
        name=_need(doc, "name", str, source),
        decomposition=decomposition,
        inputs=inputs,
        weights=weights,
        nodes=nodes,
        outputs=outputs,
        producer=extras["producer"],
        auto_decomposed=list(extras["auto_decomposed"]),
        symbols=symbols,
        specialized=_records(doc, "specialized", source, {}),
        sweep=extras["sweep"],
        constant_inputs=extras["constant_inputs"],
        call_args=list(extras["call_args"]),
        output_tree=dict(extras["output_tree"]),
        dropped=_records(doc, "dropped", source, {"node": str, "target": str, "check": str, "reason": str}),
        control_flow=_records(doc, "control_flow", source, {"node": str, "kind": str, "how": str}),
        input_sets=extras["input_sets"],
        quantize=parse_record(doc.get("quantize"), source),
        random_outputs=[
            _typed(n, str, f"{source}: random_outputs") for n in _optional(doc, "random_outputs", list, source, [])
        ],
        origin=source,
    )
    _check_declared_sizes(ir, symbols, extras["sweep"], source)
    check_wiring(ir, source)
    return ir


def _check_format(doc: Any, source: str) -> None:
    """The document is an object of format `FORMAT` at a version this build reads."""
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


def _weights(doc: dict[str, Any], source: str, values: _Names) -> list[WeightSpec]:
    """The `weights` list: each a spec with a `key` (unique) and a known `kind`."""
    weights = []
    keys = _Names(source, "weight key")
    for i, d in enumerate(_need(doc, "weights", list, source)):
        where = f"{source}: weights[{i}]"
        spec = _spec(d, where)
        shape = cast(list[int], spec.shape)  # `_spec` without symbols: every dim an int
        w = WeightSpec(spec.name, _need(d, "key", str, where), _need(d, "kind", str, where), shape, spec.dtype)
        if w.kind not in WEIGHT_KINDS:
            raise TorchIRError(f"{where}.kind: {short(w.kind)} is not one of {', '.join(WEIGHT_KINDS)}")
        values.add(w.name, f"weights[{i}].name")
        keys.add(w.key, f"weights[{i}].key")
        weights.append(w)
    return weights


def _nodes(doc: dict[str, Any], source: str, names: set[str], values: _Names) -> list[Node]:
    """The `nodes` list; node names and output value names are unique."""
    node_names = _Names(source, "node name")
    return [_node(d, i, source, names, values, node_names) for i, d in enumerate(_need(doc, "nodes", list, source))]


def _node(d: Any, i: int, source: str, names: set[str], values: _Names, node_names: _Names) -> Node:
    """`nodes[i]`: tagged arguments, output specs, optional provenance, layouts and `sym`."""
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
    return Node(
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


def _optional_fields(
    doc: dict[str, Any], source: str, symbols: list[Symbol], outputs: list[OutputSpec]
) -> dict[str, Any]:
    """The optional fields checked against the rest: `sweep`, `input_sets`, `constant_inputs`,
    `output_tree`, `producer`, `call_args`, `auto_decomposed` (by name)."""
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
    return {
        "sweep": sweep,
        "input_sets": input_sets,
        "constant_inputs": constant_inputs,
        "output_tree": output_tree,
        "producer": producer,
        "call_args": call_args,
        "auto_decomposed": auto_decomposed,
    }


def _check_declared_sizes(ir: TorchIR, symbols: list[Symbol], sweep: list[dict[str, Any]], source: str) -> None:
    """Each distinct declared shape and dtype within `limits` at the bindings `_size_bindings` gives."""
    bindings = _size_bindings(symbols, sweep)
    checked: set[tuple[tuple[Dim, ...], str]] = set()  # each distinct shape and dtype once (the first place)
    for where, spec in ir.declared():
        key = (tuple(spec.shape), spec.dtype)
        if key not in checked:
            checked.add(key)
            _check_size(spec.shape, spec.dtype, f"{source}: {where}", bindings)


def load(directory: Path) -> TorchIR:
    """Read and validate `<directory>/torch-ir.json`.

    Raises TorchIRError when the file is missing, is not JSON (or repeats a key in one object),
    or fails `parse`."""
    path = Path(directory) / TORCH_IR
    if not path.exists():
        raise TorchIRError(f"{path}: not found", hint="point at a directory written by rlx-torch-import")
    return parse(jsondoc.read(path, TorchIRError), str(path))
