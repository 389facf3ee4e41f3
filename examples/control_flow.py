"""Control flow: `torch.cond` on a tensor predicate, and a branch on a size.

    python examples/control_flow.py [--out DIR]

- `torch.cond(pred, true_fn, false_fn, operands)` on a value computed from the input: both
  branches are inlined and each output is selected with `where` on the predicate, so one bundle
  takes either branch at run time.
- A plain Python `if` on a tensor's *value* cannot be exported (torch.export fails, exit 4):
  write it as `torch.cond`. A Python `if` on a *size* is fine: torch.export specializes it (the
  example's size picks the branch), or, with a dynamic dim, put it in `torch.cond` too and each
  size takes its own branch (docs/usage.md, "Control flow and values read from tensors").
Look at: the verdict, then the same bundle on inputs that take each branch.
"""

import torch
from torch import nn


class Gate(nn.Module):
    """If the input's mean is positive: a linear layer and relu; else: sin(x) * 2 - 1."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.mean() > 0, lambda x: self.lin(x).relu(), lambda x: x.sin() * 2 - 1, (x,))


class PythonIf(nn.Module):
    """The same gate written as a Python `if` on a tensor value: torch.export cannot capture it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.mean() > 0:  # data-dependent: torch.export refuses it
            return self.lin(x).relu()
        return x.sin() * 2 - 1


torch.manual_seed(0)
model = Gate().eval()
example_inputs = (torch.rand(3, 4),)  # takes the true branch; the bundle still has both


if __name__ == "__main__":
    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "control_flow"
    report = rti.from_torch(model, example_inputs, out)
    ok = show(report, out)

    bundle = rti.BundleModel(out / "bundle")
    for label, x in (("mean > 0 (true branch)", torch.rand(3, 4)), ("mean < 0 (false branch)", -torch.rand(3, 4))):
        got = bundle.run({"x": x.numpy()})["output"]
        with torch.no_grad():
            want = model(x).numpy()
        close = np.allclose(got, want, rtol=1e-5, atol=1e-6)
        print(f"  {label}: matches PyTorch: {close}")
        ok = ok and close

    try:  # the Python `if` on a value: ExportError (CLI exit 4), with torch's explanation
        rti.from_torch(PythonIf().eval(), example_inputs, args.out / "python_if")
        ok = False  # not expected: it would have exported
    except rti.ExportError as e:
        print(f"  a Python `if` on a tensor value is refused: ExportError, exit code {int(e.exit_code)}")
    finish(ok)
