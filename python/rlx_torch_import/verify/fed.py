"""PyTorch's graph re-run with some of RLX's values fed in, where either answer is right: the one driver
of the code-fed reference (`verify/codes.py`: quantization codes at a rounding boundary) and the tie-fed
reference (`verify/tie_fed.py`: indices among tied values)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import torchir
from ..conversion import Conversion
from ..layout import input_key
from ..torchir import Node

# After PyTorch computes `node` into `env`: check RLX's values (`rlx`, by torch-ir name) there and put them
# into `env` where they are an equally right answer; "" to go on, else why the graph cannot be fed.
Feed = Callable[[Node, dict[str, Any], dict[str, np.ndarray]], str]


def fed_run(
    conv: Conversion, prefix: str, binding: dict[str, int] | None, feed: Feed
) -> tuple[torchir.TorchIR, dict[str, Any], str]:
    """(the graph run, PyTorch's values by torch-ir name, "" or why it stopped) at the point whose
    reference keys start `prefix` (a dynamic graph specialized at `binding`): every node run in order by
    PyTorch on the reference inputs and weights, `feed` called after each; RLX's values come from the
    debug build of the same graph on the same inputs."""
    import torch

    from .nodes import _run_debug
    from .torch_values import _call, to_torch

    ir = conv.ir
    if ir.is_dynamic:
        ir = torchir.specialize(ir, binding or {})
    raw = {s.name: conv.reference[input_key(s.name, prefix)] for s in ir.inputs}
    inputs = {k: v.to_numpy() for k, v in raw.items()}
    rlx = {**inputs, **_run_debug(ir, inputs, conv.raw_weights)}
    env: dict[str, Any] = {k: to_torch(v) for k, v in raw.items()}
    weights = {k: to_torch(v) for k, v in conv.raw_weights.items()}
    env.update({w.name: weights[w.key] for w in ir.weights})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for node in ir.nodes:
            if not node.outputs:
                continue
            for spec, value in zip(node.outputs, _call(node, env), strict=False):
                if value is not None:
                    env[spec.name] = value
            if why := feed(node, env, rlx):
                return ir, env, why
    return ir, env, ""
