"""Models that write their inputs in place: the reference holds the inputs as given, the
written values become `mutated_<input>` outputs, and the user's tensors are never touched."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import safetensors_io
from rlx_torch_import.errors import ExitCode

LEVELS = ["aten", "high", "core"]


class AddInPlace(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x.sin()


class ScaleSecond(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        y.mul_(2)
        return x + y


class WriteRow(nn.Module):
    """A write through a view: only row 0 of x changes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x[0].add_(1)
        return x * 2


def _reference(out) -> dict[str, np.ndarray]:
    return {k: v.to_numpy() for k, v in safetensors_io.read(out / "reference.safetensors").items()}


@pytest.mark.parametrize("level", LEVELS)
def test_in_place_input_write_is_an_output(level: str, tmp_path) -> None:
    x = torch.randn(3, 4)
    given = x.clone()
    out = tmp_path / "o"
    report = rti.from_torch(AddInPlace(), (x,), out, decomposition=level)
    assert report.ok, report.summary()
    assert [o.name for o in report.outputs] == ["output", "mutated_x"]
    assert torch.equal(x, given), "from_torch must not modify the caller's example inputs"
    ref = _reference(out)
    np.testing.assert_array_equal(ref["input.x"], given.numpy())  # before the run, not after
    np.testing.assert_array_equal(ref["output.mutated_x"], (given + 1).numpy())
    np.testing.assert_allclose(ref["output.output"], (given + 1).sin().numpy())
    ir = json.loads((out / "torch-ir.json").read_text())
    assert [o["name"] for o in ir["outputs"]] == ["output", "mutated_x"]
    meta = json.loads((out / "bundle" / "meta.json").read_text())
    assert [o["name"] for o in meta["outputs"]] == ["output", "mutated_x"]


@pytest.mark.parametrize("level", LEVELS)
def test_one_of_two_inputs_written(level: str, tmp_path) -> None:
    x, y = torch.randn(2, 5), torch.randn(2, 5)
    given = (x.clone(), y.clone())
    report = rti.from_torch(ScaleSecond(), (x, y), tmp_path / "o", decomposition=level)
    assert report.ok, report.summary()
    assert [o.name for o in report.outputs] == ["output", "mutated_y"]
    assert torch.equal(x, given[0]) and torch.equal(y, given[1])
    ref = _reference(tmp_path / "o")
    np.testing.assert_array_equal(ref["input.y"], given[1].numpy())
    np.testing.assert_array_equal(ref["output.mutated_y"], (given[1] * 2).numpy())


@pytest.mark.parametrize("level", LEVELS)
def test_write_through_a_view(level: str, tmp_path) -> None:
    x = torch.randn(3, 4)
    given = x.clone()
    report = rti.from_torch(WriteRow(), (x,), tmp_path / "o", decomposition=level)
    assert report.ok, report.summary()
    assert [o.name for o in report.outputs] == ["output", "mutated_x"] and torch.equal(x, given)


def test_kernel_writes_without_a_version_bump_are_seen(tmp_path) -> None:
    """Training batch norm updates user-passed running statistics in place without moving their
    version counter; at `aten` the graph does not record the write, the eager run does."""

    class BatchNormStats(nn.Module):
        def forward(self, x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
            return F.batch_norm(x, mean, var, training=True, momentum=0.1)

    inputs = (torch.randn(6, 3), torch.zeros(3), torch.ones(3))
    for level in ("aten", "high"):
        report = rti.from_torch(BatchNormStats(), inputs, tmp_path / level, decomposition=level)
        assert report.ok, report.summary()
        assert [o.name for o in report.outputs] == ["output", "mutated_mean", "mutated_var"]
    assert torch.equal(inputs[1], torch.zeros(3)) and torch.equal(inputs[2], torch.ones(3))


def test_mutated_output_is_verified(tmp_path) -> None:
    out = tmp_path / "o"
    assert rti.from_torch(AddInPlace(), (torch.randn(3, 4),), out).ok
    ref = {k: v.to_numpy().copy() for k, v in safetensors_io.read(out / "reference.safetensors").items()}
    ref["output.mutated_x"][2, 1] += 0.5
    safetensors_io.write(
        out / "reference.safetensors", {k: (str(v.dtype), v.shape, v.tobytes()) for k, v in ref.items()}
    )
    report = rti.build(out)
    assert not report.ok
    assert [o.name for o in report.outputs if not o.ok] == ["mutated_x"]
    assert report.outputs[1].first_mismatch == [2, 1]


def test_buffer_writes_are_not_outputs(tmp_path) -> None:
    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("calls", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls.add_(1)
            return x * 2

    for level in LEVELS:
        report = rti.from_torch(Counter(), (torch.randn(4),), tmp_path / level, decomposition=level)
        assert report.ok, report.summary()
        assert [o.name for o in report.outputs] == ["output"]


def test_model_failing_in_eager_is_an_input_error(tmp_path) -> None:
    """torch.export traces abs on bool (its meta function accepts it); eager PyTorch refuses."""

    class AbsBool(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.abs()

    with pytest.raises(rti.InputError) as info:
        rti.from_torch(AbsBool(), (torch.tensor([True, False]),), tmp_path / "o")
    assert "raised NotImplementedError when run eagerly on the example inputs" in info.value.message
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert not (tmp_path / "o").exists()
