"""Shared helpers of the op parity tests (`tests/ops/test_<family>.py`).

Each family module holds `SAMPLES`, a list of `(name, module, example inputs)`: one small module per op
(or argument variant), run through `from_torch` at the `aten` level (ops as the user wrote them) and at
`core` (what torch decomposes them into) by `check_op_sample`. Budgets come from the verifier (float32:
cosine >= 0.99999, max abs <= 1e-4 scaled to magnitude). `tests/ops/all_samples.py` joins every
family's list; `tests/ops/test_all_ops_sampled.py` checks that every registered op is exercised.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

import rlx_torch_import as rti

Sample = tuple[str, nn.Module, tuple[torch.Tensor, ...]]
LEVELS = ("aten", "core")
LOWERED: dict[tuple[str, str], set[str]] = {}  # (sample, level) -> ATen overloads it exercised

A = torch.ops.aten
P = torch.ops.prims
INF, NAN = math.inf, math.nan
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
M34 = torch.tensor([[True, False, False, True], [False, True, False, False], [True, True, False, True]])


class Fn(nn.Module):
    """Wrap `fn(module, *inputs)` as a module; keyword tensors become its parameters."""

    def __init__(self, fn: Callable[..., Any], **params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            self.register_parameter(k, nn.Parameter(v))

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(self, *xs)


def of_inputs(fn: Callable[..., Any]) -> Fn:
    """A module computing `fn(*inputs)` (no parameters)."""
    return Fn(lambda _m, *xs: fn(*xs))


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def ri(dtype: torch.dtype) -> torch.Tensor:
    return torch.randint(-50, 50, (2, 3), dtype=dtype)


def ints(*shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(-100, 100, shape, dtype=dtype)


def i8(*shape: int) -> torch.Tensor:
    return torch.randint(-128, 128, shape, dtype=torch.int8)


def wide(*shape: int) -> torch.Tensor:
    """int64 values far beyond float32-exact integers (|x| < 2**40): data movement must stay exact."""
    return torch.randint(-(2**40), 2**40, shape)


def sample_ids(samples: Sequence[Sample]) -> list[str]:
    """pytest ids: the sample names."""
    return [s[0] for s in samples]


def check_op_sample(
    name: str,
    module: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    level: str,
    tmp_path: Path,
    *,
    bit_exact: Collection[str] = (),
    relative: Collection[str] = (),
    core_differs: Collection[str] = (),
) -> None:
    """Convert and verify one sample at `level`; names in `bit_exact` must match eager PyTorch bit for bit,
    in `relative` within 1e-6 relative to each element, and those in `core_differs` must fail verification
    at `core` (torch's core graph is not its eager kernel there)."""
    report = rti.from_torch(module, inputs, tmp_path / name, decomposition=level)
    if level == "core" and name in core_differs:  # torch's core graph is not its eager kernel
        assert report.verified and not report.ok, report.summary()
        LOWERED[(name, level)] = set(report.aten_histogram)
        return
    assert report.verified and report.ok, report.summary()
    with torch.no_grad():
        eager = module(*inputs)
    n_out = len(torch.utils._pytree.tree_leaves(eager))
    # Inputs the op writes in place (e.g. batch norm's running statistics) add `mutated_<input>` outputs.
    assert len([o for o in report.outputs if not o.name.startswith("mutated_")]) == n_out
    if name in bit_exact:
        assert all(o.max_abs_error == 0 and o.nonfinite_match for o in report.outputs), report.summary()
    if name in relative:
        assert all(o.max_rel_error <= 1e-6 for o in report.outputs), report.summary()
    LOWERED[(name, level)] = set(report.aten_histogram)


def check_op_sample_at_high(
    name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path: Path, *, bit_exact: Collection[str] = ()
) -> None:
    """A sample whose lowering differs at the default `high` level, verified there too."""
    report = rti.from_torch(module, inputs, tmp_path / name, decomposition="high")
    assert report.verified and report.ok, report.summary()
    if name in bit_exact:
        assert all(o.max_abs_error == 0 and o.nonfinite_match for o in report.outputs), report.summary()
