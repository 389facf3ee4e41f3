"""Dynamic shapes end to end: one export with `dynamic_shapes` (or `--dynamic`) gives a bundle
that runs at every size in range, verified against eager PyTorch at each sweep point."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.export import Dim

import rlx_torch_import as rti
from models import MaskedBlock, make
from rlx_torch_import import safetensors_io, sizes, torchir
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import DynamicShapeError, ExitCode, ExportError, InputError, TorchIRError
from rlx_torch_import.lower import generalize

TESTS = Path(__file__).resolve().parent


def _sweep_ok(report: rti.ParityReport, symbols: dict[str, tuple[int, int]]) -> None:
    """Every sweep point passed, and each symbol was swept at min, 1 (if allowed), max-1 and max."""
    assert report.ok, report.summary()
    assert report.sweep and all(r.ok for r in report.sweep), report.summary()
    for label, (lo, hi) in symbols.items():
        swept = {r.binding[label] for r in report.sweep}
        want = {lo, hi - 1, hi} | ({1} if lo <= 1 else set())
        assert want <= swept, (label, swept)


def _convert(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], out: Path, ds: object) -> rti.ParityReport:
    return rti.from_torch(model, inputs, out, dynamic_shapes=ds)


def test_mlp_dynamic_batch(tmp_path: Path) -> None:
    model, inputs = make("mlp")
    report = _convert(model, inputs, tmp_path / "o", {"x": {0: Dim("batch", min=1, max=64)}})
    _sweep_ok(report, {"batch": (1, 64)})
    meta = json.loads((tmp_path / "o/bundle/meta.json").read_text())
    (sym,) = meta["symbols"]
    assert (sym["label"], sym["min"], sym["max"]) == ("batch", 1, 64)
    assert meta["inputs"][0]["shape"] == [sym["name"], 32]
    assert meta["outputs"][0]["shape"] == [sym["name"], 10]
    ir = torchir.load(tmp_path / "o")
    assert ir.symbols[0].example == 4 and ir.inputs[0].shape == [sym["name"], 32]
    # The bundle runs at any batch in range, each binding compiled once.
    bundle = BundleModel(tmp_path / "o/bundle")
    for batch in (3, 64, 3):
        x = torch.randn(batch, 32)
        got = bundle.run({"x": x.numpy()})["output"]
        np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert bundle.compiles == 2
    report_md = (tmp_path / "o/report.md").read_text()
    assert "| batch=max (64) |" in report_md and "Sweep over the dynamic dims (batch in 1..64)" in report_md


def test_a_failing_sweep_point_is_named(tmp_path: Path) -> None:
    """`build DIR` re-verifies every sweep point from reference.safetensors; a wrong reference at one
    point fails that row (and the report), naming the point."""
    model, inputs = make("mlp")
    _convert(model, inputs, tmp_path / "o", {"x": {0: Dim("batch", min=1, max=8)}})
    path = tmp_path / "o/reference.safetensors"
    ref = {k: (t.dtype, t.shape, bytes(t.data)) for k, t in safetensors_io.read(path).items()}
    wrong = safetensors_io.read(path)["sweep.2.output.output"].to_numpy() + 1.0
    ref["sweep.2.output.output"] = ("float32", wrong.shape, wrong.tobytes())
    safetensors_io.write(path, ref)
    report = rti.build(tmp_path / "o")
    assert not report.ok and [r.ok for r in report.sweep] == [True, True, False, True]
    assert "BAD batch=max-1 (7) (batch=7): output:" in report.summary()
    assert "| batch=max-1 (7) | batch=7 | FAIL |" in (tmp_path / "o/report.md").read_text()
    assert "batch" in repr(BundleModel(tmp_path / "o/bundle"))


@pytest.mark.parametrize("kind", ["plain", "causal", "additive_mask"])
def test_transformer_block_dynamic_batch_and_sequence(kind: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=48)
    if kind == "additive_mask":
        model = MaskedBlock().eval()
        inputs = (torch.randn(2, 7, 64), torch.randn(2, 1, 7, 7))
        ds: dict = {"x": {0: batch, 1: seq}, "mask": {0: batch, 2: seq, 3: seq}}
    else:
        model = MaskedBlock(causal=kind == "causal").eval()
        inputs = (torch.randn(2, 7, 64),)
        ds = {"x": {0: batch, 1: seq}}
    report = _convert(model, inputs, tmp_path / "o", ds)
    _sweep_ok(report, {"batch": (1, 8), "seq": (2, 48)})
    text = (tmp_path / "o/bundle/model.rlxmodel").read_text()
    assert "Attention{" in text  # attention stays on RLX's fused kernel at every size
    if kind == "causal":
        assert "mask_kind: Causal" in text


def test_cnn_dynamic_batch_and_spatial_size(tmp_path: Path) -> None:
    model, inputs = make("cnn")
    ds = {"x": {0: Dim("batch", min=1, max=8), 2: Dim("h", min=8, max=40), 3: Dim("w", min=8, max=40)}}
    report = _convert(model, inputs, tmp_path / "o", ds)
    _sweep_ok(report, {"batch": (1, 8), "h": (8, 40), "w": (8, 40)})


def test_dim_ranges_torch_cannot_trace_name_the_guard(tmp_path: Path) -> None:
    """Two max pools then a global pool: torch needs h // 4 != 1, so h >= 4 is refused, saying why."""
    model, inputs = make("cnn")
    with pytest.raises(ExportError, match=r"(?s)Constraints violated.*Not all values of h .* 4 <= h <= 40"):
        _convert(model, inputs, tmp_path / "o", {"x": {2: Dim("h", min=4, max=40)}})


