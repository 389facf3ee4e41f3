"""Complex values at a model's edges (docs/design.md, ar): complex inputs, outputs and buffers convert and
verify end to end. Files carry a complex tensor of shape S as its `view_as_real` float pairs (shape S + [2])
under the same key; torch-ir records the complex dtype; `BundleModel.run` takes and returns complex arrays.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel

COMPLEX = (("c64", torch.float32, np.complex64), ("c128", torch.float64, np.complex128))


class Stft(nn.Module):
    """An audio front end: `torch.stft(..., return_complex=True)` returned as it is."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(16, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stft(x, 16, hop_length=4, window=self.window, return_complex=True)


class Rfft(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x * 2.0, dim=-1)


class FftOfComplex(nn.Module):
    """A complex input in, its fft and a real view out."""

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.fft.fft(z, dim=-1), torch.view_as_real(z * 2)


class Rotary(nn.Module):
    """Llama's reference rotary embedding: a complex `freqs_cis` buffer made by `torch.polar`."""

    def __init__(self, dim: int, seq: int, dtype: torch.dtype) -> None:
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=dtype)[: dim // 2] / dim))
        angles = torch.outer(torch.arange(seq, dtype=dtype), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * self.freqs_cis).flatten(-2)


def _verified(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path) -> BundleModel:
    """Convert and verify `model` (per-node parity too); its bundle."""
    report = rti.from_torch(model.eval(), inputs, out, per_node=True)
    assert report.ok and report.verdict == "PASS", report.summary()
    return BundleModel(out / "bundle")


@pytest.mark.parametrize(("tag", "real", "np_complex"), COMPLEX, ids=[c[0] for c in COMPLEX])
def test_stft_and_rfft_outputs(tag: str, real: torch.dtype, np_complex: type, tmp_path) -> None:
    """A model returning `torch.stft(..., return_complex=True)` and one returning `torch.fft.rfft` verify;
    the bundle returns complex arrays equal to torch's within the float budget."""
    x = torch.randn(2, 64, dtype=real)
    bundle = _verified(Stft(real), (x,), tmp_path / "stft")
    report = json.loads((tmp_path / "stft" / "report.json").read_text())
    (row,) = report["outputs"]
    assert f"{np.dtype(np_complex).name}: compared as its float pairs (view_as_real)" in row["notes"], row
    assert row["shape"] == [*Stft(real)(x).shape, 2]
    want = Stft(real)(x).numpy()
    got = next(iter(bundle.run([x.numpy()]).values()))
    assert got.dtype == np_complex and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4 if real == torch.float32 else 1e-10, atol=1e-4)
    bundle = _verified(Rfft(), (x,), tmp_path / "rfft")
    got = next(iter(bundle.run([x.numpy()]).values()))
    assert got.dtype == np_complex and got.shape == (2, 33)


@pytest.mark.parametrize(("tag", "real", "np_complex"), COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_input(tag: str, real: torch.dtype, np_complex: type, tmp_path) -> None:
    """A complex input: the bundle takes complex numpy or torch arrays (or their float pairs)."""
    z = torch.randn(3, 8, dtype=np_complex_to_torch(np_complex))
    bundle = _verified(FftOfComplex(), (z,), tmp_path / "c")
    want = torch.fft.fft(z, dim=-1).numpy()
    for given in (z.numpy(), z, torch.view_as_real(z).numpy()):
        outs = list(bundle.run([given]).values())
        assert outs[0].dtype == np_complex and outs[1].dtype == np.dtype(real_np(real))
        np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    with pytest.raises(rti.InputError):
        bundle.run([np.zeros((3, 8), dtype=np.float32)])  # real values for a complex input


def test_complex_input_dynamic(tmp_path) -> None:
    """A complex input with a dynamic axis: meta.json's shape is the symbolic shape + [2], the sweep verifies
    (its inputs drawn as float pairs), and the bundle runs at another size."""
    from torch.export import Dim

    z = torch.randn(3, 8, dtype=torch.complex64)
    report = rti.from_torch(FftOfComplex(), (z,), tmp_path / "d", dynamic_shapes={"z": {0: Dim("b", min=1, max=16)}})
    assert report.ok and report.verdict == "PASS", report.summary()
    bundle = BundleModel(tmp_path / "d" / "bundle")
    assert bundle.meta["inputs"][0]["shape"][1:] == [8, 2] and bundle.meta["inputs"][0]["complex"] == "complex64"
    z5 = torch.randn(5, 8, dtype=torch.complex64)
    got = bundle.run([z5])["output_0"]
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, torch.fft.fft(z5).numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("tag", "real", "np_complex"), COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_buffer_rotary(tag: str, real: torch.dtype, np_complex: type, tmp_path) -> None:
    """Llama's `freqs_cis` (a complex buffer) in weights.safetensors as its float pairs; verifies."""
    x = torch.randn(2, 6, 8, dtype=real)
    model = Rotary(8, 6, real)
    bundle = _verified(model, (x,), tmp_path / "rot")
    got = next(iter(bundle.run([x.numpy()]).values()))
    np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)


def np_complex_to_torch(np_complex: type) -> torch.dtype:
    return torch.complex64 if np_complex is np.complex64 else torch.complex128


def real_np(real: torch.dtype) -> type:
    return np.float32 if real == torch.float32 else np.float64


def test_meta_complex_field_checked() -> None:
    """meta.json's `complex` field must name a complex dtype whose parts are the declared carrier, with the
    pair axis last (a hand-edited meta.json would otherwise view bytes as the wrong dtype)."""
    from rlx_torch_import import complex_edge
    from rlx_torch_import.errors import BundleError

    good = {"name": "z", "shape": [3, 2], "dtype": "float32", "rlx_dtype": "float32", "complex": "complex64"}
    complex_edge.check_spec(good, "inputs[0]")
    for bad, message in (
        (good | {"complex": "complex32"}, "is not complex64 or complex128"),
        (good | {"dtype": "float64", "rlx_dtype": "float64"}, "crosses as float32 pairs, not float64"),
        (good | {"shape": [3]}, "does not end in the pair axis 2"),
    ):
        with pytest.raises(BundleError, match=message):
            complex_edge.check_spec(bad, "inputs[0]")
    with pytest.raises(rti.InputError, match="give complex values"):
        complex_edge.to_pairs("z", np.zeros(3, np.float32), good)
    with pytest.raises(rti.InputError, match="expects complex64"):
        complex_edge.to_pairs("z", np.zeros(3, np.complex128), good)


class Mixed(nn.Module):
    """A complex input, a complex buffer and a complex output in one graph (for the crate)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("phase", torch.polar(torch.ones(8), torch.linspace(0, 3, 8)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.fft.fft(z * self.phase, dim=-1)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_crate_takes_and_returns_float_pairs(tmp_path) -> None:
    """The generated crate (graph style) declares a complex input and output by their float pairs (dims S + [2],
    a comment naming the complex dtype), binds the complex buffer's pairs, and its `cargo test` (parity against
    reference.safetensors) passes."""
    report = rti.from_torch(Mixed(), (torch.randn(2, 8, dtype=torch.complex64),), tmp_path / "m", emit="bundle,crate")
    assert report.ok, report.summary()
    (crate,) = (tmp_path / "m").glob("rlx-*")
    lib = (crate / "src" / "lib.rs").read_text()
    assert lib.count("// complex64 as its float pairs (view_as_real)") == 2 and "&[2, 8, 2]" in lib
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/rlx-torch-import/target")
    done = subprocess.run(
        ["cargo", "test", "--release", "--quiet"],
        cwd=crate,
        env={**os.environ, "CARGO_TARGET_DIR": target},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
