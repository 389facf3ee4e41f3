"""`fold_batch_norm`: eval batch norm folded into the convolution that feeds it, or one multiply and one add."""

from __future__ import annotations

from typing import Any

from ...program import FoldedBatchNorm, Program, RlxNode, ValueDecl
from ._common import claim_param, op_variant, use_counts, value_dims


def fold_batch_norm(program: Program) -> int:
    """Eval batch norm without its channels-last transposes: folded into the convolution that feeds
    it (weight scaled per output channel, one bias add) or, with no convolution, one multiply and
    one add in the input's own layout. float32 only; returns how many were folded."""
    by_id = {n.id: n for n in program.nodes}
    params = {p.name: p for p in program.params}
    all_dims = value_dims(program)
    uses = use_counts(program)
    consumers: dict[str, list[RlxNode]] = {}
    for n in program.nodes:
        for i in n.inputs:
            consumers.setdefault(i, []).append(n)

    def is_f32_param(v: str) -> bool:
        return v in params and params[v].dtype == "F32"

    drop: set[str] = set()
    insert: dict[str, list[RlxNode]] = {}  # new nodes placed where a batch norm was
    rewire: dict[str, RlxNode] = {}  # replaced nodes, same id
    renames: dict[str, str] = {}
    folded = 0
    for bn in program.nodes:
        if op_variant(bn.op) != "BatchNormInference" or bn.dtype != "F32":
            continue
        moved, gamma, beta, mean, var = bn.inputs
        if not all(is_f32_param(v) for v in (gamma, beta, mean, var)):
            continue
        pre = by_id.get(moved)
        if pre is not None and op_variant(pre.op) == "Transpose" and uses.get(moved) == 1:
            post = consumers.get(bn.id, [])
            if len(post) != 1 or op_variant(post[0].op) != "Transpose" or uses.get(bn.id) != 1:
                continue
            x, out_id, gone = pre.inputs[0], post[0].id, {pre.id, bn.id, post[0].id}
        elif len(bn.dims) <= 2:
            x, out_id, gone = moved, bn.id, {bn.id}
        else:
            continue
        x_dims = all_dims.get(x)
        channels = bn.dims[-1]
        if x_dims is None or len(x_dims) < 2 or x_dims[1] != channels:
            continue
        per_channel = (1, channels) + (1,) * (len(x_dims) - 2)
        eps = float(bn.op["BatchNormInference"]["eps"])
        where = bn.provenance
        fold: dict[str, Any] = {"gamma": gamma, "beta": beta, "mean": mean, "var": var, "eps": eps}
        conv, bias_add, conv_bias = _conv_feeding(x, by_id, uses, is_f32_param)
        if conv is not None and conv.dims[1] == channels:
            w = conv.inputs[1]
            norm = gamma.removesuffix(".weight")  # the batch norm's module path (its weight is `<module>.weight`)
            w_name = _claim(
                program, params, f"{w}.bn_folded", FoldedBatchNorm("weight", w, dims=params[w].dims, **fold)
            )
            b_name = _claim(
                program, params, f"{norm}.bn_folded_bias", FoldedBatchNorm("bias", conv_bias, dims=per_channel, **fold)
            )
            rewire[conv.id] = RlxNode(
                conv.id, conv.op, (conv.inputs[0], w_name, *conv.inputs[2:]), conv.dims, conv.dtype, conv.provenance
            )
            if bias_add is not None:
                rewire[bias_add.id] = RlxNode(
                    bias_add.id, bias_add.op, (conv.id, b_name), bias_add.dims, bias_add.dtype, bias_add.provenance
                )
                renames[out_id] = bias_add.id
            else:
                shifted = RlxNode(f"{bn.id}.shift", {"Binary": "Add"}, (conv.id, b_name), x_dims, "F32", where)
                insert[bn.id] = [shifted]
                renames[out_id] = shifted.id
        else:
            norm = gamma.removesuffix(".weight")
            s_name = _claim(
                program, params, f"{norm}.bn_scale", FoldedBatchNorm("scale", None, dims=per_channel, **fold)
            )
            t_name = _claim(
                program, params, f"{norm}.bn_shift", FoldedBatchNorm("shift", None, dims=per_channel, **fold)
            )
            scaled = RlxNode(f"{bn.id}.scaled", {"Binary": "Mul"}, (x, s_name), x_dims, "F32", where)
            shifted = RlxNode(f"{bn.id}.shift", {"Binary": "Add"}, (scaled.id, t_name), x_dims, "F32", where)
            insert[bn.id] = [scaled, shifted]
            renames[out_id] = shifted.id
        drop |= gone
        folded += 1
    if not folded:
        return 0
    nodes: list[RlxNode] = []
    for n in program.nodes:
        nodes.extend(insert.get(n.id, []))
        if n.id in drop:
            continue
        n = rewire.get(n.id, n)
        if any(i in renames for i in n.inputs):
            n = RlxNode(n.id, n.op, tuple(renames.get(i, i) for i in n.inputs), n.dims, n.dtype, n.provenance)
        nodes.append(n)
    program.nodes = nodes
    program.outputs = [renames.get(o, o) for o in program.outputs]
    return folded


def _claim(program: Program, params: dict[str, ValueDecl], base: str, recipe: FoldedBatchNorm) -> str:
    """The parameter holding `recipe` (a convolution and batch norm applied twice share one)."""
    return claim_param(program, params, base, recipe, recipe.dims)


def _conv_feeding(
    x: str, by_id: dict[str, RlxNode], uses: dict[str, int], is_f32_param: Any
) -> tuple[RlxNode | None, RlxNode | None, str | None]:
    """The convolution whose result only this batch norm reads: (conv, its bias add or None, bias param)."""
    node = by_id.get(x)
    if node is None or uses.get(x) != 1:
        return None, None, None
    if op_variant(node.op) == "Binary" and node.op["Binary"] == "Add" and is_f32_param(node.inputs[1]):
        conv = by_id.get(node.inputs[0])
        if (
            conv is not None
            and op_variant(conv.op) == "Conv"
            and uses.get(conv.id) == 1
            and is_f32_param(conv.inputs[1])
        ):
            return conv, node, node.inputs[1]
        return None, None, None
    if op_variant(node.op) == "Conv" and len(node.inputs) == 2 and is_f32_param(node.inputs[1]):
        return node, None, None
    return None, None, None
