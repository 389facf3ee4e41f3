"""The code-fed reference of a quantized graph: where RLX's quantization codes differ from PyTorch's by one step.

A PT2E graph rounds float32 values to integer codes (`quantized_decomposed.quantize_*`). Where PyTorch's
float input to a quantize sits on a rounding boundary, the last-bit difference any float32 op may have
(another summation order in a convolution) moves the code by one step, and everything after it moves by
that step's effect, beyond the output's float budget. Such an output is judged against PyTorch's graph
fed RLX's codes instead (the graph run in order, RLX's codes taken at each quantize), when every code
that differs is off by exactly one step and its float32 input is within that value's float budget of
PyTorch's (computed from RLX's codes upstream): then all the difference is those boundary roundings, and
the rest of the graph must match within the normal budgets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import torchir
from ..budgets import budget_for
from ..conversion import Conversion
from ..torchir import Node
from .fed import fed_run

QUANTIZE = (
    "quantized_decomposed.quantize_per_tensor.default",
    "quantized_decomposed.quantize_per_tensor.tensor",
    "quantized_decomposed.quantize_per_channel.default",
)


def quantizes(ir: torchir.TorchIR) -> bool:
    """Whether the graph rounds values to quantization codes."""
    return any(n.target in QUANTIZE for n in ir.nodes)


def _flips(node: Node, ours: np.ndarray, env: dict[str, Any], x_rlx: np.ndarray) -> tuple[int, str]:
    """(codes of quantize `node` RLX gives that differ from PyTorch's, why they are not boundary roundings or
    ""); `env` holds PyTorch's values computed from RLX's codes upstream, `x_rlx` RLX's float input. Codes that
    differ must be one step off, RLX's float input within its budget of PyTorch's there, and all of RLX's
    codes what torch's own quantize gives for RLX's input (so a rounding error of the lowering is never
    excused: it would differ on the same input)."""
    import torch

    from .torch_values import _call

    theirs = env[node.outputs[0].name].numpy().astype(np.int64)
    ours = ours.astype(np.int64).reshape(theirs.shape)
    differ = ours != theirs
    if not differ.any():
        return 0, ""
    if np.abs(ours - theirs).max() > 1:
        return int(differ.sum()), f"codes of {node.name} differ by more than one step"
    x_torch = env[node.args[0]["tensor"]].double().numpy()
    budget = budget_for("float32")
    allowed = budget.atol + budget.rtol * float(np.abs(x_torch).max())
    if np.abs(x_rlx.astype(np.float64).reshape(x_torch.shape) - x_torch)[differ].max() > allowed:
        return int(differ.sum()), f"the float input of {node.name} is off by more than its budget where codes differ"
    source = node.args[0]["tensor"]
    fed = {
        **env,
        source: torch.from_numpy(np.ascontiguousarray(x_rlx)).to(env[source].dtype).reshape(env[source].shape),
    }
    if not np.array_equal(_call(node, fed)[0].numpy().astype(np.int64), ours):
        return int(differ.sum()), f"torch's {node.name} of RLX's own float input gives other codes than RLX"
    return int(differ.sum()), ""


def code_fed_outputs(
    conv: Conversion, prefix: str, binding: dict[str, int] | None
) -> tuple[dict[str, np.ndarray], str]:
    """(output name -> PyTorch's value with RLX's codes fed at each quantize, a note) at the point whose
    reference keys start `prefix`; ({}, why not) where a differing code is not a boundary rounding.

    PyTorch runs the graph in order; at each quantize whose codes differ from RLX's, the difference is checked
    against PyTorch's input as computed from RLX's codes upstream, and RLX's codes go on from there."""
    flipped, nodes = 0, 0

    def feed(node: Node, env: dict[str, Any], rlx: dict[str, np.ndarray]) -> str:
        nonlocal flipped, nodes
        if node.target not in QUANTIZE:
            return ""
        out, source = node.outputs[0].name, node.args[0]["tensor"]
        if out not in rlx or source not in rlx:
            return f"RLX has no value of {node.name}"
        count, why = _flips(node, rlx[out], env, rlx[source])
        if why:
            return why
        if count:
            flipped, nodes = flipped + count, nodes + 1
            env[out] = to_torch_codes(rlx[out], env[out])
        return ""

    ir, env, why = fed_run(conv, prefix, binding, feed)
    if why:
        return {}, why
    if not flipped:
        return {}, "every quantization code equals PyTorch's"
    note = (
        f"{flipped} quantization code(s) at {nodes} quantize op(s) differ from PyTorch's by one step where the "
        "float32 input lies on a rounding boundary (within its float budget); judged against PyTorch's graph fed "
        "RLX's codes"
    )
    return {o.name: env[o.value].numpy() for o in ir.outputs if o.value in env}, note


def to_torch_codes(values: np.ndarray, like: Any) -> Any:
    """RLX's codes as a tensor of PyTorch's code dtype and shape."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(values)).to(like.dtype).reshape(like.shape)
