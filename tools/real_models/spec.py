"""What one real model is: its name, the package that builds it, the kind of issue-39 problem it
exercises, and a function that builds it (random weights, fixed seed, eval mode) with example inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# The kinds of issue 39, one per table row of the issue, plus a control that already worked.
STATE_CACHING = "state-caching forward"
DATA_DEPENDENT = "data-dependent size"
COMPLEX_FFT = "complex / FFT"
RANDOM_OPS = "random op"
TOPK_TIES = "topk ties"
CONTROL = "control"

# (model, positional example inputs, keyword example inputs)
Built = tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class Spec:
    """One model: `name` (the --only key), `package` (the import name whose absence skips it),
    `source` (the module of this package that defines it), `kind` (an issue-39 kind above),
    `description` (what is built, from which config, on which inputs), `build` (returns the
    model in eval mode with its example inputs; called with torch's seed already fixed) and
    `verify_sets` (optional: more input sets, by input name, for `verify_inputs`)."""

    name: str
    package: str
    source: str
    kind: str
    description: str
    build: Callable[[], Built]
    # extra input sets (verify_inputs) from the built example: other values of sizes computed from tensor values
    verify_sets: Callable[[Built], list[Any]] | None = None
