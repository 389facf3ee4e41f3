"""Normalization: layer norm and batch norm (eval) on RLX's fused kernels."""

from __future__ import annotations

import math

from .context import Builder, Call, Value
from .registry import lowers


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


@lowers("aten.layer_norm.default")
def layer_norm(b: Builder, call: Call) -> Value:
    """LayerNorm over the trailing `normalized_shape` axes (flattened into one)."""
    return _layer_norm(b, call)


@lowers("aten.native_layer_norm.default")
def native_layer_norm(b: Builder, call: Call) -> list[Value | None]:
    """Core ATen layer norm; only the normalized output is produced (mean/rstd are training state)."""
    return [_layer_norm(b, call), None, None]


def _check_bn_eval(call: Call) -> str | None:
    if call.get("training", False):
        return "training-mode batch_norm is not supported (put the model in eval mode)"
    if call.get("running_mean") is None or call.get("running_var") is None:
        return "batch_norm without running statistics is not supported"
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


@lowers("aten.batch_norm.default", check=_check_bn_eval)
def batch_norm(b: Builder, call: Call) -> Value:
    """Eval-mode batch norm with running statistics."""
    return _batch_norm(b, call)


@lowers("aten._native_batch_norm_legit_no_training.default", check=_check_bn_eval)
def native_batch_norm_no_training(b: Builder, call: Call) -> list[Value | None]:
    """Core ATen eval batch norm; the saved mean/rstd outputs are empty in eval."""
    return [_batch_norm(b, call), None, None]


def _group_norm(b: Builder, call: Call, groups: int) -> Value:
    x = call.tensor("input")
    c = x.dims[1]
    x4 = b.reshape(x, (*x.dims[:2], math.prod(x.dims[2:]), 1)) if x.rank != 4 else x
    gamma = _affine(b, call.get("weight"), (c,), 1.0, x.dtype)
    beta = _affine(b, call.get("bias"), (c,), 0.0, x.dtype)
    op = {"GroupNorm": {"num_groups": groups, "eps": float(call["eps"])}}
    return b.reshape(b.emit(op, [x4, gamma, beta], x4.dims, x.dtype), x.dims)


@lowers("aten.group_norm.default")
def group_norm(b: Builder, call: Call) -> Value:
    """GroupNorm over (C/G, *spatial) per group, then a per-channel affine (RLX GroupNorm is NCHW)."""
    return _group_norm(b, call, int(call["num_groups"]))


@lowers("aten.native_group_norm.default")
def native_group_norm(b: Builder, call: Call) -> list[Value | None]:
    """Core ATen group norm; only the normalized output is produced (mean/rstd are training state)."""
    return [_group_norm(b, call, int(call["group"])), None, None]


def _check_rms(call: Call) -> str | None:
    return None if call.get("eps") is not None else "rms_norm with eps=None (dtype-dependent eps) is not supported"


@lowers("aten.rms_norm.default", check=_check_rms)
def rms_norm(b: Builder, call: Call) -> Value:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape` axes."""
    return _last_axis_norm(b, call, "RmsNorm", None)
