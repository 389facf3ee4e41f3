"""Parity samples for training-time and backward ops and three activations; tests/test_ops.py runs them.

Backward and training-mode overloads never appear in an eval/no_grad export of a model, so these
samples call the ATen overload explicitly (`torch.ops.aten.<op>.<overload>(...)`) and export records it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import of_inputs as _Fn

A = torch.ops.aten
_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # activations: defaults (RLX Elu) and every scalar argument
    ("elu_default", nn.ELU(), (_r(3, 8) * 3,)),
    ("elu_alpha_scale_input_scale", _Fn(lambda x: A.elu.default(x, 0.5, 1.2, 0.8)), (_r(3, 8) * 3,)),
    ("selu", nn.SELU(), (_r(4, 6) * 3,)),
    ("hardtanh_default", nn.Hardtanh(), (_r(3, 8) * 2,)),
    ("hardtanh_bounds", _Fn(lambda x: F.hardtanh(x, -0.5, 1.5)), (_r(3, 8) * 2,)),
    ("relu6", nn.ReLU6(), (_r(3, 8) * 5,)),
    ("leaky_relu_default", nn.LeakyReLU(), (_r(3, 8),)),
    ("leaky_relu_slope", _Fn(lambda x: F.leaky_relu(x, 0.3)), (_r(2, 3, 4),)),
    ("elu_leaky_float64", _Fn(lambda x: F.elu(x, 0.7) + F.leaky_relu(x, 0.1)), (_r(3, 5).double() * 3,)),
]
