"""Whole small image models through the image lowerings, and the image checks' rejections."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti


class Decoder(nn.Module):
    """conv -> pixel shuffle -> bilinear upsample -> reflect pad -> conv -> masked_fill(-inf) -> softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.pad = nn.ReflectionPad2d(1)
        self.conv2 = nn.Conv2d(4, 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.shuffle(torch.relu(self.conv1(x)))
        y = F.interpolate(y, scale_factor=1.5, mode="bilinear", align_corners=False)
        y = self.conv2(self.pad(y))
        y = y.masked_fill(y < -0.5, float("-inf"))
        return torch.softmax(y.flatten(2), dim=-1)


class SpatialTransformer(nn.Module):
    """affine_grid from a learned theta, then grid_sample (bilinear, border) and a nearest resample."""

    def __init__(self) -> None:
        super().__init__()
        self.theta = nn.Parameter(torch.tensor([[[0.9, 0.2, 0.1], [-0.15, 1.1, -0.05]]]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = F.affine_grid(self.theta.expand(x.shape[0], 2, 3), [x.shape[0], x.shape[1], 6, 10], align_corners=False)
        warped = F.grid_sample(x, g, mode="bilinear", padding_mode="border", align_corners=False)
        # An identity grid at half resolution puts nearest coordinates exactly on .5 ties.
        eye = torch.eye(2, 3).expand(x.shape[0], 2, 3)
        half = F.affine_grid(eye, [x.shape[0], x.shape[1], 4, 5], align_corners=False)
        return warped, F.grid_sample(x, half, mode="nearest", align_corners=False)


@pytest.mark.parametrize("level", ["high", "core"])
def test_decoder(level: str, tmp_path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(Decoder(), (torch.randn(2, 3, 5, 6),), tmp_path / "dec", decomposition=level)
    assert report.ok, report.summary()


def test_spatial_transformer(tmp_path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(SpatialTransformer(), (torch.randn(2, 3, 8, 10),), tmp_path / "stn")
    assert report.ok, report.summary()


def test_grid_sample_float64_and_half(tmp_path) -> None:
    """float64 samples in float64; half rounds every step as torch's half kernel does."""

    class M(nn.Module):
        def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
            return F.grid_sample(x, g, align_corners=False)

    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        inputs = (torch.randn(1, 2, 4, 4).to(dtype), (torch.rand(1, 3, 3, 2) * 2 - 1).to(dtype))
        report = rti.from_torch(M(), inputs, tmp_path / str(dtype), decomposition="core", auto_decompose=False)
        assert report.ok, report.summary()


def test_uint8_bilinear_is_refused_not_decomposed(tmp_path) -> None:
    """torch's uint8 bilinear kernel and its decomposition disagree: the fallback leaves the op a gap."""

    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, scale_factor=2, mode="bilinear")

    with pytest.raises(rti.UnsupportedOpsError) as err:
        rti.from_torch(M(), (torch.randint(0, 255, (1, 3, 4, 4), dtype=torch.uint8),), tmp_path / "o")
    assert "fixed-point weights" in str(err.value)
