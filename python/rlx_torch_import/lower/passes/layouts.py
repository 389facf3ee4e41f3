"""`fold_param_layouts`: a `Transpose` or `Reshape` of a parameter becomes a parameter stored in the new layout.

`Program.derived_params` records the move; the bundle writer applies it to the weight's bytes
(`weights.py`). `Linear` lowers to `x @ W^T`; RLX 0.2.19 merges that transpose into its GEMM only
for 2-D, bias-free matmuls, and otherwise transposes the weight on every run (docs/design.md,
"Weights in the layout RLX reads").
"""

from __future__ import annotations

from ...program import DerivedParam, Program, RlxNode
from ._common import LAYOUT_OPS, op_variant


def fold_param_layouts(program: Program) -> int:
    """Store parameters in the layout their readers want; returns how many moves were folded."""
    params = {p.name: p for p in program.params}
    derived = program.derived_params
    renames: dict[str, str] = {}
    kept: list[RlxNode] = []
    folded = 0
    for node in program.nodes:
        inputs = tuple(renames.get(i, i) for i in node.inputs)
        variant = op_variant(node.op)
        if variant in LAYOUT_OPS and len(inputs) == 1 and inputs[0] in params and params[inputs[0]].dtype == node.dtype:
            src = params[inputs[0]]
            if variant == "Transpose":
                perm = tuple(int(p) for p in node.op["Transpose"]["perm"])
                step: tuple[str, tuple[int, ...]] = ("transpose", perm)
                suffix = "T" if perm == (1, 0) else "permute_" + "_".join(map(str, perm))
            else:
                step = ("reshape", node.dims)
                suffix = "reshape_" + "x".join(map(str, node.dims))
            base = derived.get(src.name)
            if not isinstance(base, DerivedParam):
                base = DerivedParam(src.name, ())
            name = f"{src.name}.{suffix}"
            if name not in params:
                derived[name] = DerivedParam(base.source, (*base.steps, step))
                params[name] = type(src)(name, node.dims, node.dtype)
                program.params.append(params[name])
            renames[node.id] = name
            folded += 1
            continue
        kept.append(
            node if inputs == node.inputs else RlxNode(node.id, node.op, inputs, node.dims, node.dtype, node.provenance)
        )
    program.nodes = kept
    program.outputs = [renames.get(o, o) for o in program.outputs]
    return folded
