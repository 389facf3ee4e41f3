"""The conversion-time rewrites (lower/passes/): each one fires on the pattern it is for, the
bundle still matches PyTorch, and the passes that claim the same roundings give the same bits."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import layout, safetensors_io, torchir
from rlx_torch_import.bundle.write import write_bundle
from rlx_torch_import.lower import lower, passes


def _convert(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path) -> dict:
    report = rti.from_torch(model.eval(), inputs, out)
    assert report.ok, report.summary()
    return json.loads((out / "bundle" / "meta.json").read_text())


def _run_both(out: Path) -> tuple[np.ndarray, np.ndarray]:
    """The bundle's output with the passes on and off (same torch-ir, same inputs)."""
    ir = torchir.load(out)
    weights = safetensors_io.read(out / layout.WEIGHTS)
    ref = safetensors_io.read(out / layout.REFERENCE)
    feed = {s.name: ref[f"input.{s.name}"].to_numpy() for s in ir.inputs}
    got = []
    for on in (True, False):
        where = out / f"bundle_{on}"
        shutil.rmtree(where, ignore_errors=True)
        write_bundle(lower(ir, optimize=on), ir, weights, where)
        got.append(rti.BundleModel(where).run(feed)[ir.outputs[0].name])
    return got[0], got[1]


class _Rotary(nn.Module):
    """Hugging Face's rotate-half rotary embedding on [B, H, S, D]."""

    def __init__(self, seq: int = 12, dim: int = 16) -> None:
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.seq = seq

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(self.seq).float()
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        half = q.shape[-1] // 2
        rotated = torch.cat((-q[..., half:], q[..., :half]), dim=-1)
        return q * cos + rotated * sin


def test_rotate_half_runs_on_rope_with_the_same_bits(tmp_path: Path) -> None:
    torch.manual_seed(0)
    meta = _convert(_Rotary(), (torch.randn(2, 3, 12, 16),), tmp_path / "o")
    assert meta["rewrites"]["rotary_embeddings_on_rope"] == 1 and "Rope" in meta["op_histogram"]
    on, off = _run_both(tmp_path / "o")
    assert on.tobytes() == off.tobytes()


class _RmsNorm(nn.Module):
    def __init__(self, width: int = 24) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + 1e-6))


def test_written_out_rms_norm_runs_on_rlx_rms_norm(tmp_path: Path) -> None:
    torch.manual_seed(0)
    meta = _convert(_RmsNorm(), (torch.randn(2, 5, 24),), tmp_path / "o")
    assert meta["rewrites"]["rms_norms_fused"] == 1 and "RmsNorm" in meta["op_histogram"]
    assert "Activation.Rsqrt" not in meta["op_histogram"]


class _CausalFromArange(nn.Module):
    """A causal mask built from arange (as Hugging Face builds it) passed to SDPA."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = q.shape[-2]
        keep = torch.arange(s)[None, :] <= torch.arange(s)[:, None]
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def test_constant_causal_mask_becomes_fused_causal_attention(tmp_path: Path) -> None:
    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 2, 6, 8) for _ in range(3))
    meta = _convert(_CausalFromArange(), inputs, tmp_path / "o")
    assert "Attention" in meta["op_histogram"] and "Softmax" not in meta["op_histogram"]


def test_a_data_dependent_mask_runs_as_a_bias_on_fused_attention(tmp_path: Path) -> None:
    """A mask that is an input becomes RLX's `Bias` mask; a fully masked query row still gives zeros."""

    class Masked(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    torch.manual_seed(0)
    keep = torch.rand(1, 1, 6, 6) > 0.3
    keep[..., 2, :] = False  # this query sees no key
    inputs = (*(torch.randn(1, 2, 6, 8) for _ in range(3)), keep)
    meta = _convert(Masked(), inputs, tmp_path / "o")  # parity against torch's safe softmax
    assert "Attention" in meta["op_histogram"] and "Softmax" not in meta["op_histogram"]


class _RepeatedKv(nn.Module):
    """Grouped-query attention as Hugging Face writes it (`repeat_kv`, then sdpa), or with `enable_gqa`;
    a key-padding mask from an input (`Bias`), none, or torch's causal one (`Causal`: left alone)."""

    def __init__(self, mask: str, gqa: bool = False) -> None:
        super().__init__()
        self.mask, self.gqa = mask, gqa

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
        b, hkv, s, d = k.shape
        rep = q.shape[1] // hkv
        if not self.gqa:
            k = k[:, :, None].expand(b, hkv, rep, s, d).reshape(b, hkv * rep, s, d)
            v = v[:, :, None].expand(b, hkv, rep, s, d).reshape(b, hkv * rep, s, d)
        mask = torch.arange(s)[None, None, None, :] < seen[:, None, None, :1] if self.mask == "bias" else None
        causal = self.mask == "causal"
        return nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=self.gqa
        )


