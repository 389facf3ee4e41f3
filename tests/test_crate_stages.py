"""Generated crates of staged and random models (docs/design.md, decisions ax and aw): a crate runs the size
stages as the bundle does (its `cargo test` passes, and it gives the bundle's bits at several values of
the data-dependent size), and its parity test does not compare the outputs that depend on random draws."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import safetensors_io
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.crate.style import CrateStyleError
from test_crate import TARGET, cargo, needs_cargo


class GatedMaskLinear(nn.Module):
    """x[m & gate(x) > 0] (a size that depends on the mask's and a Linear's values) into a Linear: the size
    stage reads the gate's weights from the crate's weights file."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(4, 1)
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return self.lin(x[m & (self.gate(x)[:, 0] > 0)]) * 2


class NoisyLinear(nn.Module):
    """One output drawn at random (not comparable with torch's draws), one that is not."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"noise": torch.rand(16) + 1.0, "y": self.lin(x) * 2}


# Masks over 8 rows and the rows kept (seed 2: the gate is > 0 on every row but row 1); the example keeps 5.
# 0 rows RLX's CPU matmul cannot compile (docs/design.md, decision ax: the bundle fails there too).
MASKS = {
    "one": ([False, True, False, False, False, False, False, True], 1),
    "three": ([True, True, False, True, False, False, True, False], 3),
    "all": ([True] * 8, 7),
}


def _convert(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path, name: str) -> tuple[rti.ParityReport, Path]:
    report = rti.from_torch(model, inputs, out, emit=("bundle", "crate"), name=name)
    (crate,) = out.glob("rlx-*")
    return report, crate


def _crate_run(
    crate: Path, stem: Path, inputs: dict[str, torch.Tensor], wants: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], str]:
    """The crate's example run on `inputs` with eager torch's outputs `wants` as its reference (it exits 0
    only within the verifier's budgets of them): the outputs it saved, and its stdout."""
    tensors = {
        f"input.{k}": (str(v.dtype).removeprefix("torch."), tuple(v.shape), v.numpy().tobytes())
        for k, v in inputs.items()
    }
    tensors |= {f"output.{k}": (str(v.dtype), tuple(v.shape), v.tobytes()) for k, v in wants.items()}
    ref, saved = stem.with_suffix(".safetensors"), stem.with_suffix(".out.safetensors")
    safetensors_io.write(ref, tensors)
    run = ["run", "--release", "--quiet", "--example", "run", "--", "--reference", str(ref), "--save", str(saved)]
    stdout = cargo(crate, *run)
    got = safetensors_io.read(saved)
    return {k: got[f"output.{k}"].to_numpy() for k in wants}, stdout


@needs_cargo
def test_staged_crate_runs_its_size_stage_and_matches_the_bundle(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = GatedMaskLinear().eval()
    x = torch.randn(8, 4)
    example = torch.tensor([True, True, True, False, True, False, True, True])
    report, crate = _convert(model, (x, example), tmp_path / "o", "gated_mask_linear")
    assert report.ok, report.summary()
    assert (crate / "src/stage1.hir.json").is_file() and (crate / "src/stages.rs").is_file()
    cargo(crate, "fmt", "--check")
    cargo(crate, "clippy", "--release", "--quiet", "--all-targets", "--", "-D", "warnings")
    assert "test matches_pytorch_on_the_reference_inputs ... ok" in cargo(crate, "test", "--release")
    bundle = BundleModel(tmp_path / "o" / "bundle")
    for label, (mask, kept) in MASKS.items():
        m = torch.tensor(mask)
        with torch.no_grad():
            want = model(x, m).numpy()
        outs, stdout = _crate_run(crate, tmp_path / label, {"x": x, "m": m}, {"output": want})
        got = outs["output"]
        assert want.shape == got.shape == (kept, 3), (label, want.shape, got.shape, stdout)
        (expected,) = bundle.run({"x": x.numpy(), "m": m.numpy()}).values()
        assert got.tobytes() == np.ascontiguousarray(expected).tobytes(), f"{label}: the crate differs from the bundle"


class MaskAffine(nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return x[m] * 2 + 1


@needs_cargo
@pytest.mark.slow  # opt in with -m slow, as tests/test_crate.py SLOW (the default suite keeps two crates)
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


@needs_cargo
@pytest.mark.slow  # opt in with -m slow, as tests/test_crate.py SLOW (the default suite keeps two crates)
def test_staged_crate_refuses_a_size_outside_its_range_naming_it(tmp_path: Path) -> None:
    """`.item()` as a slice end checked to 0..8 by torch._check: the crate refuses 9 as the bundle does."""
    from test_stages import CASES

    module, example, _ = CASES["slice_by_item"]
    report, crate = _convert(module, example, tmp_path / "o", "slice_item")
    assert report.ok, report.summary()
    assert "test matches_pytorch_on_the_reference_inputs ... ok" in cargo(crate, "test", "--release")
    ref = safetensors_io.read(tmp_path / "o" / "reference.safetensors")
    tensors = {k: (v.dtype, tuple(v.shape), v.to_numpy().tobytes()) for k, v in ref.items()}
    tensors["input.n"] = ("int64", (), np.array(9, dtype=np.int64).tobytes())
    safetensors_io.write(tmp_path / "bad.safetensors", tensors)
    env = {**os.environ, "CARGO_TARGET_DIR": TARGET}
    run = [
        "cargo",
        "run",
        "--release",
        "--quiet",
        "--example",
        "run",
        "--",
        "--reference",
        str(tmp_path / "bad.safetensors"),
    ]
    done = subprocess.run(run, cwd=crate, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert re.search(
        r"size u0 \(.*the size of node _local_scalar_dense\) is 9 on these inputs, outside the range 0\.\.8",
        done.stderr,
    ), done.stderr


def test_staged_crate_in_another_style_is_refused_naming_the_graph_style(tmp_path: Path) -> None:
    x, m = torch.randn(8, 4), torch.tensor([True] * 8)
    with pytest.raises(CrateStyleError, match=r"sizes that depend on tensor values.*only the graph style"):
        rti.from_torch(GatedMaskLinear().eval(), (x, m), tmp_path / "o", emit=("bundle", "crate"), emit_style="flow")


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


class ChainedColumns(nn.Module):
    """A chain of stages and a derived size in one crate: a masked transform (its size in stage 1), then
    the count of large results after it (stage 2) cuts ceil(count / 4) + 1 rows of a weight (a derived
    size, decision bb); and the positions of the largest results (int64, empty where there is none: an
    output RLX reads padded, empty-output)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(7, 3, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        inside = x.abs() < 0.5
        out = x.clone()
        out[inside] = torch.sin(x[inside]) * 3
        n = (out > 0.3).sum().item()
        torch._check(n >= 0)
        torch._check(n <= 20)
        return {"cols": self.w[: -(-n // 4) + 1] * out.sum(), "hits": torch.nonzero(out > 0.9)}


@needs_cargo
def test_crate_runs_a_chain_of_stages_and_a_derived_size_as_the_bundle(tmp_path: Path) -> None:
    model = ChainedColumns()
    x = torch.rand(5, 4, generator=torch.Generator().manual_seed(1)) * 2 - 1
    report, crate = _convert(model, (x,), tmp_path / "o", "chained_columns")
    assert report.ok, report.summary()
    assert (crate / "src/stage1.hir.json").is_file() and (crate / "src/stage2.rlxmodel").is_file()
    assert "test matches_pytorch_on_the_reference_inputs ... ok" in cargo(crate, "test", "--release")
    bundle = BundleModel(tmp_path / "o" / "bundle")
    for label, value in {"none": torch.zeros(5, 4), "all": torch.ones(5, 4), "mixed": x * 0.7 + 0.2}.items():
        with torch.no_grad():
            wants = {k: v.numpy() for k, v in model(value).items()}
        got, stdout = _crate_run(crate, tmp_path / label, {"x": value}, wants)
        expected = bundle.run({"x": value.numpy()})
        for key, want in wants.items():
            assert got[key].shape == want.shape, (label, key, got[key].shape, want.shape, stdout)
            same = got[key].tobytes() == np.ascontiguousarray(expected[key]).tobytes()
            assert same, f"{label}: the crate's {key} differs from the bundle's"
        assert (expected["hits"].shape[0] == 0) == (label == "none"), expected["hits"]  # none: an empty int64 output
