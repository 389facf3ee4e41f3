"""Attention (opset 23 to 25) and RotaryEmbedding, per the ONNX operator specifications.

Attention: 3-D inputs are split into heads (q_num_heads / kv_num_heads); past_key / past_value are
concatenated before K / V (present_key / present_value); K / V heads repeat for grouped-query attention;
Q and K are each scaled by sqrt(scale); softcap is applied to the logits before the mask; a boolean mask
keeps True, a float mask is added; is_causal masks keys past the query's position (offset by the past
length, or by nonpad_kv_seqlen - q_len); left_window_size / right_window_size mask keys outside the
window; nonpad_kv_seqlen masks padding keys; rows with every key masked give zeros.
qk_matmul_output_mode selects what the fourth output holds."""

from __future__ import annotations

import math

import torch

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles, torch_dtype

T = torch.Tensor


def _heads(x: T, n: int | None) -> T:
    """[B, S, n * h] -> [B, n, S, h] (4-D inputs unchanged)."""
    if x.dim() == 4:
        return x
    b, s, hid = x.shape
    assert n, "3-D Attention inputs need q_num_heads and kv_num_heads"
    return x.reshape(b, s, n, hid // n).transpose(1, 2)


def _bias(mask: T | None, q_len: int, kv_len: int, dt: torch.dtype) -> T:
    """The additive bias of attn_mask (bool: 0 / -inf), padded with -inf to kv_len keys."""
    if mask is None:
        return torch.zeros((q_len, kv_len), dtype=dt)
    if mask.dtype == torch.bool:
        mask = torch.where(mask, torch.zeros((), dtype=dt), torch.full((), -math.inf, dtype=dt))
    pad = kv_len - mask.shape[-1]
    if pad > 0:
        mask = torch.nn.functional.pad(mask, [0, pad], value=-math.inf)
    return mask.to(dt)


@handles("Attention")
def attention(ctx: NodeCtx) -> Fn:
    """Scaled dot-product attention with masks, caches, GQA and softcap (see the module docstring)."""
    qh, kvh = ctx.attr("q_num_heads"), ctx.attr("kv_num_heads")
    scale_attr = ctx.attr("scale")
    causal = bool(ctx.attr("is_causal", 0))
    softcap = ctx.attr("softcap", 0.0)
    mode = ctx.attr("qk_matmul_output_mode", 0)
    sp = ctx.attr("softmax_precision")
    sdt = torch_dtype(sp, "softmax_precision ") if sp is not None else None
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    three_d = ctx.rank(0) == 3

    def fn(
        q: T, k: T, v: T, mask: T | None = None, pk: T | None = None, pv: T | None = None, nonpad: T | None = None
    ) -> tuple[T, T, T, T]:
        dt = q.dtype
        q, k, v = _heads(q, qh), _heads(k, kvh), _heads(v, kvh)
        if pk is not None and pv is not None:
            k, v = torch.cat([pk, k], 2), torch.cat([pv, v], 2)
        present_k, present_v = k, v
        q_len, kv_len = q.shape[2], k.shape[2]
        scale = scale_attr if scale_attr is not None else 1 / math.sqrt(q.shape[3])
        s = torch.tensor(math.sqrt(scale), dtype=dt)
        bias = _bias(mask, q_len, kv_len, dt)
        off = (
            (nonpad.reshape(-1, 1, 1, 1) - q_len)
            if nonpad is not None and pk is None
            else (pk.shape[2] if pk is not None else 0)
        )
        diff = torch.arange(q_len).reshape(q_len, 1) + off - torch.arange(kv_len).reshape(1, kv_len)
        zero, ninf = torch.zeros((), dtype=dt), torch.full((), -math.inf, dtype=dt)
        if causal:
            bias = bias + torch.where(diff >= 0, zero, ninf)
        if left >= 0:
            bias = bias + torch.where(diff <= left, zero, ninf)
        if right >= 0:
            bias = bias + torch.where(-diff <= right, zero, ninf)
        if nonpad is not None:
            keep = torch.arange(kv_len).reshape(1, kv_len) < nonpad.reshape(-1, 1)
            bias = bias + torch.where(keep, 0.0, -math.inf).to(dt).reshape(-1, 1, 1, kv_len)
        if q.shape[1] != k.shape[1]:
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        logits = torch.matmul(q * s, (k * s).transpose(2, 3))
        if softcap:
            logits = softcap * torch.tanh(logits / softcap)
        qk_out = logits
        with_bias = logits + bias
        if mode == 2:
            qk_out = with_bias
        probs = torch.softmax(with_bias.to(sdt) if sdt is not None else with_bias, -1)
        dead = torch.isneginf(torch.amax(bias, -1, keepdim=True))
        probs = torch.where(dead, torch.zeros((), dtype=probs.dtype), probs)
        if mode == 3:
            qk_out = probs
        y = torch.matmul(probs.to(dt), v)
        if three_d:
            y = y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
        return y, present_k, present_v, qk_out.to(dt)

    return fn


@handles("RotaryEmbedding")
def rotary_embedding(ctx: NodeCtx) -> Fn:
    """Rotate the first rotary_embedding_dim features of each head by the (position-indexed) caches,
    in halves or interleaved pairs."""
    n_heads = ctx.attr("num_heads", 0)
    inter = bool(ctx.attr("interleaved", 0))
    rot = ctx.attr("rotary_embedding_dim", 0)
    shape = ctx.shape(0)

    def fn(x: T, cos: T, sin: T, pos: T | None = None) -> T:
        y = x.transpose(1, 2) if x.dim() == 4 else x.reshape(shape[0], shape[1], n_heads, -1)
        d = rot or y.shape[3]
        xr, rest = y[..., :d], y[..., d:]
        if pos is not None:
            cos, sin = cos[pos], sin[pos]
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
        x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if inter else (xr[..., : d // 2], xr[..., d // 2 :])
        re, im = cos * x1 - sin * x2, sin * x1 + cos * x2
        xr = torch.stack([re, im], -1).reshape(xr.shape) if inter else torch.cat([re, im], -1)
        out = torch.cat([xr, rest], -1)
        return out.transpose(1, 2) if x.dim() == 4 else out.reshape(shape)

    return fn
