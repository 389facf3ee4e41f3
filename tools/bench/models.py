"""The benchmark models: the headline models (MLP, torchvision, Hugging Face) and tests/models.py's."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import nn

from tests import models as test_models

ModelFactory = Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]


def _randomize_bn(model: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial BatchNorm running stats and affine parameters (as tests/test_vision_models.py)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)
    return model


class HFOutput(nn.Module):
    """A Hugging Face model whose forward(ids) returns one tensor: logits, or the last hidden state."""

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=ids, **self.kwargs)
        logits = getattr(out, "logits", None)
        return logits if logits is not None else out.last_hidden_state


def _mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.LayerNorm(1024))
    return model.eval(), (torch.randn(64, 1024),)


def _torchvision(name: str, shape: tuple[int, ...], **kwargs: Any) -> ModelFactory:
    def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import torchvision

        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        head = getattr(getattr(model, "heads", None), "head", None)
        if isinstance(head, nn.Linear):  # torchvision zero-initializes the ViT head: every output would be 0
            nn.init.normal_(head.weight, std=0.02)
        return _randomize_bn(model).eval(), (torch.randn(*shape),)

    return make


def _bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HFOutput(transformers.BertModel(cfg))
    return model.eval(), (torch.randint(0, cfg.vocab_size, (2, 128)),)


def _llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        num_hidden_layers=6,
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1376,
        vocab_size=32000,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HFOutput(transformers.LlamaForCausalLM(cfg), use_cache=False)
    return model.eval(), (torch.randint(0, cfg.vocab_size, (1, 128)),)


@dataclass(frozen=True)
class BenchModel:
    """One benchmark entry: its name, what it is, and how to build it (model in eval mode, inputs)."""

    name: str
    description: str
    make: ModelFactory


def _test_model(module: ModuleType, name: str) -> ModelFactory:
    def make() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        model, inputs = module.make(name)
        return model.eval(), tuple(inputs)

    return make


def registry() -> tuple[dict[str, BenchModel], list[str]]:
    """Every benchmark model by name, and notes on what had to be left out."""
    models = [
        BenchModel("mlp", "Linear(1024,4096)-GELU-Linear(4096,1024)-LayerNorm, batch 64", _mlp),
        BenchModel("resnet18", "torchvision resnet18, 1x3x224x224", _torchvision("resnet18", (1, 3, 224, 224))),
        BenchModel(
            "mobilenet_v3_small",
            "torchvision mobilenet_v3_small, 4x3x224x224",
            _torchvision("mobilenet_v3_small", (4, 3, 224, 224)),
        ),
        BenchModel(
            "vit_b_16",
            "torchvision vit_b_16(image_size=112), 1x3x112x112",
            _torchvision("vit_b_16", (1, 3, 112, 112), image_size=112),
        ),
        BenchModel("bert", "HF BertModel (4 layers, hidden 256, 4 heads), ids 2x128", _bert),
        BenchModel("llama", "HF LlamaForCausalLM (6 layers, hidden 512, 8/4 heads, vocab 32000), ids 1x128", _llama),
    ]
    notes: list[str] = []
    for name in test_models.MODEL_NAMES:
        models.append(BenchModel(f"tests.{name}", f"tests/models.py make({name!r})", _test_model(test_models, name)))
    return {m.name: m for m in models}, notes
