"""Reductions and softmax."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import FLOAT_DTYPES, cpu_accumulate
from ..builder import Builder
from ..call import Call, Value, norm_axis
from ..registry import lowers
from ..rlx import exact
from ._common import floor_divide


def _axes(call: Call, x: Value) -> list[int]:
    dims = call.get("dim")
    if dims is None or dims == []:
        return list(range(x.rank))
    return [norm_axis(d, x.rank) for d in ([dims] if isinstance(dims, int) else dims)]


def _reduce(op: str):  # noqa: ANN202 - factory returning a lowering
    def lower_reduce(b: Builder, call: Call) -> Value:
        x = b.cast(call.tensor("self"), call.out_dtype)
        y = b.reduce(op, x, _axes(call, x), bool(call.get("keepdim", False)))
        return b.reshape(y, call.out_dims)

    lower_reduce.__name__ = f"reduce_{op.lower()}"
    lower_reduce.__doc__ = f"Reduce {op} over `dim` (all axes when empty)."
    return lower_reduce


lowers("aten.mean.dim", "aten.mean.default", kind="reduction")(_reduce("Mean"))
lowers("aten.sum.dim_IntList", "aten.sum.default", kind="reduction")(_reduce("Sum"))
lowers("aten.amax.default", kind="reduction")(_reduce("Max"))
lowers("aten.amin.default", kind="reduction")(_reduce("Min"))


@lowers("aten.any.dim", "aten.any.dims", "aten.any.default")
def any_(b: Builder, call: Call) -> Value:
    """any(x) == max(x != 0) over the axes (uint8 input gives uint8, as in torch)."""
    x = call.tensor("self")
    f = b.cast(x, "float32")
    m = b.reduce("Max", f, _axes(call, x), bool(call.get("keepdim", False)))
    return b.cast(b.reshape(b.compare("Ne", m, b.const(0.0, "float32")), call.out_dims), call.out_dtype)


def _check_softmax(call: Call) -> str | None:
    if call.get("half_to_float", False):
        return "half_to_float=True is not supported"
    return None


@lowers("aten._softmax.default", "aten.softmax.int", check=_check_softmax, kind="reduction")
def softmax(b: Builder, call: Call) -> Value:
    """Softmax along one axis."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    axis = norm_axis(call["dim"], x.rank)
    return b.emit({"Softmax": {"axis": axis}}, [x], x.dims, x.dtype)


@lowers("aten._log_softmax.default", "aten.log_softmax.int", check=_check_softmax, kind="reduction")
def log_softmax(b: Builder, call: Call) -> Value:
    """x - max - log(sum(exp(x - max))) along one axis (stable; no log of a tiny softmax)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    axis = norm_axis(call["dim"], x.rank)
    shifted = b.binary("Sub", x, b.reduce("Max", x, [axis], keep_dim=True))
    total = b.reduce("Sum", b.unary("Exp", shifted), [axis], keep_dim=True)
    return b.binary("Sub", shifted, b.unary("Log", total))


def _scan(kind: str):  # noqa: ANN202 - factory returning a lowering
    def lower_scan(b: Builder, call: Call) -> Value:
        source = call.tensor("self")
        axis = norm_axis(call["dim"], source.rank)
        wide = cpu_accumulate(call.out_dtype)
        if call.out_dtype == "float32" and axis in b.program.dynamic_axes.get(call.tensor_name("self"), ()):
            # The float64 scan's step count follows the length; one graph for every size needs RLX's float32
            # scan (README, Limits).
            wide = "float32"
        x = b.cast(source, wide)
        y = b.emit({kind: {"axis": axis, "exclusive": False}}, [x], x.dims, x.dtype)
        return b.cast(y, call.out_dtype)

    lower_scan.__name__ = kind.lower()
    what = "sum" if kind == "Cumsum" else "product"
    lower_scan.__doc__ = (
        f"Inclusive running {what} along `dim`, accumulated as torch's CPU kernel does (float32 in float64, "
        "halves in float32, integers in int64) and rounded to the result dtype."
    )
    return lower_scan


lowers("aten.cumsum.default", kind="reduction")(_scan("Cumsum"))
lowers("aten.cumprod.default", kind="reduction")(_scan("CumProd"))


def _log_add_exp(b: Builder, p: Value, q: Value) -> Value:
    """log(exp(p) + exp(q)) == max + log1p(exp(min - max)), stable at any magnitude; max itself where it is
    infinite (both -inf, or +inf), as torch's helper; NaN propagates through max."""
    high, low = b.binary("Max", p, q), b.binary("Min", p, q)
    value = b.binary("Add", high, exact.log1p(b, b.unary("Exp", b.binary("Sub", low, high))))
    infinite = b.compare("Eq", b.unary("Abs", high), b.const(math.inf, high.dtype))
    return b.emit("Where", [infinite, high, value], high.dims, high.dtype)


