"""Parity samples for views over storage: unfold (sliding windows), im2col/col2im (F.unfold/F.fold),
and as_strided / as_strided_copy / as_strided_scatter, including as_strided over views (transposed,
sliced, expanded inputs), whose storage positions come from the layout torch traced.

Core ATen keeps `aten.unfold`, `aten.as_strided_copy` and `aten.as_strided_scatter` whole;
`F.unfold`/`F.fold` reach `im2col`/`col2im` only at the `aten` level (core decomposes them into
index / index_put), so both levels run both routes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sample_utils import of_inputs as Fn


def r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def wide(*shape: int) -> torch.Tensor:
    """int64 values far beyond float32-exact integers (|x| < 2**40): data movement must stay exact."""
    return torch.randint(-(2**40), 2**40, shape)


def _unfold_steps(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Overlapping (step < size), disjoint (step == size, with and without a remainder), gaps
    (step > size), one window spanning the whole axis, windows of one, negative dims."""
    return (
        a.unfold(2, 3, 2),
        a.unfold(-1, 4, 1),
        a.unfold(2, 3, 3),
        a.unfold(1, 3, 3),
        a.unfold(2, 2, 3),
        a.unfold(-2, 1, 2),
        a.unfold(2, 10, 1),
        a.unfold(2, 10, 4),
        a.unfold(0, 1, 1),
    )


def _frames(signal: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Audio framing: centre-pad, frames of 16 samples every 4, Hann window, magnitude of a real DFT."""
    n_fft, hop = 16, 4
    window = torch.hann_window(n_fft)
    frames = F.pad(signal[None], (n_fft // 2, n_fft // 2), mode="reflect")[0].unfold(0, n_fft, hop) * window
    spec = frames @ basis  # (frames, 2 * bins): cos | sin
    re, im = spec.chunk(2, dim=-1)
    return (re * re + im * im).sqrt()


def _dft_basis(n_fft: int = 16) -> torch.Tensor:
    k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)
    t = torch.arange(n_fft, dtype=torch.float64)[:, None]
    angle = 2 * math.pi * t * k / n_fft
    return torch.cat([angle.cos(), -angle.sin()], dim=1).float()


def _write_through_blocks(a: torch.Tensor) -> torch.Tensor:
    """An in-place write through disjoint unfold windows covering the axis (torch records the write
    back as unfold_backward, i.e. index_put of the windows)."""
    y = a * 1
    y.unfold(1, 2, 2).mul_(3)
    return y


torch.manual_seed(0)
SAMPLES: list[tuple[str, nn.Module, tuple[torch.Tensor, ...]]] = [
    # ── unfold (aten.unfold.default at every level) ──
    ("unfold_steps", Fn(_unfold_steps), (r(2, 3, 10),)),
    ("unfold_2d_windows", Fn(lambda a: a.unfold(2, 3, 2).unfold(3, 3, 2)), (r(1, 2, 7, 8),)),
    (
        "unfold_non_contiguous",
        Fn(
            lambda a: (
                a.permute(0, 2, 1, 3).unfold(-1, 3, 1).unfold(2, 2, 2),
                a.transpose(1, 3).unfold(1, 2, 1),
                a[:, :, ::2].unfold(2, 2, 1),
            )
        ),
        (r(2, 3, 5, 6),),
    ),
    ("unfold_float64", Fn(lambda a: (a.unfold(1, 3, 2), a.unfold(0, 2, 2))), (r(4, 9).double(),)),
    ("unfold_int64_wide", Fn(lambda a: (a.unfold(1, 3, 1), a.t().unfold(1, 2, 3))), (wide(4, 7),)),
    ("unfold_bool", Fn(lambda a: ((a > 0).unfold(-1, 2, 1), (a > 0).unfold(0, 2, 2))), (r(4, 5),)),
    ("unfold_scalar", Fn(lambda a: (a.sum().unfold(0, 1, 1), a.unfold(0, 1, 1))), (r(3),)),
    ("unfold_inplace_write_disjoint", Fn(_write_through_blocks), (r(3, 4),)),
    ("unfold_audio_frames", Fn(lambda s: _frames(s, _dft_basis())), (r(128),)),
    # ── F.unfold / F.fold (im2col / col2im at aten; index / index_put at core) ──
    (
        "im2col_variants",
        Fn(
            lambda a: (
                F.unfold(a, (2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)),
                F.unfold(a, 2, stride=2),
                F.unfold(a[0], 3, padding=1),
                F.unfold(a.transpose(2, 3), 3, stride=(2, 1)),
            )
        ),
        (r(2, 3, 7, 8),),
    ),
    ("im2col_float64", Fn(lambda a: F.unfold(a, 3, padding=2, stride=2)), (r(1, 2, 6, 5).double(),)),
    ("im2col_bool", Fn(lambda a: F.unfold(a > 0, 2, padding=1)), (r(1, 2, 4, 4),)),
    (
        "fold_of_unfold",
        Fn(lambda a: F.fold(F.unfold(a, 3, padding=1, stride=2), (7, 8), 3, padding=1, stride=2)),
        (r(2, 3, 7, 8),),
    ),
    # ── as_strided over views: the traced layout says where each element sits ──
    (
        "as_strided_of_views",
        Fn(
            lambda a: (
                torch.as_strided(a.t(), (2, 2), (1, 2)),
                torch.as_strided(a[1:], (2, 2), (1, 4)),
                torch.as_strided(a[1:].t(), (3, 2), (1, 4), 5),
                torch.as_strided(a[:, :1].expand(3, 4), (3, 2), (4, 0)),
                torch.as_strided(a.t().clone(memory_format=torch.contiguous_format), (2, 3), (1, 3), 1),
                torch.as_strided(a.t() * 2, (2, 3), (1, 3), 1),
            )
        ),
        (r(3, 4),),
    ),
    (
        "as_strided_copy_and_scatter",
        Fn(
            lambda a, s: (
                torch.as_strided_copy(a, (2, 2), (1, 4), 1),
                torch.as_strided_scatter(a, s, (2, 2), (1, 4), 1),
                torch.as_strided_scatter(a.t(), s, (2, 2), (1, 4), 1),
                torch.as_strided_scatter(a[1:], s[:1], (1, 2), (0, 1)),
            )
        ),
        (r(3, 4), r(2, 2)),
    ),
    (
        "as_strided_scatter_int64_bool",
        Fn(
            lambda a, s: (
                torch.as_strided_scatter(a, s, (2, 2), (1, 3), 2),
                torch.as_strided_scatter(a > 0, s > 0, (2, 2), (3, 1)),
            )
        ),
        (wide(3, 4), wide(2, 2)),
    ),
]
