"""Weight-only quantization at conversion (`quantize="int8" | "int4"`, `--quantize`): the block layouts
bit for bit, tiny HF Llama and BERT verified against eager PyTorch on their dequantized weights, the
accuracy cost against the float model, `build` re-deriving the same packed bytes, a crate that runs them,
and exit 3 naming a scheme RLX cannot run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import safetensors_io
from rlx_torch_import.errors import ExitCode, TorchIRError, UnsupportedOpsError
from rlx_torch_import.quant.schemes import SCHEMES, dequantize, pack, packed_size, parse_record, unpack

T = pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["int8", "int4"])
def test_blocks_round_trip_and_requantize_to_the_same_bytes(name: str) -> None:
    scheme = SCHEMES[name]
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((48, 96)) * rng.uniform(0.01, 3.0, (48, 1))).astype(np.float32)
    w[3, :32] = 0.0  # an all-zero block: scale 0, codes 0
    blob = pack(w, scheme)
    assert blob.dtype == np.uint8 and blob.size == packed_size(48, 96, scheme) == 48 * 3 * scheme.block_bytes
    deq = dequantize(w, scheme)
    assert np.array_equal(unpack(blob, 48, 96, scheme), deq)  # what RLX computes from the bytes
    assert np.array_equal(pack(deq, scheme), blob)  # idempotent: `build` re-derives the same bytes
    assert np.array_equal(dequantize(deq, scheme), deq)
    assert not deq[3, :32].any()
    # int8: each element within half a step (amax / 127); int4: within a step (amax / 8), as its codes reach
    # -8 steps on the peak's side but only +7 on the other (clipped there), half a step elsewhere
    step = np.abs(w.reshape(48, 3, 32)).max(-1, keepdims=True) / (127 if name == "int8" else 8)
    bound = step * (0.5 if name == "int8" else 1.0) * (1 + 2**-10)  # the f16 scale's rounding
    assert np.all(np.abs(w - deq).reshape(48, 3, 32) <= bound)


def test_torch_ir_record_is_checked() -> None:
    good = {"scheme": "int4", "rlx": "GgufQ4_0", "block": 32, "weights": ["fc.weight"], "kept_float": []}
    assert parse_record(good, "t.json")["weights"] == ["fc.weight"]
    assert parse_record(None, "t.json") == {}  # a file from before the field: a float conversion
    with pytest.raises(TorchIRError, match="quantize"):
        parse_record({**good, "block": 64}, "t.json")
    with pytest.raises(TorchIRError, match=r"quantize\.weights"):
        parse_record({**good, "weights": [1]}, "t.json")


def llama() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = T.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return T.LlamaForCausalLM(cfg), (torch.randint(0, 128, (1, 8)),)


def bert() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = T.BertConfig(
        vocab_size=128,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    return T.BertForMaskedLM(cfg), (torch.randint(0, 128, (2, 8)),)  # its decoder is tied to the embedding


class Logits(nn.Module):
    """The HF model's logits alone."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids).logits


def _convert(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path, scheme: str) -> rti.ParityReport:
    report = rti.from_torch(model, inputs, out, quantize=scheme, verify_inputs="auto", name="m")
    assert report.ok, report.summary()  # against eager PyTorch on the dequantized weights, normal budgets
    uses = [row["use"] for row in report.quantization["quantized"]]
    assert report.op_histogram.get("DequantMatMul", 0) == uses.count("matmul") > 0
    assert uses.count("gather") >= 1  # the token embedding table, gathered as packed codes
    return report


def _example_logits(q: dict[str, Any]) -> dict[str, Any]:
    (row,) = [c for c in q["accuracy_cost"] if c["point"] == "example"]
    return row


@pytest.mark.parametrize("build", [llama, bert])
def test_hf_models_verify_quantized_and_report_the_cost(build: Any, tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf, inputs = build()
    model = Logits(hf.eval())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    reports = {s: _convert(model, inputs, tmp_path / s, s) for s in ("int8", "int4")}
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the user's weights back
    q8, q4 = reports["int8"].quantization, reports["int4"].quantization
    assert (q8["rlx_scheme"], q4["rlx_scheme"]) == ("GgufQ8_0", "GgufQ4_0")
    assert not any(
        "embeddings.word_embeddings" in k["weight"] or "embed_tokens" in k["weight"] for k in q8["kept_float"]
    )
    assert q4["bundle_weight_bytes"] < q8["bundle_weight_bytes"] < q8["float_weight_bytes"]
    for q in (q8, q4):
        points = {c["point"] for c in q["accuracy_cost"]}
        assert "example" in points and any(p.startswith("auto:") for p in points)
        assert all(0.9 < c["cosine"] <= 1.0 + 1e-12 and c["max_abs_error"] > 0 for c in q["accuracy_cost"])
        assert all(0.0 <= c["top1_agreement"] <= 1.0 for c in q["accuracy_cost"])
    assert _example_logits(q4)["max_abs_error"] > _example_logits(q8)["max_abs_error"]
    assert _example_logits(q4)["cosine"] < _example_logits(q8)["cosine"]
    doc = json.loads((tmp_path / "int8" / "report.json").read_text())
    assert doc["quantization"]["quantized"] == q8["quantized"]
    assert "## Quantization" in (tmp_path / "int4" / "report.md").read_text()
    assert "<h2>Quantization</h2>" in (tmp_path / "int4" / "report.html").read_text()
    ir = json.loads((tmp_path / "int4" / "torch-ir.json").read_text())
    assert ir["quantize"]["scheme"] == "int4" and set(ir["quantize"]["weights"]) >= {
        r["weight"] for r in q4["quantized"]
    }


def test_build_packs_the_same_bytes_again(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 10), nn.ReLU(), nn.Linear(10, 3))
    out = tmp_path / "o"
    first = rti.from_torch(model, (torch.randn(2, 5, 64),), out, quantize="int8")
    assert first.ok, first.summary()
    assert [k["weight"] for k in first.quantization["kept_float"]] == ["4.weight"]  # in_features 10
    assert "not a multiple of 32" in first.quantization["kept_float"][0]["reason"]
    written = (out / "bundle" / "weights.safetensors").read_bytes()
    stored = safetensors_io.read(out / "bundle" / "weights.safetensors")
    assert stored["0.weight.GgufQ8_0"].dtype == "uint8" and "0.weight" not in stored
    again = rti.build(out)
    assert again.ok and again.quantization["quantized"] == first.quantization["quantized"]
    assert (out / "bundle" / "weights.safetensors").read_bytes() == written


