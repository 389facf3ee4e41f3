"""Parity samples of the FFT ops (lower/ops/fft.py): `_fft_c2c` / `_fft_r2c` / `_fft_c2r` (and the prims the
`aten` level's auto-decomposition emits) in complex64 and complex128, odd lengths, every norm, `n=`
padding and truncation, dims other than the last, one-sided rfft, hfft/ihfft, stft with a window and
center=True (reflect padding), istft, and an FNet-like block.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, Fn, Sample, check_op_sample, of_inputs, r, sample_ids

fft = torch.fft
DTYPES = (("f32", torch.float32), ("f64", torch.float64))


def _c2c(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    z = torch.complex(a, b)
    return tuple(
        torch.view_as_real(y)
        for y in (
            fft.fft(z, n=10, norm="ortho"),  # padded
            fft.ifft(z, n=5, norm="forward"),  # truncated
            fft.fft(z, dim=0),  # odd length, not the last dim
            fft.fftn(z, dim=(0, 2)),
            fft.ifftn(z),
            fft.ifft2(z, norm="ortho"),
        )
    )


def _r2c(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        torch.view_as_real(fft.rfft(x)),  # onesided, odd length 7
        torch.view_as_real(fft.rfft(x, n=12, dim=1, norm="forward")),
        torch.view_as_real(fft.fft(x, dim=-1)),  # two-sided
        torch.view_as_real(fft.rfftn(x, dim=(1, 2), norm="ortho")),
        fft.ihfft(x).real,  # a conjugate view: view_as_real refuses it
        fft.ihfft(x).imag,
    )


def _c2r(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    spec = fft.rfft(x)  # 4 bins of a length-7 signal
    return (
        fft.irfft(spec, n=7),  # odd output
        fft.irfft(spec, n=6, norm="ortho"),  # even output, the Nyquist bin's imaginary part ignored
        fft.irfftn(fft.rfftn(x, dim=(0, 2)), s=(2, 7), dim=(0, 2), norm="forward"),
        fft.hfft(spec, n=7),
        torch.ops.aten._fft_c2r(fft.fft(x), [2], 0, 7),  # a full spectrum: only its first 4 bins are read
    )


def _stft(x: torch.Tensor, window: torch.Tensor) -> tuple[torch.Tensor, ...]:
    spec = torch.stft(x, 16, hop_length=4, window=window, center=True, pad_mode="reflect", return_complex=True)
    back = torch.istft(spec, 16, hop_length=4, window=window, length=x.shape[-1])
    return torch.view_as_real(spec), spec.abs(), back


def _fnet(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """FNet's mixing: a 2-D FFT over (sequence, hidden), its real part, then a residual and a linear."""
    mixed = fft.fftn(x.to(torch.complex64), dim=(-2, -1)).real
    return nn.functional.linear(mixed + x, m.w)


SAMPLES: list[Sample] = [
    *(
        sample
        for tag, dt in DTYPES
        for sample in (
            (f"fft_c2c_{tag}", of_inputs(_c2c), (r(3, 6, 8).to(dt), r(3, 6, 8).to(dt))),
            (f"fft_real_{tag}", of_inputs(lambda x: (*_r2c(x), *_c2r(x))), (r(2, 5, 7).to(dt),)),
        )
    ),
    ("stft_istft", of_inputs(_stft), (r(2, 64), torch.hann_window(16))),  # complex128: fft_real_f64's r2c
    ("fnet_block", Fn(_fnet, w=r(16, 16) * 0.1), (r(2, 8, 16),)),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


def test_fnet_model(tmp_path) -> None:
    """transformers' FNetModel (a small config, random weights) converts and verifies end to end."""
    transformers = pytest.importorskip("transformers")
    config = transformers.FNetConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=64,
        max_position_embeddings=64,
        tpu_short_seq_length=16,
    )
    model = transformers.FNetModel(config).eval()
    report = rti.from_torch(model, (torch.randint(0, 100, (2, 16)),), tmp_path / "fnet")
    assert report.ok, report.summary()
    assert "aten._fft_c2c.default" in report.aten_histogram


def test_crate_imports_fft_types() -> None:
    """A generated crate names `Op::Fft`'s types from rlx-ir's root, where rlx-ir exports them (a crate with
    an FFT, `use rlx_ir::op::FftNorm`, did not compile)."""
    from rlx_torch_import.crate.graph import use_lines

    lines = use_lines({"Op", "FftAlgo", "FftContraction", "FftNorm", "FftTwiddles"})
    assert lines == ["use rlx_ir::op::{Op};", "use rlx_ir::{FftAlgo, FftContraction, FftNorm, FftTwiddles};"]
