"""scaled_dot_product_attention on RLX's fused Attention op.

Q/K/V `[..., H, S, D]` are folded to rank-3 `[B*H, S, D]` and run as single-head
attention: rank 3 is unambiguous in RLX, whereas rank 4 guesses the layout from
which axis equals `num_heads` (wrong when S == H).
"""

from __future__ import annotations

import math

import numpy as np

from ..builder import Builder
from ..call import Call, Value
from ..registry import lowers


def _check_sdpa(call: Call) -> str | None:
    q = call["query"]
    if q.rank < 3:
        return f"query of rank {q.rank} is not supported (need [..., S, D])"
    if call.get("dropout_p", 0.0) != 0.0:
        return f"dropout_p={call['dropout_p']} is not supported (inference only)"
    if call.get("attn_mask") is not None and call.get("is_causal", False):
        return "attn_mask together with is_causal is not supported"
    k, v = call["key"], call["value"]
    if k.dims[:-3] != q.dims[:-3] or ((q.rank > 3 and k.dims[-3] != q.dims[-3]) and not call.get("enable_gqa", False)):
        return "key/value batch or head count differs from query (grouped-query attention needs enable_gqa)"
    if v.dims[-1] != q.dims[-1]:
        return "value head_dim different from query head_dim is not supported yet"
    return None


def _fold(b: Builder, x: Value) -> Value:
    return b.reshape(x, (math.prod(x.dims[:-2]), x.dims[-2], x.dims[-1]))


def _repeat_heads(b: Builder, x: Value, heads: int) -> Value:
    """GQA: repeat each KV head heads/kv_heads times ([B, Hkv, S, D] -> [B, H, S, D])."""
    hkv = x.dims[-3]
    if hkv == heads:
        return x
    rep = heads // hkv
    lead = x.dims[:-3]
    y = b.reshape(x, (*lead, hkv, 1, *x.dims[-2:]))
    y = b.expand(y, (*lead, hkv, rep, *x.dims[-2:]))
    return b.reshape(y, (*lead, heads, *x.dims[-2:]))


@lowers("aten.scaled_dot_product_attention.default", check=_check_sdpa, kind="contraction")
def sdpa(b: Builder, call: Call) -> Value:
    """softmax(Q K^T * scale + mask) V; a fully masked query row gives zeros (torch >= 2.5's safe softmax)."""
    q, k, v = call.tensor("query"), call.tensor("key"), call.tensor("value")
    if q.rank > 3:
        k, v = _repeat_heads(b, k, q.dims[-3]), _repeat_heads(b, v, q.dims[-3])
    head_dim, sq, sk = q.dims[-1], q.dims[-2], k.dims[-2]
    scale = call.get("scale")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(head_dim)
    mask = call.get("attn_mask")
    causal = bool(call.get("is_causal", False))
    if mask is not None:  # a mask computed from constants (e.g. Hugging Face's causal mask from arange)
        kind = _known_mask_kind(b, mask, sq, sk)
        if kind is not None:
            mask, causal = None, kind == "Causal"
    if mask is None and (not causal or sq == sk):
        return b.reshape(_fused(b, q, k, v, scale, "Causal" if causal else "None"), call.out_dims)
    if q.dtype == "float32":  # any other mask: an additive bias on the fused kernel
        return b.reshape(_fused_with_bias(b, q, k, v, scale, mask), call.out_dims)
    return _explicit(b, q, k, v, scale, mask, causal)


def _fused(b: Builder, q: Value, k: Value, v: Value, scale: float, mask_kind: str, bias: Value | None = None) -> Value:
    """RLX's Attention on [B*H, S, D] (single head), mask kind None, Causal or Bias ([B*H, 1, Sq, Sk])."""
    qf, kf, vf = _fold(b, q), _fold(b, k), _fold(b, v)
    op = {
        "Attention": {
            "num_heads": 1,
            "head_dim": q.dims[-1],
            "v_head_dim": None,
            "mask_kind": mask_kind,
            "score_scale": scale,
            "attn_logit_softcap": None,
        }
    }
    return b.emit(op, [qf, kf, vf, *([bias] if bias is not None else [])], qf.dims, q.dtype)


