"""Check a torch-ir read from disk against torch itself and against its weights file, before
anything is lowered.

`torchir.parse` checks the file's form; `check_weights` that weights.safetensors holds each
declared weight as declared; `check_reference` that reference.safetensors holds each tensor verification
reads as declared; `check_ops` that each node is a call torch can make and that its
declared outputs are what torch computes from its declared inputs. Per node:

1. its `target` resolves to a torch `OpOverload` (one torch does not know: TorchIRError);
2. its `args`/`kwargs` bind to the op's schema: not too many positional arguments, no unknown or
   repeated keyword, every required argument given, each argument of the kind the schema types it
   (a tensor where it takes a Tensor, a number where it takes an int, ...);
3. the op runs on fake tensors (torch's meta kernels, as torch.export ran them) of the declared
   input shapes and dtypes (a dynamic program at its example sizes), and each declared output
   shape and dtype must be what torch gives.

A file rlx-torch-import wrote always passes: what the check cannot decide is skipped, never
refused. Skipped are size computations (`sym` nodes) and Python-operator targets (`operator.*`,
`math.*`, `torch.sym_*`); ops the registry has no lowering for (lowering reports them as
unsupported); registered ops torch does not know in this process (a library's custom op);
layout-sensitive ops (fake tensors here are contiguous); values read from tensors (`.item()`)
and calls that take one where the schema wants a number; and ops torch cannot run on fake
tensors (data-dependent output shapes, no meta kernel).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Container, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import safetensors_io
from ..complex_edge import stored
from ..dtypes import is_complex
from ..errors import BundleError, TorchIRError
from ..layout import TORCH_IR, input_key, output_key, set_prefix, sweep_prefix
from ..limits import short
from ..sizes import Dim, evaluate, evaluate_known, evaluate_shape, values_of
from .schema import LAYOUT_SENSITIVE, Node, TensorSpec, TorchIR, WeightSpec, decode_float

# Targets that are not torch ops: Python operators on sizes (the registry lowers them itself).
_PYTHON_PREFIXES = ("operator.", "math.", "torch.", "builtins.", "_operator.")
# Values read from a tensor: a Python number in torch, a 0-d tensor in torch-ir.
_ITEM_OPS = frozenset({"aten.item.default", "aten._local_scalar_dense.default"})
# Exceptions of torch's meta/fake machinery meaning "cannot be computed from shapes alone".
_DATA_DEPENDENT = (
    "DynamicOutputShapeException",
    "DataDependentOutputException",
    "GuardOnDataDependentSymNode",
    "UnsupportedOperatorException",
)

# The argument tags each schema type accepts (`real_type` names: "number" is Scalar). A "tensor"
# where a number is taken is a value read from a tensor; a number where a single Tensor is taken
# is a Python number torch wraps for some ops (`aten.mul.Tensor(x, 2)`): running the op decides.
_NUMBER = frozenset({"int", "float", "bool", "sym", "tensor"})
_KINDS: dict[str, frozenset[str]] = {
    "Tensor": _NUMBER,
    "int": _NUMBER,
    "SymInt": _NUMBER,
    "float": _NUMBER,
    "bool": _NUMBER,
    "number": _NUMBER,
    "str": frozenset({"str"}),
    "ScalarType": frozenset({"dtype", "int"}),
    "Layout": frozenset({"layout", "int"}),
    "Device": frozenset({"device", "str"}),
    "MemoryFormat": frozenset({"memory_format", "int"}),
}
_KIND_NAMES = {
    "Tensor": "a tensor",
    "str": "a string",
    "ScalarType": "a dtype",
    "Layout": "a layout",
    "Device": "a device",
    "MemoryFormat": "a memory format",
}


def resolve(target: str, where: str, lowerable: Container[str]) -> Any | None:
    """The torch OpOverload `target` names; None for a target this check leaves alone (a Python
    operator; an op not in `lowerable`, the lowering registry's targets, which lowering reports; an
    `ns.op.overload` of a namespace other than aten and prims that torch does not know here: a
    library's op, which lowering reports as unsupported).
    Raises TorchIRError for an aten/prims target torch does not know, an overload missing or
    unknown, or a target that is not `namespace.op.overload`."""
    import torch

    if target.startswith(_PYTHON_PREFIXES) or " " in target:
        return None
    parts = target.split(".")
    op = None
    if len(parts) == 3 and all(p.isidentifier() for p in parts):
        ns, name, overload = parts
        try:
            op = getattr(getattr(getattr(torch.ops, ns), name), overload)
        except (AttributeError, RuntimeError):
            op = None
    if op is not None and isinstance(op, torch._ops.OpOverload):
        return op if target in lowerable else None
    if target in lowerable:  # a library's custom op that is not loaded in this process
        return None
    if len(parts) == 3 and all(p.isidentifier() for p in parts) and parts[0] not in ("aten", "prims"):
        return None  # an op of a library not loaded here, perhaps: lowering reports it as unsupported
    if len(parts) == 2 and all(p.isidentifier() for p in parts):
        packet = getattr(getattr(torch.ops, parts[0], None), parts[1], None) if parts[0].isidentifier() else None
        if isinstance(packet, torch._ops.OpOverloadPacket):
            names = ", ".join(f"{target}.{o}" for o in packet.overloads()[:6])
            raise TorchIRError(f"{where}.target: {short(target)} names no overload; torch has {names}")
    if len(parts) == 3 and parts[0].isidentifier() and parts[1].isidentifier():
        packet = getattr(getattr(torch.ops, parts[0], None), parts[1], None)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            names = ", ".join(f"{parts[0]}.{parts[1]}.{o}" for o in packet.overloads()[:6])
            raise TorchIRError(f"{where}.target: {short(target)} is not an overload torch knows; torch has {names}")
    raise TorchIRError(
        f"{where}.target: {short(target)} is not an op torch knows (expected an ATen overload such as "
        "'aten.linear.default')"
    )


def _unwrap(text: str, outer: str) -> tuple[str, bool]:
    return (text[len(outer) + 1 : -1], True) if text.startswith(outer + "[") and text.endswith("]") else (text, False)


def _base_type(schema_arg: Any) -> tuple[str, bool, bool, bool]:
    """(base type, optional, list, optional items) of a schema argument's type as torch spells it
    (`List[Optional[Tensor]]` -> ("Tensor", False, True, True); "number" is Scalar)."""
    text, optional = _unwrap(str(getattr(schema_arg, "real_type", schema_arg.type)), "Optional")
    text, is_list = _unwrap(text, "List")
    text, optional_items = _unwrap(text, "Optional")
    return text, optional, is_list, optional_items


def _check_kind(arg: dict[str, Any], schema_arg: Any, where: str, target: str) -> None:
    """`arg` must be of a kind `schema_arg`'s type takes; TorchIRError naming the argument."""
    base, optional, is_list, optional_items = _base_type(schema_arg)
    allowed = _KINDS.get(base)
    if base == "Tensor" and is_list:
        allowed = frozenset({"tensor"})
    if allowed is None:  # a type this check does not model (Generator, Dimname, ...)
        return
    ((tag, payload),) = arg.items()
    if tag == "none" and (optional or schema_arg.has_default_value()):
        return
    if is_list:
        if tag == "list":
            for k, item in enumerate(payload):
                ((item_tag, _),) = item.items()
                if item_tag not in allowed and not (item_tag == "none" and optional_items):
                    raise TorchIRError(
                        f"{where}[{k}]: {short(item)} is not {_KIND_NAMES.get(base, 'a number')}, as {target}'s "
                        f"argument {schema_arg.name!r} ({getattr(schema_arg, 'real_type', schema_arg.type)}) takes"
                    )
            return
        if base != "Tensor" and tag in allowed:  # an int where torch takes int[1]
            return
    elif tag in allowed:
        return
    raise _kind_error(arg, schema_arg, where, target)


def _kind_error(arg: dict[str, Any], schema_arg: Any, where: str, target: str) -> TorchIRError:
    base, _, is_list, _ = _base_type(schema_arg)
    kind = "a list" if is_list else _KIND_NAMES.get(base, "a number")
    return TorchIRError(
        f"{where}: {short(arg)} is not {kind}, as {target}'s argument {schema_arg.name!r} "
        f"({getattr(schema_arg, 'real_type', schema_arg.type)}) takes"
    )


def bind_args(node: Node, op: Any, where: str) -> dict[str, tuple[Any, dict[str, Any], str]]:
    """`node`'s arguments by schema name: (schema argument, tagged value, field path). Raises
    TorchIRError for too many positional arguments, an unknown or repeated keyword, a missing
    required argument, or an argument of the wrong kind."""
    target = str(op)
    schema = op._schema.arguments
    positional = [a for a in schema if not a.kwarg_only]
    if len(node.args) > len(positional):
        raise TorchIRError(
            f"{where}.args: {len(node.args)} positional argument(s); {target} takes at most {len(positional)} "
            f"({', '.join(a.name for a in positional) or 'none'})"
        )
    bound = {a.name: (a, v, f"{where}.args[{j}]") for j, (a, v) in enumerate(zip(positional, node.args, strict=False))}
    by_name = {a.name: a for a in schema}
    for key, value in node.kwargs.items():
        if key not in by_name:
            raise TorchIRError(
                f"{where}.kwargs: {short(key)} is not an argument of {target} ({', '.join(by_name) or 'none'})"
            )
        if key in bound:
            raise TorchIRError(f"{where}.kwargs[{key!r}]: argument {key!r} of {target} is also given positionally")
        bound[key] = (by_name[key], value, f"{where}.kwargs[{key!r}]")
    missing = [a.name for a in schema if a.name not in bound and not a.has_default_value()]
    if missing:
        raise TorchIRError(f"{where}: {target} needs argument(s) {', '.join(missing)}, which are not given")
    for schema_arg, value, at in bound.values():
        _check_kind(value, schema_arg, at, target)
    return bound


class _Skip(Exception):
    """This node cannot be checked on fake tensors (not an error)."""


def _fake_value(
    arg: dict[str, Any], schema_arg: Any, specs: dict[str, tuple[list[int], str]], values: dict[str, int]
) -> Any:
    """A tagged argument as torch takes it; tensors are fake tensors of the declared shape and dtype
    (made inside a FakeTensorMode: no memory)."""
    import torch

    ((tag, payload),) = arg.items()
    if tag == "tensor":
        if _base_type(schema_arg)[0] != "Tensor":  # a value read from a tensor (`.item()`) as a number
            raise _Skip
        shape, dtype = specs[payload]
        return torch.empty(shape, dtype=getattr(torch, dtype))
    if tag == "list":
        return [_fake_value(a, schema_arg, specs, values) for a in payload]
    if tag == "sym":
        return evaluate(payload, values)
    if tag == "float":
        return decode_float(payload)
    if tag == "dtype":
        return getattr(torch, payload)
    if tag == "device":
        return torch.device(payload)
    if tag in ("layout", "memory_format"):
        return getattr(torch, payload)
    if tag == "none":
        return None
    return payload


def _run_fake(
    op: Any,
    bound: dict[str, tuple[Any, dict[str, Any], str]],
    specs: dict[str, tuple[list[int], str]],
    values: dict[str, int],
) -> list[Any]:
    """`op` on fake tensors of the declared inputs: its results, flattened. Raises _Skip when torch
    cannot compute the result from shapes and dtypes alone."""
    args, kwargs = [], {}
    for schema_arg in op._schema.arguments:
        if schema_arg.name in bound:
            value = _fake_value(bound[schema_arg.name][1], schema_arg, specs, values)
            if schema_arg.kwarg_only:
                kwargs[schema_arg.name] = value
            else:
                args.append(value)
    try:
        result = op(*args, **kwargs)
    except NotImplementedError:  # no meta kernel or fake implementation
        raise _Skip from None
    except Exception as e:
        if type(e).__name__ in _DATA_DEPENDENT or "meta" in str(e).lower():
            raise _Skip from None
        raise
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _shape_text(shape: list[Any], dtype: str) -> str:
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


def _refused(
    node: Node,
    bound: dict[str, tuple[Any, dict[str, Any], str]],
    specs: dict[str, tuple[list[int], str]],
    where: str,
    at: str,
    e: Exception,
) -> TorchIRError:
    """The error for a call torch refuses: a number where this op takes a tensor (torch names the
    argument), or the declared input shapes and dtypes with torch's message."""
    text = str(e)
    for name, (schema_arg, value, field_path) in bound.items():
        if "tensor" not in value and f"for argument '{name}'" in text:
            return _kind_error(value, schema_arg, field_path, node.target)
    inputs = ", ".join(
        f"{name}: {_shape_text(*specs[v['tensor']])}" for name, (_, v, _) in bound.items() if v.get("tensor") in specs
    )
    return TorchIRError(
        f"{where}: {node.target} refuses the declared inputs ({inputs}{at}): {type(e).__name__}: "
        f"{text.splitlines()[0] if text else ''}"
    )


def check_ops(ir: TorchIR, lowerable: Container[str]) -> dict[str, str]:
    """Check every node of `ir` (as read from disk, symbolic if dynamic) whose target is in `lowerable`
    (the lowering registry's targets; lowering reports the others as unsupported) against torch: its target,
    its arguments against the op's schema, and its declared outputs against what the op gives on
    fake tensors (torch's meta kernels, as torch.export ran them) of its declared inputs, a dynamic
    program at its example sizes. Returns the nodes not run on fake tensors (node name -> why).
    Raises TorchIRError naming the file, node index and name, field and value."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    values = values_of(ir.symbols)
    at = f" at {', '.join(f'{s.label}={s.example}' for s in ir.symbols)}" if ir.symbols else ""
    specs: dict[str, tuple[list[int], str]] = {}
    declared: list[TensorSpec | WeightSpec] = [*ir.inputs, *ir.weights]
    for spec in declared:
        specs[spec.name] = (evaluate_shape(spec.shape, values), spec.dtype)
    skipped: dict[str, str] = {}
    log = logging.getLogger("torch._subclasses.fake_tensor")  # logs each refused call with a traceback
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with torch.no_grad(), FakeTensorMode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check_nodes(ir, specs, values, at, skipped, lowerable)
    finally:
        log.setLevel(level)
    return skipped


def _check_nodes(
    ir: TorchIR,
    specs: dict[str, tuple[list[int], str]],
    values: dict[str, int],
    at: str,
    skipped: dict[str, str],
    lowerable: Container[str],
) -> None:
    """`check_ops`'s node loop, inside a FakeTensorMode; fills `skipped`."""
    import torch

    from ..dtypes import torch_name

    source = ir.origin or TORCH_IR
    # Values read from tensors (`.item()` and arithmetic on them): numbers in torch (no dtype of
    # their own in type promotion), 0-d tensors in torch-ir. Calls reading one are not run.
    scalars: set[str] = set()

    def reads_scalar(arg: dict[str, Any]) -> bool:
        ((tag, payload),) = arg.items()
        return (tag == "tensor" and payload in scalars) or (tag == "list" and any(reads_scalar(a) for a in payload))

    for i, node in enumerate(ir.nodes):
        where = f"{source}: nodes[{i}] ({node.name})"
        declared = [(o, evaluate_shape(o.shape, values) if o.dtype != "none" else []) for o in node.outputs]
        for o, shape in declared:
            if o.dtype != "none":
                specs[o.name] = (shape, o.dtype)
        if node.sym:
            continue
        op = resolve(node.target, where, lowerable)
        if op is None:
            skipped[node.name] = "not an op this check runs"
            scalars.update(o.name for o in node.outputs if not o.shape)
            continue
        bound = bind_args(node, op, where)
        if node.target in _ITEM_OPS or any(reads_scalar(a) for a in [*node.args, *node.kwargs.values()]):
            skipped[node.name] = "it reads a value read from a tensor"
            scalars.update(o.name for o in node.outputs if not o.shape)
            continue
        if node.target in LAYOUT_SENSITIVE:
            skipped[node.name] = "its result depends on its inputs' memory layout"
            continue
        try:
            results = _run_fake(op, bound, specs, values)
        except _Skip:
            skipped[node.name] = "torch cannot compute it from shapes and dtypes alone"
            continue
        except Exception as e:
            raise _refused(node, bound, specs, where, at, e) from None
        if any(o.dtype != "none" for o in node.outputs) and len(node.outputs) != len(results):
            raise TorchIRError(
                f"{where}.outputs: {len(node.outputs)} declared; {node.target} gives {len(results)} result(s)"
            )
        for j, ((o, shape), got) in enumerate(zip(declared, results, strict=False)):
            if o.dtype == "none":
                continue
            if not isinstance(got, torch.Tensor):
                if not shape:  # a number in torch, a 0-d tensor in torch-ir
                    continue
                raise TorchIRError(
                    f"{where}: outputs[{j}] declares {_shape_text(o.shape, o.dtype)}; {node.target} gives "
                    f"{short(got)} (not a tensor)"
                )
            got_shape, got_dtype = list(got.shape), torch_name(got.dtype)
            if (got_shape, got_dtype) != (shape, o.dtype):
                bound_text = f" ({_shape_text(shape, o.dtype)}{at})" if shape != list(o.shape) else ""
                raise TorchIRError(
                    f"{where}: outputs[{j}] declares {_shape_text(o.shape, o.dtype)}{bound_text}; {node.target} "
                    f"gives {_shape_text(got_shape, got_dtype)} for these inputs{at}"
                )


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
        if (t.dtype, list(t.shape)) != stored(w.dtype, list(w.shape)):  # complex: its float pairs
            raise BundleError(
                f"{path}: tensor {w.key!r} is {t.dtype}{list(t.shape)}; {source} weights[{i}] ({w.name}) declares "
                f"{w.dtype}{list(w.shape)}"
            )
    extra = sorted(set(tensors) - {w.key for w in ir.weights})
    if not extra:
        return []
    listed = ", ".join(extra[:8]) + (f" and {len(extra) - 8} more" if len(extra) > 8 else "")
    return [f"{path.name} holds {len(extra)} tensor(s) {TORCH_IR} does not declare (not used): {listed}"]


def check_reference(ir: TorchIR, path: Path) -> dict[str, safetensors_io.RawTensor]:
    """Read reference.safetensors (`safetensors_io.read`) and check it against torch-ir: every
    tensor verification will read is there with the declared dtype and shape: `input.<name>` and
    `output.<name>` (a dynamic program's at the example sizes), `sweep.<i>.input/output.<name>` for
    each sweep point eager PyTorch ran at (shapes at the point's binding), and
    `set.<k>.input/output.<name>` for each extra input set it ran on (dtype, and rank and static
    dims; the sizes a set gives are checked when it runs). Other tensors are ignored.

    Raises BundleError naming the file, the tensor, and the expected vs found dtype and shape."""
    ref = safetensors_io.read(path)
    source = ir.origin or TORCH_IR

    def expect(key: str, what: str, dtype: str, shape: Sequence[Dim]) -> None:
        declared = f"{dtype}{list(shape)}" + (" as its float pairs" if is_complex(dtype) else "")
        dtype, shape = stored(dtype, list(shape))  # complex: its view_as_real float pairs
        t = ref.get(key)
        if t is None:
            some = ", ".join(sorted(ref)[:8]) + (", ..." if len(ref) > 8 else "")
            raise BundleError(
                f"{path}: no tensor {key!r} ({source} {what}: {declared}); the file holds {some or 'no tensors'}"
            )
        fits = len(t.shape) == len(shape) and all(
            isinstance(d, str) or d == n for d, n in zip(shape, t.shape, strict=True)
        )
        if t.dtype != dtype or not fits:
            raise BundleError(f"{path}: tensor {key!r} is {t.dtype}{list(t.shape)}; {source} {what} is {declared}")

    def check_point(prefix: str, binding: dict[str, int] | None, label: str) -> None:
        for i, s in enumerate(ir.inputs):
            shape = s.shape if binding is None else evaluate_shape(s.shape, binding)
            expect(input_key(s.name, prefix), f"inputs[{i}] ({label})", s.dtype, shape)
        for i, o in enumerate(ir.outputs):
            shape = o.shape if binding is None else evaluate_known(o.shape, binding)  # staged sizes: unbound
            expect(output_key(o.name, prefix), f"outputs[{i}] ({label})", o.dtype, shape)

    check_point("", values_of(ir.symbols), "the example")
    for i, point in enumerate(ir.sweep):
        if "error" not in point:
            check_point(sweep_prefix(i), dict(point["binding"]), f"at sweep[{i}], {point['label']}")
    for k, entry in enumerate(ir.input_sets):
        if "error" not in entry:
            check_point(set_prefix(k), None, f"in input_sets[{k}], {entry['label']}")
    return ref
