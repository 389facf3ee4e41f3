"""Bundled example: a small MLP (linear + layer_norm + gelu).

This file is both a model file for the CLI and a script:

    rlx-torch-import examples/mlp.py -o out/mlp     # the CLI reads `model` and `example_inputs`
    python examples/mlp.py [--out DIR]              # the same conversion through the Python API

Look at: the verdict line (PASS/FAIL) and the per-output errors, then OUT/report.md.
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


if __name__ == "__main__":  # the CLI loads this file under another name: this part is the script's
    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "mlp"
    report = rti.from_torch(model, example_inputs, out)  # export, lower, write, verify
    ok = show(report, out)

    # The bundle runs without PyTorch: compile once, run many times.
    bundle = rti.BundleModel(out / "bundle")
    x = np.random.default_rng(1).standard_normal((4, 64), dtype=np.float32)
    got = bundle.run({"x": x})["output"]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    print(f"  BundleModel on new inputs: max abs error {np.abs(got - want).max():.2e}")
    finish(ok and np.allclose(got, want, rtol=1e-4, atol=1e-4))
