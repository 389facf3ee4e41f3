"""Real Hugging Face architectures, built from small configs with random weights (nothing downloaded).

Each converts at the default `high` level and must verify against PyTorch.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn

import rlx_torch_import as rti

T = pytest.importorskip("transformers")


class Logits(nn.Module):
    """Return one tensor (logits, or the last hidden state) from a HF model."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        if len(args) == 3:  # encoder-decoder: input ids, attention mask, decoder input ids
            out = self.model(input_ids=args[0], attention_mask=args[1], decoder_input_ids=args[2])
        else:
            out = self.model(*args)
        logits = getattr(out, "logits", None)
        return logits if logits is not None else out.last_hidden_state


def ids(*shape: int) -> torch.Tensor:
    return torch.randint(0, 128, shape)


def llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Rotary embeddings, grouped-query attention, causal mask, SwiGLU, RMSNorm; int64 token ids."""
    cfg = T.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return T.LlamaForCausalLM(cfg), (ids(1, 8),)


def bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = T.BertConfig(
        vocab_size=128,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    return T.BertModel(cfg), (ids(2, 8),)


def gpt2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = T.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)
    return T.GPT2LMHeadModel(cfg), (ids(1, 8),)


def vit() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = T.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=10,
    )
    return T.ViTForImageClassification(cfg), (torch.randn(1, 3, 32, 32),)


def bart() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Encoder-decoder with cross-attention (query length 6 != key length 9)."""
    cfg = T.BartConfig(
        vocab_size=128,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
    )
    return T.BartForConditionalGeneration(cfg), (ids(1, 9), torch.ones(1, 9, dtype=torch.long), ids(1, 6))


def t5() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Relative position buckets (integer math, log, abs) and an additive position bias."""
    cfg = T.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4)
    return T.T5ForConditionalGeneration(cfg), (ids(1, 9), torch.ones(1, 9, dtype=torch.long), ids(1, 6))


def mixtral() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Sparse MoE through transformers' grouped-mm experts path (sort, histc, cumsum, grouped mm, index_put)."""
    cfg = T.MixtralConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=64,
    )
    return T.MixtralForCausalLM(cfg), (ids(1, 8),)


def llava() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Vision-language: CLIP patches projected into Llama's embeddings at the image tokens, behind a
    `torch._check` of tensor values (`aten._is_all_true`, dropped with a note: RLX cannot raise)."""
    vision = T.CLIPVisionConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8
    )
    text = T.LlamaConfig(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    cfg = T.LlavaConfig(vision_config=vision, text_config=text, image_token_index=300, vision_feature_layer=-1)
    image_tokens = torch.full((1, (32 // 8) ** 2), 300)
    tokens = torch.cat([torch.tensor([[1]]), image_tokens, torch.randint(2, 299, (1, 6))], dim=1)
    return T.LlavaForConditionalGeneration(cfg), (tokens, torch.randn(1, 3, 32, 32))


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "llava": llava,
    "mixtral": mixtral,
    "llama": llama,
    "bert": bert,
    "gpt2": gpt2,
    "vit": vit,
    "bart": bart,
    "t5": t5,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_hf_architecture_verifies(name: str, tmp_path) -> None:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, inputs = MODELS[name]()
    report = rti.from_torch(Logits(model.eval()), inputs, tmp_path / name)
    assert report.verified and report.ok, report.summary()
    for o in report.outputs:
        assert o.cosine >= 0.99999, report.summary()
