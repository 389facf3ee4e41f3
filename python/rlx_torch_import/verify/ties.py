"""Tie choices: where RLX's `topk` / `sort` / `kthvalue` / `median` indices differ from PyTorch's only among
tied values.

PyTorch's CPU `topk` selects with libstdc++'s `std::partial_sort` (k * 64 <= n) or `std::nth_element` and
`std::sort` of the first k - 1, and `sort` without `stable=True` is `std::sort`, all on (value, index) pairs
compared by value alone (NaN largest; `aten/src/ATen/native/cpu/TopKImpl.h`, `SortingKernel.cpp`); `median`
partitions with `std::nth_element` and `kthvalue` with torch's own quick-select (`Sorting.cpp`). Which
of several equal values comes first is then whatever those introsort/introselect/heap algorithms leave: a
data-dependent sequence of median-of-three partitions, heap sifts and insertion sorts, different again
under libc++ or MSVC (torch's macOS and Windows builds). No fixed graph of RLX ops reproduces it short of
simulating the algorithm step by step, so RLX's lowering picks its own documented order (lowest index first,
stable) and the verdict is honest about it instead:

a failing output is judged against PyTorch's graph run in order with, at each such node, RLX's indices
substituted for PyTorch's (and the node's values re-read at them), when RLX's indices are a choice torch's
op could have made on PyTorch's own input there: in range, distinct along the dimension, and selecting,
position by position, values equal to PyTorch's (`==`, so -0.0 and 0.0 tie as in torch's comparator; NaN
with NaN). Indices that select any other value are never excused. The verdict then holds for the tie
choice RLX made, and the report's note names the node(s) (`verify/tie_fed.py`). Per-node parity
(`verify/nodes.py`) marks a local difference among tied values the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import torchir
from ..torchir import Node

# Ops whose CPU index order among tied values comes from libstdc++'s selection/sort algorithms:
# target -> (values output, indices output).
TIE_ORDERED = {
    "aten.topk.default": (0, 1),
    "aten.sort.default": (0, 1),
    "aten.sort.stable": (0, 1),
    "aten.kthvalue.default": (0, 1),  # torch's own quick-select
    "aten.median.dim": (0, 1),  # std::nth_element (a row holding NaN: its first NaN, a rule RLX keeps)
    "aten.nanmedian.dim": (0, 1),
}
# Where each takes `dim` among its positional arguments (topk(self, k, dim), kthvalue(self, k, dim), sort(self, dim)).
_DIM_AT = {"aten.topk.default": 2, "aten.kthvalue.default": 2}


def tie_ordered(node: Node) -> bool:
    """Whether `node`'s indices among tied values follow a selection/sort algorithm, not a specified rule:
    `topk`, `kthvalue`, `median.dim`, `nanmedian.dim`, and `sort` unless `stable=True` (a stable sort is
    reproduced exactly)."""
    if node.target not in TIE_ORDERED:
        return False
    if node.target == "aten.sort.stable":
        return node.kwargs.get("stable", {}).get("bool") is not True
    return True


def tie_indices(node: Node) -> str:
    """The name of a `TIE_ORDERED` node's indices output."""
    return node.outputs[TIE_ORDERED[node.target][1]].name


def reorders(ir: torchir.TorchIR) -> bool:
    """Whether the graph has a node whose tie order is an algorithm's (`tie_ordered`) in its reference: not
    where the front end records the reference's order as specified (torch-ir `producer["tie_order"]`:
    ONNX Runtime, whose TopK gives the lower index first)."""
    if ir.producer.get("tie_order") == "specified":
        return False
    return any(tie_ordered(n) for n in ir.nodes)


def _dim(node: Node, rank: int) -> int:
    """The dimension a topk/sort node works along (torch-ir args: topk(self, k, dim), sort(self, dim))."""
    position = _DIM_AT.get(node.target, 1)
    arg = node.kwargs.get("dim") or (node.args[position] if len(node.args) > position else {"int": -1})
    dim = int(arg.get("int", -1))
    return dim % max(rank, 1)


def tie_choice(node: Node, env: dict[str, Any], ours: np.ndarray) -> tuple[int, str, Any]:
    """(how many of RLX's indices `ours` differ from PyTorch's, why they are not a choice among ties or "",
    the node's values at RLX's indices) for a `tie_ordered` node, PyTorch's values in `env` (its input as
    computed with RLX's tie choices upstream)."""
    import torch

    values_at, indices_at = TIE_ORDERED[node.target]
    x = env[node.args[0]["tensor"]]
    theirs = env[node.outputs[indices_at].name]
    mine = torch.from_numpy(np.ascontiguousarray(ours).astype(np.int64)).reshape(theirs.shape)
    differ = int((mine != theirs).sum())
    if not differ:
        return 0, "", None
    if x.dim() == 0:
        return differ, f"node {node.name}: the indices of a 0-d input differ", None
    dim = _dim(node, x.dim())
    n = x.shape[dim]
    reduced = mine.dim() < x.dim()  # kthvalue/median without keepdim: one index per row, its dim dropped
    if reduced:
        mine = mine.unsqueeze(dim)
    if bool(((mine < 0) | (mine >= n)).any()):
        return differ, f"node {node.name}: RLX's indices leave the range [0, {n})", None
    ordered = torch.sort(mine, dim=dim).values
    if ordered.shape[dim] > 1 and bool((ordered.diff(dim=dim) == 0).any()):
        return differ, f"node {node.name}: RLX's indices repeat a position along dim {dim}", None
    picked = torch.gather(x, dim, mine)
    picked = picked.squeeze(dim) if reduced else picked
    want = env[node.outputs[values_at].name]
    same = picked == want
    if picked.is_floating_point():
        nan = picked.isnan() & want.isnan()
        if node.target == "aten.median.dim":  # a row holding NaN gives its first NaN: a rule, not a tie
            nan = nan & (mine.squeeze(dim) if reduced else mine).eq(theirs)
        same = same | nan
    if not bool(same.all()):
        at = tuple(int(i) for i in np.argwhere(~same.numpy())[0])
        return (
            differ,
            f"node {node.name}: RLX's indices select other values than PyTorch's, not a tie "
            f"(at {list(at)}: {picked[at].item()!r} where PyTorch has {want[at].item()!r})",
            None,
        )
    return differ, "", picked
