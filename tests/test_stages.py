"""Sizes that depend on tensor values, run in stages (docs/design.md, decisions ax and bb): each module converts
and verifies, then the bundle runs at several values of its data-dependent size (0 included where torch
allows it) and agrees with eager PyTorch exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.errors import InputError


class Nonzero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x > 0.5).float() * 2


class MaskIndex(nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return x[m] * 2 + 1


class MaskedSelect(nn.Module):
    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return torch.masked_select(x, m) - 1


class Unique(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.unique(x, sorted=True) * 3


class UniqueCounts(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        return values * 3, inverse, counts


class Bincount(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bincount(x, minlength=3) + 1


class SliceByItem(nn.Module):
    """Reformer-like: a length computed from the inputs slices the sequence."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[1])
        return x[:, :k] * 2


class Durations(nn.Module):
    """VITS-like: each frame repeated by a predicted duration (output length = sum of durations)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.repeat_interleave(x, d, dim=0))


class MaskedSpline(nn.Module):
    """VITS-like chain of stages: a masked transform `out[inside] = f(x[inside])` (its size in stage 1),
    then a mask of the result (a size computed from values sized by the first: stage 2)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inside = x.abs() < 0.5
        out = x.clone()
        out[inside] = torch.sin(x[inside]) * 3
        return out[out > 0.3] * 2


