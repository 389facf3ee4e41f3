"""Bundled example: a small MLP (linear + layer_norm + gelu).

rlx-torch-import examples/mlp.py -o out/mlp
"""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 64, d_hidden: int = 128, d_out: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.norm(self.fc1(x))))


torch.manual_seed(0)
model = MLP().eval()  # inference mode (from_torch converts in eval mode either way)
example_inputs = (torch.randn(4, 64),)
