"""Matrix products: linear, addmm, mm, bmm, matmul."""

from __future__ import annotations

from .context import Builder, Call, Value
from .registry import lowers


def _weight_t(b: Builder, w: Value) -> Value:
    """[out, in] -> [in, out] for x @ W^T."""
    return b.transpose(w, [1, 0]) if w.rank == 2 else b.reshape(w, (w.dims[0], 1))


@lowers("aten.linear.default")
def linear(b: Builder, call: Call) -> Value:
    """input @ weight^T + bias."""
    x, w = call.tensor("input"), call.tensor("weight")
    x2 = b.reshape(x, (1, x.dims[0])) if x.rank == 1 else x
    y = b.matmul(x2, _weight_t(b, w))
    bias = call.get("bias")
    if bias is not None:
        y = b.binary("Add", y, bias)
    return b.reshape(y, call.out_dims)


@lowers("aten.addmm.default")
def addmm(b: Builder, call: Call) -> Value:
    """beta * self + alpha * (mat1 @ mat2)."""
    prod = b.matmul(call.tensor("mat1"), call.tensor("mat2"))
    alpha, beta = call.get("alpha", 1), call.get("beta", 1)
    if alpha != 1:
        prod = b.binary("Mul", prod, b.const(alpha, prod.dtype))
    bias = call.tensor("self")
    if beta == 0:
        return prod
    if beta != 1:
        bias = b.binary("Mul", bias, b.const(beta, bias.dtype))
    return b.binary("Add", prod, bias)


@lowers("aten.mm.default", "aten.bmm.default")
def mm(b: Builder, call: Call) -> Value:
    """self @ mat2 (2-D or batched 3-D)."""
    return b.matmul(call.tensor("self"), call.tensor("mat2"))


@lowers("aten.matmul.default")
def matmul(b: Builder, call: Call) -> Value:
    """torch.matmul with numpy rules: 1-D operands are promoted then squeezed."""
    x, y = call.tensor("self"), call.tensor("other")
    x2 = b.reshape(x, (1, x.dims[0])) if x.rank == 1 else x
    y2 = b.reshape(y, (y.dims[0], 1)) if y.rank == 1 else y
    return b.reshape(b.matmul(x2, y2), call.out_dims)
