"""Parity samples of the shape and data-movement ops (lower/ops/shape.py): reshapes and views, permute/
transpose, expand, slicing with steps, select/split/chunk/cat/stack, flip/roll/repeat, tril/triu, gather and
index_select (also of a 0-d tensor), diagonal, select_scatter, dropout in eval mode, wide int64 data
movement, unfold (sliding windows, also written through in place), im2col (F.unfold) and
as_strided / as_strided_copy / as_strided_scatter over views, whose storage positions come from the layout
torch traced; and the as_strided argument values that are refused.

Core ATen keeps aten.unfold, as_strided_copy and as_strided_scatter whole; F.unfold reaches im2col only at
the `aten` level (core decomposes it into index), so both levels run both routes. select_scatter and
squeeze.dim are called explicitly: torch's core table decomposes them, so only `aten` reaches them.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, Fn, Sample, check_op_sample, ints, of_inputs, r, sample_ids, wide
from rlx_torch_import import torchir

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


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
SAMPLES: list[Sample] = [
    ("permute_transpose_t", Fn(lambda m, a, b: a.permute(2, 0, 1).transpose(-1, 0) + b.t()), (r(3, 4, 5), r(5, 3))),
    ("reshape_flatten_squeeze", Fn(lambda m, a: a.reshape(2, -1).unsqueeze(1).flatten(1).squeeze()), (r(2, 3, 4),)),
    ("expand", Fn(lambda m, a: a.expand(3, 4, 5) * 2), (r(4, 1),)),
    ("slice_step", Fn(lambda m, a: a[:, 1:-1][:, :4] + a[:, ::2] + a[-1:, 3:]), (r(3, 7),)),
    (
        "select_split_cat",
        Fn(lambda m, a: torch.cat([*a.split([1, 3], dim=1), a[:, 0:1]], dim=-1)[:, :4] + a[0]),
        (r(2, 4),),
    ),
    ("chunk", Fn(lambda m, a: a.chunk(2, -1)[1] * a.chunk(3, 0)[2][:, :3]), (r(3, 6),)),
    ("dropout_eval_identity", nn.Sequential(nn.Dropout(0.5), nn.Linear(3, 3)), (r(2, 3),)),
    (
        "split_unflatten_type_as",
        Fn(lambda m, a, b: a.split(2, dim=1)[1].unflatten(1, (2, 1)).type_as(b)),
        (r(2, 4), r(1).double()),
    ),
    (
        "gather_both_axes",
        Fn(lambda m, a, i, j: torch.gather(a, 1, i) + torch.gather(a, -2, j)[:, :4]),
        (r(3, 5), torch.randint(0, 5, (3, 4)), torch.randint(0, 3, (3, 5))),
    ),
    (
        "bool_data_movement",
        Fn(
            lambda m, a: (
                torch.cat([a > 0, a < 0], 0)[:, ::2],
                torch.where(a > 0, a > 1, a < -1),
                torch.stack([a > 0, a < 0], -1).transpose(0, 2),
            )
        ),
        (r(3, 4),),
    ),
    ("stack_float", Fn(lambda m, a, b: torch.stack([a, b * 2], dim=1)), (r(3, 4), r(3, 4))),
    ("flip", Fn(lambda m, a: (a.flip(0, -1), (a > 0).flip(1))), (r(3, 4, 2),)),
    (
        "index_select_repeat_roll",
        Fn(lambda m, a, i: (a.index_select(1, i), a.repeat(2, 1, 3), torch.roll(a, (1, -2), (0, 2)), torch.roll(a, 3))),
        (r(2, 3, 4), torch.tensor([2, 0])),
    ),
    ("tril_triu", Fn(lambda m, a: (torch.tril(a), torch.triu(a, 1), torch.tril(a, -1))), (r(2, 4, 5),)),
    # as_strided on a contiguous input: overlapping windows, offsets, broadcast (stride 0), ints
    (
        "as_strided_windows",
        of_inputs(
            lambda a: (
                torch.as_strided(a, (3, 4), (2, 1)),
                torch.as_strided(a, (2, 3, 2), (4, 1, 3), 2),
                torch.as_strided(a, (4, 3), (0, 4), 1),
                torch.as_strided(a, (), (), 7),
            )
        ),
        (r(3, 4),),
    ),
    ("as_strided_int64", of_inputs(lambda a: torch.as_strided(a + 1, (2, 2), (1, 3), 4)), (wide(12),)),
    # diagonal: positive/negative offsets, any pair of dims, either order
    (
        "diagonal_offsets_dims",
        of_inputs(
            lambda a: (
                torch.diagonal(a),
                torch.diagonal(a, 1, 0, 2),
                torch.diagonal(a, -2, 2, 0),
                torch.diagonal(a, 2, -1, -2),
                torch.diagonal(a, -1, 1, 2),
            )
        ),
        (r(3, 4, 5),),
    ),
    ("diagonal_matrix_int", of_inputs(lambda a: (torch.diag(a), a.diagonal(-1))), (ints(4, 4),)),
    # select_scatter and squeeze.dim called explicitly: torch's core table decomposes them (only `aten` reaches them)
    (
        "select_scatter",
        of_inputs(
            lambda a, s, t, i, u: (
                torch.select_scatter(a, s, 1, -1),
                torch.select_scatter(a, t, 0, 0),
                torch.select_scatter(i, u, 2, 1),
            )
        ),
        (r(3, 4, 2), r(3, 2), r(4, 2), ints(2, 2, 3), ints(2, 2)),
    ),
    ("squeeze_dim", of_inputs(lambda a: (a.squeeze(1), a.squeeze(-1), a.squeeze(0))), (r(3, 1, 4, 1),)),
    (
        "int64_wide_moves_and_matmul",
        of_inputs(
            lambda x, y: (
                torch.tril(x),
                x.flip(0),
                x.abs() + x.neg() * 3,
                x.sign(),
                torch.sort(x, 1, descending=True),
                x.amax(1),
                x.sum(0),
                x @ y,
                torch.gather(x, 1, torch.tensor([[2, 0], [1, 1]])),
            )
        ),
        (torch.tensor([[2**53 + 1, -(2**55) - 3, 7], [2**40 + 5, -9, 0]]), torch.tensor([[3, -1], [2, 5], [-4, 7]])),
    ),
    # ── unfold (aten.unfold.default at every level) ──
    ("unfold_steps", of_inputs(_unfold_steps), (r(2, 3, 10),)),
    ("unfold_2d_windows", of_inputs(lambda a: a.unfold(2, 3, 2).unfold(3, 3, 2)), (r(1, 2, 7, 8),)),
    (
        "unfold_non_contiguous",
        of_inputs(
            lambda a: (
                a.permute(0, 2, 1, 3).unfold(-1, 3, 1).unfold(2, 2, 2),
                a.transpose(1, 3).unfold(1, 2, 1),
                a[:, :, ::2].unfold(2, 2, 1),
            )
        ),
        (r(2, 3, 5, 6),),
    ),
    ("unfold_float64", of_inputs(lambda a: (a.unfold(1, 3, 2), a.unfold(0, 2, 2))), (r(4, 9).double(),)),
    ("unfold_int64_wide", of_inputs(lambda a: (a.unfold(1, 3, 1), a.t().unfold(1, 2, 3))), (wide(4, 7),)),
    ("unfold_bool", of_inputs(lambda a: ((a > 0).unfold(-1, 2, 1), (a > 0).unfold(0, 2, 2))), (r(4, 5),)),
    ("unfold_scalar", of_inputs(lambda a: (a.sum().unfold(0, 1, 1), a.unfold(0, 1, 1))), (r(3),)),
    ("unfold_inplace_write_disjoint", of_inputs(_write_through_blocks), (r(3, 4),)),
    ("unfold_audio_frames", of_inputs(lambda s: _frames(s, _dft_basis())), (r(128),)),
    # ── F.unfold (im2col at aten; index at core); F.fold of it is in test_pool.py ──
    (
        "im2col_variants",
        of_inputs(
            lambda a: (
                F.unfold(a, (2, 3), dilation=(2, 1), padding=(1, 0), stride=(1, 2)),
                F.unfold(a, 2, stride=2),
                F.unfold(a[0], 3, padding=1),
                F.unfold(a.transpose(2, 3), 3, stride=(2, 1)),
            )
        ),
        (r(2, 3, 7, 8),),
    ),
    ("im2col_float64", of_inputs(lambda a: F.unfold(a, 3, padding=2, stride=2)), (r(1, 2, 6, 5).double(),)),
    ("im2col_bool", of_inputs(lambda a: F.unfold(a > 0, 2, padding=1)), (r(1, 2, 4, 4),)),
    # ── as_strided over views: the traced layout says where each element sits ──
    (
        "as_strided_of_views",
        of_inputs(
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
        of_inputs(
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
        of_inputs(
            lambda a, s: (
                torch.as_strided_scatter(a, s, (2, 2), (1, 3), 2),
                torch.as_strided_scatter(a > 0, s > 0, (2, 2), (3, 1)),
            )
        ),
        (wide(3, 4), wide(2, 2)),
    ),
    # index_select of a 0-d tensor (found by the coverage run: RLX's Gather wants rank >= 1)
    *[
        (
            f"index_select_0d_{str(dt)[6:]}",
            of_inputs(lambda x, i: (torch.index_select(x, 0, i), torch.index_select(x, -1, i[:1]))),
            (torch.tensor(3.5).to(dt), torch.tensor([0])),
        )
        for dt in (torch.float32, torch.float64, torch.int64, torch.bool)
    ],
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path)


def test_as_strided_reading_a_gap_of_a_view_is_refused(tmp_path) -> None:
    """as_strided reads torch's storage; a position between a strided view's elements is no element of it."""
    model = of_inputs(lambda a: torch.as_strided(a[:, ::2], (2, 2), (1, 2)))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(3, 4),), tmp_path / "o", decomposition="core")
    assert "aten.as_strided.default" in info.value.targets
    assert "reads storage position 1, which holds no element of its input" in info.value.explain()


def test_as_strided_reading_before_a_slice_is_refused(tmp_path) -> None:
    model = of_inputs(lambda a: torch.as_strided(a[1:], (2, 2), (1, 2), 0))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(3, 4),), tmp_path / "o", decomposition="aten")
    assert "storage offset 4" in info.value.explain()


def test_as_strided_scatter_into_a_view_that_is_not_dense_is_refused(tmp_path) -> None:
    model = of_inputs(lambda a, s: torch.as_strided_scatter(a[:, ::2], s, (2,), (1,)))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(3, 4), torch.randn(2)), tmp_path / "o", decomposition="aten")
    assert "aten.as_strided_scatter.default" in info.value.targets
    assert "not dense (sizes [3, 2], strides [4, 2])" in info.value.explain()


def test_as_strided_layout_is_recorded_and_read_back(tmp_path) -> None:
    model = of_inputs(lambda a: torch.as_strided(a * 2, (2, 2), (1, 2), 1))
    rti.from_torch(model, (torch.randn(3, 4),), tmp_path / "o", decomposition="core")
    ir = torchir.load(tmp_path / "o")
    node = next(n for n in ir.nodes if n.target == "aten.as_strided.default")
    assert node.layouts == {"mul": {"strides": [4, 1], "storage_offset": 0}}
    assert (tmp_path / "o" / "torch-ir.json").read_text().count('"layouts"') == 1, "recorded only where needed"


def test_bad_layout_record_is_rejected() -> None:
    node = {"name": "n", "target": "aten.as_strided.default", "args": [], "kwargs": {}, "outputs": []}
    doc = {"format": torchir.FORMAT, "version": torchir.VERSION, "name": "m", "decomposition": "core"}
    doc |= {"inputs": [], "weights": [], "outputs": [], "nodes": [node | {"layouts": {"x": {"strides": "4"}}}]}
    with pytest.raises(rti.TorchIRError, match="strides"):
        torchir.parse(doc)