class AxialSlice(nn.Module):
    """Reformer-like axial position embeddings: ceil((max id + 1) / 8) columns of 8 positions are cut
    from the weights (torch prints the count `-((-u0 - 1)//8)`: not a line of u0, so a derived size)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 4, 8, 3, generator=torch.Generator().manual_seed(0)))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        m = ids.max().item()
        torch._check(m >= 0)
        torch._check(m < 32)
        enc = self.w[:, : -(-(m + 1) // 8)].reshape(1, -1, 3)
        return enc[0].index_select(0, ids[0]) * 2


def _x(seed: int, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


CASES: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]] = {
    "nonzero": (
        Nonzero(),
        (_x(0, 4, 5),),
        [(_x(1, 4, 5),), (torch.zeros(4, 5),), (torch.ones(4, 5),), (_x(2, 4, 5) * 0.6,)],
    ),
    "mask_index": (
        MaskIndex(),
        (_x(0, 3, 4, 2), _x(1, 3, 4) > 0.5),
        [
            (_x(2, 3, 4, 2), _x(3, 3, 4) > 0.2),
            (_x(2, 3, 4, 2), torch.zeros(3, 4, dtype=torch.bool)),
            (_x(2, 3, 4, 2), torch.eye(3, 4, dtype=torch.bool)),
        ],
    ),
    "masked_select": (
        MaskedSelect(),
        (_x(0, 3, 5), torch.tensor([True, False, True, True, False])),
        [
            (_x(2, 3, 5), torch.tensor([False, False, False, False, True])),
            (_x(2, 3, 5), torch.zeros(5, dtype=torch.bool)),
            (_x(2, 3, 5), torch.ones(5, dtype=torch.bool)),
        ],
    ),
    "unique": (
        Unique(),
        (torch.tensor([3, 1, 3, 7, 1, 0, 9, 9]),),
        [(torch.tensor([5, 5, 5, 5, 5, 5, 5, 5]),), (torch.arange(8) - 4,), (torch.tensor([2, 1, 2, 1, 2, 1, 2, 1]),)],
    ),
    "unique_counts": (
        UniqueCounts(),
        (torch.tensor([[3, 1, 3, 7], [1, 0, 9, 9]]),),
        [
            (torch.full((2, 4), 5),),
            (torch.arange(8).reshape(2, 4) - 4,),
            (torch.tensor([[2, 1, 2, 1], [2, 1, 2, 1]]),),
        ],
    ),
    "bincount": (
        Bincount(),
        (torch.tensor([0, 4, 1, 1, 2, 4]),),
        [(torch.tensor([0, 0, 0, 1, 0, 0]),), (torch.tensor([9, 0, 3, 3, 2, 8]),), (torch.tensor([6, 6, 6, 6, 6, 6]),)],
    ),
    "slice_by_item": (
        SliceByItem(),
        (_x(0, 2, 8), torch.tensor(5)),
        [
            (_x(1, 2, 8), torch.tensor(2)),
            (_x(1, 2, 8), torch.tensor(8)),
            (_x(1, 2, 8), torch.tensor(0)),
            (_x(1, 2, 8), torch.tensor(1)),
        ],
    ),
    "durations": (
        Durations(),
        (_x(0, 4, 4), torch.tensor([1, 0, 2, 3])),
        [
            (_x(1, 4, 4), torch.tensor([2, 2, 2, 2])),
            (_x(1, 4, 4), torch.tensor([0, 0, 1, 0])),
            (_x(1, 4, 4), torch.tensor([5, 0, 0, 0])),
        ],
    ),
    "chain": (
        MaskedSpline(),
        (_x(0, 4, 5) * 2 - 1,),
        [(torch.zeros(4, 5),), (torch.ones(4, 5),), (_x(1, 4, 5) * 2 - 1,), (_x(2, 4, 5) - 2,)],
    ),
    "derived": (
        AxialSlice(),
        (torch.tensor([[3, 9, 1, 12]]),),
        [(torch.tensor([[0, 1, 2, 3]]),), (torch.tensor([[31, 0, 5, 5]]),), (torch.tensor([[8, 16, 17, 2]]),)],
    ),
}


def _sizes(model: Any, inputs: tuple[torch.Tensor, ...]) -> dict[str, int]:
    return dict(model.binding(dict(zip(model.input_names, [t.numpy() for t in inputs], strict=True))))


@pytest.mark.parametrize("name", sorted(CASES))
def test_staged_model_matches_torch_at_several_sizes(name: str, tmp_path: Path) -> None:
    module, example, others = CASES[name]
    report = rti.from_torch(module, example, tmp_path / name, verify_inputs=list(others))
    assert report.ok, report.summary()
    assert len(report.input_sets) == len(others) and all(r.ok for r in report.input_sets)
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "only one value" not in note, note
    if name != "durations":  # a Linear over the size: tests below
        assert not any("cannot run" in n for n in report.notes), report.notes  # 0 runs where torch allows it
    model = rti.BundleModel(tmp_path / name / "bundle")
    assert len(model.meta["stages"]) == (2 if name == "chain" else 1), "the bundle records its size stages"
    sizes = {tuple(_sizes(model, inputs).values()) for inputs in [example, *others]}
    assert len(sizes) == len(others) + 1, f"sizes covered: {sizes}"


def test_size_zero_before_a_matmul_is_a_clear_error(tmp_path: Path) -> None:
    """RLX's CPU matmul divides by its row count when it compiles: a size a stage computed that is 0 and
    reaches a Linear cannot run, and the error names the size and its node (docs/usage.md)."""
    module, example, _ = CASES["durations"]
    report = rti.from_torch(module, example, tmp_path / "d", verify_inputs=[])
    assert report.ok, report.summary()
    want = "repeat_interleave.size (u0) = 0 cannot run: RLX does not compile the main graph there"
    assert any(want in n and "matmul.rs" in n for n in report.notes), report.notes
    model = rti.BundleModel(tmp_path / "d" / "bundle")
    with pytest.raises(rti.errors.RlxError, match=r"u0 \(the size of node repeat_interleave\) is 0 on these inputs"):
        model.run([_x(1, 4, 4).numpy(), np.zeros(4, dtype=np.int64)])


def test_size_outside_its_range_names_symbol_node_and_value(tmp_path: Path) -> None:
    module, example, _ = CASES["slice_by_item"]
    assert rti.from_torch(module, example, tmp_path / "s").ok
    model = rti.BundleModel(tmp_path / "s" / "bundle")
    with pytest.raises(
        InputError, match=r"size u0 \(.*_local_scalar_dense.*\) is 9 on these inputs, outside the range 0\.\.8"
    ):
        model.run([_x(1, 2, 8).numpy(), np.array(9)])


def test_crate_of_a_staged_model_in_a_style_without_stages_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """Graph-style crates run the stages (tests/test_crate_stages.py); the tensor and flow styles do not."""
    module, example, _ = CASES["nonzero"]
    with pytest.raises(rti.errors.RtiError, match=r"runs them in size stages .* only the graph style does"):
        rti.from_torch(module, example, tmp_path / "c", emit=("bundle", "crate"), emit_style="tensor")
    assert not (tmp_path / "c").exists()


def test_build_lowers_the_stages_again_from_the_folder(tmp_path: Path) -> None:
    """`build DIR` re-lowers torch-ir (its symbols record the stages) and re-verifies every input set."""
    module, example, others = CASES["unique"]
    assert rti.from_torch(module, example, tmp_path / "u", verify_inputs=list(others)).ok
    (tmp_path / "u" / "bundle" / "stage1.hir.json").unlink()
    report = rti.build(tmp_path / "u")
    assert report.ok and len(report.input_sets) == len(others), report.summary()
    model = rti.BundleModel(tmp_path / "u" / "bundle")
    (out,) = model.run([np.array([4, 4, 1, 0, 0, 1, 9, 4])]).values()
    np.testing.assert_array_equal(out, [0, 3, 12, 27])


class DurationPath(nn.Module):
    """VITS's length regulator (transformers' VitsModel.forward, `generate_path`): the output length is
    the largest total duration, `arange` over it builds the masks, a matmul expands the frames."""

    def forward(self, log_duration: torch.Tensor, means: torch.Tensor) -> torch.Tensor:
        duration = torch.ceil(torch.exp(log_duration))  # [1, 1, T]
        lengths = torch.clamp_min(torch.sum(duration, [1, 2]), 1).long()
        indices = torch.arange(lengths.max(), dtype=lengths.dtype)
        out_mask = (indices.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1).to(means.dtype)
        attn_mask = torch.ones(1, 1, duration.shape[-1]).unsqueeze(2) * out_mask.unsqueeze(-1)
        _, _, out_len, in_len = attn_mask.shape
        cum = torch.cumsum(duration, -1).view(in_len, 1)
        valid = (
            (torch.arange(out_len, dtype=duration.dtype).unsqueeze(0) < cum).to(means.dtype).view(1, in_len, out_len)
        )
        padded = valid - nn.functional.pad(valid, [0, 0, 1, 0, 0, 0])[:, :-1]
        attn = padded.unsqueeze(1).transpose(2, 3) * attn_mask
        return torch.matmul(attn.squeeze(1), means.transpose(1, 2)).transpose(1, 2)


def test_vits_like_length_regulator(tmp_path: Path) -> None:
    module = DurationPath()
    means = _x(0, 1, 3, 5)
    others = [(torch.full((1, 1, 5), 0.2), means), (torch.full((1, 1, 5), -3.0), means), (_x(2, 1, 1, 5) * 2, means)]
    report = rti.from_torch(module, (_x(1, 1, 1, 5), means), tmp_path / "v", verify_inputs=others)
    assert report.ok and all(r.ok for r in report.input_sets), report.summary()
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "only one value" not in note, note


class SliceUnchecked(nn.Module):
    """Reformer-like without torch._check: torch gives the slice's clamped length its own size."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return x[:, 1 : n.item()] + 1


