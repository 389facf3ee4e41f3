"""Model classes of the spec beyond the foundation three, each verified against PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti


class ClassifierHead(nn.Module):
    """Transformer encoder + mean-pool over the sequence + linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(16, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, d = t.shape
        return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, causal: bool) -> torch.Tensor:
        k, v = self.kv(memory).chunk(2, dim=-1)
        y = F.scaled_dot_product_attention(self.split(self.q(x)), self.split(k), self.split(v), is_causal=causal)
        return self.o(y.transpose(1, 2).flatten(2))


class EncoderDecoder(nn.Module):
    """Encoder self-attention, decoder causal self-attention and cross-attention (Sq != Sk)."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.enc_attn = Attention(d, heads)
        self.dec_self = Attention(d, heads)
        self.dec_cross = Attention(d, heads)
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(3))
        self.out = nn.Linear(d, 11)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        memory = self.norms[0](src + self.enc_attn(src, src, causal=False))
        h = self.norms[1](tgt + self.dec_self(tgt, tgt, causal=True))
        h = self.norms[2](h + self.dec_cross(h, memory, causal=False))
        return self.out(h)


class DecoderLM(nn.Module):
    """Token ids (int64) -> embedding -> causal attention block -> tied LM head."""

    def __init__(self, vocab: int = 100, d: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(64, d)
        self.attn = Attention(d, 4)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1])
        h = self.tok(ids) + self.pos(positions)
        h = self.norm(h + self.attn(h, h, causal=True))
        return h @ self.tok.weight.t()


class TopKMoE(nn.Module):
    """Router -> top-k (values and indices) -> softmax over the k -> gather the chosen experts' outputs."""

    def __init__(self, d: int = 16, experts: int = 4, k: int = 2) -> None:
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 32), nn.SiLU(), nn.Linear(32, d)) for _ in range(experts)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = torch.topk(self.router(x), self.k, dim=-1)
        weights = F.softmax(weights, dim=-1)
        every = torch.stack([e(x) for e in self.experts], dim=1)  # [T, E, D]
        picked = torch.gather(every, 1, chosen.unsqueeze(-1).expand(-1, -1, x.shape[-1]))  # [T, k, D]
        return (weights.unsqueeze(-1) * picked).sum(dim=1)


