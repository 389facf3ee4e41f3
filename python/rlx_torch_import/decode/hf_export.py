"""A Hugging Face causal LM as a decode step of the decode-step convention (`decode/convention.py`;
`hf_decode_step`) and the example inputs and `dynamic_shapes` to export it with (`hf_decode_inputs`):
the torch side of decoding, which `decode/generate.py` (numpy) never imports."""

from __future__ import annotations

from typing import Any

from ..errors import InputError


def hf_decode_step(model: Any) -> Any:
    """A Hugging Face causal LM (LlamaForCausalLM, Qwen2, Mistral within its window, GPT-2, or another
    with full causal attention, a `DynamicCache` and 4-D attention masks) as a decode step of the
    convention (`decode/convention.py`): `forward(input_ids [B, T] int64, positions [B, T]
    int64, token_mask [B, T] int64, cache_mask [B, S] int64, k_0, v_0, ..., k_{L-1}, v_{L-1})`, each
    cache tensor float [B, n_kv_heads, S, head_dim], returns `(logits [B, T, vocab], k_0', v_0', ...)`
    with this step's keys/values alone, [B, n_kv_heads, T, head_dim] (`Decoder` writes them into its
    cache: the step copies T entries out, not the whole cache).

    The masks are Hugging Face's 2-D `attention_mask` split at the cache: `cache_mask[b, j]` is 1
    where cache slot j holds a token of row b (0: a padded prompt slot, or a slot of the Decoder's
    bucket padding) and `token_mask[b, i]` 1 where new token i is one (0: padding). New token i
    (slot S + i) sees the slots j <= S + i whose mask is 1, as HF's causal mask with padding does;
    a token that would see none (a left pad before any token of its row) sees itself alone, so its
    row stays finite (its output is never used, its keys never seen). `positions` are each token's
    position in its own row (RoPE, or GPT-2's learned positions), given by `generate` as HF's
    `generate` gives them. A sliding-window model would need its window in the mask: not built
    here. Returns a torch.nn.Module (eval mode)."""
    import torch
    from transformers import DynamicCache

    class HfDecodeStep(torch.nn.Module):
        def __init__(self, lm: Any) -> None:
            super().__init__()
            self.lm = lm
            self.layers = int(lm.config.num_hidden_layers)

        def forward(
            self, input_ids: Any, positions: Any, token_mask: Any, cache_mask: Any, *past: Any
        ) -> tuple[Any, ...]:
            if len(past) != 2 * self.layers:
                raise InputError(f"the decode step takes {2 * self.layers} cache tensors, got {len(past)}")
            t = input_ids.shape[1]
            s = past[0].shape[2]
            pairs = [(past[2 * i], past[2 * i + 1]) for i in range(self.layers)]
            cache = DynamicCache(ddp_cache_data=pairs, config=self.lm.config)
            keys = torch.cat([cache_mask, token_mask], dim=-1) != 0  # [B, S + T]: the slots holding a token
            slot = torch.arange(s + t)
            query = torch.arange(t).unsqueeze(1) + s  # [T, 1]: each new token's slot
            mask = keys[:, None, :] & (slot.unsqueeze(0) <= query)[None]  # [B, T, S + T]
            alone = ~mask.any(dim=-1, keepdim=True)  # a query that sees no slot: let it see itself
            mask = mask | (alone & (slot.unsqueeze(0) == query)[None])
            out = self.lm(
                input_ids=input_ids, cache=cache, position_ids=positions, attention_mask=mask[:, None], use_cache=True
            )
            new = [x[:, :, s:] for layer in out.cache.layers for x in (layer.keys, layer.values)]
            return (out.logits, *new)

    return HfDecodeStep(model).eval()


def hf_decode_inputs(
    config: Any, *, batch: int = 1, seq: int = 3, cache: int = 5, max_seq: int = 512, max_cache: int = 4096
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Example inputs and `dynamic_shapes` to export `hf_decode_step(model)` of a model with this
    config: ids, positions and token_mask [batch, seq] (seq a Dim "seq" in 1..max_seq), cache_mask
    [batch, cache] and 2 * layers random caches [batch, n_kv_heads, cache, head_dim] (the length a Dim
    "cache" in 0..max_cache; the masks' example values hold some padding). The
    example sizes seq and cache must be >= 2 (torch.export specializes 0 and 1); the bundle still
    runs at every size in the ranges. Returns (args, dynamic_shapes) for `from_torch`. Raises
    InputError for example sizes below 2 and for a sliding-window model (Mistral's `sliding_window`)
    whose window max_cache + max_seq would reach (the step's mask has no window, and HF's sliding
    cache keeps only the last window - 1 tokens)."""
    import torch
    from torch.export import Dim

    if seq < 2 or cache < 2:
        raise InputError(
            f"the example seq and cache must be >= 2 (torch.export specializes 0 and 1), got {seq}, {cache}"
        )
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True) is not False and max_cache + max_seq >= window:
        raise InputError(
            f"{type(config).__name__} attends within a sliding window of {window} tokens, which "
            f"hf_decode_step's mask does not apply; max_cache + max_seq = {max_cache + max_seq} would reach past it",
            hint=f"export with max_cache + max_seq <= {window - 1} (the window never slides then: HF's sliding "
            "cache keeps the last window - 1 tokens)",
        )
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, int(config.vocab_size), (batch, seq), generator=gen)
    positions = (torch.arange(seq) + cache).unsqueeze(0).expand(batch, seq).contiguous()
    layers = int(config.num_hidden_layers)
    past = tuple(torch.randn(batch, kv_heads, cache, head_dim, generator=gen) for _ in range(2 * layers))
    token_mask = torch.ones(batch, seq, dtype=torch.int64)
    cache_mask = (torch.arange(cache) > 0).to(torch.int64).unsqueeze(0).expand(batch, cache).contiguous()
    s, length = Dim("seq", min=1, max=max_seq), Dim("cache", min=0, max=max_cache)
    shapes = ({1: s}, {1: s}, {1: s}, {1: length}, tuple({2: length} for _ in past))
    return (ids, positions, token_mask, cache_mask, *past), shapes