def test_llama_dynamic_sequence_length(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from test_hf_models import Logits, llama

    torch.manual_seed(0)
    model, inputs = llama()
    report = _convert(Logits(model.eval()), inputs, tmp_path / "o", (({1: Dim("seq", min=2, max=64)},),))
    _sweep_ok(report, {"seq": (2, 64)})
    text = (tmp_path / "o/bundle/model.rlxmodel").read_text()
    assert "mask_kind: Causal" in text and "Rope" in text  # the causal mask and rotary stay fused


MODEL_FILE = """
import sys
sys.path.insert(0, {tests!r})
import torch
from models import MaskedBlock, make
{body}
"""


@pytest.mark.parametrize(
    ("body", "flags", "symbols"),
    [
        ("model, example_inputs = make('mlp')", ["x:0=batch:1:16"], {"batch": (1, 16)}),
        (
            "torch.manual_seed(0)\nmodel = MaskedBlock(causal=True).eval()\nexample_inputs = (torch.randn(2, 7, 64),)",
            ["x:0=batch:1:4", "x:1=seq:2:24"],
            {"batch": (1, 4), "seq": (2, 24)},
        ),
        ("model, example_inputs = make('cnn')", ["x:2=h:8:24", "x:3=w:8:24"], {"h": (8, 24), "w": (8, 24)}),
    ],
    ids=["mlp", "causal_block", "cnn"],
)
def test_cli_dynamic(body: str, flags: list[str], symbols: dict, tmp_path: Path) -> None:
    src = tmp_path / "model.py"
    src.write_text(MODEL_FILE.format(tests=str(TESTS), body=body))
    args = [str(src), "-o", str(tmp_path / "o"), "-q"]
    for flag in flags:
        args += ["--dynamic", flag]
    assert cli_main(args) == ExitCode.OK
    report = json.loads((tmp_path / "o/report.json").read_text())
    assert report["ok"] and report["symbols"].keys() == symbols.keys()
    assert all(row["ok"] for row in report["sweep"])
    for label, (lo, hi) in symbols.items():
        assert {lo, hi - 1, hi} <= {row["binding"][label] for row in report["sweep"]}


def test_cli_llama_dynamic_sequence(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    src = tmp_path / "llama.py"
    src.write_text(
        MODEL_FILE.format(
            tests=str(TESTS),
            body="from test_hf_models import Logits, llama\ntorch.manual_seed(0)\nm, example_inputs = llama()\n"
            "model = Logits(m.eval())",
        )
    )
    assert cli_main([str(src), "-o", str(tmp_path / "o"), "-q", "--dynamic", "args_0:1=seq:2:32"]) == ExitCode.OK
    report = json.loads((tmp_path / "o/report.json").read_text())
    assert report["ok"] and len(report["sweep"]) == 4


@pytest.fixture(scope="module")
def masked_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle with two inputs sharing the batch and sequence symbols."""
    out = tmp_path_factory.mktemp("masked") / "o"
    torch.manual_seed(0)
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=16)
    ds = {"x": {0: batch, 1: seq}, "mask": {0: batch, 2: seq, 3: seq}}
    report = rti.from_torch(
        MaskedBlock().eval(), (torch.randn(2, 5, 64), torch.randn(2, 1, 5, 5)), out, dynamic_shapes=ds
    )
    assert report.ok, report.summary()
    return out / "bundle"


def test_sizes_out_of_range_and_disagreeing_inputs_are_refused(masked_bundle: Path, tmp_path: Path) -> None:
    model = BundleModel(masked_bundle)
    x, mask = np.zeros((2, 17, 64), np.float32), np.zeros((2, 1, 17, 17), np.float32)
    with pytest.raises(
        InputError, match=r"input 'x' axis 1 has size 17 for symbol seq .* outside its declared range 2\.\.16"
    ):
        model.run({"x": x, "mask": mask})
    with pytest.raises(
        InputError, match=r"input 'mask' axis 2 gives symbol seq .* size 6, but input 'x' axis 1 gives it 5"
    ):
        model.run({"x": np.zeros((2, 5, 64), np.float32), "mask": np.zeros((2, 1, 6, 6), np.float32)})
    with pytest.raises(InputError, match=r"input 'x' axis 2 has size 32; the bundle expects 64"):
        model.run({"x": np.zeros((2, 5, 32), np.float32), "mask": np.zeros((2, 1, 5, 5), np.float32)})
    assert model.compiles == 0  # refused before anything was compiled or run
    # The CLI: exit code 2 (bad input), with the same message.
    np.savez(tmp_path / "big.npz", x=x, mask=mask)
    assert cli_main(["run", str(masked_bundle), "--inputs", str(tmp_path / "big.npz")]) == ExitCode.BAD_INPUT
    np.savez(tmp_path / "ok.npz", x=np.ones((3, 9, 64), np.float32), mask=np.zeros((3, 1, 9, 9), np.float32))
    assert cli_main(["run", str(masked_bundle), "--inputs", str(tmp_path / "ok.npz")]) == ExitCode.OK


def test_binding_cache_keeps_the_most_recent(masked_bundle: Path) -> None:
    model = BundleModel(masked_bundle, binding_cache=2)

    def run(b: int, s: int) -> None:
        model.run({"x": np.ones((b, s, 64), np.float32), "mask": np.zeros((b, 1, s, s), np.float32)})

    for b, s in [(1, 4), (2, 4), (1, 4), (3, 4), (2, 4)]:
        run(b, s)
    assert model.compiles == 4  # (2, 4) was dropped when (3, 4) came in
    with pytest.raises(InputError, match="binding_cache"):
        BundleModel(masked_bundle, binding_cache=0)


def test_unbacked_sizes_with_dynamic_dims(tmp_path: Path) -> None:
    """A size that depends on tensor values (a size stage, tests/test_stages.py) under a dynamic input dim:
    the stage is a symbolic graph too, and the sweep over the dim computes the count at each point."""

    class Masked(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0] * 2

    dims = ({0: torch.export.Dim("rows", min=2, max=16)},)
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(3))
    sets = [(torch.randn(9, 5),), (-torch.ones(3, 5),)]
    report = rti.from_torch(Masked(), (x,), tmp_path / "o", dynamic_shapes=dims, verify_inputs=sets)
    assert report.ok and report.sweep and all(r.ok for r in report.input_sets), report.summary()
    model = BundleModel(tmp_path / "o" / "bundle")
    assert model.meta["stages"][0]["symbolic"] == "stage1.rlxmodel"
    for rows in (2, 7, 16):
        y = np.random.default_rng(rows).standard_normal((rows, 5)).astype(np.float32)
        (out,) = model.run([y]).values()
        np.testing.assert_array_equal(out, y[y > 0] * 2)


def test_specialized_dims_are_reported_with_a_warning(tmp_path: Path) -> None:
    class FixedWidth(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w  # the width must be 8

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = rti.from_torch(FixedWidth(), (torch.randn(3, 8),), tmp_path / "o", dynamic_shapes={"x": {1: Dim.AUTO}})
    assert report.ok
    found = [
        w for w in caught if "input 'x' axis 1 (x.1) was asked to be dynamic, but is static at size 8" in str(w.message)
    ]
    assert found
    assert found[0].filename == __file__, f"the warning points at {found[0].filename}, not at the caller's line"
    ir = torchir.load(tmp_path / "o")
    assert not ir.symbols and ir.specialized[0]["axis"] == 1 and ir.specialized[0]["size"] == 8
    assert re.search(r"torch added the guard Eq\(s\d+, 8\) at .* in meta_mm", ir.specialized[0]["reason"])


def test_cli_dynamic_spec_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "m.py"
    src.write_text(MODEL_FILE.format(tests=str(TESTS), body="model, example_inputs = make('mlp')"))
    for flag, message in [
        ("x0=batch", "is not INPUT:AXIS=NAME[:MIN[:MAX]]"),
        ("y:0=batch", "dynamic_shapes names 'y', which is no input of forward() (its inputs are x)"),
        ("x:0=batch:9:3", "MIN 9 is above MAX 3"),
        ("x:0=auto:1:4", "takes no range"),
    ]:
        assert cli_main([str(src), "-o", str(tmp_path / "o"), "-q", "--dynamic", flag]) == ExitCode.BAD_INPUT
        assert message in capsys.readouterr().err


def test_symbolic_expressions_and_binding_inference() -> None:
    values = {"s0": 7, "s1": 3}
    assert sizes.evaluate("2*s0 + 1", values) == 15
    assert sizes.evaluate("((s0 + 1)//2)", values) == 4
    assert sizes.evaluate("Max(s0, 8)*s1", values) == 24
    assert sizes.evaluate("CeilDiv(s0, 2) + Mod(s0, s1)", values) == 5
    with pytest.raises(InputError, match="not an integer expression"):
        sizes.evaluate("s0.real", values)
    with pytest.raises(InputError, match="uses s9"):
        sizes.evaluate("s9 + 1", values)
    syms = [sizes.Symbol(0, "s0", "batch", 1, 8, 2), sizes.Symbol(1, "s1", "seq", 2, 16, 4)]
    inputs = [("x", ["s0", "s1", 4]), ("y", ["s0", "2*s1"])]
    assert sizes.infer_binding(syms, inputs, {"x": (3, 5, 4), "y": (3, 10)}) == {"s0": 3, "s1": 5}
    with pytest.raises(InputError, match=r"input 'y' axis 1 has size 9, which is no value of 2\*s1"):
        sizes.infer_binding(syms, inputs, {"x": (3, 5, 4), "y": (3, 9)})
    with pytest.raises(InputError, match="rank 2"):
        sizes.infer_binding(syms, inputs, {"x": (3, 5), "y": (3, 10)})


def test_probes_step_in_no_proportion_and_sweeps_cover_the_edges() -> None:
    syms = [
        sizes.Symbol(i, f"s{i}", f"d{i}", lo, hi, ex)
        for i, (lo, hi, ex) in enumerate([(1, 4, 2), (2, 512, 8), (1, None, 3), (2, 5, 3), (0, 64, 4), (1, 9, 2)])
    ]
    probes = generalize.probe_bindings(syms)
    assert len(probes) == generalize.PROBES
    steps = [[p[s.name] - probes[0][s.name] for p in probes[1:]] for s in syms]
    for p in probes:
        assert len(set(p.values())) == len(p), p  # no two symbols share a size at one probe
    for i, a in enumerate(steps):
        assert all(v >= 2 for v in (p[syms[i].name] for p in probes)) and len(set(a)) == len(a)
        for b in steps[i + 1 :]:
            assert any(a[j] * b[k] != a[k] * b[j] for j in range(3) for k in range(3)), (a, b)
    points = sizes.sweep_points(syms[:2])
    # d1's typical point is d0's (every symbol at its example); then the corners
    assert [p.label for p in points] == [
        "d0=min (1)",
        "d0=typical (2)",
        "d0=max-1 (3)",
        "d0=max (4)",
        "d1=min (2)",
        "d1=max-1 (511)",
        "d1=max (512)",
        "all=min",
        "all=max",
        "min/max alternating",
    ]
    assert [p.binding for p in points[-3:]] == [{"s0": 1, "s1": 2}, {"s0": 4, "s1": 512}, {"s0": 1, "s1": 512}]
    assert any(p.binding == {"s0": 2, "s1": 512} for p in points)


def test_torch_ir_records_symbols_and_rejects_bad_expressions(tmp_path: Path) -> None:
    model, inputs = make("mlp")
    rti.from_torch(model, inputs, tmp_path / "o", dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}}, verify=False)
    doc = json.loads((tmp_path / "o/torch-ir.json").read_text())
    assert doc["version"] == torchir.VERSION and doc["symbols"][0]["label"] == "batch"
    assert len(doc["sweep"]) == 4
    name = doc["symbols"][0]["name"]
    doc["inputs"][0]["shape"][0] = f"{name} +"
    with pytest.raises(TorchIRError, match="is not valid"):
        torchir.parse(doc)
    doc["inputs"][0]["shape"][0] = "s999"
    with pytest.raises(TorchIRError, match="undeclared symbol"):
        torchir.parse(doc)


class SymOps(torch.nn.Module):
    """Every way torch.export leaves a SymInt in the graph: sym_size, operator.mul / floordiv / add,
    and SymInt arguments of view, reshape, expand, arange, full, slice and narrow."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, t, c = x.shape
        y = x.reshape(b * t, c).view(b, t, 2, c // 2)
        pos = torch.arange(t, dtype=torch.float32)
        scale = torch.full((b, t), 2.0)
        z = y.flatten(2) + pos[None, :, None] * scale[..., None]
        e = z[:, :, :1].expand(b, t, c)
        return e + z, z[:, : t // 2 + 1].sum(1), z.narrow(1, 1, (t + 1) // 2).mean(1)


def test_size_computations_and_symint_arguments_lower(tmp_path: Path) -> None:
    half = Dim("half", min=2, max=16)  # torch requires an even length here (its suggested fix)
    ds = {"x": {0: Dim("batch", min=1, max=8), 1: 2 * half}}
    report = _convert(SymOps(), (torch.randn(3, 6, 8),), tmp_path / "o", ds)
    _sweep_ok(report, {"batch": (1, 8), "half": (2, 16)})
    bundle = BundleModel(tmp_path / "o/bundle")
    with pytest.raises(InputError, match=r"input 'x' axis 1 has size 7, which is no value of 2\*s"):
        bundle.run({"x": np.zeros((2, 7, 8), np.float32)})
    assert bundle.binding({"x": np.zeros((2, 10, 8), np.float32)}) == {"batch": 2, "half": 5}
    ir = torchir.load(tmp_path / "o")
    size_ops = {n.target for n in ir.nodes if n.sym}
    assert {"aten.sym_size.int", "operator.mul", "operator.floordiv", "operator.add"} <= size_ops, size_ops
    tagged = json.dumps([n.args for n in ir.nodes if n.target.startswith(("aten.view", "aten.arange", "aten.slice"))])
    assert '"sym"' in tagged


def test_pooled_sizes_of_two_spatial_dims_are_not_confused(tmp_path: Path) -> None:
    """A strided conv then a strided max pool floor-divide h and w; at a few probe sizes the pooled
    height can fit a formula of the width. Every sweep point (and the corners) constrains the fit."""
    torch.manual_seed(0)
    stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 7, 2, 3), torch.nn.MaxPool2d(3, 2, 1)).eval()
    ds = {"input": {2: Dim("h", min=33, max=128), 3: Dim("w", min=33, max=128)}}
    report = _convert(stem, (torch.randn(2, 3, 64, 64),), tmp_path / "o", ds)
    _sweep_ok(report, {"h": (33, 128), "w": (33, 128)})
    assert {"all=min", "all=max", "min/max alternating"} <= {r.label for r in report.sweep}
    bundle = BundleModel(tmp_path / "o/bundle")
    x = torch.randn(2, 3, 45, 117)
    np.testing.assert_allclose(
        bundle.run({"input": x.numpy()})["output"], stem(x).detach().numpy(), rtol=1e-4, atol=1e-5
    )


class SizeArithmetic(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x.shape[1] + x.shape[0]  # sizes used as numbers


class SizeProduct(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + x.shape[0] * x.shape[1]


def test_sizes_used_as_numbers(tmp_path: Path) -> None:
    ds = {"x": {0: Dim("batch", min=2, max=8), 1: Dim("seq", min=2, max=16)}}
    report = _convert(SizeArithmetic(), (torch.randn(3, 5),), tmp_path / "o", ds)
    _sweep_ok(report, {"batch": (2, 8), "seq": (2, 16)})
    # A product of two sizes is no single symbol's: refused naming the node (exit 3).
    with pytest.raises(DynamicShapeError, match=r"node %\d+ \[add <- aten\.add\.Tensor\]") as caught:
        _convert(SizeProduct(), (torch.randn(3, 5),), tmp_path / "p", ds)
    assert "make that dim static" in (caught.value.hint or "")
    assert DynamicShapeError("x").exit_code == ExitCode.UNSUPPORTED


def test_bert_with_attention_mask_dynamic_sequence(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")

    class Bert(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            cfg = transformers.BertConfig(
                vocab_size=128,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=128,
                max_position_embeddings=64,
            )
            self.bert = transformers.BertModel(cfg)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    torch.manual_seed(0)
    ids, mask = torch.randint(0, 128, (2, 8)), torch.ones(2, 8, dtype=torch.int64)
    mask[1, 6:] = 0
    seq = Dim("seq", min=2, max=64)
    ds = {"input_ids": {1: seq}, "attention_mask": {1: seq}}
    report = _convert(Bert().eval(), (ids, mask), tmp_path / "o", ds)
    _sweep_ok(report, {"seq": (2, 64)})


def test_cli_partial_dynamic_and_bad_axes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "two.py"
    src.write_text(
        "import torch\n"
        "class Two(torch.nn.Module):\n"
        "    def forward(self, x, scale):\n"
        "        return x * scale\n"
        "model = Two()\n"
        "example_inputs = (torch.randn(3, 4), torch.randn(4))\n"
    )
    out = str(tmp_path / "o")
    assert cli_main([str(src), "-o", out, "-q", "--dynamic", "x:0=batch:1:16"]) == ExitCode.OK  # scale stays static
    capsys.readouterr()
    assert cli_main([str(src), "-o", out, "-q", "--dynamic", "x:5=batch"]) == ExitCode.BAD_INPUT
    assert "axis 5 of input 'x' dynamic (batch), but its example has shape [3, 4]" in capsys.readouterr().err
    one = tmp_path / "one.py"
    one.write_text(src.read_text().replace("torch.randn(3, 4)", "torch.randn(1, 4)"))
    assert cli_main([str(one), "-o", out, "-q", "--dynamic", "x:0=batch:1:16"]) == ExitCode.BAD_INPUT
    assert "its example size is 1: torch.export always specializes sizes 0 and 1" in capsys.readouterr().err


class _PositionsAfterCache(torch.nn.Module):
    """`arange(past, past + new)`: positions that start at a dynamic size (a KV cache's length)."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, past: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, t = past.shape[1], x.shape[1]
        positions = torch.arange(s, s + t, dtype=self.dtype)
        return positions, x * positions.to(x.dtype) + past.sum()


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_a_range_that_starts_at_a_dynamic_size(dtype: torch.dtype, tmp_path: Path) -> None:
    model = _PositionsAfterCache(dtype)
    inputs = (torch.randn(1, 5), torch.randn(1, 3))
    ds = ({1: Dim("cache", min=0, max=64)}, {1: Dim("seq", min=1, max=16)})
    report = rti.from_torch(model, inputs, tmp_path / "o", dynamic_shapes=ds, per_node=False)
    assert report.ok, report.summary()
    bundle = BundleModel(tmp_path / "o/bundle")
    for cache, seq in ((0, 1), (9, 4), (64, 16)):
        past, x = torch.randn(1, cache), torch.randn(1, seq)
        got = bundle.run({"past": past.numpy(), "x": x.numpy()})
        want = model(past, x)
        np.testing.assert_array_equal(got["output_0"], want[0].numpy())
        np.testing.assert_allclose(got["output_1"], want[1].numpy(), rtol=1e-6, atol=1e-5)


class _KeywordCache(torch.nn.Module):
    def forward(self, ids: torch.Tensor, **past: torch.Tensor) -> torch.Tensor:
        return ids.float().sum(1, keepdim=True) + sum(v.sum(1, keepdim=True) for v in past.values())


@pytest.mark.parametrize("form", ["torch", "flat"])
def test_dynamic_shapes_for_keyword_tensors_of_forward_kwargs(form: str, tmp_path: Path) -> None:
    """`forward(ids, **past)`: dynamic_shapes in torch's form ({"past": {"k0": ...}}) or naming each
    keyword; torch's `high` decomposition cannot re-run such a program's guards (a torch defect), and
    the error says what to do instead."""
    ids, past = torch.zeros(1, 3, dtype=torch.long), {"k0": torch.randn(1, 5), "v0": torch.randn(1, 5)}
    cache = Dim("cache", min=0, max=64)
    keyed = {"k0": {1: cache}, "v0": {1: cache}}
    ds = {"ids": {1: Dim("seq", max=16)}, **({"past": keyed} if form == "torch" else keyed)}
    report = rti.from_torch(
        _KeywordCache(), (ids,), tmp_path / "o", kwargs=past, dynamic_shapes=ds, decomposition="aten"
    )
    assert report.ok, report.summary()
    symbols = {s["label"] for s in json.loads((tmp_path / "o/bundle/meta.json").read_text())["symbols"]}
    assert symbols == {"seq", "cache"}
    with pytest.raises(ExportError) as e:
        rti.from_torch(_KeywordCache(), (ids,), tmp_path / "h", kwargs=past, dynamic_shapes=ds)
    assert "convert with decomposition='aten' (CLI: --decomposition aten)" in str(e.value.hint)