def _check_logcumsumexp(call: Call) -> str | None:
    x = call["self"]
    if getattr(x, "dtype", "float32") not in FLOAT_DTYPES:
        return f"logcumsumexp on {x.dtype} is not supported (floating point only, as in torch)"
    return None


@lowers("aten.logcumsumexp.default", check=_check_logcumsumexp, kind="reduction")
def logcumsumexp(b: Builder, call: Call) -> Value:
    """log(cumsum(exp(x))) along `dim`, stably: a scan in log2(n) steps (Hillis-Steele) whose step is
    log-add-exp of running values (no exp of a large value, no log of an underflowed sum), in torch's
    accumulate dtype (float64 for float32)."""
    x = b.cast(call.tensor("self"), cpu_accumulate(call.out_dtype))
    if x.rank == 0:
        return b.cast(x, call.out_dtype)
    y, back = b.to_last_axis(x, norm_axis(call["dim"], x.rank))
    n, last = y.dims[-1], y.rank - 1
    step = 1
    while step < n:
        fill = b.expand(b.const(-math.inf, y.dtype), (*y.dims[:-1], step))
        shifted = b.emit({"Concat": {"axis": last}}, [fill, b.narrow(y, last, 0, n - step)], y.dims, y.dtype)
        y = _log_add_exp(b, y, shifted)
        step *= 2
    return b.cast(b.transpose(y, back), call.out_dtype)


@lowers("aten.cummax.default", "aten.cummin.default")
def cummax_cummin(b: Builder, call: Call) -> list[Value | None]:
    """(values, int64 indices) of the running max/min along `dim`. As torch's CPU kernel: a NaN, once
    seen, stays the value; the index moves to every later element equal to the running value (ties and
    NaNs take the latest index)."""
    x = call.tensor("self")
    is_max = call.target == "aten.cummax.default"
    if x.rank == 0:
        return [x, b.const(np.zeros((), dtype=np.int64), "int64")]
    y, back = b.to_last_axis(x, norm_axis(call["dim"], x.rank))
    floating = y.dtype in FLOAT_DTYPES
    work = y if floating else b.cast(y, "int64")
    if floating:
        identity: float = -math.inf if is_max else math.inf
    else:
        identity = int(np.iinfo(np.int64).min if is_max else np.iinfo(np.int64).max)
    values = exact.scan(b, "Max" if is_max else "Min", work, identity)
    hit = b.cast(b.compare("Eq", work, values), "int64")
    if floating:  # NaN == NaN: the latest NaN is the index once the running value is NaN
        hit = b.binary("Max", hit, b.cast(exact.is_nan(b, work), "int64"))
    n = y.dims[-1]
    positions = b.expand(b.const(np.arange(n, dtype=np.int64), "int64"), y.dims)
    latest = b.binary("Sub", b.binary("Mul", hit, b.binary("Add", positions, b.const(1, "int64"))), b.const(1, "int64"))
    indices = exact.scan(b, "Max", latest, -1)
    return [b.cast(b.transpose(values, back), x.dtype), b.transpose(indices, back)]


lowers("aten.prod.dim_int", "aten.prod.default", kind="reduction")(_reduce("Prod"))