@pytest.mark.parametrize(
    ("mask", "gqa", "shared"), [("bias", False, 1), ("none", False, 1), ("bias", True, 1), ("causal", False, 0)]
)
def test_grouped_query_attention_reads_each_kv_head_once_with_the_same_bits(
    tmp_path: Path, mask: str, gqa: bool, shared: int
) -> None:
    torch.manual_seed(0)
    sq = 7 if mask == "causal" else 3
    inputs = (torch.randn(2, 8, sq, 16), torch.randn(2, 2, 7, 16), torch.randn(2, 2, 7, 16), torch.tensor([[5], [7]]))
    meta = _convert(_RepeatedKv(mask, gqa), inputs, tmp_path)
    assert meta["rewrites"]["kv_heads_shared"] == shared
    on, off = _run_both(tmp_path)
    np.testing.assert_array_equal(on, off)
    nodes = json.loads((tmp_path / "bundle" / "model.hir.json").read_text())["nodes"]
    repeats = [n for n in nodes if "Expand" in json.dumps(n["op"]) and len(n["shape"]["dims"]) == 5]
    assert len(repeats) == 2 * (1 - shared)  # [B, H_kv, rep, S, D]: the key and value copies, gone when shared


def test_batch_norm_without_a_convolution_is_a_scale_and_shift(tmp_path: Path) -> None:
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(4)
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    meta = _convert(nn.Sequential(nn.ReLU(), bn), (torch.randn(2, 4, 3, 5),), tmp_path / "o")
    assert meta["rewrites"]["batch_norms_folded"] == 1
    assert "BatchNormInference" not in meta["op_histogram"] and "Transpose" not in meta["op_histogram"]


def test_linear_weights_are_stored_transposed_once(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4, bias=False))
    meta = _convert(model, (torch.randn(3, 5, 8),), tmp_path / "o")
    assert "Transpose" not in meta["op_histogram"]
    stored = safetensors_io.read(tmp_path / "o" / "bundle" / "weights.safetensors")
    assert stored["0.weight.T"].shape == (8, 16) and "0.weight" not in stored
    want = model[0].weight.detach().numpy().T
    assert np.array_equal(stored["0.weight.T"].to_numpy(), want)  # moved, not recomputed
    on, off = _run_both(tmp_path / "o")
    assert on.tobytes() == off.tobytes()


