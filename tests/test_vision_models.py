"""Whole vision / sequence models through from_torch, verified against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

import rlx_torch_import as rti


def _randomize_bn(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give BatchNorm (2-D and 3-D) running stats and affine params non-trivial values (so they matter), eval mode."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
    return model.eval()


class MnistCnn(nn.Module):
    """conv/relu/maxpool x2, flatten, linear x2 on 1x28x28."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 7 * 7, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Decoder(nn.Module):
    """An upsampling decoder: transposed convolutions with different stride/padding/groups/dilation."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(16, 12, 4, stride=2, padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(12, 8, 3, stride=2, padding=1, output_padding=1, groups=2),
            nn.ReLU(),
            nn.ConvTranspose2d(8, 4, 3, stride=1, padding=2, dilation=2, bias=False),
            nn.Tanh(),
            nn.ConvTranspose2d(4, 3, (3, 5), stride=(3, 2), padding=(0, 2), output_padding=(2, 1)),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class Seq(nn.Module):
    """A 2-layer bidirectional batch-first LSTM or GRU returning (output, final state)."""

    def __init__(self, cls: type[nn.RNNBase]) -> None:
        super().__init__()
        self.rnn = cls(6, 8, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.rnn(x)


def _vit() -> nn.Module:
    vit = torchvision.models.VisionTransformer(
        image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128
    )
    nn.init.normal_(vit.heads.head.weight, std=0.1)  # torchvision zero-initializes the head
    return vit


torch.manual_seed(0)
MODELS = [
    ("mnist_cnn", MnistCnn, (1, 1, 28, 28), "high"),
    ("decoder", Decoder, (1, 16, 4, 4), "high"),
    ("resnet18", lambda: torchvision.models.resnet18(weights=None), (1, 3, 64, 64), "high"),
    ("mobilenet_v3_small", lambda: torchvision.models.mobilenet_v3_small(weights=None), (1, 3, 64, 64), "high"),
    ("vit_tiny", _vit, (1, 3, 32, 32), "high"),
    ("lstm_bidir_2layer", lambda: Seq(nn.LSTM), (2, 5, 6), "aten"),
    ("gru_bidir_2layer", lambda: Seq(nn.GRU), (2, 5, 6), "aten"),
    # At high/core torch unrolls the recurrence into basic ops (flip for the reverse direction).
    ("lstm_bidir_2layer_high", lambda: Seq(nn.LSTM), (2, 5, 6), "high"),
    ("gru_bidir_2layer_core", lambda: Seq(nn.GRU), (2, 5, 6), "core"),
]


@pytest.mark.parametrize(("name", "make", "shape", "level"), MODELS, ids=[m[0] for m in MODELS])
def test_model(name: str, make, shape: tuple[int, ...], level: str, tmp_path) -> None:
    torch.manual_seed(0)
    model = _randomize_bn(make())
    x = torch.randn(*shape)
    report = rti.from_torch(model, (x,), tmp_path / name, decomposition=level)
    assert report.verified and report.ok, report.summary()
    assert all(o.cosine >= 0.99999 for o in report.outputs), report.summary()


def test_torchvision_vit_b_16_small_image(tmp_path) -> None:
    """The real vit_b_16 architecture (12 layers, 768 wide, 86M parameters) on a 32x32 image."""
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None, image_size=32).eval()
    nn.init.normal_(model.heads.head.weight, std=0.02)  # torchvision zero-initializes the head
    report = rti.from_torch(model, (torch.randn(1, 3, 32, 32),), tmp_path / "vit_b_16")
    assert report.verified and report.ok, report.summary()
    assert report.outputs[0].cosine >= 0.99999