def test_slice_by_an_unchecked_item_clamps_as_torch(tmp_path: Path) -> None:
    x = _x(0, 2, 8)
    others = [(x, torch.tensor(v)) for v in (1, 8, 20, -2, -30)]
    report = rti.from_torch(SliceUnchecked(), (x, torch.tensor(5)), tmp_path / "s", verify_inputs=others)
    assert report.ok and all(r.ok for r in report.input_sets), report.summary()
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "[0, 4, 5, 7]" in note, note


class RealImages(nn.Module):
    """Idefics3-like: padding images (all zeros) are dropped with a boolean mask before the vision
    encoder, whose features then fill the image-token slots of the text embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 4, 4, stride=4)
        self.proj = nn.Linear(16, 6)

    def forward(self, pixels: torch.Tensor, embeds: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        real = (pixels == 0.0).sum(dim=(-1, -2, -3)) != pixels[0].numel()
        feats = self.proj(self.patch(pixels[real]).flatten(1))  # [images, 6]
        return embeds.masked_scatter(slots.unsqueeze(-1), feats.sum(0, keepdim=True).expand(embeds.shape[0], 6))


def test_idefics3_like_padding_images_dropped(tmp_path: Path) -> None:
    pixels = _x(0, 3, 3, 8, 8)
    embeds, slots = _x(1, 5, 6), torch.tensor([False, True, False, True, False])
    padded = pixels.clone()
    padded[1:] = 0
    others = [(padded, embeds, slots), (torch.cat([pixels[:2], torch.zeros(1, 3, 8, 8)]), embeds, slots)]
    report = rti.from_torch(RealImages(), (pixels, embeds, slots), tmp_path / "i", verify_inputs=others)
    assert report.ok and all(r.ok for r in report.input_sets), report.summary()
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "[1, 2, 3]" in note, note


def test_sizes_are_verified_at_several_values_without_verify_inputs(tmp_path: Path) -> None:
    """With no verify_inputs a staged model is verified on the "auto" sets too (those eager PyTorch
    accepts), so its size takes several values, 0 (an all-negative input) among them."""

    class Positive(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0] * 2

    report = rti.from_torch(
        Positive(), (torch.randn(4, 5, generator=torch.Generator().manual_seed(0)),), tmp_path / "p"
    )
    assert report.ok, report.summary()
    assert report.input_sets and all(row.label.startswith("auto:") for row in report.input_sets), report.input_sets
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    values = [int(v) for v in note.split("[", 1)[1].split("]", 1)[0].split(",")]
    assert len(values) >= 3 and 0 in values, note


def test_a_size_that_is_not_a_line_of_a_staged_size_is_derived_by_the_stage(tmp_path: Path) -> None:
    """Reformer-like: the count of columns is its own symbol, computed by the stage from the value read
    (decision bb); the note lists both sizes' values, and the main graph is symbolic in the derived one."""
    module, example, others = CASES["derived"]
    report = rti.from_torch(module, example, tmp_path / "d", verify_inputs=list(others))
    assert report.ok, report.summary()
    (note,) = [n for n in report.notes if n.startswith("sizes computed from tensor values")]
    assert "-((-u0 - 1) // 8) (d0, size of node _local_scalar_dense): [1, 2, 3, 4]" in note, note
    model = rti.BundleModel(tmp_path / "d" / "bundle")
    (derived,) = [s for s in model.symbols if s.derived]
    assert derived.stage == 1 and (derived.min, derived.max) == (1, 4), derived
    for top, columns in ((0, 1), (8, 2), (23, 3), (31, 4)):
        ids = np.array([[top, 0, 1, 2]])
        assert model.binding({"ids": ids})[derived.label] == columns
        (out,) = model.run([ids]).values()
        with torch.no_grad():
            np.testing.assert_array_equal(out, module(torch.from_numpy(ids)).numpy())


