"""Recurrent networks: a 2-layer bidirectional LSTM and a GRU (batch first), each returning
(output, final state) as torch's modules do.

    python examples/rnn.py [--out DIR]
    rlx-torch-import examples/rnn.py -o out/lstm      # the LSTM (the file's `model`)

torch.export unrolls the recurrence over the example's sequence length, so the bundle runs at
that length. Look at: the verdicts, and the outputs named by their place in forward's result:
`output_0` (every step), `output_1.0` / `output_1.1` (the LSTM's final h and c). torch.export
warns that `_flat_weights` were assigned during export: torch's own LSTM does that, it is harmless.
"""

import torch
from torch import nn


class Seq(nn.Module):
    """A 2-layer bidirectional batch-first RNN of class `cls`, returning torch's (output, state)."""

    def __init__(self, cls: type[nn.RNNBase]) -> None:
        super().__init__()
        self.rnn = cls(input_size=6, hidden_size=8, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.rnn(x)


torch.manual_seed(0)
model = Seq(nn.LSTM).eval()
example_inputs = (torch.randn(2, 5, 6),)  # batch 2, 5 steps, 6 features


if __name__ == "__main__":
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    ok = True
    for name, module in (("lstm", model), ("gru", Seq(nn.GRU).eval())):
        out = args.out / name
        report = rti.from_torch(module, example_inputs, out, name=name)
        ok = show(report, out) and ok
    finish(ok)
