"""Matrix products (linear, addmm, mm, bmm, matmul) and pairwise distances (cdist, pdist)."""

from __future__ import annotations

import math

import numpy as np

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
        prod = b.binary("Mul", prod, b.opmath(alpha, prod.dtype))
    bias = call.tensor("self")
    if beta == 0:
        return prod
    if beta != 1:
        bias = b.binary("Mul", bias, b.opmath(beta, bias.dtype))
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


# ── pairwise distances: cdist / pdist ────────────────────────────────────

FLOATS = ("float32", "float64", "float16", "bfloat16")


def _check_distance(call: Call) -> str | None:
    x = call.tensor("x1" if call.target == "aten._cdist_forward.default" else "self")
    if x.dtype not in FLOATS:
        return f"{call.target} on {x.dtype} is not supported (float only, as in torch)"
    if call["p"] < 0:
        return f"p={call['p']} is not supported (torch requires p >= 0)"
    return None


def _p_norm(b: Builder, diff: Value, p: float) -> Value:
    """p-norm of diff over the last axis: p = 0 counts nonzeros, p = inf is the largest magnitude."""
    axis = diff.rank - 1
    a = b.unary("Abs", diff)
    if p == 0:
        nonzero = b.cast(b.compare("Ne", a, b.const(0.0, a.dtype)), a.dtype)
        return b.reduce("Sum", nonzero, [axis], keep_dim=False)
    if math.isinf(p):
        return b.reduce("Max", a, [axis], keep_dim=False)
    if p == 1:
        return b.reduce("Sum", a, [axis], keep_dim=False)
    if p == 2:
        return b.unary("Sqrt", b.reduce("Sum", b.binary("Mul", diff, diff), [axis], keep_dim=False))
    total = b.reduce("Sum", b.binary("Pow", a, b.opmath(p, a.dtype)), [axis], keep_dim=False)
    return b.binary("Pow", total, b.opmath(1.0 / p, a.dtype))


def _euclidean_mm(b: Builder, x1: Value, x2: Value) -> Value:
    """torch's matmul form of p = 2: [-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, clamped at 0, sqrt."""
    n1 = b.reduce("Sum", b.binary("Mul", x1, x1), [x1.rank - 1], keep_dim=True)
    n2 = b.reduce("Sum", b.binary("Mul", x2, x2), [x2.rank - 1], keep_dim=True)
    one1, one2 = b.expand(b.const(1.0, x1.dtype), n1.dims), b.expand(b.const(1.0, x2.dtype), n2.dims)
    left = [b.binary("Mul", x1, b.const(-2.0, x1.dtype)), n1, one1]
    right = [x2, one2, n2]
    axis = x1.rank - 1
    a = b.emit({"Concat": {"axis": axis}}, left, (*x1.dims[:-1], x1.dims[-1] + 2), x1.dtype)
    c = b.emit({"Concat": {"axis": axis}}, right, (*x2.dims[:-1], x2.dims[-1] + 2), x2.dtype)
    perm = [*range(c.rank - 2), c.rank - 1, c.rank - 2]
    sq = b.binary("Max", b.matmul(a, b.transpose(c, perm)), b.const(0.0, x1.dtype))
    return b.unary("Sqrt", sq)


@lowers("aten._cdist_forward.default", check=_check_distance)
def cdist(b: Builder, call: Call) -> Value:
    """out[..., i, j] = p-norm of x1[..., i, :] - x2[..., j, :] (p = 2 by matmul where torch's compute_mode does)."""
    x1, x2, p = call.tensor("x1"), call.tensor("x2"), float(call["p"])
    dims, dtype = call.out_dims, call.out_dtype
    batch = dims[:-2]
    x1 = b.expand(x1, (*batch, *x1.dims[-2:]))
    x2 = b.expand(x2, (*batch, *x2.dims[-2:]))
    r1, r2, m = x1.dims[-2], x2.dims[-2], x1.dims[-1]
    if m == 0 or r1 == 0 or r2 == 0:
        return b.expand(b.const(0.0, dtype), dims)
    mode = call.get("compute_mode", 0)
    if p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25))):
        return _euclidean_mm(b, x1, x2)
    diff = b.binary("Sub", b.reshape(x1, (*batch, r1, 1, m)), b.reshape(x2, (*batch, 1, r2, m)))
    return _p_norm(b, diff, p)


@lowers("aten._pdist_forward.default", check=_check_distance)
def pdist(b: Builder, call: Call) -> Value:
    """p-norm of x[i] - x[j] for every row pair i < j, in row-major order (two row gathers, then the norm)."""
    x, p = call.tensor("self"), float(call.get("p", 2.0))
    n, m = x.dims
    i, j = np.triu_indices(n, k=1)
    if len(i) == 0 or m == 0:
        return b.expand(b.const(0.0, call.out_dtype), call.out_dims)
    rows_i = b.emit({"Gather": {"axis": 0}}, [x, b.const(i.astype(np.int64), "int64")], (len(i), m), x.dtype)
    rows_j = b.emit({"Gather": {"axis": 0}}, [x, b.const(j.astype(np.int64), "int64")], (len(j), m), x.dtype)
    return _p_norm(b, b.binary("Sub", rows_i, rows_j), p)