class Hits(nn.Module):
    """Outputs RLX cannot read when they are empty (int64 and float64): read padded (empty-output)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.nonzero(x > 0.5), x[x > 0.7].double() * 3, torch.arange((x > 0.9).sum().item()) * 2


def test_int64_and_float64_outputs_of_size_0_are_read(tmp_path: Path) -> None:
    """RLX panics reading an empty int64/float64 graph output: such an output that may be empty is read
    flattened with a padding element (docs/rlx-defects.md, zero-size-output) and runs at 0 like any size."""
    x = _x(0, 4, 5)
    others = [(torch.zeros(4, 5),), (torch.ones(4, 5),), (torch.full((4, 5), 0.6),)]
    report = rti.from_torch(Hits(), (x,), tmp_path / "h", verify_inputs=others)
    assert report.ok and all(r.ok for r in report.input_sets), report.summary()
    assert not any("cannot run" in n for n in report.notes), report.notes
    model = rti.BundleModel(tmp_path / "h" / "bundle")
    assert [o.get("padded_axis") for o in model.meta["outputs"]] == [0, 0, 0]
    for value in (torch.zeros(4, 5), torch.full((4, 5), 0.6), x):
        got = model.run([value.numpy()])
        with torch.no_grad():
            want = Hits()(value)
        for out, expected in zip(got.values(), want, strict=True):
            assert out.dtype == expected.numpy().dtype and out.shape == tuple(expected.shape)
            np.testing.assert_array_equal(out, expected.numpy())
