"""The pass budgets by dtype: how far RLX may be from PyTorch and still pass (`Budget`).

A leaf module below both stages that read it (no imports beyond the standard library): the verifier
(`verify/compare.py`) and the crate writer (`crate/sources.py`, which writes the float budgets into a
generated crate's `src/host.rs`) read the one table here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """How far a result may be from PyTorch and still pass."""

    atol: float
    rtol: float
    min_cosine: float


# The one table of float budgets: the generated Rust crates get theirs from here
# (crate/sources.py writes it into src/host.rs).
_BUDGETS = {
    "float64": Budget(atol=1e-9, rtol=1e-7, min_cosine=0.9999999),
    "float32": Budget(atol=1e-4, rtol=1e-4, min_cosine=0.99999),
    "float16": Budget(atol=2e-3, rtol=2e-3, min_cosine=0.999),
    "bfloat16": Budget(atol=1.6e-2, rtol=1.6e-2, min_cosine=0.995),
}
# Integers and bool: every element equal. Cosine is reported but not judged (it is
# computed in float64 and can round below 1.0 for identical large integers).
EXACT = Budget(atol=0.0, rtol=0.0, min_cosine=-1.0)


# A float output whose outliers a float64 run can judge (a float64 output has no wider judge).
JUDGED = ("float32", "float16", "bfloat16")
# How many times PyTorch's own error (against float64) RLX may be off at an outlier, beyond the
# element's own budget. Two float32 computations of one ill-conditioned value differ by a similar,
# random amount; 16 keeps such pairs passing (the ratio of two such errors exceeds 16 rarely, and the
# median floor covers elements PyTorch happens to get exactly), while a lost digit is off by far more.
JUDGE_FACTOR = 16.0


def float_budgets() -> dict[str, Budget]:
    """The float dtypes' budgets (a copy); every other dtype is exact."""
    return dict(_BUDGETS)


def budget_for(dtype: str) -> Budget:
    """The pass budget for an output of this torch-ir dtype (exact for integers and bool)."""
    return _BUDGETS.get(dtype, EXACT)


def is_exact(dtype: str) -> bool:
    """Whether outputs of this dtype must match element for element (integers and bool)."""
    return dtype not in _BUDGETS
