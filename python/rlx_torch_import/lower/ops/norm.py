"""Normalization: layer norm and batch norm (eval) on RLX's fused kernels."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ...dtypes import HALF_DTYPES, compute_rlx
from ...sizes import sizes
from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


def _affine(b: Builder, given: Value | None, dims: tuple[int, ...], fill: float, dtype: str) -> Value:
    """The given gamma/beta, or a constant of ones/zeros when the module has none."""
    if given is not None:
        return b.reshape(given, dims)
    return b.expand(b.const(fill, dtype), dims)


def _last_axis_norm(b: Builder, call: Call, kind: str, bias: Value | None) -> Value:
    """LayerNorm/RmsNorm over the trailing `normalized_shape` axes, flattened into the last one."""
    x = call.tensor("input")
    k = len(call["normalized_shape"])
    inner = math.prod(x.dims[x.rank - k :])
    flat = b.reshape(x, (*x.dims[: x.rank - k], inner))
    gamma = _affine(b, call.get("weight"), (inner,), 1.0, x.dtype)
    beta = _affine(b, bias, (inner,), 0.0, x.dtype)
    y = b.emit({kind: {"axis": -1, "eps": float(call["eps"])}}, [flat, gamma, beta], flat.dims, x.dtype)
    return b.reshape(y, x.dims)


def _layer_norm(b: Builder, call: Call) -> Value:
    return _last_axis_norm(b, call, "LayerNorm", call.get("bias"))


@lowers("aten.layer_norm.default", kind="reduction")
def layer_norm(b: Builder, call: Call) -> Value:
    """LayerNorm over the trailing `normalized_shape` axes (flattened into one)."""
    return _layer_norm(b, call)


def _widened(b: Builder, x: Value) -> Value:
    """Half-precision statistics accumulate in float32 (as torch's CPU kernels do); eps stays unrounded."""
    return b.cast(x, "float32") if x.dtype in ("float16", "bfloat16") else x


def _mean_rstd(b: Builder, call: Call, x: Value, rows: int) -> list[Value]:
    """Saved statistics over x viewed as [rows, -1]: mean and 1 / sqrt(biased var + eps), shaped and typed as
    torch records outputs 1 and 2 (only a backward reads them; RLX's dead-code pass drops them otherwise)."""
    flat = b.reshape(_widened(b, x), (rows, x.numel // rows))
    mean = b.reduce("Mean", flat, [1], keep_dim=True)
    centered = b.binary("Sub", flat, mean)
    var = b.reduce("Mean", b.binary("Mul", centered, centered), [1], keep_dim=True)
    rstd = b.unary("Rsqrt", b.binary("Add", var, b.opmath(float(call["eps"]), var.dtype)))
    specs = call.node.outputs[1:3]
    return [b.cast(b.reshape(v, sizes(o.shape)), o.dtype) for v, o in zip((mean, rstd), specs, strict=True)]


@lowers("aten.native_layer_norm.default", kind="reduction")
def native_layer_norm(b: Builder, call: Call) -> list[Value | None]:
    """Core ATen layer norm: (out, mean, rstd), the statistics over the normalized axes."""
    x = call.tensor("input")
    rows = x.numel // math.prod(call["normalized_shape"])
    return [_layer_norm(b, call), *_mean_rstd(b, call, x, rows)]


def _check_bn_eval(call: Call) -> str | None:
    if call.get("training", False):
        return "training-mode batch_norm is not supported (put the model in eval mode)"
    if call.get("running_mean") is None or call.get("running_var") is None:
        return "batch_norm without running statistics is not supported"
    return None


def _check_bn(call: Call) -> str | None:
    """Training mode (batch statistics) and eval mode (running statistics) are both lowered."""
    if not call.get("training", False):
        return _check_bn_eval(call)
    x = call["input"]
    if x.rank < 2:
        return f"training-mode batch_norm of rank-{x.rank} input is not supported (expects [N, C, ...])"
    if x.numel // x.dims[1] <= 1 and call.get("running_var") is not None:
        return "training-mode batch_norm with one value per channel (the unbiased running variance divides by 0)"
    return None


def _batch_norm(b: Builder, call: Call) -> Value:
    """RLX's BatchNormInference normalizes the last axis: move channels there and back."""
    x = call.tensor("input")
    c = x.dims[1] if x.rank > 1 else x.dims[0]
    gamma = _affine(b, call.get("weight"), (c,), 1.0, x.dtype)
    beta = _affine(b, call.get("bias"), (c,), 0.0, x.dtype)
    to_last = [0, *range(2, x.rank), 1] if x.rank > 2 else list(range(x.rank))
    back = [0, x.rank - 1, *range(1, x.rank - 1)] if x.rank > 2 else list(range(x.rank))
    moved = b.transpose(x, to_last)
    y = b.emit(
        {"BatchNormInference": {"eps": float(call["eps"])}},
        [moved, gamma, beta, call.tensor("running_mean"), call.tensor("running_var")],
        moved.dims,
        x.dtype,
    )
    return b.transpose(y, back)


@lowers("aten._native_batch_norm_legit_no_training.default", check=_check_bn_eval, kind="reduction")
def native_batch_norm_no_training(b: Builder, call: Call) -> list[Value | None]:
    """Core ATen eval batch norm; the saved mean/rstd outputs are empty in eval."""
    return [_batch_norm(b, call), *_empty_stats(b, call)]


def _empty_stats(b: Builder, call: Call) -> list[Value | None]:
    """Eval mode's saved mean/rstd: the empty tensors torch returns (a model may return them)."""
    return [
        b.const(np.zeros(sizes(o.shape), dtype=np.float32), o.dtype) if math.prod(o.shape) == 0 else None
        for o in call.node.outputs[1:3]
    ]


def _group_norm(b: Builder, call: Call, groups: int) -> Value:
    x = call.tensor("input")
    c = x.dims[1]
    x4 = b.reshape(x, (*x.dims[:2], math.prod(x.dims[2:]), 1)) if x.rank != 4 else x
    gamma = _affine(b, call.get("weight"), (c,), 1.0, x.dtype)
    beta = _affine(b, call.get("bias"), (c,), 0.0, x.dtype)
    op = {"GroupNorm": {"num_groups": groups, "eps": float(call["eps"])}}
    return b.reshape(b.emit(op, [x4, gamma, beta], x4.dims, x.dtype), x.dims)


@lowers("aten.group_norm.default", kind="reduction")
def group_norm(b: Builder, call: Call) -> Value:
    """GroupNorm over (C/G, *spatial) per group, then a per-channel affine (RLX GroupNorm is NCHW)."""
    return _group_norm(b, call, int(call["num_groups"]))


@lowers("aten.native_group_norm.default", kind="reduction")
def native_group_norm(b: Builder, call: Call) -> list[Value | None]:
    """Core ATen group norm: (out, mean, rstd), the [N, G] statistics of each group."""
    x, groups = call.tensor("input"), int(call["group"])
    return [_group_norm(b, call, groups), *_mean_rstd(b, call, x, x.dims[0] * groups)]


def _check_rms(call: Call) -> str | None:
    return None if call.get("eps") is not None else "rms_norm with eps=None (dtype-dependent eps) is not supported"


@lowers("aten.rms_norm.default", check=_check_rms, kind="reduction")
def rms_norm(b: Builder, call: Call) -> Value:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` axes."""
    return _last_axis_norm(b, call, "RmsNorm", None)


# ── training-mode batch norm ─────────────────────────────────────────────


def _stats_dtype(call: Call, dtype: str) -> str:
    """The dtype torch's CPU batch norm keeps the batch statistics in: the input's, unless a parameter
    or running statistic has another (the mixed-type kernel then keeps float32). Export's fake kernels
    record the input's dtype for save_mean/save_rstd either way; the CPU kernel is the reference."""
    params = [call.get(n) for n in ("weight", "bias", "running_mean", "running_var")]
    return dtype if all(p is None or p.dtype == dtype for p in params) else "float32"


def _batch_stats(b: Builder, call: Call) -> tuple[Value, Value, Value, list[Value]]:
    """Normalize by the batch mean and biased variance over all axes but channels: (out, mean[C], var[C],
    [save_mean[C], save_rstd[C]]), the saved statistics in the dtype torch's CPU kernel keeps them in."""
    given = call.tensor("input")
    x = _widened(b, given)
    c = x.dims[1] if x.rank > 1 else x.dims[0]
    axes = [a for a in range(x.rank) if a != 1] if x.rank > 1 else [0]
    shape = tuple(c if a == 1 else 1 for a in range(x.rank)) if x.rank > 1 else (c,)
    mean = b.reduce("Mean", x, axes, keep_dim=True)
    centered = b.binary("Sub", x, mean)
    var = b.reduce("Mean", b.binary("Mul", centered, centered), axes, keep_dim=True)
    rstd = b.unary("Rsqrt", b.binary("Add", var, b.opmath(float(call["eps"]), x.dtype)))
    stats = _stats_dtype(call, given.dtype)
    saved = [mean, rstd]
    if stats in HALF_DTYPES:  # torch's CPU kernel keeps the batch mean and invstd in that dtype, rounded
        saved = [b.round_to(v, stats) for v in saved]
        centered = b.binary("Sub", x, b.cast(saved[0], "float32"))
        rstd = b.cast(saved[1], "float32")
    out = b.binary("Mul", centered, rstd)
    if call.get("weight") is not None:
        out = b.binary("Mul", out, b.reshape(call.tensor("weight"), shape))
    if call.get("bias") is not None:
        out = b.binary("Add", out, b.reshape(call.tensor("bias"), shape))
    saved = [b.reshape(v, (c,)) for v in saved]
    return b.cast(out, call.out_dtype), b.reshape(mean, (c,)), b.reshape(var, (c,)), saved


def _saved(b: Builder, call: Call, saved: list[Value]) -> list[Value]:
    """save_mean and save_rstd = 1 / sqrt(var + eps), in the dtypes torch records for outputs 1 and 2."""
    return [_as_recorded(b, v, spec) for v, spec in zip(saved, call.node.outputs[1:3], strict=True)]


def _running_stats(b: Builder, call: Call, mean: Value, var: Value) -> list[Value]:
    """(1 - m) * running + m * batch statistic, for the mean and the unbiased (n / (n - 1)) variance."""
    m = float(call["momentum"])
    n = call.tensor("input").numel // mean.dims[0]
    new = []
    for name, stat in (("running_mean", mean), ("running_var", b.binary("Mul", var, b.opmath(n / (n - 1), var.dtype)))):
        running = call.tensor(name)
        step = b.cast(b.binary("Mul", stat, b.opmath(m, stat.dtype)), running.dtype)
        new.append(b.binary("Add", b.binary("Mul", running, b.opmath(1.0 - m, running.dtype)), step))
    return new


def _train_in_place(b: Builder, call: Call) -> tuple[Value, list[Value]]:
    """Training-mode batch norm that writes the updated running statistics back in place (when given):
    (out, [save_mean, save_rstd])."""
    out, mean, var, saved = _batch_stats(b, call)
    if call.get("running_mean") is not None and call.get("running_var") is not None:
        for name, value in zip(("running_mean", "running_var"), _running_stats(b, call, mean, var), strict=True):
            call.mutate(name, value)
    return out, saved


@lowers("aten.batch_norm.default", check=_check_bn, kind="reduction")
def batch_norm(b: Builder, call: Call) -> Value:
    """Eval mode: running statistics; training mode: batch statistics (given running stats updated in place)."""
    return _train_in_place(b, call)[0] if call.get("training", False) else _batch_norm(b, call)


@lowers("aten._native_batch_norm_legit.default", check=_check_bn)
def native_batch_norm_legit(b: Builder, call: Call) -> list[Value | None]:
    """(out, save_mean, save_rstd); training mode updates running_mean/var in place, eval mode uses them."""
    if not call["training"]:
        return [_batch_norm(b, call), *_empty_stats(b, call)]
    out, saved = _train_in_place(b, call)
    return [out, *_saved(b, call, saved)]


def _check_no_stats(call: Call) -> str | None:
    return None if call["training"] else "batch_norm without running statistics in eval mode (torch raises too)"


@lowers("aten._native_batch_norm_legit.no_stats", check=_check_no_stats)
def native_batch_norm_legit_no_stats(b: Builder, call: Call) -> list[Value | None]:
    """(out, save_mean, save_rstd) of training-mode batch norm without running statistics."""
    out, _, _, saved = _batch_stats(b, call)
    return [out, *_saved(b, call, saved)]


@lowers("aten._native_batch_norm_legit_functional.default", check=_check_bn)
def native_batch_norm_legit_functional(b: Builder, call: Call) -> list[Value | None]:
    """Functional form (core ATen export of the above): the updated running_mean/var are outputs 3 and 4."""
    if not call["training"]:
        return [_batch_norm(b, call), *_empty_stats(b, call), call.tensor("running_mean"), call.tensor("running_var")]
    out, mean, var, saved = _batch_stats(b, call)
    new_stats = _running_stats(b, call, mean, var)
    return [
        out,
        *_saved(b, call, saved),
        *(_as_recorded(b, v, o) for v, o in zip(new_stats, call.node.outputs[3:], strict=True)),
    ]


def _as_recorded(b: Builder, v: Value, spec: Any) -> Value:
    """`v` labelled with the dtype export records for it: export's fake kernels can record float32 for
    statistics the CPU kernel keeps in the input's half dtype (both compute as float32 here)."""
    same = compute_rlx(spec.dtype) == compute_rlx(v.dtype)
    return replace(v, dtype=spec.dtype) if same else b.cast(v, spec.dtype)
