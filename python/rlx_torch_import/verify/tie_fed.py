"""The tie-fed reference (`verify/ties.py` says why): PyTorch's graph re-run with RLX's choices among tied
topk/sort values, and a failing output judged against it."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import torchir
from ..conversion import Conversion
from ..layout import input_key
from .ties import TIE_ORDERED, tie_choice, tie_ordered


def tie_fed_outputs(conv: Conversion, prefix: str, binding: dict[str, int] | None) -> tuple[dict[str, np.ndarray], str]:
    """(output name -> PyTorch's value with RLX's tie choices substituted, a note naming the nodes) at the
    point whose reference keys start `prefix`; ({}, why not) where RLX's indices at some node are not a
    choice among tied values, or where none differ."""
    import torch

    from .nodes import _run_debug
    from .torch_values import _call, to_torch

    ir = conv.ir
    if ir.is_dynamic:
        ir = torchir.specialize(ir, binding or {})
    raw = {s.name: conv.reference[input_key(s.name, prefix)] for s in ir.inputs}
    feed = {k: v.to_numpy() for k, v in raw.items()}
    rlx = _run_debug(ir, feed, conv.raw_weights)
    env: dict[str, Any] = {k: to_torch(v) for k, v in raw.items()}
    weights = {k: to_torch(v) for k, v in conv.raw_weights.items()}
    env.update({w.name: weights[w.key] for w in ir.weights})
    chosen: list[str] = []
    total = 0
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for node in ir.nodes:
            if not node.outputs:
                continue
            for spec, value in zip(node.outputs, _call(node, env), strict=False):
                if value is not None:
                    env[spec.name] = value
            if not tie_ordered(node):
                continue
            values_at, indices_at = TIE_ORDERED[node.target]
            out = node.outputs[indices_at].name
            if out not in rlx:
                return {}, f"RLX has no value of {node.name}'s indices"
            count, why, picked = tie_choice(node, env, rlx[out])
            if why:
                return {}, why
            if count:
                total += count
                chosen.append(node.name)
                env[out] = torch.from_numpy(np.ascontiguousarray(rlx[out]).astype(np.int64)).reshape(env[out].shape)
                env[node.outputs[values_at].name] = picked
    if not chosen:
        return {}, "every topk/sort index equals PyTorch's"
    note = (
        f"{total} index(es) at node(s) {', '.join(chosen)} differ from PyTorch's only by a choice among tied "
        "values (PyTorch's CPU order there is its selection or sort algorithm's); judged against PyTorch's "
        "graph with RLX's tie choice substituted: the verdict holds for the tie choice RLX made"
    )
    return {o.name: _host(env[o.value]) for o in ir.outputs if o.value in env}, note


def _host(value: Any) -> np.ndarray:
    """A torch value as the reference stores it (bfloat16 as float32)."""
    import torch

    return (value.float() if value.dtype == torch.bfloat16 else value).numpy()
