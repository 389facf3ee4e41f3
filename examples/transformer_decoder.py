"""A causal transformer decoder LM: token ids (int64) -> embeddings -> 2 pre-norm blocks with causal
self-attention (`scaled_dot_product_attention(is_causal=True)`) -> logits.

    python examples/transformer_decoder.py [--out DIR]
    rlx-torch-import examples/transformer_decoder.py -o out/decoder

Look at: the verdict, and the check that the bundle is causal: changing the last token changes
only the last position's logits.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # position i sees 0..i only
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class DecoderLM(nn.Module):
    def __init__(self, vocab: int = 100, d: int = 32, heads: int = 4, layers: int = 2, max_len: int = 32) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(input_ids) + self.positions(torch.arange(input_ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))


torch.manual_seed(0)
model = DecoderLM().eval()
example_inputs = (torch.randint(0, 100, (2, 12)),)


if __name__ == "__main__":
    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "transformer_decoder"
    report = rti.from_torch(model, example_inputs, out)
    ok = show(report, out)

    bundle = rti.BundleModel(out / "bundle")
    ids = example_inputs[0].clone()
    before = bundle.run({"input_ids": ids.numpy()})["output"]
    ids[:, -1] = (ids[:, -1] + 1) % 100  # another last token
    after = bundle.run({"input_ids": ids.numpy()})["output"]
    causal = np.array_equal(before[:, :-1], after[:, :-1]) and not np.array_equal(before[:, -1], after[:, -1])
    print(f"  causal: earlier positions unchanged when the last token changes: {causal}")
    finish(ok and causal)
