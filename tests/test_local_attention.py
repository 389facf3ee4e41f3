"""Blocked local self-attention (HaloNet): each query block of b x b pixels attends to the
(b + 2*halo)^2 keys and values around it, taken by two overlapping `unfold`s of the padded K/V map.
Converted end to end and verified against PyTorch; timm's HaloAttn / halonet26t too when timm is
installed (random weights)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti


class HaloBlock(nn.Module):
    """Multi-head local attention over b x b query blocks with a halo of `halo` pixels, plus a
    learned relative-position bias indexed by (key offset - query offset) in each window."""

    def __init__(self, dim: int = 16, heads: int = 2, block: int = 4, halo: int = 1) -> None:
        super().__init__()
        self.heads, self.block, self.halo, self.win = heads, block, halo, block + 2 * halo
        self.dh = dim // heads
        self.q = nn.Conv2d(dim, dim, 1, bias=False)
        self.kv = nn.Conv2d(dim, 2 * dim, 1, bias=False)
        self.proj = nn.Conv2d(dim, dim, 1)
        span = self.win + block - 1  # relative offsets key - query along one axis: -(b-1) .. win-1
        self.rel = nn.Parameter(torch.randn(heads, span * span) * 0.5)
        qy, qx = torch.meshgrid(torch.arange(block), torch.arange(block), indexing="ij")
        ky, kx = torch.meshgrid(torch.arange(self.win), torch.arange(self.win), indexing="ij")
        dy = ky.reshape(1, -1) - qy.reshape(-1, 1) + block - 1
        dx = kx.reshape(1, -1) - qx.reshape(-1, 1) + block - 1
        self.register_buffer("rel_index", dy * span + dx)  # (b*b, win*win)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        b, nh, nw, dh = self.block, h // self.block, w // self.block, self.dh
        q = self.q(x).reshape(n * self.heads, dh, nh, b, nw, b).permute(0, 2, 4, 3, 5, 1)
        q = q.reshape(n * self.heads, nh * nw, b * b, dh)
        kv = F.pad(self.kv(x), [self.halo] * 4)
        kv = kv.unfold(2, self.win, b).unfold(3, self.win, b)  # n, 2c, nh, nw, win, win
        kv = kv.reshape(n * self.heads, 2 * dh, nh * nw, self.win * self.win).permute(0, 2, 3, 1)
        k, v = kv.split(dh, dim=-1)
        bias = self.rel[:, self.rel_index].repeat(n, 1, 1).unsqueeze(1)  # n*heads, 1, b*b, win*win
        attn = (q @ k.transpose(-1, -2) * dh**-0.5 + bias).softmax(-1)
        out = (attn @ v).reshape(n, self.heads, nh, nw, b, b, dh).permute(0, 1, 6, 2, 4, 3, 5)
        return x + self.proj(out.reshape(n, c, h, w))


class HaloNetLite(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.attn = nn.Sequential(HaloBlock(), nn.GroupNorm(4, 16), HaloBlock(block=2, halo=2))
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(self.stem(x)).mean((2, 3)))


def test_halo_local_attention_block(tmp_path) -> None:
    torch.manual_seed(0)
    model = HaloNetLite().eval()
    for level in ("high", "core"):
        report = rti.from_torch(model, (torch.randn(2, 3, 16, 24),), tmp_path / level, decomposition=level)
        assert report.verified and report.ok, report.summary()
        assert report.aten_histogram["aten.unfold.default"] == 4


class FrameEnergy(nn.Module):
    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return s.unfold(-1, 16, 4).pow(2).mean(-1)


def test_audio_framing_with_a_dynamic_length(tmp_path) -> None:
    """Overlapping frames of a signal whose length is dynamic: one RLX graph for every length in range."""
    model = FrameEnergy()
    report = rti.from_torch(
        model, (torch.randn(2, 64),), tmp_path / "o", dynamic_shapes={"s": {1: Dim("n", min=20, max=80)}}
    )
    assert report.ok and report.sweep and all(r.ok for r in report.sweep), report.summary()


def test_timm_halo_attention(tmp_path) -> None:
    """timm's HaloAttn layer and halonet26t at a small input (random weights)."""
    timm = pytest.importorskip("timm")
    from timm.layers.halo_attn import HaloAttn

    torch.manual_seed(0)
    layer = HaloAttn(16, 16, num_heads=2, dim_head=8, block_size=4, halo_size=1).eval()
    report = rti.from_torch(layer, (torch.randn(1, 16, 8, 12),), tmp_path / "layer")
    assert report.verified and report.ok, report.summary()
    model = timm.create_model("halonet26t", pretrained=False).eval()
    report = rti.from_torch(model, (torch.randn(1, 3, 256, 256),), tmp_path / "halonet26t")
    assert report.verified and report.ok, report.summary()
