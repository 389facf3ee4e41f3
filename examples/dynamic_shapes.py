"""Dynamic shapes: one export with a dynamic batch and sequence length (torch.export's `Dim`),
one bundle that runs at every size in the declared ranges.

    python examples/dynamic_shapes.py [--out DIR]
    rlx-torch-import examples/dynamic_shapes.py -o out/dyn --dynamic x:0=batch:1:8 --dynamic x:1=seq:2:64

Verification runs eager PyTorch and the bundle at a sweep of sizes (each symbol's min, 1, the
example, max-1, max, and corners), one report row per point. Look at: the sweep rows
(`report.sweep`), then `BundleModel.run` at sizes of your own: it reads the sizes from the inputs
(`binding`), compiles once per binding and keeps the last few compiled (`binding_cache`).
"""

import torch
from torch import nn
from torch.export import Dim


class TokenMixer(nn.Module):
    """A linear layer, a softmax over the sequence and a layer norm: shapes (batch, seq, 16)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x)
        weights = torch.softmax(h @ h.transpose(1, 2) / 4.0, dim=-1)  # (batch, seq, seq)
        return self.norm(x + weights @ h)


torch.manual_seed(0)
model = TokenMixer().eval()
example_inputs = (torch.randn(2, 8, 16),)  # example sizes of a named Dim must be >= 2
dynamic_shapes = {"x": {0: Dim("batch", min=1, max=8), 1: Dim("seq", min=2, max=64)}}


if __name__ == "__main__":
    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "dynamic_shapes"
    report = rti.from_torch(model, example_inputs, out, dynamic_shapes=dynamic_shapes)
    ok = show(report, out)
    for row in report.sweep:  # one row per sweep point
        print(f"    sweep {row.label:<24} {row.binding}  {'ok' if row.ok else 'FAIL'}")

    bundle = rti.BundleModel(out / "bundle", binding_cache=4)
    for batch, seq in ((1, 3), (5, 17), (8, 64)):
        x = np.random.default_rng(batch).standard_normal((batch, seq, 16), dtype=np.float32)
        got = bundle.run({"x": x})["output"]
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        close = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4)
        print(f"  run at {bundle.binding({'x': x})}: shape {got.shape}, matches PyTorch: {close}")
        ok = ok and close
    finish(ok)
