"""Pooling/fold argument values RLX cannot compute are refused by the capability pass, naming the overload."""

from __future__ import annotations

import pytest
import torch

import rlx_torch_import as rti
from sample_utils import of_inputs

A = torch.ops.aten


CASES = [
    (
        "aten.adaptive_avg_pool3d.default",
        lambda x: A.adaptive_avg_pool3d.default(x, [2, 0, 3]),
        (torch.randn(1, 2, 4, 5, 6),),
        "output_size with None/0 entries is not supported",
    ),
]


@pytest.mark.parametrize(("target", "fn", "inputs", "reason"), CASES, ids=[c[0] for c in CASES])
def test_refused(target: str, fn, inputs: tuple[torch.Tensor, ...], reason: str, tmp_path) -> None:
    with pytest.raises(rti.UnsupportedOpsError) as err:
        rti.from_torch(of_inputs(fn), inputs, tmp_path / "o", decomposition="aten", auto_decompose=False)
    assert target in err.value.targets
    assert reason in str(err.value)
