"""Parity samples for the vision op families; tests/test_ops.py runs them with the rest."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import of_inputs as _Fn


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _rnn(cls: type[nn.RNNBase], **kw: object) -> nn.Module:
    """An LSTM/GRU returning (output, h_n) / (output, (h_n, c_n)), as a module."""

    class _Rnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = cls(4, 5, **kw)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.rnn(x)

    return _Rnn()


class _RnnState(nn.Module):
    """A 2-layer batch-first LSTM/GRU from a given state; returns output and final state + initial state."""

    def __init__(self, cls: type[nn.RNNBase]) -> None:
        super().__init__()
        self.rnn = cls(4, 5, num_layers=2, batch_first=True)

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, h = self.rnn(x, state if len(state) > 1 else state[0])
        final = h if isinstance(h, tuple) else (h,)
        # Adding the initial state afterwards shows it was not overwritten in place.
        return out, *(f + s for f, s in zip(final, state, strict=True))


_GEN = torch.Generator().manual_seed(3)
torch.manual_seed(3)

SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # max pooling: ceil_mode that changes the size, dilation (with padding and ceil)
    ("max_pool_ceil", nn.MaxPool2d(3, stride=2, ceil_mode=True), (_r(1, 2, 8, 10),)),
    ("max_pool_ceil_pad", nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (_r(2, 3, 8, 7),)),
    ("max_pool_dilation", nn.MaxPool2d(3, stride=1, padding=1, dilation=2), (_r(1, 2, 9, 8),)),
    ("max_pool_dilation_ceil", nn.MaxPool2d(2, stride=2, dilation=(2, 1), ceil_mode=True), (_r(1, 2, 10, 9),)),
    # average pooling: count_include_pad, ceil_mode, divisor_override
    ("avg_pool_plain", nn.AvgPool2d(2), (_r(1, 3, 8, 8),)),
    ("avg_pool_pad_include", nn.AvgPool2d(3, stride=2, padding=1), (_r(1, 2, 9, 8),)),
    ("avg_pool_pad_exclude", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (_r(1, 2, 9, 8),)),
    ("avg_pool_ceil_include", nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (_r(2, 2, 8, 8),)),
    (
        "avg_pool_ceil_exclude",
        nn.AvgPool2d((2, 3), stride=(2, 2), ceil_mode=True, count_include_pad=False),
        (_r(1, 2, 7, 8),),
    ),
    ("avg_pool_divisor_override", nn.AvgPool2d(2, padding=1, divisor_override=3), (_r(1, 2, 6, 6),)),
    # adaptive pooling: non-uniform windows, 3-D input, max
    ("adaptive_avg_nonuniform", nn.AdaptiveAvgPool2d((3, 4)), (_r(2, 3, 7, 10),)),
    ("adaptive_avg_mixed_3d", nn.AdaptiveAvgPool2d((2, 3)), (_r(3, 8, 7),)),
    ("adaptive_avg_global", nn.AdaptiveAvgPool2d(1), (_r(2, 4, 5, 3),)),
    ("adaptive_max_nonuniform", nn.AdaptiveMaxPool2d((3, 2)), (_r(1, 3, 7, 5),)),
    ("adaptive_max_uniform_global", _Fn(lambda a: F.adaptive_max_pool2d(a, (2, 1))), (_r(1, 2, 6, 5),)),
    # transposed convolution
    ("conv_transpose_stride2", nn.ConvTranspose2d(3, 4, 3, stride=2), (_r(1, 3, 5, 4),)),
    (
        "conv_transpose_pad_outpad",
        nn.ConvTranspose2d(4, 6, (3, 4), stride=(2, 3), padding=(1, 2), output_padding=(1, 2), bias=False),
        (_r(2, 4, 5, 4),),
    ),
    (
        "conv_transpose_groups_dilation",
        nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2, dilation=2),
        (_r(1, 4, 4, 5),),
    ),
    ("conv_transpose_1d", nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1), (_r(2, 3, 7),)),
    # recurrent layers (aten.lstm.input / aten.gru.input at the aten level; decomposed at core).
    # Bidirectional ones are in test_vision_models.py: at core they need aten.flip, which no family lowers.
    ("lstm_seq_first_nobias", _rnn(nn.LSTM, bias=False), (_r(5, 3, 4),)),
    ("gru_seq_first", _rnn(nn.GRU, num_layers=2), (_r(5, 3, 4),)),
    ("gru_initial_state", _RnnState(nn.GRU), (_r(2, 5, 4), _r(2, 2, 5))),
    ("lstm_initial_state", _RnnState(nn.LSTM), (_r(2, 5, 4), _r(2, 2, 5), _r(2, 2, 5))),
]
