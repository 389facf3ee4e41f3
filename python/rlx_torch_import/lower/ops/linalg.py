"""Matrix products (linear, addmm, mm, bmm, matmul) and pairwise distances (cdist, pdist)."""

from __future__ import annotations

import math

import numpy as np

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


def _weight_t(b: Builder, w: Value) -> Value:
    """[out, in] -> [in, out] for x @ W^T."""
    return b.transpose(w, [1, 0]) if w.rank == 2 else b.reshape(w, (w.dims[0], 1))


@lowers("aten.linear.default", kind="contraction")
def linear(b: Builder, call: Call) -> Value:
    """input @ weight^T + bias."""
    x, w = call.tensor("input"), call.tensor("weight")
    x2 = b.reshape(x, (1, x.dims[0])) if x.rank == 1 else x
    y = b.matmul(x2, _weight_t(b, w))
    bias = call.get("bias")
    if bias is not None:
        y = b.binary("Add", y, bias)
    return b.reshape(y, call.out_dims)


@lowers("aten.addmm.default", kind="contraction")
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


@lowers("aten.addbmm.default", kind="contraction")
def addbmm(b: Builder, call: Call) -> Value:
    """beta * self + alpha * sum_i(batch1[i] @ batch2[i]), the batch sum as one matmul:
    [n, B * k] @ [B * k, m] (batch1's batch axis moved inside its rows)."""
    b1, b2 = call.tensor("batch1"), call.tensor("batch2")
    batches, n, k = b1.dims
    m = b2.dims[2]
    rows = b.reshape(b.transpose(b1, [1, 0, 2]), (n, batches * k))
    prod = b.matmul(rows, b.reshape(b2, (batches * k, m)))
    dtype = call.out_dtype
    prod = b.cast(prod, dtype)
    alpha, beta = call.get("alpha", 1), call.get("beta", 1)
    if alpha != 1:
        prod = b.binary("Mul", prod, b.opmath(alpha, dtype))
    if beta == 0:  # self is ignored (NaN in it does not propagate), as in torch
        return b.expand(prod, call.out_dims)
    bias = b.cast(call.tensor("self"), dtype)
    if beta != 1:
        bias = b.binary("Mul", bias, b.opmath(beta, dtype))
    return b.expand(b.binary("Add", prod, bias), call.out_dims)


def _check_int_mm(call: Call) -> str | None:
    a, c = call["self"], call["mat2"]
    if getattr(a, "dtype", "int8") != "int8" or getattr(c, "dtype", "int8") != "int8":
        return "_int_mm takes int8 operands only (as torch's kernel)"
    return None


@lowers("aten._int_mm.default", check=_check_int_mm, kind="contraction")
def int_mm(b: Builder, call: Call) -> Value:
    """int8 self @ int8 mat2 accumulated in int32, exactly (the products summed in int64, which wraps to
    int32 like torch's int32 accumulator)."""
    return b.matmul(b.cast(call.tensor("self"), "int32"), b.cast(call.tensor("mat2"), "int32"))


@lowers("aten.mm.default", "aten.bmm.default", kind="contraction")
def mm(b: Builder, call: Call) -> Value:
    """self @ mat2 (2-D or batched 3-D)."""
    return b.matmul(call.tensor("self"), call.tensor("mat2"))


@lowers("aten.matmul.default", kind="contraction")
def matmul(b: Builder, call: Call) -> Value:
    """torch.matmul with numpy rules: 1-D operands are promoted then squeezed."""
    x, y = call.tensor("self"), call.tensor("other")
    x2 = b.reshape(x, (1, x.dims[0])) if x.rank == 1 else x
    y2 = b.reshape(y, (y.dims[0], 1)) if y.rank == 1 else y
    return b.reshape(b.matmul(x2, y2), call.out_dims)


# ── determinant ──────────────────────────────────────────────────────────

# Gaussian elimination is unrolled over the matrix size: n steps of O(1) nodes each.
MAX_DET_N = 64


def _det_input(call: Call) -> Value:
    return call.tensor("self" if call.target == "aten.det.default" else "A")


def _check_det(call: Call) -> str | None:
    a = call["self" if call.target == "aten.det.default" else "A"]
    if a.dtype not in ("float32", "float64"):
        return f"det of {a.dtype} is not supported (torch's LU runs on float32/float64)"
    if a.dims[-1] > MAX_DET_N:
        return (
            f"det of a {a.dims[-1]}x{a.dims[-1]} matrix is not supported (the elimination is unrolled per "
            f"column; n <= {MAX_DET_N})"
        )
    return None


@lowers("aten._linalg_det.default", "aten.linalg_det.default", check=_check_det, kind="reduction")
@lowers("aten.det.default", check=_check_det)
def det(b: Builder, call: Call) -> Value | list[Value | None]:
    """det(A) by Gaussian elimination with partial pivoting, as LAPACK's LU: per column the row of largest
    |value| (the first on ties) becomes the pivot, det is the product of the pivots, negated per row swap; a
    zero column gives det 0. (_linalg_det's LU and pivots outputs are not computed.)"""
    a = _det_input(call)
    dtype, n = a.dtype, a.dims[-1]
    batch = math.prod(a.dims[:-2])
    det_value = b.expand(b.const(1.0, dtype), (batch,))
    s = b.reshape(a, (batch, n, n))  # the trailing block still to eliminate
    zero = b.const(0.0, dtype)
    for m in range(n, 0, -1):
        col = b.reshape(b.narrow(s, 2, 0, 1), (batch, m))
        if m == 1:
            det_value = b.binary("Mul", det_value, b.reshape(col, (batch,)))
            break
        _, p = b.arg_extreme("Max", b.unary("Abs", col), 1, keep_dim=True)
        hot = b.compare(
            "Eq", b.expand(b.const(np.arange(m).reshape(1, m), "int64"), (batch, m)), b.expand(p, (batch, m))
        )
        hot3 = b.expand(b.reshape(hot, (batch, m, 1)), (batch, m, m))
        pivot_row = b.reduce("Sum", b.emit("Where", [hot3, s, b.expand(zero, s.dims)], s.dims, dtype), [1], False)
        first = b.reshape(b.narrow(s, 1, 0, 1), (batch, 1, m))
        s = b.emit("Where", [hot3, b.expand(first, s.dims), s], s.dims, dtype)  # row p takes row 0's place
        swapped = b.compare("Ne", b.reshape(p, (batch,)), b.const(0, "int64"))
        det_value = b.emit("Where", [swapped, b.unary("Neg", det_value), det_value], (batch,), dtype)
        pivot = b.reshape(b.narrow(pivot_row, 1, 0, 1), (batch,))
        det_value = b.binary("Mul", det_value, pivot)
        below = b.reshape(b.narrow(b.narrow(s, 1, 1, m - 1), 2, 0, 1), (batch, m - 1))
        factors = b.binary("Div", below, b.reshape(pivot, (batch, 1)))
        singular = b.expand(b.reshape(b.compare("Eq", pivot, zero), (batch, 1)), (batch, m - 1))
        factors = b.emit("Where", [singular, b.expand(zero, (batch, m - 1)), factors], (batch, m - 1), dtype)
        rest = b.narrow(b.narrow(s, 1, 1, m - 1), 2, 1, m - 1)
        update = b.binary(
            "Mul", b.reshape(factors, (batch, m - 1, 1)), b.reshape(b.narrow(pivot_row, 1, 1, m - 1), (batch, 1, m - 1))
        )
        s = b.binary("Sub", rest, update)
    det_value = b.reshape(det_value, a.dims[:-2])
    return [det_value, None, None] if call.target == "aten._linalg_det.default" else det_value


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
