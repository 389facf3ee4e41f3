"""A Hugging Face causal LM as a decode step of `generate`'s convention (`hf_decode_step`) and the
example inputs and `dynamic_shapes` to export it with (`hf_decode_inputs`); re-exported by
`rlx_torch_import.generate`."""

from __future__ import annotations

from typing import Any

from .errors import InputError


def hf_decode_step(model: Any) -> Any:
    """A Hugging Face causal LM (LlamaForCausalLM, or another with full causal attention, a
    `DynamicCache` and 4-D attention masks) as a decode step of the convention (`generate`'s module docstring):
    `forward(input_ids [B, T] int64, positions [B, T] int64, k_0, v_0, ..., k_{L-1}, v_{L-1})`, each
    cache tensor float [B, n_kv_heads, S, head_dim], returns `(logits [B, T, vocab], k_0', v_0', ...)`
    with this step's keys/values alone, [B, n_kv_heads, T, head_dim] (`Decoder` writes them into its
    cache: the step copies T entries out, not the whole cache).

    The mask lets each new token see the cache slots below `positions[b, 0]` and the new tokens up to
    itself, so slots at or past it (padding) are ignored; RoPE uses `positions`. A sliding-window
    model would need its window in the mask: not built here. Returns a torch.nn.Module (eval mode)."""
    import torch
    from transformers import DynamicCache

    class HfDecodeStep(torch.nn.Module):
        def __init__(self, lm: Any) -> None:
            super().__init__()
            self.lm = lm
            self.layers = int(lm.config.num_hidden_layers)

        def forward(self, input_ids: Any, positions: Any, *past: Any) -> tuple[Any, ...]:
            if len(past) != 2 * self.layers:
                raise InputError(f"the decode step takes {2 * self.layers} cache tensors, got {len(past)}")
            b, t = input_ids.shape
            s = past[0].shape[2]
            pairs = [(past[2 * i], past[2 * i + 1]) for i in range(self.layers)]
            cache = DynamicCache(ddp_cache_data=pairs, config=self.lm.config)
            slots = torch.arange(s, dtype=positions.dtype)
            seen = slots.unsqueeze(0) < positions[:, :1]  # [B, S]: the valid cache slots
            q = torch.arange(t)
            causal = q.unsqueeze(0) <= q.unsqueeze(1)  # [T, T]: key k <= query q
            mask = torch.cat([seen[:, None, None, :].expand(b, 1, t, s), causal[None, None].expand(b, 1, t, t)], -1)
            out = self.lm(input_ids=input_ids, cache=cache, position_ids=positions, attention_mask=mask, use_cache=True)
            new = [x[:, :, s:] for layer in out.cache.layers for x in (layer.keys, layer.values)]
            return (out.logits, *new)

    return HfDecodeStep(model).eval()


def hf_decode_inputs(
    config: Any, *, batch: int = 1, seq: int = 3, cache: int = 5, max_seq: int = 512, max_cache: int = 4096
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Example inputs and `dynamic_shapes` to export `hf_decode_step(model)` of a model with this
    config: ids and positions [batch, seq] (seq a Dim "seq" in 1..max_seq), and 2 * layers random
    caches [batch, n_kv_heads, cache, head_dim] (the length a Dim "cache" in 0..max_cache). The
    example sizes seq and cache must be >= 2 (torch.export specializes 0 and 1); the bundle still
    runs at every size in the ranges. Returns (args, dynamic_shapes) for `from_torch`. Raises
    InputError for example sizes below 2 and for a sliding-window model (Mistral's `sliding_window`)
    whose window max_cache + max_seq would pass (the step's mask has no window)."""
    import torch
    from torch.export import Dim

    if seq < 2 or cache < 2:
        raise InputError(
            f"the example seq and cache must be >= 2 (torch.export specializes 0 and 1), got {seq}, {cache}"
        )
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True) is not False and max_cache + max_seq > window:
        raise InputError(
            f"{type(config).__name__} attends within a sliding window of {window} tokens, which "
            f"hf_decode_step's mask does not apply; max_cache + max_seq = {max_cache + max_seq} would reach past it",
            hint=f"export with max_cache + max_seq <= {window} (the window never slides then)",
        )
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, int(config.vocab_size), (batch, seq), generator=gen)
    positions = (torch.arange(seq) + cache).unsqueeze(0).expand(batch, seq).contiguous()
    layers = int(config.num_hidden_layers)
    past = tuple(torch.randn(batch, kv_heads, cache, head_dim, generator=gen) for _ in range(2 * layers))
    s, length = Dim("seq", min=1, max=max_seq), Dim("cache", min=0, max=max_cache)
    return (ids, positions, *past), ({1: s}, {1: s}, tuple({2: length} for _ in past))
