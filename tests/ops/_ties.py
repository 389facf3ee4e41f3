"""Parity samples of the index-producing ops on tied values, for every dtype they take (issue 39, part 5):
`INDEXING_TIES` (topk, sort, argsort) join tests/ops/test_indexing.py's samples, `REDUCE_TIES` (argmax/max.dim,
kthvalue, median) tests/ops/test_reduce.py's; `TIE_BIT_EXACT` names those judged bit for bit.

What eager PyTorch (2.15, CPU) gives among equal values, and how each sample is judged:

- `sort(stable=True)` / `argsort(stable=True)`: ties keep index order, ascending and descending; -0.0 ties
  with 0.0. A rule: reproduced bit for bit (`BIT_EXACT`).
- `sort` without `stable=True` is libstdc++'s `std::sort` of (value, index) pairs: insertion sort up to 16
  elements (stable, so reproduced bit for bit), introsort beyond (ties in an order no rule gives).
- `topk` is `std::partial_sort` (k * 64 <= n) or `std::nth_element` + `std::sort` (a row of ten zeros
  gives 8, 6, 7). Those samples pass as a tie choice (`verify/ties.py`): RLX's indices select, position by
  position, values equal to PyTorch's.
- NaN sorts above +inf (largest in `topk`, last in the k smallest), NaNs in index order: float32 and the
  halves through the NaN-aware sort of the workaround layer (`sort-nan`), float64 through the exact sort.
- `kthvalue` (torch's quick-select), `median.dim`/`nanmedian.dim` (std::nth_element): values are torch's,
  indices among ties a tie choice; `median` of a row holding NaN is NaN at the row's first NaN (a rule).
- `argmax`/`argmin`/`max.dim`/`min.dim`: the first occurrence; NaN is the extreme (its first occurrence),
  -0.0 ties with 0.0; bit for bit. (`cummax`/`cummin`, the last occurrence: tests/ops/test_reduce.py.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from _samples import Fn, Sample, of_inputs

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int64, torch.int32, torch.uint8)

_GEN = torch.Generator().manual_seed(39)


def _tied(dtype: torch.dtype, n: int, rows: int = 3, levels: int = 3) -> torch.Tensor:
    """`rows` x `n` values from `levels` distinct ones (many ties), a row of all-equal values first."""
    x = torch.randint(0, levels, (rows, n), generator=_GEN)
    x[0] = 1
    if dtype.is_floating_point:
        return (x.to(torch.float64) * 0.5 - 0.5).to(dtype)  # -0.5, 0.0, 0.5
    return x.to(dtype)


def _signed_zeros(dtype: torch.dtype) -> torch.Tensor:
    """Rows where 0.0 and -0.0 tie (floats); integers get plain ties."""
    x = torch.tensor([[0.0, -0.0, 0.0, -0.0, 1.0, -1.0, -0.0, 0.0], [2.0, -0.0, 2.0, 0.0, -1.0, 2.0, -1.0, 0.0]])
    return x.to(dtype) if dtype.is_floating_point else x.abs().to(dtype)


def _extremes(dtype: torch.dtype) -> torch.Tensor:
    """Rows with repeated extremes: NaN twice, -inf ties, ±0 ties (floats); repeated max/min (integers)."""
    if dtype.is_floating_point:
        nan, inf = float("nan"), float("inf")
        x = torch.tensor(
            [[1.0, nan, 3.0, nan, 3.0], [-inf, 2.0, -inf, 2.0, 0.0], [0.0, -0.0, -0.0, 0.0, -0.0], [5.0] * 5]
        )
        return x.to(dtype)
    return torch.tensor([[1, 7, 3, 7, 1], [4, 2, 4, 2, 0], [0, 0, 9, 9, 0], [5] * 5]).to(dtype)


def _stable_sorts(x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        *torch.sort(x, stable=True),
        *torch.sort(x, dim=0, descending=True, stable=True),
        torch.argsort(x, dim=-1, descending=True, stable=True),
        *torch.sort(z, stable=True),
        *torch.sort(z, descending=True, stable=True),
        *torch.sort(x[:, :16]),  # std::sort of <= 16 elements is an insertion sort: stable
    )


def _topks(x: torch.Tensor, long: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        *torch.topk(x, 4, dim=-1),  # nth_element + sort; the all-equal row first
        *torch.topk(x, 3, dim=-1, largest=False),
        *torch.topk(x, 2, dim=0),
        *torch.topk(long, 3, dim=-1),  # 3 * 64 <= 200: partial_sort
        *torch.topk(long, 3, dim=-1, largest=False),
        *torch.sort(x, descending=True),  # std::sort of 40: introsort
    )


def _arg_extremes(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        x.argmax(-1),
        x.argmin(-1),
        *x.max(dim=1),
        *x.min(dim=1, keepdim=True),
        x.argmax(),
        x.argmin(0),
    )


def _with_nan(dtype: torch.dtype) -> torch.Tensor:
    """Rows with NaN (twice), ±inf, ±0 and ties: NaN sorts above +inf, NaNs in index order."""
    nan, inf = float("nan"), float("inf")
    x = torch.tensor(
        [[3.0, nan, 1.0, -inf, inf, nan, 2.0, -0.0], [nan, nan, 0.0, 0.0, -0.0, 1.0, inf, -inf], [1.0] * 8]
    )
    return x.to(dtype)


def _nan_sorts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        *torch.sort(x, stable=True),
        *torch.sort(x, descending=True, stable=True),
        torch.argsort(x, dim=0, stable=True),
        *torch.sort(x),  # 8 elements: std::sort's insertion sort, stable
        *torch.topk(x, 3),  # NaN first, then +inf
        *torch.topk(x, 3, largest=False),  # NaN last
    )


def _order_statistics(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        *torch.kthvalue(x, 3, dim=1),
        *torch.kthvalue(x, 1, dim=0, keepdim=True),
        *torch.median(x, dim=1),
        *torch.median(x, dim=0, keepdim=True),
        *torch.nanmedian(x, dim=1),
        torch.median(x),
        torch.nanmedian(x),
    )


def _statistic_rows(dtype: torch.dtype) -> torch.Tensor:
    """Ties, an all-equal row, and for floats rows with NaN (one, two, all): median gives the first NaN."""
    x = _tied(dtype, 7, rows=3)
    if dtype.is_floating_point:
        nan = float("nan")
        extra = torch.tensor([[nan, 1.0, nan, 0.5, 0.5, -0.0, 0.0], [nan] * 7, [2.0, nan, 1.0, 1.0, 3.0, 1.0, 0.0]])
        x = torch.cat([x, extra.to(dtype)])
    return x


def _each(fn: Callable[..., tuple[torch.Tensor, ...]], arity: int) -> Fn:
    """One module applying `fn` to each consecutive group of `arity` inputs (one group per dtype): one
    conversion covers every dtype of a family."""
    return of_inputs(lambda *xs: tuple(out for i in range(0, len(xs), arity) for out in fn(*xs[i : i + arity])))


def _bool_sorts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (*torch.sort(x, stable=True), *torch.sort(x, descending=True, stable=True))


INDEXING_TIES: list[Sample] = [
    *[
        (
            f"ties_stable_sort_{kind}",
            _each(_stable_sorts, 2),
            tuple(t for dt in dts for t in (_tied(dt, 24), _signed_zeros(dt))),
        )
        for kind, dts in (("floats", FLOATS), ("ints", INTS))
    ],
    ("ties_stable_sort_bool", of_inputs(_bool_sorts), (_tied(torch.int64, 20, levels=2).bool(),)),
    *[
        (
            f"ties_topk_{kind}",
            _each(_topks, 2),
            tuple(t for dt in dts for t in (_tied(dt, 40), _tied(dt, 200, rows=2))),
        )
        for kind, dts in (("floats", FLOATS), ("ints", INTS))
    ],
    ("ties_nan_sort_floats", _each(_nan_sorts, 1), tuple(_with_nan(dt) for dt in FLOATS)),
]

REDUCE_TIES: list[Sample] = [
    *[
        (f"ties_arg_extremes_{kind}", _each(_arg_extremes, 1), tuple(_extremes(dt) for dt in dts))
        for kind, dts in (("floats", FLOATS), ("ints", INTS))
    ],
    *[
        (f"ties_order_statistics_{kind}", _each(_order_statistics, 1), tuple(_statistic_rows(dt) for dt in dts))
        for kind, dts in (("floats", FLOATS), ("ints", INTS))
    ],
]

# Samples whose every output must equal eager PyTorch bit for bit, with no tie choice: a specified order.
TIE_BIT_EXACT = {
    name
    for name, _, _ in (*INDEXING_TIES, *REDUCE_TIES)
    if not name.startswith(("ties_topk_", "ties_order_statistics_"))
}
