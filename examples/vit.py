"""A vision transformer: torchvision's VisionTransformer at tiny sizes (32x32 images, 8x8 patches,
2 layers, hidden 32), random weights.

    python examples/vit.py [--out DIR]
    rlx-torch-import examples/vit.py -o out/vit

Look at: the verdict, and which RLX ops the patch embedding (a strided convolution), the class
token, the attention and the MLP became (bundle/meta.json `op_histogram`; `provenance` maps each
RLX node to the ATen op and module it came from).
"""

import torch
import torchvision
from torch import nn

torch.manual_seed(0)
model = torchvision.models.VisionTransformer(
    image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
).eval()
nn.init.normal_(model.heads.head.weight, std=0.1)  # torchvision zero-initializes the head
example_inputs = (torch.randn(2, 3, 32, 32),)


if __name__ == "__main__":
    import json

    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "vit"
    report = rti.from_torch(model, example_inputs, out)
    ok = show(report, out)
    meta = json.loads((out / "bundle" / "meta.json").read_text())
    print("  RLX ops:", ", ".join(f"{op} x{n}" for op, n in sorted(meta["op_histogram"].items())))
    finish(ok)
