"""Parity samples of recurrent layers (lower/ops/rnn.py): aten.lstm.input / aten.gru.input at the aten
level (decomposed at core), from a zero or a given initial state.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from _samples import LEVELS, Sample, check_op_sample, sample_ids

_GEN = torch.Generator().manual_seed(3)


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


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    # recurrent layers (aten.lstm.input / aten.gru.input at the aten level; decomposed at core).
    # Bidirectional ones are in test_vision_models.py: at core they need aten.flip, which no family lowers.
    ("lstm_seq_first_nobias", _rnn(nn.LSTM, bias=False), (_r(5, 3, 4),)),
    ("gru_seq_first", _rnn(nn.GRU, num_layers=2), (_r(5, 3, 4),)),
    ("gru_initial_state", _RnnState(nn.GRU), (_r(2, 5, 4), _r(2, 2, 5))),
    ("lstm_initial_state", _RnnState(nn.LSTM), (_r(2, 5, 4), _r(2, 2, 5), _r(2, 2, 5))),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)
