"""Token-by-token generation with a KV cache: a tiny Llama (random weights, nothing downloaded) exported
as a decode step whose cache length is a dynamic dim, converted once, then run by `generate`.

    python examples/llama_decode.py [--out DIR]

`hf_decode_step(model)` wraps the Hugging Face model: forward(input_ids, positions, token_mask,
cache_mask, k_0, v_0, ...) (the masks: Hugging Face's attention_mask for padded batches)
returns (logits, k_0', v_0', ...), each k_i'/v_i' this step's keys/values (the caller appends them).
`hf_decode_inputs(config)` gives example inputs and `dynamic_shapes` (new tokens 1..512, cache
0..4096). `generate(bundle, prompt, n)` prefills the prompt with an empty cache, then feeds one token
per step; the cache is padded to 128-slot buckets so RLX compiles a new binding once per 128 tokens,
not once per token, and stays in RLX's arena between steps. Like `model.generate`, it stops at the
model's end-of-sequence token when given it (`eos_token_id`).

Look at: the verdict and its sweep over the two dynamic dims; the bundle's inputs; the generated
tokens against Hugging Face's own greedy `model.generate`, and how many bindings were compiled.
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

config = LlamaConfig(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)
torch.manual_seed(0)
model = LlamaForCausalLM(config).eval()


if __name__ == "__main__":
    import warnings

    import numpy as np
    from _common import finish, parse_args, show

    import rlx_torch_import as rti
    from rlx_torch_import.decode.generate import Decoder, generate
    from rlx_torch_import.decode.hf_export import hf_decode_inputs, hf_decode_step

    args = parse_args(__doc__)
    out = args.out / "llama_decode"
    step = hf_decode_step(model)
    example_args, dynamic_shapes = hf_decode_inputs(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' notes on its cache arguments
        report = rti.from_torch(step, example_args, out, dynamic_shapes=dynamic_shapes, per_node=False)
    ok = show(report, out)

    decoder = Decoder(out / "bundle")
    print(
        "  bundle inputs:",
        ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in decoder.model.meta["inputs"][:3]),
        "...",
    )
    prompt = np.random.default_rng(0).integers(0, 256, (1, 9))
    tokens = generate(decoder, prompt, 24, eos_token_id=model.generation_config.eos_token_id, pad_token_id=0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = model.generate(torch.from_numpy(prompt), max_new_tokens=24, do_sample=False, pad_token_id=0).numpy()
    same = tokens.shape == want.shape and bool((tokens == want).all())
    print(f"  generated {tokens.shape[1] - prompt.shape[1]} tokens: {tokens[0, prompt.shape[1] :].tolist()}")
    print(f"  same tokens as model.generate (greedy): {same}; bindings compiled: {decoder.model.compiles}")
    finish(ok and same)
