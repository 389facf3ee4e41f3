"""Which values of a program are exactly determined, so judged bit for bit (docs/design.md, decision ao).

A value is *exact-judged* when PyTorch's result is one bit pattern that any correct implementation must
give: the graph's inputs and weights (a weight-only quantized weight excepted: RLX dequantizes it in the
graph), and every value a node computes from exact-judged tensors when

- the node's op is value-exact (`lower.registry.value_exact`: kinds `movement` and `exact`, declared on
  its `@lowers`): data movement and selection, rounding to an integer, sign, negation, absolute value; or
- its results are integers or bool (integer arithmetic, comparisons, casts to an integer and index
  results are exact functions of exact inputs).

A tensor a node writes in place (batch norm's running statistics) is exact-judged after that node only
if the node's results are.

Everything else, and everything computed from it, keeps the float budgets: `round(matmul(x))` is not
exact-judged, since the matmul may legitimately differ by an ULP and the rounding then by one at a tie.

Outputs and per-node cumulative values are judged with their value's criterion; a node's local
(reference-fed) value is bit-exact whenever its op is value-exact, its inputs being PyTorch's own.
"""

from __future__ import annotations

from ..dtypes import COMPLEX_PARTS, RECORDS
from ..torchir import TensorSpec, TorchIR, WeightSpec, arg_reads

# float and complex dtypes (a complex value is float pairs: judged as its parts are)
_FLOAT = {r.name for r in RECORDS.values() if r.eps is not None} | set(COMPLEX_PARTS)


def complex_names(ir: TorchIR) -> set[str]:
    """The names of `ir`'s complex values (inputs, weights and node outputs)."""
    declared: list[TensorSpec | WeightSpec] = [*ir.inputs, *ir.weights, *(o for n in ir.nodes for o in n.outputs)]
    return {s.name for s in declared if s.dtype in COMPLEX_PARTS}


def exact_values(ir: TorchIR) -> set[str]:
    """The names of the exact-judged values of `ir` (module docstring): inputs, weights (by torch-ir
    name) and node outputs. Symbolic shapes need no binding: the judgement is structural."""
    from ..lower.complexes import complex_kind
    from ..lower.registry import VALUE_EXACT_KINDS, _schema, value_exact
    from ..lower.writes import written_arguments

    quantized = set(ir.quantize["weights"]) if ir.quantize else set()
    known = {s.name for s in ir.inputs} | {w.name for w in ir.weights if w.key not in quantized}
    complex_values = complex_names(ir)
    for node in ir.nodes:
        reads = node.reads()
        # an op's complex form (`lower.complexes.complex_kind`: complex abs, multiply, ...) has its own kind
        complex_form = complex_kind(node, complex_values)
        exact = all(name in known for name in reads) and (
            (value_exact(node.target) if complex_form is None else complex_form in VALUE_EXACT_KINDS)
            or all(o.dtype not in _FLOAT for o in node.outputs if o.dtype != "none")
        )
        if exact:
            known |= {o.name for o in node.outputs if o.dtype != "none"}
        elif written := written_arguments(node.target):  # later reads see what the node wrote
            names = _schema(node.target)[0]
            given = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
            known -= {t for i in written if i < len(names) for t in arg_reads(given.get(names[i]))}
    return known


def exact_outputs(ir: TorchIR) -> set[str]:
    """The float outputs of `ir` (by output name) judged bit for bit: their value is exact-judged
    (`exact_values`). Integer and bool outputs are judged exactly anyway (`budgets.is_exact`)."""
    known = exact_values(ir)
    return {o.name for o in ir.outputs if o.dtype in _FLOAT and o.value in known}
