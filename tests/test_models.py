"""The foundation models convert and verify against PyTorch at every decomposition level."""

from __future__ import annotations

import json

import pytest
import torch

import rlx_torch_import as rti
from models import MODEL_NAMES, make

# Fused RLX ops each model must land on at the `aten`/`high` levels (ARCHITECTURE.md §1.2).
FUSED = {
    "mlp": {"LayerNorm", "Activation.Gelu", "MatMul"},
    "transformer_block": {"LayerNorm", "Attention", "Activation.Silu", "MatMul"},
    "cnn": {"Conv", "Pool", "Activation.Relu", "MatMul"},  # eval batch norm is folded into the convolutions
}


@pytest.mark.parametrize("level", ["aten", "high", "core"])
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_verifies(name: str, level: str, tmp_path) -> None:
    model, inputs = make(name)
    out = tmp_path / name
    report = rti.from_torch(model, inputs, out, decomposition=level)

    assert report.verified and report.ok, report.summary()
    for o in report.outputs:
        assert o.cosine >= 0.99999 and o.max_abs_error <= 1e-4, report.summary()

    # The bundle runs again from disk and reproduces PyTorch.
    got = rti.run_bundle(out / "bundle", [t.numpy() for t in inputs])
    with torch.no_grad():
        want = model(*inputs)
    assert torch.allclose(torch.from_numpy(got["output"]), want, atol=1e-4, rtol=1e-4)

    meta = json.loads((out / "bundle" / "meta.json").read_text())
    derived = meta["derived_params"]  # weights in the layout RLX reads / batch norm folded, from state_dict entries

    def stored(name: str) -> set[str]:
        d = derived.get(name)
        if d is None:
            return {name}
        refs = [d["source"]] if "source" in d else [d[k] for k in ("conv", "gamma", "beta", "mean", "var") if d[k]]
        return set().union(*(stored(r) for r in refs))

    assert set().union(*(stored(p["name"]) for p in meta["params"])) <= set(model.state_dict())
    if name == "mlp":  # Linear's weight transpose is done once, at conversion, not on every run
        assert "Transpose" not in meta["op_histogram"] and meta["rewrites"]["param_layouts_folded"] == 2
    if name == "cnn":  # conv + eval batch norm: one convolution with scaled weights, no channels-last transposes
        assert meta["rewrites"]["batch_norms_folded"] == 2 and "BatchNormInference" not in meta["op_histogram"]
        assert "Transpose" not in meta["op_histogram"]
    if level != "core":
        assert FUSED[name] <= set(meta["op_histogram"]), meta["op_histogram"]
    saved = json.loads((out / "report.json").read_text())
    assert saved["ok"] is True and saved["outputs"][0]["cosine"] >= 0.99999


def test_core_level_decomposes(tmp_path) -> None:
    model, inputs = make("transformer_block")
    rti.from_torch(model, inputs, tmp_path / "o", decomposition="core")
    ir = json.loads((tmp_path / "o" / "torch-ir.json").read_text())
    targets = {n["target"] for n in ir["nodes"]}
    assert "aten.scaled_dot_product_attention.default" not in targets
    assert "aten.linear.default" not in targets and "aten.addmm.default" in targets


def test_high_level_keeps_fused_ops(tmp_path) -> None:
    model, inputs = make("transformer_block")
    rti.from_torch(model, inputs, tmp_path / "o", decomposition="high")
    ir = json.loads((tmp_path / "o" / "torch-ir.json").read_text())
    targets = {n["target"] for n in ir["nodes"]}
    assert {"aten.scaled_dot_product_attention.default", "aten.linear.default", "aten.layer_norm.default"} <= targets


def test_weights_keep_state_dict_names_and_dtypes(tmp_path) -> None:
    from safetensors.torch import load_file

    model, inputs = make("cnn")
    rti.from_torch(model, inputs, tmp_path / "o")
    saved = load_file(str(tmp_path / "o" / "weights.safetensors"))
    sd = model.state_dict()
    assert set(saved) <= set(sd)
    assert "bn1.running_mean" in saved
    for k, t in saved.items():
        assert t.dtype == sd[k].dtype and torch.equal(t, sd[k])


def test_build_relowers_existing_torch_ir(tmp_path) -> None:
    model, inputs = make("mlp")
    out = tmp_path / "o"
    rti.from_torch(model, inputs, out)
    before = (out / "bundle" / "model.hir.json").read_text()
    (out / "bundle").rename(tmp_path / "old")
    report = rti.build(out)
    assert report.ok, report.summary()
    assert (out / "bundle" / "model.hir.json").read_text() == before
