"""Resampling at dynamic image sizes (docs/design.md, decision aw): nearest (1-D/2-D/3-D, nearest-exact,
scale or size given) and the linear family lower to the same RLX graph at every size, so an FPN-like
model with dynamic height and width converts once and verifies across its sweep; nearest stays bit-exact
with eager PyTorch at every size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.errors import DynamicShapeError, ExitCode, ExportError


class TinyFPN(torch.nn.Module):
    """conv -> stride-2 conv -> 2x upsample -> concat with the first level (YOLO's neck, in small)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.c1(x)
        up = F.interpolate(self.c2(a), scale_factor=2.0, mode=self.mode)
        return torch.cat([a, up], 1)


class Nearests(torch.nn.Module):
    """Nearest 2-D with scales and with sizes that follow the input. (At dynamic sizes torch.export
    writes the 1-D/3-D and nearest-exact `.vec` overloads with a float size, sym_float(h) * scale,
    which torch-ir does not record yet: those are refused before lowering.)"""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h, w = x.shape[2], x.shape[3]
        return (
            F.interpolate(x, scale_factor=2.0, mode="nearest"),
            F.interpolate(x, size=(2 * h, 3 * w), mode="nearest"),
            F.interpolate(x, scale_factor=(3.0, 1.0), mode="nearest"),
        )


class Linears(torch.nn.Module):
    """Bilinear by a scale and by a size that follows the input."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h, w = x.shape[2], x.shape[3]
        return (
            F.interpolate(x, scale_factor=2.0, mode="bilinear"),
            F.interpolate(x, size=(3 * h, 2 * w), mode="bilinear"),
        )


def _dims() -> dict[str, dict[int, object]]:
    return {"x": {2: Dim("h", min=2, max=8) * 4, 3: Dim("w", min=2, max=8) * 4}}


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_fpn_with_dynamic_height_and_width(mode: str, tmp_path: Path) -> None:
    report = rti.from_torch(TinyFPN(mode).eval(), (torch.randn(1, 3, 16, 24),), tmp_path / "o", dynamic_shapes=_dims())
    assert report.ok, report.summary()
    assert len(report.sweep) >= 4 and all(r.ok for r in report.sweep), report.summary()


@pytest.mark.parametrize(
    ("kind", "dtype"), [("nearest", torch.float32), ("linear", torch.float32), ("linear", torch.float64)]
)
def test_resampling_at_every_size(kind: str, dtype: torch.dtype, tmp_path: Path) -> None:
    """One bundle runs at sizes other than those it was lowered at; nearest is bit-exact there."""
    model = (Nearests() if kind == "nearest" else Linears()).eval()
    x = torch.randn(1, 2, 12, 8, dtype=dtype)
    report = rti.from_torch(model, (x,), tmp_path / "o", dynamic_shapes=_dims())
    assert report.ok, report.summary()
    bundle = BundleModel(tmp_path / "o/bundle")
    for h, w in ((8, 8), (12, 28), (32, 20), (32, 32)):
        x = torch.randn(1, 2, h, w, dtype=dtype)
        got = list(bundle.run({"x": x.numpy()}).values())
        want = model(x)
        assert len(got) == len(want)
        for g, t in zip(got, want, strict=True):
            if kind == "nearest":
                np.testing.assert_array_equal(g, t.numpy())
            else:
                tol = 1e-5 if dtype == torch.float32 else 1e-12
                np.testing.assert_allclose(g, t.numpy(), rtol=tol, atol=tol / 10)


def test_a_step_that_changes_with_the_size_is_refused_naming_the_node(tmp_path: Path) -> None:
    """align_corners makes the step (in - 1) / (out - 1), which is no formula RLX's symbolic graph holds."""

    class Aligned(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=True)

    with pytest.raises(DynamicShapeError, match="upsample_bilinear2d"):
        rti.from_torch(Aligned(), (torch.randn(1, 2, 12, 8),), tmp_path / "o", dynamic_shapes=_dims())


class _FixedWidth(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w  # the width must be 8


def test_dynamic_dims_torch_fixed_are_said_in_the_report_or_refused(tmp_path: Path) -> None:
    """Dim.AUTO lets torch fix a dim: the conversion goes on, and the report (and the CLI summary, which
    prints it) names the input, the axis, the size and torch's guard. A named Dim is a promise torch could
    not keep: torch.export refuses it, and so do we (ExportError, exit 4)."""
    with pytest.warns(UserWarning, match="asked to be dynamic"):
        report = rti.from_torch(
            _FixedWidth(), (torch.randn(3, 8),), tmp_path / "o", dynamic_shapes={"x": {1: Dim.AUTO}}
        )
    want = "input 'x' axis 1 (x.1) was asked to be dynamic but is static at size 8: torch added the guard Eq("
    assert report.ok and any(n.startswith(want) for n in report.notes), report.notes
    assert want in report.summary() and want in (tmp_path / "o/report.md").read_text()
    with pytest.raises(ExportError, match="Constraints violated") as raised:
        rti.from_torch(
            _FixedWidth(), (torch.randn(3, 8),), tmp_path / "n", dynamic_shapes={"x": {1: Dim("width", max=16)}}
        )
    assert raised.value.exit_code == ExitCode.EXPORT_FAILED
