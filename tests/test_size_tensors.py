"""Tensors made from sizes under dynamic shapes (issue 38): `torch.scalar_tensor(x.shape[0])`,
`torch.tensor(n)`, `torch.full((1,), n)`, a size times a constant tensor, a size as a `torch.cond`
predicate. Each becomes a value computed per binding (docs/design.md decision au), in bounded and
unbounded ranges, checked against eager PyTorch (integers exactly) at sizes the sweep does not visit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel


class SizeTensors(torch.nn.Module):
    """Every way a size becomes a tensor value, used in arithmetic."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = x.shape[0]
        as_float = torch.scalar_tensor(n)  # float32
        as_long = torch.tensor(n)  # int64 (aten.scalar_tensor)
        filled = torch.full((1,), n)  # int64 (aten.full)
        scaled = torch.ones(4) * n  # a constant tensor times the size: not folded at one size
        shifted = torch.scalar_tensor(2 * n - 7, dtype=torch.int64)  # negative at n = 1..3
        return x * as_float + filled, as_long, scaled * 0.5 - 1, shifted * 3


class SizePredicate(torch.nn.Module):
    """A size read as a tensor, used as a `torch.cond` predicate."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = torch.scalar_tensor(x.shape[0])
        return torch.cond(n > 4, lambda x: x * 2, lambda x: x - 1, (x,))


RANGES = {
    "bounded": Dim("b", min=1, max=12),
    "unbounded": Dim("b", min=1),
    "auto": Dim.AUTO,
}


def _differing(bundle: BundleModel, model: torch.nn.Module, batches: list[int]) -> list[int]:
    """The batch sizes at which the bundle's outputs differ from eager PyTorch's: in dtype, shape or
    any integer; a float by more than float32 rounding (the size itself is exact, see `shifted`)."""
    wrong = []
    for batch in batches:
        x = torch.randn(batch, 3)
        want = model(x)
        got = bundle.call(x.numpy())
        for w, g in zip(
            want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,), strict=True
        ):
            w, g = w.numpy(), np.asarray(g)
            if g.dtype != w.dtype or g.shape != w.shape:
                wrong.append(batch)
            elif w.dtype.kind == "f" and not np.allclose(g, w, rtol=1e-6, atol=0):
                wrong.append(batch)
            elif w.dtype.kind != "f" and not np.array_equal(g, w):
                wrong.append(batch)
    return wrong


@pytest.mark.parametrize("dims", list(RANGES), ids=list(RANGES))
def test_tensors_made_from_a_size_follow_the_binding(dims: str, tmp_path: Path) -> None:
    model = SizeTensors()
    report = rti.from_torch(model, (torch.randn(5, 3),), tmp_path / "o", dynamic_shapes=({0: RANGES[dims]},))
    assert report.ok and report.sweep and all(r.ok for r in report.sweep), report.summary()
    bundle = BundleModel(tmp_path / "o/bundle", binding_cache=2)
    top = 12 if dims == "bounded" else 3000  # unbounded: far past the sweep (4x the example)
    lowest = 1 if dims != "auto" else 2
    assert _differing(bundle, model, [lowest, 3, 4, 7, 11, top]) == []


def test_a_size_read_as_a_tensor_chooses_the_cond_branch_per_binding(tmp_path: Path) -> None:
    model = SizePredicate()
    report = rti.from_torch(model, (torch.randn(3, 3),), tmp_path / "o", dynamic_shapes=({0: Dim("b", min=1)},))
    assert report.ok, report.summary()
    bundle = BundleModel(tmp_path / "o/bundle", binding_cache=1)
    assert _differing(bundle, model, [1, 2, 4, 5, 9, 100]) == []  # both branches: 4 is not > 4, 5 is


class PositionsAfterCache(torch.nn.Module):
    """`arange(past, past + new)` and the cache length as a number: the cache dim has no maximum (a
    value whose shape uses only the bounded seq still gets seq's bound) and may be 0."""

    def forward(self, past: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, t = past.shape[1], x.shape[1]
        return torch.arange(s, s + t), x * torch.scalar_tensor(s) + past.sum()


def test_a_range_after_an_unbounded_cache(tmp_path: Path) -> None:
    model = PositionsAfterCache()
    ds = ({1: Dim("cache", min=0)}, {1: Dim("seq", min=1, max=16)})
    report = rti.from_torch(model, (torch.randn(1, 5), torch.randn(1, 3)), tmp_path / "o", dynamic_shapes=ds)
    assert report.ok and all(r.ok for r in report.sweep), report.summary()
    bundle = BundleModel(tmp_path / "o/bundle", binding_cache=1)
    for cache, seq in ((0, 1), (1, 16), (77, 4), (5000, 2)):
        past, x = torch.randn(1, cache), torch.randn(1, seq)
        positions, scaled = bundle.call(past.numpy(), x.numpy())
        want = model(past, x)
        np.testing.assert_array_equal(positions, want[0].numpy())
        # past.sum() is RLX's float32 sum (another order than torch's): within a few ULP of the total
        np.testing.assert_allclose(scaled, want[1].numpy(), rtol=1e-6, atol=1e-6 * max(1.0, float(cache)))


class SizeSpaced(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :1] + torch.linspace(0, x.shape[0], 5)


def test_points_spaced_up_to_a_size_are_refused_naming_the_op(tmp_path: Path) -> None:
    """linspace's points are computed at conversion: an end that is a size is refused (exit 3), not fixed."""
    with pytest.raises(rti.UnsupportedOpsError) as caught:
        rti.from_torch(SizeSpaced(), (torch.randn(3, 4),), tmp_path / "o", dynamic_shapes=({0: Dim("b", min=2)},))
    assert "aten.linspace.default: a start/end that is a dynamic size" in caught.value.message
    assert caught.value.exit_code == 3 and not (tmp_path / "o").exists()