def test_flush_denormals_is_set_only_when_it_changes_nothing(tmp_path: Path) -> None:
    class Tiny(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 1e-30  # subnormal results that flushing would zero

    meta = _convert(Tiny(), (torch.full((4,), 1e-10),), tmp_path / "tiny")
    assert meta["flush_denormals"] is False
    meta = _convert(nn.Linear(4, 3), (torch.randn(2, 4),), tmp_path / "plain")
    assert meta["flush_denormals"] is True
    assert math.isclose(
        rti.BundleModel(tmp_path / "tiny" / "bundle").run([np.full(4, 1e-10, np.float32)])["output"][0],
        1e-40,
        rel_tol=1e-2,
    )


def test_a_convolution_and_batch_norm_used_twice_fold_once_each_way(tmp_path: Path) -> None:
    """Weight sharing: the same conv + batch norm on two inputs reuses one folded weight; one conv
    feeding two different batch norms keeps both norms (as a scale and a shift each)."""

    def bn(c: int) -> nn.BatchNorm2d:
        m = nn.BatchNorm2d(c)
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 2.0)
        m.weight.data.normal_()
        return m

    class Siamese(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c, self.bn = nn.Conv2d(3, 4, 3), bn(4)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return self.bn(self.c(a)) - self.bn(self.c(b))

    class TwoNorms(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c, self.bn1, self.bn2 = nn.Conv2d(3, 4, 3), bn(4), bn(4)

        def forward(self, a: torch.Tensor) -> torch.Tensor:
            y = self.c(a)
            return self.bn1(y) * self.bn2(y)

    torch.manual_seed(0)
    meta = _convert(Siamese(), (torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8)), tmp_path / "s")
    assert meta["rewrites"]["batch_norms_folded"] == 2
    assert [p["name"] for p in meta["params"]].count("c.weight.bn_folded") == 1
    meta = _convert(TwoNorms(), (torch.randn(1, 3, 8, 8),), tmp_path / "t")
    assert {"bn1.bn_scale", "bn2.bn_scale"} <= {p["name"] for p in meta["params"]}


class _SqueezeExcite(nn.Module):
    """conv + batch norm + ReLU, then a [N, C, 1, 1] scale of [N, C, H, W] (torchvision's SE block)."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c)
        self.fc = nn.Conv2d(c, c, 1)
        self.bn.running_mean.normal_()
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        return y * torch.sigmoid(self.fc(y.mean((2, 3), keepdim=True)))


def _without_broadcast_passes(out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, np.ndarray]:
    """The bundle's output with every pass, and with every pass but broadcasts.py's (same torch-ir, inputs)."""
    ir = torchir.load(out)
    weights = safetensors_io.read(out / layout.WEIGHTS)
    ref = safetensors_io.read(out / layout.REFERENCE)
    feed = {s.name: ref[f"input.{s.name}"].to_numpy() for s in ir.inputs}
    got = []
    for on in (True, False):
        if not on:
            for name in ("broadcast_channel_params", "flatten_trailing_broadcasts"):
                monkeypatch.setattr(passes, name, lambda program: 0)
        where = out / f"bundle_{on}"
        write_bundle(lower(ir), ir, weights, where)
        got.append(rti.BundleModel(where).run(feed)[ir.outputs[0].name])
    return got[0], got[1]


def test_a_leading_axes_broadcast_runs_flattened_with_the_same_bits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(0)
    meta = _convert(_SqueezeExcite(), (torch.randn(4, 3, 6, 5),), tmp_path / "o")
    assert meta["rewrites"]["broadcasts_flattened"] == 1  # the [4, 8, 1, 1] scale of [4, 8, 6, 5]
    on, off = _without_broadcast_passes(tmp_path / "o", monkeypatch)
    assert on.tobytes() == off.tobytes()


def test_per_channel_parameters_are_stored_broadcast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Needs broadcast_channel_params registered (and DerivedParam's "broadcast" step)."""
    torch.manual_seed(0)
    model = _SqueezeExcite()
    meta = _convert(model, (torch.randn(4, 3, 6, 5),), tmp_path / "o")
    # the folded conv bias, stored [8, 6, 5], and the 1x1 conv's bias, a reshape to [8, 1, 1]
    assert meta["rewrites"]["channel_params_broadcast"] == 2
    stored = safetensors_io.read(tmp_path / "o" / "bundle" / "weights.safetensors")
    assert stored["bn.bn_folded_bias.broadcast_8x6x5"].shape == (8, 6, 5)
    want = model.fc.bias.detach().numpy().reshape(8, 1, 1)
    assert np.array_equal(stored["fc.bias.broadcast_8x1x1"].to_numpy(), want)  # moved, not recomputed
    on, off = _without_broadcast_passes(tmp_path / "o", monkeypatch)
    assert on.tobytes() == off.tobytes()


def test_a_batch_of_one_keeps_its_per_channel_bias(tmp_path: Path) -> None:
    """At batch 1 the broadcast bias would be as large as the slot RLX keeps for its Expand: left as is."""
    torch.manual_seed(0)
    meta = _convert(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), (torch.randn(1, 3, 6, 6),), tmp_path / "o")
    assert meta["rewrites"].get("channel_params_broadcast", 0) == 0
    assert [p["shape"] for p in meta["params"] if p["name"].startswith("0.bias")] == [[1, 4, 1, 1]]