class ScalarMath(nn.Module):
    """Python-scalar arithmetic, reverse ops, pow, clamp (scalar and tensor bounds), floor division, remainder."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (
            a * 2
            + 3
            - 1 / (b.abs() + 1)
            + a**2
            + torch.pow(2.0, a)
            + a.clamp(-0.5, 0.5)
            + a.clamp(min=b)
            + a // 0.3
            + a % 0.7
            + torch.remainder(a, b.abs() + 0.5)
            + (2 - a)
            + 3 / (a.abs() + 1)
            + torch.fmod(a, 0.4)
        )


CASES = {
    "classifier_head": lambda: (ClassifierHead(), (torch.randn(2, 7, 16),)),
    "encoder_decoder": lambda: (EncoderDecoder(), (torch.randn(2, 9, 32), torch.randn(2, 6, 32))),
    "decoder_lm_int64_ids": lambda: (DecoderLM(), (torch.randint(0, 100, (2, 10)),)),
    "topk_moe": lambda: (TopKMoE(), (torch.randn(6, 16),)),
    "scalar_math": lambda: (ScalarMath(), (torch.randn(3, 4), torch.randn(3, 4))),
}


@pytest.mark.parametrize("level", ["high", "core"])
@pytest.mark.parametrize("name", list(CASES))
def test_model_class_verifies(name: str, level: str, tmp_path) -> None:
    torch.manual_seed(0)
    model, inputs = CASES[name]()
    report = rti.from_torch(model.eval(), inputs, tmp_path / name, decomposition=level)
    assert report.verified and report.ok, report.summary()
    for o in report.outputs:
        assert o.cosine >= 0.99999, report.summary()


def _axial_rope(h: int, w: int, head_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables for 2-D (row, column) positions; half the pairs rotate by row, half by column."""
    quarter = head_dim // 4
    freqs = 1.0 / theta ** (torch.arange(quarter, dtype=torch.float32) / quarter)
    rows, cols = torch.meshgrid(
        torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32), indexing="ij"
    )
    angles = torch.cat([rows.reshape(-1, 1) * freqs, cols.reshape(-1, 1) * freqs], dim=-1)  # [h*w, head_dim/2]
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs (x0, x1) by the angle: (x0 cos - x1 sin, x0 sin + x1 cos)."""
    x0, x1 = x.unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


class MMDiTBlock(nn.Module):
    """FLUX-style double-stream block: adaLN modulation, QK RMSNorm, axial RoPE, joint text+image attention."""

    def __init__(self, d: int = 32, heads: int = 2, grid: tuple[int, int] = (3, 4)) -> None:
        super().__init__()
        self.heads, self.grid = heads, grid
        self.mod_img, self.mod_txt = nn.Linear(d, 6 * d), nn.Linear(d, 6 * d)
        self.qkv_img, self.qkv_txt = nn.Linear(d, 3 * d), nn.Linear(d, 3 * d)
        self.qn, self.kn = nn.RMSNorm(d // heads, eps=1e-6), nn.RMSNorm(d // heads, eps=1e-6)
        self.out_img, self.out_txt = nn.Linear(d, d), nn.Linear(d, d)
        self.mlp_img = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"), nn.Linear(2 * d, d))
        self.mlp_txt = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"), nn.Linear(2 * d, d))
        self.norm = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.unflatten(-1, (self.heads, -1)).transpose(1, 2)  # [B, H, S, Dh]

    def forward(self, img: torch.Tensor, txt: torch.Tensor, temb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = F.silu(temb)
        si, sc_i, gi, s2i, sc2i, g2i = self.mod_img(c)[:, None].chunk(6, dim=-1)
        st, sc_t, gt, s2t, sc2t, g2t = self.mod_txt(c)[:, None].chunk(6, dim=-1)
        qi, ki, vi = self.qkv_img(self.norm(img) * (1 + sc_i) + si).chunk(3, dim=-1)
        qt, kt, vt = self.qkv_txt(self.norm(txt) * (1 + sc_t) + st).chunk(3, dim=-1)
        q = torch.cat([self.qn(self._heads(qt)), self.qn(self._heads(qi))], dim=2)
        k = torch.cat([self.kn(self._heads(kt)), self.kn(self._heads(ki))], dim=2)
        v = torch.cat([self._heads(vt), self._heads(vi)], dim=2)
        cos, sin = _axial_rope(*self.grid, q.shape[-1])
        n_txt = txt.shape[1]
        q = torch.cat([q[:, :, :n_txt], _rotate(q[:, :, n_txt:], cos, sin)], dim=2)
        k = torch.cat([k[:, :, :n_txt], _rotate(k[:, :, n_txt:], cos, sin)], dim=2)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
        a_txt, a_img = a[:, :n_txt], a[:, n_txt:]
        img = img + gi * self.out_img(a_img)
        img = img + g2i * self.mlp_img(self.norm(img) * (1 + sc2i) + s2i)
        txt = txt + gt * self.out_txt(a_txt)
        txt = txt + g2t * self.mlp_txt(self.norm(txt) * (1 + sc2t) + s2t)
        return img, txt


@pytest.mark.parametrize("level", ["high", "core"])
def test_flux_style_mmdit_block(level: str, tmp_path) -> None:
    torch.manual_seed(0)
    block = MMDiTBlock().eval()
    inputs = (torch.randn(2, 12, 32), torch.randn(2, 5, 32), torch.randn(2, 32))
    report = rti.from_torch(block, inputs, tmp_path / "mmdit", decomposition=level)
    assert report.verified and report.ok, report.summary()
    assert len(report.outputs) == 2 and all(o.cosine >= 0.99999 for o in report.outputs)
