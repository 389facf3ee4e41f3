"""Parity samples for the vision op families; tests/test_ops.py runs them with the rest."""

from __future__ import annotations

import torch
from torch import nn

SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = []
