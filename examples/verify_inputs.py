"""Verify on more input sets than the example: `verify_inputs` ("auto", dicts, tuples, files).

    python examples/verify_inputs.py [--out DIR]
    rlx-torch-import examples/verify_inputs.py -o out/vi --verify-inputs auto --verify-inputs extra.safetensors

The example inputs rarely hit the values that break a conversion (ties, huge logits, a fully
masked row). `verify_inputs` adds input sets, each verified against eager PyTorch with its own
report row (`report.input_sets`); `report.ok` needs every set to pass. A set is "auto"
(adversarial sets made from the example's shapes, dtypes and value ranges: `auto:rounding`,
`auto:ties`, `auto:large`, `auto:zeros`, `auto:negative`, `auto:masked-row`, ...), a dict keyed by
input name (inputs left out are the example's), a tuple of tensors in input order, or a
.safetensors file keyed by input name. The sets are stored with the reference, so `build(OUT)`
verifies them again without the model. Look at: one row per set, with what it exercises.
"""

import torch
from torch import nn


class MaskedSoftmax(nn.Module):
    """Scores -> softmax over the last axis where `mask` is True (a masked attention's core)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.proj(x).masked_fill(~mask, -1e4)
        return torch.softmax(scores, dim=-1)


torch.manual_seed(0)
model = MaskedSoftmax().eval()
example_inputs = (torch.randn(3, 8), torch.rand(3, 8) > 0.3)


if __name__ == "__main__":
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "verify_inputs"
    x, mask = example_inputs
    sets = [
        "auto",  # the adversarial sets
        {"x": x * 50},  # a dict: large scores; `mask` stays the example's
        (torch.randn(3, 8), torch.ones(3, 8, dtype=torch.bool)),  # a tuple: every input, in order
    ]
    report = rti.from_torch(model, example_inputs, out, verify_inputs=sets)
    ok = show(report, out)
    for row in report.input_sets:
        print(f"    {row.label:<16} {'ok' if row.ok else 'FAIL':<4} {row.description[:72]}")
    finish(ok and len(report.input_sets) > 2)