@lowers("aten.all.dim", "aten.all.dims", "aten.all.default")
def all_(b: Builder, call: Call) -> Value:
    """all(x) == min(x != 0) over the axes (uint8 input gives uint8, as in torch)."""
    x = call.tensor("self")
    truth = b.cast(b.compare("Ne", b.as_float(x), b.const(0.0, "float32")), "float32")
    m = b.reduce("Min", truth, _axes(call, x), bool(call.get("keepdim", False)))
    return b.cast(b.reshape(b.compare("Ne", m, b.const(0.0, "float32")), call.out_dims), call.out_dtype)


@lowers("aten.max.default", "aten.min.default", kind="reduction")
def max_min_all(b: Builder, call: Call) -> Value:
    """Largest / smallest element of the whole tensor."""
    x = call.tensor("self")
    op = "Max" if call.target == "aten.max.default" else "Min"
    return b.reshape(b.reduce(op, x, list(range(x.rank)), keep_dim=False), call.out_dims)


@lowers("aten.max.dim", "aten.min.dim", kind="reduction")
def max_min_dim(b: Builder, call: Call) -> list[Value | None]:
    """(values, indices) of the largest / smallest element along `dim`."""
    x = call.tensor("self")
    axis, keep = norm_axis(call["dim"], x.rank), bool(call.get("keepdim", False))
    is_max = call.target == "aten.max.dim"
    values, indices = b.arg_extreme("Max" if is_max else "Min", x, axis, keep)
    return [values, indices]


def _var_mean(b: Builder, call: Call) -> tuple[Value, Value]:
    """(sum((x - mean)^2) / (N - correction), mean) over `dim`, shaped as torch records them
    (`.dim`/`.default` overloads: unbiased=True means correction 1; a non-positive divisor gives inf/nan as in
    torch)."""
    x = b.cast(call.tensor("self"), call.out_dtype)
    axes = _axes(call, x)
    if call.target.endswith((".dim", ".default")):
        correction = 1 if call.get("unbiased", True) else 0
    else:
        correction = call.get("correction", 1)
    n = math.prod(x.dims[a] for a in axes)
    keep = bool(call.get("keepdim", False))
    mean = b.reduce("Mean", x, axes, keep_dim=True)
    dev = b.binary("Sub", x, mean)
    total = b.reduce("Sum", b.binary("Mul", dev, dev), axes, keep)
    var = b.binary("Div", total, b.const(float(max(n - correction, 0)), x.dtype))
    return b.reshape(var, call.out_dims), b.reshape(mean, call.out_dims)


@lowers("aten.var.correction", "aten.var.dim", "aten.var.default", kind="reduction")
def var(b: Builder, call: Call) -> Value:
    """sum((x - mean)^2) / (N - correction) over `dim` (unbiased=True means correction 1)."""
    return _var_mean(b, call)[0]


@lowers("aten.std.correction", "aten.std.dim", "aten.std.default", kind="reduction")
def std(b: Builder, call: Call) -> Value:
    """sqrt(var) over `dim`."""
    return b.unary("Sqrt", _var_mean(b, call)[0])


@lowers(
    "aten.var_mean.correction",
    "aten.var_mean.dim",
    "aten.var_mean.default",
    "aten.std_mean.correction",
    "aten.std_mean.dim",
    "aten.std_mean.default",
    kind="reduction",
)
def var_std_mean(b: Builder, call: Call) -> list[Value | None]:
    """(var or sqrt(var), mean) over `dim`."""
    var, mean = _var_mean(b, call)
    return [b.unary("Sqrt", var) if "std_mean" in call.target else var, mean]


# ── order statistics: kthvalue, median, nanmedian ────────────────────────────────────────────


def _check_order_statistic(call: Call) -> str | None:
    if getattr(call["self"], "dtype", "float32") == "bool":
        return f"{call.target} on bool is not supported (torch's CPU kernel refuses bool too)"
    return None


def _ascending(b: Builder, x: Value) -> tuple[Value, Value]:
    """(x with its last axis sorted ascending, the int64 positions it came from): a stable sort, NaN last."""
    axis = x.rank - 1
    order = b.cast(b.emit({"ArgSort": {"axis": axis, "descending": False}}, [x], x.dims, "float32"), "int64")
    return exact.gather_along(b, x, order, axis), order


