"""Recurrent ops: RNN, GRU, LSTM (forward / reverse / bidirectional, layout 0 / 1, clip, initial states,
GRU linear_before_reset, LSTM peepholes and input_forget), unrolled over the static sequence length.
sequence_lens must be absent or a constant equal to the sequence length for every batch entry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlx_torch_import.frontend.onnx.torch_route.module import Fn, NodeCtx, handles

T = torch.Tensor
Act = Callable[[T], T]
_ACTS: dict[str, Act] = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


@dataclass
class _Spec:
    op: str
    hidden: int
    dirs: list[bool]  # per direction: reversed?
    acts: list[list[Act]]  # per direction
    clip: float | None
    layout: int
    lbr: bool
    input_forget: bool


def _spec(ctx: NodeCtx) -> _Spec:
    direction = ctx.attr("direction", "forward")
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]
    names = ctx.attr("activations") or _DEFAULT_ACTS[ctx.op] * len(dirs)
    if ctx.attr("activation_alpha") or ctx.attr("activation_beta"):
        raise ctx.fail("recurrent activations with alpha / beta")
    acts = []
    per = len(_DEFAULT_ACTS[ctx.op])
    for d in range(len(dirs)):
        chunk = names[d * per : (d + 1) * per]
        if any(n.lower() not in _ACTS for n in chunk):
            raise ctx.fail(f"recurrent activations {chunk}")
        acts.append([_ACTS[n.lower()] for n in chunk])
    if ctx.has(4):
        lens = ctx.ints(4, "sequence_lens")
        steps = ctx.shape(0)[1 if ctx.attr("layout", 0) else 0]
        if any(n != steps for n in lens):
            raise ctx.fail("sequence_lens shorter than the sequence (per-batch lengths)")
    return _Spec(
        ctx.op,
        ctx.attr("hidden_size") or ctx.shape(2)[-1],
        dirs,
        acts,
        ctx.attr("clip"),
        ctx.attr("layout", 0),
        bool(ctx.attr("linear_before_reset", 0)),
        bool(ctx.attr("input_forget", 0)),
    )


def _cell(sp: _Spec, acts: list[Act], w: T, r: T, b: T, p: T | None) -> Callable[[T, T, T], tuple[T, T]]:
    """One time step (x [B, I], h [B, H], c [B, H]) -> (h, c) for one direction's weights."""
    hs = sp.hidden
    g = _GATES[sp.op]
    wb, rb = b[: g * hs], b[g * hs :]

    def clip(v: T) -> T:
        return torch.clamp(v, -sp.clip, sp.clip) if sp.clip is not None else v

    def step(x: T, h: T, c: T) -> tuple[T, T]:
        xw = x @ w.t() + wb
        if sp.op == "RNN":
            return acts[0](clip(xw + h @ r.t() + rb)), c
        if sp.op == "GRU":
            hr = h @ r.t()
            z = acts[0](clip(xw[:, :hs] + hr[:, :hs] + rb[:hs]))
            rr = acts[0](clip(xw[:, hs : 2 * hs] + hr[:, hs : 2 * hs] + rb[hs : 2 * hs]))
            if sp.lbr:
                cand = xw[:, 2 * hs :] + rr * (hr[:, 2 * hs :] + rb[2 * hs :])
            else:
                cand = xw[:, 2 * hs :] + (rr * h) @ r[2 * hs :].t() + rb[2 * hs :]
            return (1 - z) * acts[1](clip(cand)) + z * h, c
        gates = xw + h @ r.t() + rb
        pi, po, pf = (p[:hs], p[hs : 2 * hs], p[2 * hs :]) if p is not None else (0, 0, 0)
        i = acts[0](clip(gates[:, :hs] + pi * c))
        f = acts[0](clip(gates[:, 2 * hs : 3 * hs] + pf * c))
        if sp.input_forget:
            f = 1 - i
        cand = acts[1](clip(gates[:, 3 * hs :]))
        c = f * c + i * cand
        o = acts[0](clip(gates[:, hs : 2 * hs] + po * c))
        return o * acts[2](c), c

    return step


@handles("RNN", "GRU", "LSTM")
def recurrent(ctx: NodeCtx) -> Fn:
    """Outputs Y [S, D, B, H] (layout 1: [B, S, D, H]), Y_h [D, B, H] (layout 1: [B, D, H]), LSTM's Y_c."""
    sp = _spec(ctx)
    g = _GATES[sp.op]
    n_out = len(ctx.node.output)

    def fn(x: T, w: T, r: T, b: T | None = None, _lens: T | None = None, *rest: T | None) -> tuple[T, ...]:
        h0 = rest[0] if rest else None
        c0 = rest[1] if len(rest) > 1 else None
        p = rest[2] if len(rest) > 2 else None
        if sp.layout:
            x = x.transpose(0, 1)
            h0 = h0.transpose(0, 1) if h0 is not None else None
            c0 = c0.transpose(0, 1) if c0 is not None else None
        steps, batch = x.shape[0], x.shape[1]
        ys, hs, cs = [], [], []
        for d, rev in enumerate(sp.dirs):
            bias = b[d] if b is not None else torch.zeros(2 * g * sp.hidden, dtype=x.dtype)
            step = _cell(sp, sp.acts[d], w[d], r[d], bias, p[d] if p is not None else None)
            h = h0[d] if h0 is not None else torch.zeros(batch, sp.hidden, dtype=x.dtype)
            c = c0[d] if c0 is not None else torch.zeros(batch, sp.hidden, dtype=x.dtype)
            out = [h] * steps
            for t in reversed(range(steps)) if rev else range(steps):
                h, c = step(x[t], h, c)
                out[t] = h
            ys.append(torch.stack(out, 0))
            hs.append(h)
            cs.append(c)
        y, yh, yc = torch.stack(ys, 1), torch.stack(hs, 0), torch.stack(cs, 0)
        if sp.layout:
            y, yh, yc = y.permute(2, 0, 1, 3), yh.transpose(0, 1), yc.transpose(0, 1)
        return (y, yh, yc)[: max(n_out, 1)]

    return fn
