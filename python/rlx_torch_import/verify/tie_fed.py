"""The tie-fed reference (`verify/ties.py` says why): PyTorch's graph re-run with RLX's choices among tied
topk/sort values, and a failing output judged against it."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..conversion import Conversion
from ..torchir import Node
from .fed import fed_run
from .ties import TIE_ORDERED, tie_choice, tie_ordered


def tie_fed_outputs(conv: Conversion, prefix: str, binding: dict[str, int] | None) -> tuple[dict[str, np.ndarray], str]:
    """(output name -> PyTorch's value with RLX's tie choices substituted, a note naming the nodes) at the
    point whose reference keys start `prefix`; ({}, why not) where RLX's indices at some node are not a
    choice among tied values, or where none differ."""
    import torch

    chosen: list[str] = []
    total = 0

    def feed(node: Node, env: dict[str, Any], rlx: dict[str, np.ndarray]) -> str:
        nonlocal total
        if not tie_ordered(node):
            return ""
        values_at, indices_at = TIE_ORDERED[node.target]
        out = node.outputs[indices_at].name
        if out not in rlx:
            return f"RLX has no value of {node.name}'s indices"
        count, why, picked = tie_choice(node, env, rlx[out])
        if why:
            return why
        if count:
            total += count
            chosen.append(node.name)
            env[out] = torch.from_numpy(np.ascontiguousarray(rlx[out]).astype(np.int64)).reshape(env[out].shape)
            env[node.outputs[values_at].name] = picked
        return ""

    ir, env, why = fed_run(conv, prefix, binding, feed)
    if why:
        return {}, why
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
