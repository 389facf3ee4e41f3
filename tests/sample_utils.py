"""Shared helpers for the parity sample lists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class Fn(nn.Module):
    """Wrap `fn(module, *inputs)` as a module; keyword tensors become its parameters."""

    def __init__(self, fn: Callable[..., Any], **params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        for k, v in params.items():
            self.register_parameter(k, nn.Parameter(v))

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(self, *xs)


def of_inputs(fn: Callable[..., Any]) -> Fn:
    """A module computing `fn(*inputs)` (no parameters)."""
    return Fn(lambda _m, *xs: fn(*xs))
