"""Parity samples of the indexing ops (lower/ops/indexing.py): advanced indexing (negative, broadcast and
non-adjacent index tensors, int32 indices), index_put with integer and boolean-mask indices (overwrite and
accumulate, wide integers, in-place forms, values per True position or broadcast), gather/scatter/
scatter_add and scatter_reduce in every reduction with and without self, masked_scatter (the mask
broadcasts; the source is consumed in row-major order of True positions), sort/topk/argmax/argmin (exact
and stable on integers), bucketize/searchsorted (ties, NaN, ±inf, sorter, out_int32), nonzero_static,
x[mask] (its size computed by a size stage); and what is refused (a boolean mask next to another index).

In-place calls (`x[mask] = v`) stay in-place ops at the `aten` level, where the automatic decomposition
fallback functionalizes them into the functional ops lowered here; `core` functionalizes them at export.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, M34, NAN, A, Fn, Sample, check_op_sample, of_inputs, r, sample_ids, wide
from _ties import INDEXING_TIES, TIE_BIT_EXACT

_GEN = torch.Generator().manual_seed(11)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_GEN)


def _mask_set(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[m] = v
    return c


def _mask_set_inner(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[:, m] = v
    return c


def _mask_fill_forms(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """x[mask] = scalar (masked_fill_ at aten), = 0-d tensor (index_put_), masked_fill_ with a tensor value."""
    c, d, e = a.clone(), a.clone(), a.clone()
    c[m] = 2.5
    d[m] = torch.tensor(-1.0)
    e.masked_fill_(m, v)
    return c, d, e


def _mask_accumulate(a: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c.index_put_((m,), v, accumulate=True)
    return c


def _int_index_set(a: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[i] = v
    return c


torch.manual_seed(0)
SAMPLES: list[Sample] = [
    ("index_one_axis_negative", Fn(lambda m, a, i: a[:, i]), (r(3, 5, 2), torch.tensor([4, -1, 0]))),
    (
        "index_adjacent_broadcast",
        Fn(lambda m, a, i, j: a[i, j]),
        (r(3, 5, 2), torch.tensor([[0], [2]]), torch.tensor([1, -2, 3])),
    ),
    ("index_non_adjacent", Fn(lambda m, a, i, j: a[i, :, j]), (r(3, 5, 2), torch.tensor([0, 2]), torch.tensor([1, 0]))),
    (
        "topk_largest_smallest",
        Fn(lambda m, a: (torch.topk(a, 3, dim=1), torch.topk(a, 2, dim=0, largest=False))),
        (r(4, 6),),
    ),
    (
        "index_put_overwrite_and_accumulate",
        Fn(
            lambda m, a, i, j, v: (
                a.index_put((i,), v[:, :1].expand(3, 3)),
                a.index_put((i, j), v[0], accumulate=True),
            )
        ),
        (r(5, 3), torch.tensor([4, 0, -2]), torch.tensor([1, 2, 1]), r(3, 3)),
    ),
    ("sort_argsort", Fn(lambda m, a: (torch.sort(a, descending=True), torch.sort(a, dim=0, stable=True))), (r(4, 6),)),
    ("argmax_argmin", Fn(lambda m, a: (a.argmax(-1), a.argmin(0, keepdim=True), a.argmax())), (r(4, 6),)),
    (
        "scatter_family",
        Fn(
            lambda m, a, i, s: (
                a.scatter(1, i, s),
                a.scatter(1, i, 2.5),
                a.scatter_add(1, i, s),
                a.scatter_reduce(1, i, s, "amax"),
                a.scatter_reduce(0, i[:, :2] % 2, s[:, :2], "sum"),
            )
        ),
        (r(2, 4), torch.tensor([[0, 2, 1], [3, 0, 0]]), r(2, 3)),
    ),
    (
        "int_sort_exact_stable",
        Fn(lambda m, a: (torch.sort(a), torch.sort(a, descending=True, stable=True), torch.sort(a * (1 << 40), dim=0))),
        (torch.tensor([[3, 1, 2, 1, 0, 3], [2, 0, 5, 1, 2, 3]]),),
    ),
    (
        "int_index_put_and_scatter",
        Fn(
            lambda m, p: (
                torch.empty_like(p).index_put((p,), torch.arange(6) * (1 << 40)),
                torch.zeros(6, dtype=torch.long).scatter(0, p, torch.arange(6) - 3),
            )
        ),
        (torch.tensor([4, 0, 5, 1, 3, 2]),),
    ),
    # index_put after full slices (what core decomposes col2im into)
    (
        "index_put_middle_axes_accumulate",
        of_inputs(lambda x, v, i, j: A.index_put.default(x, [None, i, j], v, True)),
        (_r(2, 5, 6, 3), _r(2, 4, 3), torch.tensor([0, 4, 0, 2]), torch.tensor([1, 5, 1, 0])),
    ),
    (
        "index_put_non_adjacent",
        of_inputs(lambda x, v, i, j: A.index_put.default(x, [i, None, j], v)),
        (_r(4, 3, 5), _r(3, 3), torch.tensor([3, 0, 1]), torch.tensor([4, 2, 0])),
    ),
    # integer scatter-add (torch's core decomposition of scale_grad_by_freq counts with it): wide values, int32
    (
        "index_put_int_accumulate",
        of_inputs(lambda a, i, v: a.index_put((i,), v, accumulate=True)),
        (
            torch.arange(12).reshape(6, 2) * (1 << 40) - 7,
            torch.tensor([0, 2, 2, 5, 0, -1]),
            torch.randint(-(1 << 45), 1 << 45, (6, 2), generator=_GEN),
        ),
    ),
    (
        "index_put_int32_accumulate_2d_index",
        of_inputs(lambda a, i, j, v: a.index_put((i, j), v, accumulate=True)),
        (
            torch.zeros(4, 3, dtype=torch.int32),
            torch.tensor([1, 1, 3]),
            torch.tensor([2, 2, 0]),
            torch.tensor([5, -9, 4], dtype=torch.int32),
        ),
    ),
    # masked_scatter: the mask broadcasts; source is consumed in row-major order of True positions
    (
        "masked_scatter_broadcast",
        of_inputs(lambda a, m, s: a.masked_scatter(m, s)),
        (r(3, 4), torch.tensor([True, False, True, True]), r(13)),
    ),
    (
        "masked_scatter_expand_self",
        of_inputs(lambda a, m, s: a.masked_scatter(m, s)),
        (r(2, 4), torch.rand(3, 1, 4) > 0.5, r(3, 8)),
    ),
    (
        "masked_scatter_int_bool",
        of_inputs(lambda a, m, s, t: (a.masked_scatter(m, s), (a > 0).masked_scatter(m, t))),
        (wide(3, 5), torch.rand(3, 5) > 0.4, wide(20), torch.rand(15) > 0.5),
    ),
    # scatter_reduce: every reduce, with and without self, positions that receive nothing keep self.
    *[
        (
            f"scatter_reduce_{reduce}_{'self' if include_self else 'noself'}",
            of_inputs(lambda x, i, s, r=reduce, inc=include_self: x.scatter_reduce(1, i, s, r, include_self=inc)),
            (torch.randn(3, 6), torch.tensor([[0, 2, 0, 5], [1, 1, 1, 1], [4, 0, 4, 0]]), torch.randn(3, 4)),
        )
        for reduce in ("sum", "prod", "mean", "amax", "amin")
        for include_self in (False, True)
    ],
    (
        "scatter_reduce_mean_int64_float64",
        of_inputs(
            lambda x, i, s, d: (
                x.scatter_reduce(0, i, s, "mean", include_self=False),
                x.scatter_reduce(0, i, s, "sum"),
                d.scatter_reduce(0, i, d[:4] * 3, "mean"),
            )
        ),
        (
            torch.tensor([10, -7, 3, 8, 1]),
            torch.tensor([0, 0, 3, 0]),
            torch.tensor([5, -6, 2**40, 4]),
            torch.randn(5).double(),
        ),
    ),
    # int32 index tensors (torch accepts int32 and int64 indices for these ops).
    (
        "index_ops_int32_indices",
        of_inputs(
            lambda w, x, i: (
                F.embedding(i, w),
                x.index_select(1, i),
                x[:, i],
                torch.gather(x, 1, i.reshape(1, 3).expand(3, 3)),
                x.scatter(1, i.reshape(1, 3), 2.5),
                x.scatter_add(1, i.reshape(1, 3), torch.ones(1, 3)),
                F.embedding_bag(i, w, torch.tensor([0, 2], dtype=torch.int32)),
            )
        ),
        (torch.randn(10, 4), torch.randn(3, 5), torch.tensor([1, 4, 2], dtype=torch.int32)),
    ),
    (
        "float64_sort_topk_gather_scatter",
        of_inputs(
            lambda x, i: (
                *torch.sort(x, 1),
                *torch.topk(x, 3, dim=1),
                torch.gather(x, 1, i),
                x.scatter(1, i, x[:, :2] * 2),
                x.scatter_add(1, i, x[:, :2]),
                torch.tril(x),
                torch.argmax(x, 0),
            )
        ),
        (torch.randn(3, 6).double(), torch.tensor([[0, 5], [2, 2], [4, 1]])),
    ),
    (
        "scatter_reduce_extremes_int64_float64",
        of_inputs(
            lambda x, i, s, d: (
                x.scatter_reduce(0, i, s, "amax", include_self=False),
                x.scatter_reduce(0, i, s, "prod"),
                d.scatter_reduce(0, i, d[:4] * 3, "amin", include_self=False),
                d.scatter_reduce(0, i, d[:4] - 1, "amax"),
            )
        ),
        (
            torch.tensor([10, -7, 3, 8, 1]),
            torch.tensor([0, 0, 3, 0]),
            torch.tensor([5, -6, 2**40, 4]),
            torch.randn(5).double(),
        ),
    ),
    (
        "index_add_uint8_wraps",
        of_inputs(lambda x, s: x.index_add(0, torch.tensor([1, 1]), s)),
        (torch.tensor([5, 200, 7], dtype=torch.uint8), torch.tensor([100, 30], dtype=torch.uint8)),
    ),
    # index_put with a boolean mask: scalar / 0-d / per-True values, broadcast rows, inner mask, accumulate
    ("mask_fill_forms", of_inputs(_mask_fill_forms), (r(3, 4), M34, torch.tensor(-2.0))),
    ("mask_set_per_true", of_inputs(_mask_set), (r(3, 4), M34, r(6))),
    ("mask_set_rows", of_inputs(_mask_set), (r(3, 4, 2), M34, r(6, 2))),
    ("mask_set_broadcast_row", of_inputs(_mask_set), (r(3, 4, 2), M34, r(2))),
    ("mask_set_leading_axis", of_inputs(_mask_set), (r(3, 4, 2), torch.tensor([True, False, True]), r(2, 4, 2))),
    ("mask_set_inner_axes", of_inputs(_mask_set_inner), (r(2, 3, 4), M34, r(2, 6))),
    ("mask_accumulate", of_inputs(_mask_accumulate), (r(3, 4), M34, r(6))),
    (
        "mask_accumulate_int64",
        of_inputs(_mask_accumulate),
        (torch.randint(-9, 9, (3, 4)), M34, torch.randint(-(2**40), 2**40, (6,))),
    ),
    (
        "mask_set_int8_bool",
        of_inputs(lambda a, m, v, p, q: (_mask_set(a, m, v), _mask_set(p, m, q))),
        (
            torch.randint(-9, 9, (3, 4), dtype=torch.int8),
            M34,
            torch.randint(-100, 100, (6,), dtype=torch.int8),
            r(3, 4) > 0,
            r(6) > 0,
        ),
    ),
    (
        "mask_index_put_functional",
        of_inputs(lambda a, m, v, u: (A.index_put(a, [m], v), A.index_put(a.float(), [u], v.float()))),
        (r(3, 4).double(), M34, r(6).double(), M34.to(torch.uint8)),
    ),
    ("mask_set_none_true", of_inputs(_mask_set), (r(3, 4), torch.zeros(3, 4, dtype=torch.bool), r(0))),
    ("index_put_in_place_int_index", of_inputs(_int_index_set), (r(5, 3), torch.tensor([4, 0, -2]), r(3, 3))),
    # nonzero_static: padding with fill_value, truncation, any dtype (NaN is nonzero), no nonzero at all
    (
        "nonzero_static",
        of_inputs(
            lambda a, m, i, z: (
                torch.nonzero_static(a, size=5),
                torch.nonzero_static(a, size=2, fill_value=7),
                torch.nonzero_static(m, size=30),
                torch.nonzero_static(i, size=4, fill_value=-9),
                torch.nonzero_static(z, size=3),
            )
        ),
        (
            torch.tensor([[0, 1.5, 0], [NAN, 0, -2]]),
            r(2, 3, 4) > 0,
            torch.tensor([3, 0, 2]),
            torch.zeros(4, 2, dtype=torch.bool),
        ),
    ),
    # x[mask]: the count of True positions is a size a stage computes (docs/design.md, decision ax)
    ("index_bool_mask_rows", Fn(lambda m, a, k: a[k]), (r(4, 3), torch.tensor([True, False, True, True]))),
    ("index_bool_mask_inner", Fn(lambda m, a: a[:, a[0] > 0]), (r(3, 6),)),
    ("index_bool_mask_2d", Fn(lambda m, a: a[a > 0] * 2), (r(3, 4),)),
    # bucketize/searchsorted: ties on boundaries (left/right), NaN and ±inf values, a NaN boundary sorted last
    (
        "bucketize_ties_nan_inf",
        Fn(
            lambda m, a, e: (
                torch.bucketize(a, e),
                torch.bucketize(a, e, right=True, out_int32=True),
                torch.bucketize(a.double(), e.double(), right=True),
                torch.bucketize(2.0, e),
                torch.bucketize(a, torch.cat([e, e.new_tensor([NAN])])),
            )
        ),
        (
            torch.tensor([[0.0, 1.0, 2.0, NAN], [float("inf"), -float("inf"), 2.5, 3.0]]),
            torch.tensor([1.0, 2.0, 2.0, 3.0]),
        ),
    ),
    (
        "bucketize_int64_and_mixed",
        Fn(lambda m, i, e: (torch.bucketize(i, e), torch.bucketize(i, e, right=True), torch.bucketize(i * 0.5, e))),
        (torch.tensor([[-5, 1, 2], [3, 7, 1 << 40]]), torch.tensor([1, 2, 2, 3, 1 << 40])),
    ),
    (
        "searchsorted_batched_side_sorter",
        Fn(
            lambda m, s, v, u, o: (
                torch.searchsorted(s, v),
                torch.searchsorted(s, v, right=True, out_int32=True),
                torch.searchsorted(s, v, side="right"),
                torch.searchsorted(s[0, 0], v),
                torch.searchsorted(s[0, 0], 2.0, right=True),
                torch.searchsorted(u, v[0], sorter=o),
                torch.searchsorted(s[1].long(), v[1].long(), side="left"),
            )
        ),
        (
            torch.tensor([[[1.0, 2.0, 2.0, 4.0], [-1.0, 0.0, 0.0, NAN]], [[0.5, 0.5, 3.0, 3.0], [0, 1, 2, 3]]]),
            torch.tensor([[[2.0, 0.0, 5.0], [0.0, NAN, -1.0]], [[0.5, 3.0, -2.0], [1.5, 3.0, 2.0]]]),
            torch.tensor([4.0, 2.0, 1.0, 2.0]),
            torch.tensor([2, 1, 3, 0]),
        ),
    ),
    *INDEXING_TIES,  # topk/sort/argsort on tied values, NaN and ±0 in every dtype (tests/ops/_ties.py)
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=TIE_BIT_EXACT)


def _mask_and_index(a: torch.Tensor, m: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    c = a.clone()
    c[m, i] = v
    return c


@pytest.mark.parametrize("level", ["aten", "core"])
def test_boolean_mask_with_another_index_is_refused(tmp_path, level: str) -> None:
    model = of_inputs(_mask_and_index)
    inputs = (torch.randn(3, 4), torch.tensor([True, False, True]), torch.tensor([1, 3]), torch.randn(2))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, inputs, tmp_path / "o", decomposition=level)
    assert {"aten.index_put.default", "aten.index_put_.default"} & set(info.value.targets)
    assert "a boolean mask together with other index tensors is not supported" in info.value.explain()


def test_nonzero_static_beyond_the_dense_limit_is_refused(tmp_path) -> None:
    model = of_inputs(lambda a: torch.nonzero_static(a, size=5000))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(64, 64),), tmp_path / "o", decomposition="aten")
    assert "aten.nonzero_static.default" in info.value.targets


class _Inner(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a.masked_select(a > 0)


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pick = _Inner()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.pick(a) * 2


def test_data_dependent_sizes_run_in_stages(tmp_path) -> None:
    """masked_select inside a submodule: its size is computed by a size stage, then the graph runs at it."""
    report = rti.from_torch(_Outer(), (torch.randn(3, 4),), tmp_path / "o", decomposition="core")
    assert report.ok, report.summary()
    assert rti.BundleModel(tmp_path / "o" / "bundle").meta["stages"]
