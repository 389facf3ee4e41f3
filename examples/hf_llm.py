"""A Hugging Face LLM built from a config with random weights (nothing downloaded): a tiny
LlamaConfig -> LlamaForCausalLM, called with keyword arguments (input_ids + attention_mask).

    python examples/hf_llm.py [--out DIR]
    rlx-torch-import examples/hf_llm.py -o out/llama      # example_kwargs are read from the file

Look at: the verdict; the bundle's inputs named after the keywords (`input_ids`,
`attention_mask`) and its output `logits` (forward's ModelOutput, flattened by path);
`BundleModel.call(input_ids=..., attention_mask=...)` returning a dict like the model's output.
A real checkpoint converts the same way (`LlamaForCausalLM.from_pretrained(...)`), only slower.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention
    max_position_embeddings=64,
    use_cache=False,  # return logits only (with the cache, its tensors are outputs too)
)
torch.manual_seed(0)
model = LlamaForCausalLM(config).eval()
example_inputs = ()
example_kwargs = {
    "input_ids": torch.randint(0, 128, (2, 8)),
    "attention_mask": torch.tensor([[1] * 8, [0, 0] + [1] * 6]),  # the second row left-padded
}


if __name__ == "__main__":
    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti

    args = parse_args(__doc__)
    out = args.out / "hf_llm"
    report = rti.from_torch(model, example_inputs, out, kwargs=example_kwargs)
    ok = show(report, out)

    bundle = rti.BundleModel(out / "bundle")
    print("  bundle inputs:", ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in bundle.meta["inputs"]))
    ids = torch.randint(0, 128, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    result = bundle.call(input_ids=ids.numpy(), attention_mask=mask.numpy())  # called like the model
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits.numpy()
    print(f"  call() returned {sorted(result)}; logits max abs error {np.abs(result['logits'] - want).max():.2e}")
    finish(ok and np.allclose(result["logits"], want, rtol=1e-4, atol=1e-4))
