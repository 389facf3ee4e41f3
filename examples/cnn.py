"""A small CNN with batch norm: conv -> batch norm -> relu -> max pool, twice, then a linear head.

    python examples/cnn.py [--out DIR]
    rlx-torch-import examples/cnn.py -o out/cnn      # also a model file for the CLI

Look at: the verdict, and the bundle's weights: in eval mode each batch norm is folded into the
convolution before it (`<conv>.weight.bn_folded`, `<bn>.bn_folded_bias` in bundle/weights.safetensors,
recorded in bundle/meta.json `derived_params`). The conversion always runs the model in eval mode
(batch norm on its running statistics), so set statistics that are not the defaults to see them used.
"""

import torch
from torch import nn


class SmallCnn(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).flatten(1))


torch.manual_seed(0)
model = SmallCnn().eval()
with torch.no_grad():  # running statistics as a trained model has them (fresh ones are 0 and 1)
    for bn in (model.features[1], model.features[5]):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
example_inputs = (torch.randn(2, 3, 16, 16),)


if __name__ == "__main__":
    import json

    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "cnn"
    report = rti.from_torch(model, example_inputs, out)
    ok = show(report, out)
    meta = json.loads((out / "bundle" / "meta.json").read_text())
    print("  weights derived for RLX:", ", ".join(sorted(meta.get("derived_params", {}))))
    print("  RLX ops:", meta["op_histogram"])  # no BatchNorm node left: folded into the Conv
    finish(ok)
