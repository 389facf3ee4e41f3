"""Whether a model's outputs depend on random draws: eager PyTorch run under three seeds.

RLX draws with its own generator (`lower/ops/random.py`), so an output that depends on the values drawn
cannot equal eager PyTorch's. Only a graph with a random op (torch's `nondeterministic_seeded` tag:
rand, randint, bernoulli, training-mode dropout, normal, multinomial, ...) is run again; its outputs that
are identical under every seed do not depend on the draws (a max over sampled indices, a mask multiplied
by zero) and are verified as usual, the others get the "random" verdict (`verify/randomness.py`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ...torchir import TorchIR, WeightSpec
from .inputs import ModelInputs
from .outputs import output_names
from .reference import eager_outputs
from .state import ModelState

# The torch seeds the eager runs use (fixed so a conversion is repeatable). Three, so an output with few
# possible values (one coin flip) looks the same under all of them with probability 1/4 at most, not 1/2.
SEEDS = (20260, 4242, 7)


def random_targets(graph_module: Any) -> list[str]:
    """The random ATen overloads (tagged `nondeterministic_seeded`) an exported graph calls where they draw
    (not dropout in eval mode or with p = 0, which the `aten` level keeps), sorted."""
    found = set()
    for node in graph_module.graph.nodes:
        tags = getattr(node.target, "tags", ())
        if node.op == "call_function" and torch.Tag.nondeterministic_seeded in tags and _draws(node):
            found.add(str(node.target))
    return sorted(found)


def _draws(node: Any) -> bool:
    """Whether an fx call of a random op draws: a dropout only in training mode (`train`, argument 2) with p > 0."""
    if "dropout" not in str(node.target):
        return True
    args = list(node.args) + [None] * 3
    p, train = node.kwargs.get("p", args[1]), node.kwargs.get("train", args[2])
    return train is not False and p not in (0, 0.0)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or _nan_equal(a, b))
    return bool(a == b) if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor) else False


def _nan_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.is_floating_point() or a.is_complex()) and bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))


class _Draws(TorchDispatchMode):
    """Records the values each random op draws during an eager run, in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[tuple[str, torch.Tensor]] = []  # (ATen overload, what it drew)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()) and isinstance(out, torch.Tensor):
            self.values.append((str(func), out.detach().clone()))
        return out


def seed_dependent_outputs(
    model: Any, inputs: ModelInputs, state: ModelState
) -> tuple[list[str], list[tuple[str, torch.Tensor]]]:
    """Names (as torch-ir's `outputs`, `frontend.torch.outputs.output_names`) of the outputs whose eager values
    differ between runs under the torch seeds `SEEDS`; and what the random ops drew ((ATen overload, values),
    in call order) when the model seeds torch's generator itself (Reformer's LSH `hash_seed`: every run
    leaves the generator in one state, and drew the same), else [].
    Each run starts from `state` and the caller's RNG state is given back afterwards. Raises what
    `eager_outputs` raises."""
    runs = []
    draws: list[list[tuple[str, torch.Tensor]]] = []
    after: list[torch.Tensor] = []  # the generator's state after each run
    with torch.random.fork_rng(devices=[]):
        for seed in SEEDS:
            torch.manual_seed(seed)
            with _Draws() as drawn:
                runs.append(eager_outputs(model, inputs, state=state).outputs)
            draws.append(drawn.values)
            after.append(torch.get_rng_state())
    first, _ = pytree.tree_flatten_with_path(runs[0])
    others = [pytree.tree_leaves(run) for run in runs[1:]]
    names = output_names([path for path, _ in first])
    changed = [
        name
        for i, (name, (_, leaf)) in enumerate(zip(names, first, strict=True))
        if not all(_same(leaf, other[i]) for other in others)
    ]
    # the model seeded the generator itself when every run, started from another seed, left it in one state
    seeded = all(torch.equal(a, after[0]) for a in after[1:])
    fixed = seeded and all(
        len(d) == len(draws[0]) and all(a[0] == b[0] and _same(a[1], b[1]) for a, b in zip(d, draws[0], strict=True))
        for d in draws[1:]
    )
    return changed, draws[0] if fixed else []


def bake_draws(ir: TorchIR, weights: dict[str, torch.Tensor], draws: list[tuple[str, torch.Tensor]]) -> bool:
    """Make each random node of `ir` a constant holding what it drew in eager PyTorch (`draws`: (ATen
    overload, values) in call order), with its tensor in `weights`, when every eager run drew the same
    (decision aw): its draws are then part of the model, as a weight is. Returns False and changes nothing
    when the random nodes and the draws do not pair up one to one by ATen overload, shape and dtype (a
    decomposed graph draws with other ops than eager PyTorch called)."""
    from ...dtypes import torch_name
    from ...verify.randomness import random_node

    nodes = [n for n in ir.nodes if random_node(n)]
    if not nodes or len(nodes) != len(draws):
        return False
    for node, (target, value) in zip(nodes, draws, strict=True):
        if len(node.outputs) != 1 or node.outputs[0].shape != list(value.shape) or node.target != target:
            return False
        if node.outputs[0].dtype != torch_name(value.dtype):
            return False
    for node, (_, value) in zip(nodes, draws, strict=True):
        key = f"rlx_draws.{node.name}"
        out = node.outputs[0]
        ir.weights.append(WeightSpec(out.name, key, "constant", list(value.shape), out.dtype))
        weights[key] = value
        ir.dropped.append(
            {
                "target": node.target,
                "node": node.name,
                "check": node.source or node.module_path or "the model's forward",
                "reason": "the model seeds torch's generator itself (its draws are the same under every seed), "
                "so the values it drew are kept as a constant",
            }
        )
    ir.nodes[:] = [n for n in ir.nodes if n not in nodes]
    return True


def drawn_outputs(ir: TorchIR) -> list[str]:
    """Names of `ir`'s outputs computed (through any chain of nodes) from a random node's draws."""
    from ...verify.randomness import random_node

    drawn = {o.name for n in ir.nodes if random_node(n) for o in n.outputs}
    for node in ir.nodes:
        if drawn.intersection(node.reads()):
            drawn |= {o.name for o in node.outputs}
    return [o.name for o in ir.outputs if o.value in drawn]
