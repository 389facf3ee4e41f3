"""Generated crates of staged and random models (docs/design.md, decision aq): a crate runs the size
stages as the bundle does (its `cargo test` passes, and it gives the bundle's bits at several values of
the data-dependent size), and its parity test does not compare the outputs that depend on random draws."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import safetensors_io
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.crate.style import CrateStyleError
from test_crate import cargo, needs_cargo


class MaskLinear(nn.Module):
    """x[m] (a size that depends on the mask's values) into a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return self.lin(x[m]) * 2


class NoisyLinear(nn.Module):
    """One output drawn at random (not comparable with torch's draws), one that is not."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"noise": torch.rand(16) + 1.0, "y": self.lin(x) * 2}


MASKS = {  # the example (4 rows kept) and other sizes of x[m]; 0 rows RLX's CPU matmul cannot compile
    "one": [False, False, True, False, False, False],
    "three": [True, False, False, True, False, True],
    "all": [True] * 6,
}


def _convert(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path, name: str) -> tuple[rti.ParityReport, Path]:
    report = rti.from_torch(model, inputs, out, emit=("bundle", "crate"), name=name)
    (crate,) = out.glob("rlx-*")
    return report, crate


@needs_cargo
def test_staged_crate_runs_its_size_stage_and_matches_the_bundle(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MaskLinear().eval()
    x = torch.randn(6, 4)
    example = torch.tensor([True, False, True, True, False, True])
    report, crate = _convert(model, (x, example), tmp_path / "o", "mask_linear")
    assert report.ok, report.summary()
    assert (crate / "src/stage1.hir.json").is_file() and (crate / "src/stages.rs").is_file()
    cargo(crate, "fmt", "--check")
    cargo(crate, "clippy", "--release", "--quiet", "--all-targets", "--", "-D", "warnings")
    assert "test matches_pytorch_on_the_reference_inputs ... ok" in cargo(crate, "test", "--release")
    bundle = BundleModel(tmp_path / "o" / "bundle")
    for label, mask in MASKS.items():
        m = torch.tensor(mask)
        with torch.no_grad():
            want = model(x, m).numpy()
        ref = tmp_path / f"{label}.safetensors"
        tensors = {
            "input.x": ("float32", tuple(x.shape), x.numpy().tobytes()),
            "input.m": ("bool", tuple(m.shape), m.numpy().tobytes()),
            "output.output": ("float32", tuple(want.shape), want.tobytes()),
        }
        safetensors_io.write(ref, tensors)
        saved = tmp_path / f"{label}.out.safetensors"
        run = ["run", "--release", "--quiet", "--example", "run", "--", "--reference", str(ref), "--save", str(saved)]
        stdout = cargo(crate, *run)  # exit 0: within the verifier's budgets of eager torch
        got = safetensors_io.read(saved)["output.output"].to_numpy()
        assert got.shape == (sum(mask), 3), (label, got.shape, stdout)
        (expected,) = bundle.run({"x": x.numpy(), "m": m.numpy()}).values()
        assert got.tobytes() == np.ascontiguousarray(expected).tobytes(), f"{label}: the crate differs from the bundle"


class MaskAffine(nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return x[m] * 2 + 1


@needs_cargo
def test_staged_crate_with_dynamic_dims_runs_every_sweep_point(tmp_path: Path) -> None:
    """Dynamic input dims: the size stage is a symbolic graph too, compiled per binding of the input dims;
    the crate's test runs every sweep point the reference holds, x[m]'s size 0 included."""
    from torch.export import Dim

    torch.manual_seed(0)
    n = Dim("n", min=2, max=16)
    x, m = torch.randn(6, 4), torch.tensor([True, False, True, True, False, True])
    out = tmp_path / "o"
    report = rti.from_torch(
        MaskAffine(),
        (x, m),
        out,
        emit=("bundle", "crate"),
        name="mask_affine",
        dynamic_shapes={"x": {0: n}, "m": {0: n}},
    )
    assert report.ok, report.summary()
    (crate,) = out.glob("rlx-*")
    assert (crate / "src/stage1.rlxmodel").is_file()
    stdout = cargo(crate, "test", "--release", "--", "--nocapture")
    assert "test matches_pytorch_on_the_reference_inputs ... ok" in stdout, stdout
    shapes = re.findall(r"^(example|sweep\.\d+\.) \(output shapes \[\[(\d+), 4\]\]\)", stdout, re.M)
    assert len(shapes) >= 4 and "0" in {k for _, k in shapes}, stdout


def test_staged_crate_in_another_style_is_refused_naming_the_graph_style(tmp_path: Path) -> None:
    x, m = torch.randn(6, 4), torch.tensor([True, False, True, True, False, True])
    with pytest.raises(CrateStyleError, match=r"sizes that depend on tensor values.*only the graph style"):
        rti.from_torch(MaskLinear().eval(), (x, m), tmp_path / "o", emit=("bundle", "crate"), emit_style="flow")


@needs_cargo
def test_random_outputs_are_not_compared_by_the_crate_test(tmp_path: Path) -> None:
    torch.manual_seed(0)
    report, crate = _convert(NoisyLinear().eval(), (torch.randn(3, 8),), tmp_path / "o", "noisy_linear")
    assert report.verdict == "RANDOM", report.summary()
    stdout = cargo(crate, "test", "--release", "--", "--nocapture")
    assert "noise: random: not compared" in stdout, stdout
    assert "y: ok" in stdout and "test matches_pytorch_on_the_reference_inputs ... ok" in stdout, stdout
    saved = tmp_path / "crate.safetensors"
    stdout = cargo(crate, "run", "--release", "--quiet", "--example", "run", "--", "--save", str(saved))  # exit 0
    assert "noise: random: not compared" in stdout, stdout
    got = safetensors_io.read(saved)
    ref = safetensors_io.read(tmp_path / "o" / "reference.safetensors")
    for key, expected in BundleModel(tmp_path / "o" / "bundle").run({"x": ref["input.x"].to_numpy()}).items():
        # the crate draws what the bundle draws (RLX's generator, the bundle's seed policy)
        assert got[f"output.{key}"].to_numpy().tobytes() == np.ascontiguousarray(expected).tobytes(), key
