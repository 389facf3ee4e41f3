"""Parity samples of the factory ops (lower/ops/creation.py): full/ones/zeros(_like), new_*, arange
(integer dtypes truncate a fractional start and step to int64 first; float dtypes round as torch's vectorized
loop does), linspace/logspace in every dtype, and the explicit fill.Scalar / empty_strided overloads (torch's
Core ATen table decomposes fill.Scalar, so only the `aten` level reaches it).

At `core`, torch's own decomposition of linspace/logspace with an integer dtype computes other integers than
its kernel (it interpolates first and truncates after): the core graph differs from eager and verification
must say so (CORE_DIFFERS); those samples also run at the default `high` level.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _samples import (
    FLOATS,
    INTS,
    LEVELS,
    A,
    Fn,
    Sample,
    check_op_sample,
    check_op_sample_at_high,
    ints,
    of_inputs,
    r,
    sample_ids,
)


def _arange_ints(dtype: torch.dtype) -> nn.Module:
    """Integer ranges with fractional starts and steps: torch truncates both to int64 first."""
    return of_inputs(
        lambda x: (
            torch.arange(1, 4, 0.5, dtype=dtype) + x[0],
            torch.arange(0.5, 4, 1, dtype=dtype) + x[0],
            torch.arange(-0.5 if dtype != torch.uint8 else 0.5, 3, 0.7, dtype=dtype) + x[0],
            torch.arange(2.9, 9, 1.9, dtype=dtype) + x[0],
        )
    )


def _spaces(dtype: torch.dtype) -> nn.Module:
    """Evenly spaced points with fractional ends, both directions; logspace in the dtypes it fits."""
    hi = 7.1 if dtype not in (torch.uint8, torch.int8) else 2.9
    lo = -3.3 if dtype != torch.uint8 else 0.3
    return of_inputs(
        lambda x: (
            torch.linspace(lo, hi, 37, dtype=dtype) + x,
            torch.linspace(hi, lo, 9, dtype=dtype) + x[0],
            torch.logspace(lo, 1.9 if dtype != torch.int8 else 1.5, 11, dtype=dtype) + x[0],
            torch.logspace(0, 4, 5, base=2.0, dtype=dtype) + x[0],
        )
    )


def _arange_floats(dtype: torch.dtype) -> nn.Module:
    """Fractional steps long enough for torch's vectorized loop (its values differ from start + i * step
    computed once and rounded by an ULP here and there)."""
    return of_inputs(
        lambda x: (
            torch.arange(0.1, 40, 0.3, dtype=dtype) + x,
            torch.arange(-2.3, 11, 0.1, dtype=dtype)[:133] + x,
            torch.arange(100.3, 200, 0.7, dtype=dtype)[:133] + x,
        )
    )


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    (
        "arange_scalar_tensor",
        Fn(lambda m, a: a * torch.arange(4, dtype=torch.float32) + torch.arange(1, 9, 2)),
        (r(3, 4),),
    ),
    (
        "full_ones_zeros_like",
        Fn(lambda m, a: a + torch.ones_like(a) * 2 - torch.zeros_like(a) + torch.full((3, 1), 0.25)),
        (r(3, 4),),
    ),
    (
        "new_and_plain_factories",
        Fn(
            lambda m, a: (
                a.new_zeros(3, 4)
                + a.new_ones(3, 4)
                + a.new_full((3, 4), 2.0)
                + torch.ones(3, 4)
                + torch.zeros(4)
                + torch.arange(2, 6)
                + a
            )
        ),
        (r(3, 4),),
    ),
    # fill.Scalar and empty_strided called explicitly (torch's core table decomposes fill.Scalar)
    (
        "fill_scalar",
        of_inputs(lambda a, i, m: (A.fill.Scalar(a, 2.5), A.fill.Scalar(i, -3), A.fill.Scalar(m, True) | m)),
        (r(2, 3), ints(4), torch.rand(3) > 0.5),
    ),
    (
        "empty_strided_then_filled",
        of_inputs(lambda a: A.fill.Scalar(A.empty_strided.default([2, 3], [1, 2]), 1.5) + a),
        (r(2, 3),),
    ),
    # arange: integer dtypes truncate start and step; float dtypes as torch's vectorized loop rounds
    *[(f"arange_fractional_{str(dt)[6:]}", _arange_ints(dt), (torch.zeros(6, dtype=dt),)) for dt in INTS],
    *[(f"arange_fractional_{str(dt)[6:]}", _arange_floats(dt), (torch.zeros(133, dtype=dt),)) for dt in FLOATS],
    # linspace / logspace: torch's kernel (integer dtypes truncate start and end first)
    *[(f"linspace_logspace_{str(dt)[6:]}", _spaces(dt), (torch.zeros(37, dtype=dt),)) for dt in (*FLOATS, *INTS)],
]

# At `core`, torch's decomposition of linspace/logspace computes other integers than its kernel: verification
# must report the difference there; these samples also run at the default `high` level.
CORE_DIFFERS = {f"linspace_logspace_{str(dt)[6:]}" for dt in INTS}
# Bit for bit with eager PyTorch (every other sample: within the budget of its dtype).
BIT_EXACT = CORE_DIFFERS | {name for name, _, _ in SAMPLES if name.startswith("arange_fractional_")}
HIGH_TOO = [s for s in SAMPLES if s[0] in CORE_DIFFERS]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=BIT_EXACT, core_differs=CORE_DIFFERS)


@pytest.mark.parametrize(("name", "module", "inputs"), HIGH_TOO, ids=sample_ids(HIGH_TOO))
def test_op_sample_at_high(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path) -> None:
    """Samples whose lowering differs at the default `high` level run there too."""
    check_op_sample_at_high(name, module, inputs, tmp_path, bit_exact=BIT_EXACT)