def test_dynamic_batch_runs_quantized_at_every_sweep_point(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 8))
    dims = ({0: torch.export.Dim("b", min=1, max=16)},)
    report = rti.from_torch(model, (torch.randn(4, 5, 64),), tmp_path / "o", quantize="int4", dynamic_shapes=dims)
    assert report.ok and len(report.sweep) == 4 and all(r.ok for r in report.sweep), report.summary()
    assert report.op_histogram["DequantMatMul"] == 2


def test_a_scheme_rlx_cannot_run_is_exit_3_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOpsError, match="'nf4'") as e:
        rti.from_torch(nn.Linear(64, 8), (torch.randn(2, 64),), tmp_path / "a", quantize="nf4")
    assert e.value.exit_code == ExitCode.UNSUPPORTED
    args = [sys.executable, "-m", "rlx_torch_import.cli", str(REPO / "examples" / "mlp.py"), "-o", str(tmp_path / "b")]
    done = subprocess.run(
        [*args, "-q", "--quantize", "int8", "--quantize-block", "64"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == ExitCode.UNSUPPORTED, done.stderr
    assert "int8 (GgufQ8_0) in blocks of 64" in done.stderr and "blocks of 32" in done.stderr
    assert not (tmp_path / "b").exists()
    done = subprocess.run([*args, "-q", "--quantize", "nf4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == ExitCode.UNSUPPORTED and "'nf4'" in done.stderr, done.stderr  # as the API: exit 3
    assert "adding-an-op" not in done.stderr  # a scheme, not a missing lowering


def test_crate_runs_the_packed_weights_like_the_bundle(tmp_path: Path) -> None:
    test_crate = pytest.importorskip("test_crate")
    if test_crate.CARGO is None:
        pytest.skip("cargo is not installed")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32), nn.ReLU(), nn.Linear(32, 4))
    out = tmp_path / "o"
    report = rti.from_torch(model, (torch.randn(3, 64),), out, quantize="int4", emit="crate", name="q4")
    assert report.ok and report.op_histogram["DequantMatMul"] == 3, report.summary()
    (crate,) = out.glob("rlx-*")
    test_crate.cargo(crate, "test", "--release", "--quiet")  # its parity test against the reference
    saved = tmp_path / "crate.safetensors"
    test_crate.cargo(crate, "run", "--release", "--quiet", "--example", "run", "--", "--save", str(saved))
    got = safetensors_io.read(saved)
    for key, expected in test_crate._bundle_outputs(out).items():
        assert got[f"output.{key}"].to_numpy().tobytes() == np.ascontiguousarray(expected).tobytes(), key


def test_weights_the_f16_scale_cannot_hold_stay_float(tmp_path: Path) -> None:
    """A weight whose block scale would overflow float16 (it would dequantize to inf/NaN) is kept float, with
    the reason; the rest is packed and the model verifies."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.Linear(8, 32), nn.Linear(32, 4)).eval()
    model[0].weight.data[0, 0] = 1e7  # int8's scale is |w| / 127: past float16's 65504
    report = rti.from_torch(model, (torch.randn(4, 64),), tmp_path / "out", quantize="int8")
    assert report.ok, report.summary()
    kept = {k["weight"]: k["reason"] for k in report.quantization["kept_float"]}
    assert "float16 block scale" in kept["0.weight"]
    assert [r["weight"] for r in report.quantization["quantized"]] == ["3.weight"]
    assert all(math.isfinite(c["max_abs_error"]) for c in report.quantization["accuracy_cost"])


def test_half_precision_bytes_are_counted_as_stored(tmp_path: Path) -> None:
    """A float16 model's weights stay float16 (not quantized) and the report counts their stored bytes."""
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8)).half().eval()
    report = rti.from_torch(model, (torch.randn(4, 64).half(),), tmp_path / "out", quantize="int8")
    assert report.ok, report.summary()
    q = report.quantization
    assert q["quantized"] == [] and len(q["kept_float"]) == 2
    assert q["bundle_weight_bytes"] == 2 * sum(p.numel() for p in model.parameters())
    assert any("no weight was packed" in n for n in report.notes)


def test_block_size_without_a_scheme_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(rti.InputError, match="quantize_block=64 without quantize"):
        rti.from_torch(nn.Linear(32, 4), (torch.randn(2, 32),), tmp_path / "out", quantize_block=64)
    with pytest.raises(rti.InputError, match="positive number"):
        rti.from_torch(nn.Linear(32, 4), (torch.randn(2, 32),), tmp_path / "out", quantize="int8", quantize_block=0)
    assert rti.from_torch(nn.Linear(32, 4).eval(), (torch.randn(2, 32),), tmp_path / "ok", quantize="INT8").ok
