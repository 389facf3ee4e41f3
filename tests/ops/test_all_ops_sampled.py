"""Adding an op means adding its sample: every registry key is exercised by some family's samples.

tests/ops/conftest.py runs this test last, after every family's `test_op_sample` recorded what it lowered.
"""

from __future__ import annotations

import pytest

from _samples import LEVELS, LOWERED

# Registered overloads torch 2.15's export never emits for these samples (kept so older or
# newer torch versions, and hand-written torch-ir, still lower). Each entry says why.
NOT_REACHED_BY_EXPORT = {
    "aten.alias.default": "export folds aliases away",
    "aten.contiguous.default": "export records clone/no-op instead",
    "aten.detach.default": "removed under no_grad export",
    "aten.div.Scalar": "export records tensor/scalar division as div.Tensor",
    "aten.sub.Scalar": "export records tensor - scalar as sub.Tensor",
    "aten._unsafe_view.default": "torch 2.15 export emits view.default",
}


def test_every_registered_op_has_a_sample() -> None:
    """Adding an op means adding its sample: every registry key is exercised above (runs last)."""
    from all_samples import SAMPLES
    from rlx_torch_import.lower import REGISTRY

    if len(LOWERED) < len(SAMPLES) * len(LEVELS):
        pytest.skip("needs the whole sample list to have run in this session")
    seen = set().union(*LOWERED.values())
    missing = sorted(set(REGISTRY) - seen - set(NOT_REACHED_BY_EXPORT))
    assert not missing, f"registered ops without a parity sample: {missing}"
    stale = sorted(set(NOT_REACHED_BY_EXPORT) & seen)
    assert not stale, f"now reached by a sample; drop from NOT_REACHED_BY_EXPORT: {stale}"
