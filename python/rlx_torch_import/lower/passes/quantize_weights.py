"""`quantize_weights`: a `Linear` whose weight the conversion quantized (`quant/schemes.py`, torch-ir's
`quantize` record) runs on RLX's `DequantMatMul` over the weight's packed blocks.

After `fold_param_layouts`, `aten.linear` is `MatMul(x, W.T)` with `W.T` a parameter derived from W by a
(1, 0) transpose (`lower/ops/linalg.py`). That node becomes

    Reshape(x) [m, k] -> DequantMatMul{scheme}(x2, W.<scheme>) [m, n] -> Reshape [..., n]

(no reshape for a 2-D x), the node's id kept on the last one; the bias `Add` after it is unchanged.
`W.<scheme>` is a uint8 parameter [packed bytes] (`program.QuantizedWeight`, computed from
weights.safetensors' W by the bundle writer). weights.safetensors holds W already dequantized, so the
float reference and the packed weight hold the same values: RLX's CPU kernel dequantizes the blocks to
exactly those float32 values and runs its GEMM.
"""

from __future__ import annotations

import math
from typing import Any

from ...program import DerivedParam, Program, QuantizedWeight, RlxNode, ValueDecl
from ...quant.schemes import BLOCK, SCHEMES, packed_size
from ._common import op_variant, splice, value_dims


def _transposed_source(program: Program, name: str) -> str | None:
    """W when parameter `name` is W [n, k] stored transposed (`W.T`, `fold_param_layouts`), else None."""
    d = program.derived_params.get(name)
    if isinstance(d, DerivedParam) and d.steps == (("transpose", (1, 0)),):
        return d.source
    return None


def quantize_weights(program: Program, record: dict[str, Any] | None) -> int:
    """Rewrite every float32 `x @ W^T` whose W the `record` lists (torch-ir `quantize`) into a
    `DequantMatMul`; returns how many matmuls were rewritten. W must be [n, k] with k a multiple of 32
    (the front end lists no other); one not read that way stays float (the report says so)."""
    if not record:
        return 0
    scheme = SCHEMES[record["scheme"]]
    wanted = set(record["weights"])
    params = {p.name: p for p in program.params}
    dims = value_dims(program)
    replaced: dict[str, list[RlxNode]] = {}
    for node in program.nodes:
        if op_variant(node.op) != "MatMul" or node.dtype != "F32" or len(node.inputs) != 2:
            continue
        x, wt = node.inputs
        source = _transposed_source(program, wt)
        if source is None or source not in wanted or params[wt].dtype != "F32" or len(params[wt].dims) != 2:
            continue
        k, n = params[wt].dims
        x_dims = dims[x]
        if k % BLOCK or x_dims[-1] != k or node.dims[-1] != n:
            continue
        name = f"{source}.{scheme.rlx}"
        if name not in params:
            program.derived_params[name] = QuantizedWeight(source, scheme.rlx, (n, k))
            params[name] = ValueDecl(name, (packed_size(n, k, scheme),), "U8")
            program.params.append(params[name])
        m = math.prod(x_dims[:-1])
        where = node.provenance
        chain: list[RlxNode] = []
        if len(x_dims) != 2:
            chain.append(RlxNode(f"{node.id}.rows", {"Reshape": {"new_shape": [m, k]}}, (x,), (m, k), "F32", where))
            x = chain[-1].id
        out = node.id if len(node.dims) == 2 else f"{node.id}.dequant"
        chain.append(RlxNode(out, {"DequantMatMul": {"scheme": scheme.rlx}}, (x, name), (m, n), "F32", where))
        if len(node.dims) != 2:
            new_shape = list(node.dims)
            chain.append(RlxNode(node.id, {"Reshape": {"new_shape": new_shape}}, (out,), node.dims, "F32", where))
        replaced[node.id] = chain
    return splice(program, replaced)