def _fused_with_bias(b: Builder, q: Value, k: Value, v: Value, scale: float, mask: Value | None) -> Value:
    """A bool mask (True keeps), a float mask (added to the scores) or torch's top-left causal pattern
    (mask None, Sq != Sk) as RLX's `Bias` mask, [B*H, 1, Sq, Sk]. A query row whose every key is
    masked gives zeros, as torch's safe softmax does (RLX's kernel gives NaN there)."""
    sq, sk = q.dims[-2], k.dims[-2]
    if mask is None:
        mask = b.const(np.tril(np.ones((sq, sk), dtype=bool)), "bool")
    if mask.dtype == "bool":
        bias = b.emit("Where", [mask, b.const(0.0, "float32"), b.const(-math.inf, "float32")], mask.dims, "float32")
    else:
        bias = b.cast(mask, "float32")
    lead = math.prod(q.dims[:-2])
    bias = b.reshape(b.expand(bias, (*q.dims[:-2], sq, sk)), (lead, 1, sq, sk))
    y = _fused(b, q, k, v, scale, "Bias", bias)
    known = b.known(bias)
    if known is not None and not (known == -np.inf).all(axis=-1).any():
        return y  # no query row is fully masked
    dead = b.compare("Eq", b.reduce("Max", bias, [3], keep_dim=True), b.const(-math.inf, "float32"))
    dead = b.expand(b.reshape(dead, (lead, sq, 1)), y.dims)
    return b.emit("Where", [dead, b.expand(b.const(0.0, y.dtype), y.dims), y], y.dims, y.dtype)


def _known_mask_kind(b: Builder, mask: Value, sq: int, sk: int) -> str | None:
    """ "None" when a constant mask lets every query see every key, "Causal" when it is torch's
    top-left causal pattern with sq == sk (where RLX's bottom-right alignment agrees), else None.
    Bool masks keep True; float masks add 0 (kept) or -inf (masked)."""
    value = b.known(mask)
    if value is None:
        return None
    value = np.broadcast_to(value, (*value.shape[:-2], sq, sk) if value.ndim >= 2 else (sq, sk))
    if mask.dtype == "bool":
        keep = value.astype(bool)
    elif np.all((value == 0) | (value == -np.inf)):
        keep = value == 0
    else:  # a float mask with other values is a real bias
        return None
    if keep.all():
        return "None"
    if sq == sk and (keep == np.tril(np.ones((sq, sk), dtype=bool))).all():
        return "Causal"
    return None


def _explicit(b: Builder, q: Value, k: Value, v: Value, scale: float, mask: Value | None, causal: bool) -> Value:
    """Masked attention as matmul/softmax/matmul (torch's top-left causal alignment)."""
    perm = [*range(k.rank - 2), k.rank - 1, k.rank - 2]
    scores = b.matmul(q, b.transpose(k, perm))
    scores = b.binary("Mul", scores, b.opmath(scale, scores.dtype))
    sq, sk = q.dims[-2], k.dims[-2]
    if causal:
        keep = np.tril(np.ones((sq, sk), dtype=bool))
        mask = b.const(keep, "bool")
    if mask is not None:
        if mask.dtype == "bool":
            neg = b.const(float("-inf"), scores.dtype)
            dims = scores.dims
            scores = b.emit("Where", [b.expand(mask, dims), scores, b.expand(neg, dims)], dims, scores.dtype)
        else:
            scores = b.binary("Add", scores, mask)
    probs = b.emit({"Softmax": {"axis": scores.rank - 1}}, [scores], scores.dims, scores.dtype)
    if mask is not None:  # torch's safe softmax: a query row whose every key is masked (-inf) attends to nothing
        dead = b.compare("Eq", b.reduce("Max", scores, [scores.rank - 1], keep_dim=True), b.const(-math.inf, "float32"))
        zeros = b.expand(b.const(0.0, probs.dtype), probs.dims)
        probs = b.emit("Where", [b.expand(dead, probs.dims), zeros, probs], probs.dims, probs.dtype)
    return b.matmul(probs, v)
