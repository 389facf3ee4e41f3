"""Image ops: pixel (un)shuffle, padding (constant, reflect, replicate, circular), masked_fill, and the
slice_scatter / copy / empty that core ATen emits for circular padding."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import FLOAT_DTYPES
from ..builder import Builder
from ..call import Call, Value, norm_axis
from ..registry import lowers
from ._common import gather_axis

# ── pixel shuffle ────────────────────────────────────────────────────────


@lowers("aten.pixel_shuffle.default", kind="movement")
def pixel_shuffle(b: Builder, call: Call) -> Value:
    """[.., C*r*r, H, W] -> [.., C, H*r, W*r]: reshape, move the r axes inside, reshape."""
    x, r = call.tensor("self"), call["upscale_factor"]
    *lead, c, h, w = x.dims
    n = math.prod(lead)
    y = b.reshape(x, (n, c // (r * r), r, r, h, w))
    y = b.transpose(y, [0, 1, 4, 2, 5, 3])
    return b.reshape(y, call.out_dims)


@lowers("aten.pixel_unshuffle.default", kind="movement")
def pixel_unshuffle(b: Builder, call: Call) -> Value:
    """[.., C, H*r, W*r] -> [.., C*r*r, H, W]: the inverse reshape/transpose of pixel_shuffle."""
    x, r = call.tensor("self"), call["downscale_factor"]
    *lead, c, h, w = x.dims
    n = math.prod(lead)
    y = b.reshape(x, (n, c, h // r, r, w // r, r))
    y = b.transpose(y, [0, 1, 3, 5, 2, 4])
    return b.reshape(y, call.out_dims)


# ── padding ──────────────────────────────────────────────────────────────


def _pad_pairs(rank: int, pad: list[int]) -> list[tuple[int, int]]:
    """torch's flat pad list (last axis first) as (before, after) per axis."""
    pairs = [(0, 0)] * rank
    for i in range(len(pad) // 2):
        pairs[rank - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    return pairs


_MODE_OPS = {
    "aten.constant_pad_nd.default": "constant",
    "aten.reflection_pad1d.default": "reflect",
    "aten.reflection_pad2d.default": "reflect",
    "aten.reflection_pad3d.default": "reflect",
    "aten.replication_pad1d.default": "replicate",
    "aten.replication_pad2d.default": "replicate",
    "aten.replication_pad3d.default": "replicate",
}


def _pad_mode(call: Call) -> str:
    """The mode an overload implies (constant_pad_nd, reflection_padNd, ...), else aten.pad's `mode`."""
    return _MODE_OPS.get(call.target) or call.get("mode", "constant")


def _pad_list(call: Call) -> list[int]:
    """torch's flat pad list: `pad` of aten.pad/constant_pad_nd, `padding` of the per-mode overloads."""
    return call["pad"] if call.target in ("aten.pad.default", "aten.constant_pad_nd.default") else call["padding"]


def _check_pad(call: Call) -> str | None:
    x, mode = call.tensor("self"), _pad_mode(call)
    pairs = _pad_pairs(x.rank, _pad_list(call))
    if mode not in ("constant", "reflect", "replicate", "circular"):
        return f"pad mode {mode!r} is not supported"
    if mode == "constant":
        value = call.get("value", 0.0)
        if not math.isfinite(value) and x.dtype not in FLOAT_DTYPES:
            return f"non-finite pad value {value} on {x.dtype}"
        return None
    for axis, (lo, hi) in enumerate(pairs):
        if lo < 0 or hi < 0:
            return f"negative padding {_pad_list(call)} in mode {mode!r} is not supported"
        n = x.dims[axis]
        if (mode == "reflect" and max(lo, hi) >= n) or (mode == "circular" and max(lo, hi) > n):
            return f"pad {_pad_list(call)} is too large for axis {axis} of size {n} in mode {mode!r}"
    return None


def _constant_blocks(b: Builder, x: Value, pairs: list[tuple[int, int]], value: float) -> Value:
    """Pad with a (possibly non-finite) constant as Concat of broadcast constant blocks."""
    fill = b.const(value, x.dtype)
    for axis, (lo, hi) in enumerate(pairs):
        parts = []
        for size in (lo, hi):
            dims = list(x.dims)
            dims[axis] = size
            parts.append(b.expand(fill, tuple(dims)) if size > 0 else None)
        seq = [p for p in (parts[0], x, parts[1]) if p is not None]
        if len(seq) > 1:
            dims = list(x.dims)
            dims[axis] += lo + hi
            x = b.emit({"Concat": {"axis": axis}}, seq, dims, x.dtype)
    return x


@lowers(
    "aten.pad.default",
    "aten.constant_pad_nd.default",
    "aten.reflection_pad1d.default",
    "aten.reflection_pad2d.default",
    "aten.replication_pad1d.default",
    "aten.replication_pad2d.default",
    check=_check_pad,
    kind="movement",
)
@lowers("aten.reflection_pad3d.default", "aten.replication_pad3d.default", check=_check_pad)
def pad(b: Builder, call: Call) -> Value:
    """Crop negative pads (Narrow), then RLX Pad (constant/reflect/replicate/circular); ±inf/nan fills use Concat."""
    x, mode = call.tensor("self"), _pad_mode(call)
    pairs = _pad_pairs(x.rank, _pad_list(call))
    for axis, (lo, hi) in enumerate(pairs):  # negative pads crop (constant mode only)
        if lo < 0 or hi < 0:
            start, length = max(-lo, 0), x.dims[axis] - max(-lo, 0) - max(-hi, 0)
            dims = list(x.dims)
            dims[axis] = length
            x = b.emit({"Narrow": {"axis": axis, "start": start, "len": length}}, [x], dims, x.dtype)
    pairs = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    if not any(lo or hi for lo, hi in pairs):
        return x
    if mode == "constant":
        value = float(call.get("value", 0.0))
        if not math.isfinite(value):
            return _constant_blocks(b, x, pairs, value)
        rlx_mode: dict[str, float] | str = {"Constant": value}
    else:
        rlx_mode = mode.capitalize()
    return b.emit({"Pad": {"pads": [list(p) for p in pairs], "mode": rlx_mode}}, [x], call.out_dims, x.dtype)


# ── masked_fill ──────────────────────────────────────────────────────────


@lowers("aten.masked_fill.Scalar", "aten.masked_fill.Tensor", kind="movement")
def masked_fill(b: Builder, call: Call) -> Value:
    """mask ? value : x (value as a constant or rank-0 tensor, so ±inf is fine)."""
    x, mask, value = call.tensor("self"), call.tensor("mask"), call["value"]
    dims, dtype = call.out_dims, call.out_dtype
    fill = b.cast(value, dtype) if isinstance(value, Value) else b.const(value, dtype)
    return b.emit("Where", [b.expand(mask, dims), b.expand(fill, dims), b.expand(b.cast(x, dtype), dims)], dims, dtype)


# ── slice_scatter / copy / empty (what core emits for circular pad) ─────


@lowers("aten.slice_scatter.default")
def slice_scatter(b: Builder, call: Call) -> Value:
    """self with self[.., start:end:step, ..] = src: a Gather over Concat(self, src) with constant indices."""
    x, src = call.tensor("self"), b.cast(call.tensor("src"), call.out_dtype)
    axis = norm_axis(call.get("dim", 0), x.rank)
    size = x.dims[axis]
    start, end, step = call.get("start", 0), call.get("end", size), call.get("step", 1)
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    index = np.arange(size)
    targets = np.arange(start, end, step)[: src.dims[axis]]
    index[targets] = size + np.arange(len(targets))
    dims = list(x.dims)
    dims[axis] += src.dims[axis]
    both = b.emit({"Concat": {"axis": axis}}, [b.cast(x, call.out_dtype), src], dims, call.out_dtype)
    return gather_axis(b, both, axis, index)


@lowers("aten.copy.default")
def copy(b: Builder, call: Call) -> Value:
    """src broadcast to self's shape, in self's dtype (functional copy_)."""
    return b.expand(b.cast(call.tensor("src"), call.out_dtype), call.out_dims)


@lowers("aten.empty.memory_format")  # not value-exact: torch's values are whatever the memory held
def empty(b: Builder, call: Call) -> Value:
    """Uninitialized memory: zeros (any later read in torch would be undefined)."""
    return b.expand(b.const(0, call.out_dtype), call.out_dims)
