"""Argument values the misc lowerings refuse, and the torch-ir layout record as_strided relies on."""

from __future__ import annotations

import pytest
import torch

import rlx_torch_import as rti
from rlx_torch_import import torchir
from sample_utils import of_inputs


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


def test_complex_output_is_reported_not_crashed(tmp_path) -> None:
    """A complex result is an unsupported dtype, reported before reference.safetensors is written."""
    model = of_inputs(lambda a: torch.fft.rfft(a))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(8),), tmp_path / "o", decomposition="core")
    assert "aten._fft_r2c.default" in info.value.targets
    assert not (tmp_path / "o").exists()
