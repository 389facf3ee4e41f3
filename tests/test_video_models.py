"""Video models (3-D convolution, 3-D batch norm and pooling, tubelet patch embeddings) through from_torch,
verified against PyTorch: torchvision's r3d_18 / mc3_18 / r2plus1d_18 and Hugging Face's VideoMAE."""

from __future__ import annotations

import warnings

import pytest
import torch
import torchvision
from torch import nn

import rlx_torch_import as rti
from test_vision_models import _randomize_bn

VIDEO = torchvision.models.video
MODELS = [
    ("r3d_18", lambda: VIDEO.r3d_18(weights=None)),
    ("mc3_18", lambda: VIDEO.mc3_18(weights=None)),
    ("r2plus1d_18", lambda: VIDEO.r2plus1d_18(weights=None)),
]


@pytest.mark.parametrize(("name", "make"), MODELS, ids=[m[0] for m in MODELS])
def test_torchvision_video_model(name: str, make, tmp_path) -> None:
    """A 4-frame 32x32 clip (N, C, T, H, W) through the whole network (stem, 4 stages, global pool, fc)."""
    torch.manual_seed(0)
    model = _randomize_bn(make())
    report = rti.from_torch(model, (torch.randn(1, 3, 4, 32, 32),), tmp_path / name)
    assert report.verified and report.ok, report.summary()
    assert report.outputs[0].cosine >= 0.99999, report.summary()


def test_hf_videomae(tmp_path) -> None:
    """VideoMAE encoder from a small config (random weights): a Conv3d tubelet embedding, then a ViT."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.VideoMAEConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        num_frames=4,
        tubelet_size=2,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
    )
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.VideoMAEModel(cfg).eval()

    class Hidden(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.model(pixel_values).last_hidden_state

    report = rti.from_torch(Hidden(), (torch.randn(1, 4, 3, 32, 32),), tmp_path / "videomae")
    assert report.verified and report.ok, report.summary()
    assert report.outputs[0].cosine >= 0.99999, report.summary()