def _order_statistic(b: Builder, call: Call, pick: str) -> tuple[Value, Value]:
    """(values, int64 indices) of the order statistic `pick` ("kth", "median", "nanmedian") along `dim`, shaped
    as torch gives them. Values are torch's; an index among tied values is the lowest (torch's CPU selection,
    quick-select or std::nth_element, leaves another: `verify/ties.py` judges RLX's choice)."""
    x = call.tensor("self")
    if x.rank == 0:
        return x, b.const(np.zeros((), dtype=np.int64), "int64")
    whole = call.target.endswith("median.default")
    if whole:
        x, axis, keep = b.reshape(x, (x.numel,)), 0, False
    else:
        axis, keep = norm_axis(call.get("dim", -1), x.rank), bool(call.get("keepdim", False))
    xt, back = b.to_last_axis(x, axis)
    n, last = xt.dims[-1], xt.rank - 1
    floating = xt.dtype in FLOAT_DTYPES
    _, order = _ascending(b, xt)
    row = (*xt.dims[:-1], 1)
    if pick == "kth":
        at = b.narrow(order, last, int(call["k"]) - 1, 1)
    elif pick == "median" or not floating:
        at = b.narrow(order, last, (n - 1) // 2, 1)
    else:  # nanmedian: the lower median of the non-NaN values ((m - 1) // 2, 0 for an all-NaN row, as torch)
        nans = b.reduce("Sum", b.cast(exact.is_nan(b, xt), "int64"), [last], keep_dim=True)
        count = b.binary("Max", b.binary("Sub", b.const(n - 1, "int64"), nans), b.const(0, "int64"))
        at = exact.gather_along(b, order, floor_divide(b, count, b.const(2, "int64")), last)
    if pick == "median" and floating and not b.nan_free(xt):  # torch returns the first NaN of a row holding one
        positions = b.expand(b.const(np.arange(n, dtype=np.float32), "float32"), xt.dims)
        where_nan = b.emit(
            "Where",
            [exact.is_nan(b, xt), positions, b.expand(b.const(float(n), "float32"), xt.dims)],
            xt.dims,
            "float32",
        )
        first = b.reduce("Min", where_nan, [last], keep_dim=True)  # n where the row has no NaN
        has_nan = b.compare("Lt", first, b.const(float(n), "float32"))
        at = b.emit("Where", [has_nan, b.cast(first, "int64"), at], row, "int64")
    values = exact.gather_along(b, xt, at, last)
    out = row if keep else row[:-1]
    values, at = b.reshape(values, out), b.reshape(at, out)
    if keep:
        values, at = b.transpose(values, back), b.transpose(at, back)
    return values, at


@lowers("aten.kthvalue.default", check=_check_order_statistic, kind="movement")
def kthvalue(b: Builder, call: Call) -> list[Value | None]:
    """(values, indices) of the k-th smallest element along `dim` (NaN above +inf), from a stable sort."""
    return list(_order_statistic(b, call, "kth"))


@lowers("aten.median.dim", check=_check_order_statistic, kind="movement")
def median_dim(b: Builder, call: Call) -> list[Value | None]:
    """(values, indices) of the lower median along `dim`; a row holding NaN gives NaN at its first NaN (torch)."""
    return list(_order_statistic(b, call, "median"))


@lowers("aten.nanmedian.dim", check=_check_order_statistic, kind="movement")
def nanmedian_dim(b: Builder, call: Call) -> list[Value | None]:
    """(values, indices) of the lower median of the non-NaN elements along `dim` (NaN for an all-NaN row)."""
    return list(_order_statistic(b, call, "nanmedian"))


# Not "movement": where -0.0 and 0.0 tie at the median, which one torch's std::nth_element returns is its
# selection's choice (no index output to re-read it at), so the value is judged by value, not by its bits.
@lowers("aten.median.default", "aten.nanmedian.default", check=_check_order_statistic)
def median_all(b: Builder, call: Call) -> Value:
    """The lower median of all elements (median: NaN if any is NaN; nanmedian: of the non-NaN ones); a zero
    median is the first zero in index order (torch's sign of zero there is its selection's choice)."""
    return _order_statistic(b, call, "median" if call.target == "aten.median.default" else "nanmedian")[0]
