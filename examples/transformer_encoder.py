"""A transformer encoder (torch's own nn.TransformerEncoder, 2 layers) with a padding mask.

    python examples/transformer_encoder.py [--out DIR]
    rlx-torch-import examples/transformer_encoder.py -o out/encoder

The padding mask is a second input (bool, True = padding), passed as a keyword argument:
`from_torch(model, (x,), out, kwargs={"src_key_padding_mask": mask})`; a model file gives it as
`example_kwargs`. Look at: the verdict, the bundle's two inputs (`x`, `src_key_padding_mask`) and
the same bundle run on another mask through `BundleModel.call`, which takes the model's own call.
"""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, d_model: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor) -> torch.Tensor:
        return self.norm(self.encoder(x, src_key_padding_mask=src_key_padding_mask))


torch.manual_seed(0)
model = Encoder().eval()
example_inputs = (torch.randn(2, 10, 32),)
example_kwargs = {"src_key_padding_mask": torch.arange(10).expand(2, 10) >= torch.tensor([[10], [7]])}


if __name__ == "__main__":
    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "transformer_encoder"
    report = rti.from_torch(model, example_inputs, out, kwargs=example_kwargs)
    ok = show(report, out)

    bundle = rti.BundleModel(out / "bundle")
    x = torch.randn(2, 10, 32)
    mask = torch.arange(10).expand(2, 10) >= torch.tensor([[4], [9]])  # other lengths, same shapes
    got = bundle.call(x.numpy(), src_key_padding_mask=mask.numpy())
    with torch.no_grad():
        want = model(x, src_key_padding_mask=mask).numpy()
    print("  bundle inputs:", ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in bundle.meta["inputs"]))
    print(f"  another padding mask: max abs error {np.abs(got - want).max():.2e}")
    finish(ok and np.allclose(got, want, rtol=1e-4, atol=1e-4))
