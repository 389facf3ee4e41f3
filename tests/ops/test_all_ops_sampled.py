"""Adding an op means adding its sample: every registry key is exercised by some family's samples, and
every op family (`REGISTRY[target].family`, its module in lower/ops/) has its own tests/ops/test_<family>.py.

tests/ops/conftest.py runs the sample check last, after every family's `test_op_sample` recorded what it lowered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _samples import LEVELS, LOWERED

# Registered overloads torch 2.15's export never emits for these samples (kept so older or
# newer torch versions, and hand-written torch-ir, still lower). Each entry says why.
NOT_REACHED_BY_EXPORT = {
    "aten.alias.default": "export folds aliases away",
    "aten.contiguous.default": "export records clone/no-op instead",
    "aten.detach.default": "removed under no_grad export",
    "aten.sub.Scalar": "export records tensor - scalar as sub.Tensor",
}

# test_*.py modules here that are not an op family's samples
NOT_A_FAMILY = {"all_ops_sampled"}


def test_every_family_has_its_test_module() -> None:
    """tests/ops/test_<family>.py and the op families match one to one: every family in REGISTRY has its
    module here, and every module here (but NOT_A_FAMILY) names a family."""
    from rlx_torch_import.lower import REGISTRY

    families = {lowering.family for lowering in REGISTRY.values()}
    modules = {p.stem.removeprefix("test_") for p in Path(__file__).resolve().parent.glob("test_*.py")}
    modules -= NOT_A_FAMILY
    missing = sorted(families - modules)
    assert not missing, f"op families without a tests/ops/test_<family>.py: {missing}"
    stray = sorted(modules - families)
    assert not stray, f"tests/ops/test_<name>.py naming no op family (rename it after its family): {stray}"


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
