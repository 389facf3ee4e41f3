"""The three reference architectures of the foundation, with fixed seeds."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """linear + layer_norm + gelu."""

    def __init__(self, d_in: int = 32, d_hidden: int = 64, d_out: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class TransformerBlock(nn.Module):
    """Pre-norm block: multi-head sdpa (view/transpose heads) + SwiGLU MLP, with residuals."""

    def __init__(self, d_model: int = 64, n_heads: int = 4, d_ff: int = 128) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class MaskedBlock(TransformerBlock):
    """TransformerBlock whose attention is causal (`is_causal`) or takes an additive mask input."""

    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        self.causal = causal

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class SmallCNN(nn.Module):
    """conv2d(+bias) + batch_norm(eval) + relu + max_pool2d + adaptive_avg_pool2d(1) + flatten + linear."""

    def __init__(self, n_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=1, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(32, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        x = F.adaptive_avg_pool2d(x, 1)
        return self.head(torch.flatten(x, 1))


class DtypeZoo(nn.Module):
    """Every dtype the graph boundary carries: int64/bool/f16/bf16 inputs, weights and outputs,
    and a buffer whose name is not a Rust identifier."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.w16 = nn.Parameter(torch.randn(8, 8).half())
        self.wbf = nn.Parameter(torch.randn(8).bfloat16())
        self.register_buffer("offset", torch.arange(1, 9))
        self.register_buffer("keep", torch.tensor([True, False] * 4))
        self.register_buffer("odd-name ü", torch.full((8,), 0.5))

    def forward(
        self, ids: torch.Tensor, mask: torch.Tensor, xh: torch.Tensor, xb: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        s = self.emb(ids) + xh.float() @ self.w16.float() + xb.float() * self.wbf.float()
        s = s + self.offset.float() * getattr(self, "odd-name ü")
        s = torch.where(mask[:, None] & self.keep, s, -s)
        return s, ids * 3 + self.offset[:2], mask.logical_not(), s.half(), s.bfloat16()


class NestedIO(nn.Module):
    """A dict and a list of tensors in; a dict holding a tuple and a list out (names by pytree path)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, d: dict[str, torch.Tensor], xs: list[torch.Tensor]) -> dict[str, object]:
        h = self.fc(x + d["bias"]) * xs[0] - xs[1]
        return {"hidden": h, "pair": (h.sum(-1), [h.relu(), (h > 0).sum(-1)])}


def _randomize_bn(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics, so batch norm is really tested."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    return model


def make(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A fresh seeded model and its example inputs."""
    torch.manual_seed(0)
    if name == "mlp":
        return MLP().eval(), (torch.randn(4, 32),)
    if name == "transformer_block":
        return TransformerBlock().eval(), (torch.randn(2, 7, 64),)
    if name == "cnn":
        return _randomize_bn(SmallCNN()).eval(), (torch.randn(2, 3, 16, 16),)
    if name == "dtype_zoo":
        inputs = (
            torch.tensor([3, 7]),
            torch.tensor([True, False]),
            torch.randn(2, 8).half(),
            torch.randn(2, 8).bfloat16(),
        )
        return DtypeZoo().eval(), inputs
    if name == "nested_io":
        inputs = (torch.randn(3, 8), {"bias": torch.randn(8)}, [torch.randn(8), torch.randn(3, 8)])
        return NestedIO().eval(), inputs  # type: ignore[return-value]
    raise KeyError(name)


MODEL_NAMES = ("mlp", "transformer_block", "cnn")
