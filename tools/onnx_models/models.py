"""The models `tools.onnx_models` exports: small test-style modules, torchvision classifiers and
Hugging Face transformers built from small configs. Every one has random weights (seeded), nothing
is downloaded; each comes with named example inputs (the ONNX graph's input names) and the names
of its outputs, in the order the exporters flatten them."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

SEED = 0
# Token ids are drawn from [ID_LOW, vocab): real-looking ids, clear of the low special-token ids.
ID_LOW = 5
Inputs = dict[str, torch.Tensor]
Factory = Callable[[], tuple[nn.Module, Inputs]]


@dataclass(frozen=True)
class Spec:
    """One model: its name, a line saying what it is, how to build it (module in eval mode, inputs
    by ONNX input name, in forward's order), its output names, and whether it is big (left out of
    the default run unless `--only` names it or `--big` is given)."""

    name: str
    description: str
    make: Factory
    outputs: tuple[str, ...]
    big: bool = False


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.LayerNorm(64), nn.Linear(64, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def _randomize_bn(model: nn.Module) -> nn.Module:
    """Non-trivial BatchNorm running statistics and affine parameters (the defaults, mean 0 and
    variance 1, would make every BatchNorm the identity)."""
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for m in model.modules():
            mean, var = getattr(m, "running_mean", None), getattr(m, "running_var", None)
            if not isinstance(m, nn.modules.batchnorm._BatchNorm) or mean is None or var is None:
                continue
            mean.uniform_(-0.2, 0.2, generator=g)
            var.uniform_(0.5, 1.5, generator=g)
            if m.affine:
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.2, 0.2, generator=g)
    return model


def mlp() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(SEED)
    return _Mlp().eval(), {"x": torch.randn(4, 32)}


def cnn() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(SEED)
    return _randomize_bn(_Cnn()).eval(), {"x": torch.randn(2, 3, 32, 32)}


class _Encoder(nn.Module):
    """nn.TransformerEncoderLayer called with `src` alone. Exported bare, the legacy exporter's
    tracer hands `is_causal` to scaled_dot_product_attention as a traced tensor and fails
    (TypeError: argument 'is_causal' must be bool, not Tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        return self.layer(src)


def transformer_block() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(SEED)
    return _Encoder().eval(), {"src": torch.randn(2, 10, 64)}


def _torchvision(arch: str, **kwargs: Any) -> Factory:
    def make() -> tuple[nn.Module, Inputs]:
        import torchvision  # type: ignore[import-untyped]

        torch.manual_seed(SEED)
        model = getattr(torchvision.models, arch)(weights=None, **kwargs)
        head = getattr(getattr(model, "heads", None), "head", None)
        if isinstance(head, nn.Linear):  # torchvision zero-initializes ViT's head: every logit would be 0
            nn.init.normal_(head.weight, std=0.02)
        return _randomize_bn(model).eval(), {"x": torch.randn(1, 3, 224, 224)}

    return make


class _HF(nn.Module):
    """A Hugging Face model called with keyword inputs, returning the named fields of its output
    as a tuple of tensors (no cache, no dict)."""

    def __init__(self, model: nn.Module, fields: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.fields = fields

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=True)
        return tuple(getattr(out, f) for f in self.fields)


def _text_inputs(vocab: int, batch: int = 2, seq: int = 8) -> Inputs:
    """input_ids in [ID_LOW, vocab) and an attention mask whose second row pads its last 2 tokens."""
    g = torch.Generator().manual_seed(SEED + 2)
    ids = torch.randint(ID_LOW, vocab, (batch, seq), generator=g, dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if batch > 1:
        mask[1, -2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


VOCAB = 1000


def _hf(config: str, model: str, fields: tuple[str, ...], attn: str, **sizes: Any) -> Factory:
    """A factory for `transformers.<model>(transformers.<config>(vocab_size=VOCAB, **sizes))` with
    attention implementation `attn`, returning `fields` of its output, on `_text_inputs`."""

    def make() -> tuple[nn.Module, Inputs]:
        import transformers

        torch.manual_seed(SEED)
        kwargs: dict[str, Any] = {"vocab_size": VOCAB, "attn_implementation": attn, **sizes}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = getattr(transformers, model)(getattr(transformers, config)(**kwargs))
        return _HF(built.eval(), fields).eval(), _text_inputs(VOCAB)

    return make


BERT = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 128,
}
LLAMA = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}
GPT2 = {"n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 2, "bos_token_id": 0, "eos_token_id": 0}
TEXT = "vocab 1000; input_ids (ids in [5, 1000)) + attention_mask 2x8"


def _hf_specs(attn: str, suffix: str) -> list[Spec]:
    bert_out = ("last_hidden_state", "pooler_output")
    return [
        Spec(
            f"bert{suffix}",
            f"HF BertModel (hidden 64, 2 layers, 2 heads, {attn} attention), {TEXT}",
            _hf("BertConfig", "BertModel", bert_out, attn, **BERT),
            bert_out,
        ),
        Spec(
            f"llama{suffix}",
            f"HF LlamaForCausalLM (hidden 64, 2 layers, 4/2 heads, {attn} attention), {TEXT}",
            _hf("LlamaConfig", "LlamaForCausalLM", ("logits",), attn, **LLAMA),
            ("logits",),
        ),
        Spec(
            f"gpt2{suffix}",
            f"HF GPT2Model (n_embd 64, 2 layers, 2 heads, {attn} attention), {TEXT}",
            _hf("GPT2Config", "GPT2Model", ("last_hidden_state",), attn, **GPT2),
            ("last_hidden_state",),
        ),
    ]


SPECS = (
    Spec("mlp", "Linear(32,64)-ReLU-LayerNorm-Linear(64,16), x 4x32", mlp, ("y",)),
    Spec("cnn", "2x(Conv2d-BatchNorm-ReLU), MaxPool, AdaptiveAvgPool, Linear; x 2x3x32x32", cnn, ("logits",)),
    Spec(
        "transformer_block",
        "nn.TransformerEncoderLayer(d_model 64, 4 heads, ff 128, batch_first), eval; src 2x10x64",
        transformer_block,
        ("out",),
    ),
    Spec("resnet18", "torchvision resnet18, 1x3x224x224", _torchvision("resnet18"), ("logits",)),
    Spec(
        "mobilenet_v3_small",
        "torchvision mobilenet_v3_small, 1x3x224x224",
        _torchvision("mobilenet_v3_small"),
        ("logits",),
    ),
    Spec("efficientnet_b0", "torchvision efficientnet_b0, 1x3x224x224", _torchvision("efficientnet_b0"), ("logits",)),
    Spec("squeezenet1_0", "torchvision squeezenet1_0, 1x3x224x224", _torchvision("squeezenet1_0"), ("logits",)),
    Spec("vit_b_16", "torchvision vit_b_16, 1x3x224x224", _torchvision("vit_b_16"), ("logits",), big=True),
    *_hf_specs("eager", ""),
    *_hf_specs("sdpa", "_sdpa"),
)
BY_NAME = {s.name: s for s in SPECS}
