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


def seed_dependent_outputs(model: Any, inputs: ModelInputs, state: ModelState) -> list[str]:
    """Names (as torch-ir's `outputs`, `frontend.outputs.output_names`) of the outputs whose eager values
    differ between runs under the torch seeds `SEEDS`; each run starts from `state` and the caller's RNG
    state is given back afterwards. Raises what `eager_outputs` raises."""
    runs = []
    with torch.random.fork_rng(devices=[]):
        for seed in SEEDS:
            torch.manual_seed(seed)
            runs.append(eager_outputs(model, inputs, state=state).outputs)
    first, _ = pytree.tree_flatten_with_path(runs[0])
    others = [pytree.tree_leaves(run) for run in runs[1:]]
    names = output_names([path for path, _ in first])
    return [
        name
        for i, (name, (_, leaf)) in enumerate(zip(names, first, strict=True))
        if not all(_same(leaf, other[i]) for other in others)
    ]
