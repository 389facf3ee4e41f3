"""Specialisation: a symbolic torch-ir program at one binding of its symbols (`specialize`), and the nodes
of such a bound program whose values depend on a symbol (`size_valued`)."""

from __future__ import annotations

from typing import Any, cast

from ..errors import TorchIRError
from ..layout import TORCH_IR
from ..limits import check_tensor_size, short
from ..sizes import Dim, SizeInt, evaluate, evaluate_shape
from .schema import Node, OutputSpec, TensorSpec, TorchIR


def specialize(ir: TorchIR, values: dict[str, int]) -> TorchIR:
    """This program at one binding (torch symbol name -> size): every shape and SymInt
    argument evaluated, size-computation nodes dropped, no symbols left. Each node's
    symbolic output shapes stay readable through `symbolic_shapes` (value name -> dims).

    Raises TorchIRError naming the file, field and binding when a shape evaluates to a
    negative size or to a tensor larger than this machine's memory (`limits`), before anything
    is lowered at that binding."""
    if not ir.symbols:
        return ir
    _check_sizes(ir, values)

    def arg(a: dict[str, Any]) -> dict[str, Any]:
        tag, payload = next(iter(a.items()))
        if tag == "sym":
            return {"int": SizeInt(evaluate(payload, values), str(payload))}
        if tag == "list":
            return {"list": [arg(x) for x in payload]}
        return a

    def spec(t: TensorSpec) -> TensorSpec:
        return TensorSpec(t.name, cast(list[Dim], evaluate_shape(t.shape, values)), t.dtype, t.path)

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
        for n in ir.nodes
        if not n.sym
    ]
    bound = TorchIR(
        name=ir.name,
        decomposition=ir.decomposition,
        inputs=[spec(s) for s in ir.inputs],
        weights=ir.weights,
        nodes=nodes,
        outputs=[
            OutputSpec(o.name, o.value, cast(list[Dim], evaluate_shape(o.shape, values)), o.dtype) for o in ir.outputs
        ],
        producer=ir.producer,
        auto_decomposed=ir.auto_decomposed,
        constant_inputs=ir.constant_inputs,
        call_args=ir.call_args,
        output_tree=ir.output_tree,
        dropped=ir.dropped,
        control_flow=ir.control_flow,
        input_sets=ir.input_sets,
        quantize=ir.quantize,
        random_outputs=ir.random_outputs,
        origin=ir.origin,
        symbolic_shapes=ir.value_shapes(),
        bound_symbols=list(ir.symbols),
        binding=dict(values),
    )
    return bound


def _check_sizes(ir: TorchIR, values: dict[str, int]) -> None:
    """Each declared symbolic shape of `ir` at `values`: TorchIRError naming the file, field and
    binding for a negative size or a tensor larger than this machine's memory (`limits`)."""
    at = ", ".join(f"{k}={v}" for k, v in values.items())
    checked: set[tuple[tuple[Dim, ...], str]] = set()  # each distinct shape and dtype once
    for where, declared in ir.declared():
        key = (tuple(declared.shape), declared.dtype)
        if declared.dtype == "none" or all(isinstance(d, int) for d in declared.shape) or key in checked:
            continue
        checked.add(key)
        sizes = evaluate_shape(declared.shape, values)
        field_path = f"{ir.origin or TORCH_IR}: {where}.shape"
        if any(d < 0 for d in sizes):
            raise TorchIRError(f"{field_path}: {short(declared.shape)} is {sizes} at {at}: a negative size")
        check_tensor_size(
            sizes, declared.dtype, f"{field_path} {short(declared.shape)} at {at} ({sizes})", TorchIRError
        )


def size_valued(ir: TorchIR, size_dependent: set[str]) -> set[str]:
    """The nodes of a program bound from a dynamic one whose values depend on a symbol: those given a
    size as a number (a SymInt argument, a `SizeInt` once bound) or reading a value of a
    size-dependent or size-valued node, transitively (`Program.size_valued`: not folded)."""
    if not ir.symbolic_shapes:
        return set()

    def sized(arg: dict[str, Any]) -> bool:
        tag, payload = next(iter(arg.items()))
        return (tag == "int" and isinstance(payload, SizeInt)) or (tag == "list" and any(sized(a) for a in payload))

    def reads(arg: dict[str, Any], values: set[str]) -> bool:
        tag, payload = next(iter(arg.items()))
        return (tag == "tensor" and payload in values) or (tag == "list" and any(reads(a, values) for a in payload))

    found: set[str] = set()
    values: set[str] = set()
    for n in ir.nodes:
        args = [*n.args, *n.kwargs.values()]
        if n.name in size_dependent or any(sized(a) or reads(a, values) for a in args):
            found.add(n.name)
            values.update(o.name for o in n.outputs)
    return found - size_dependent
