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


# ---- buffers and parameters the forward writes: every run starts from the state as given ----


class CountCalls(nn.Module):
    """The new-user repro: the output reads the buffer after the write."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count += 1
        return x * self.count


class RunningTotal(nn.Module):
    """A running-statistic style buffer: accumulates the input's sum, the output reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.full((1,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x.sum())
        return x - self.total


def _weights(out) -> dict[str, np.ndarray]:
    return {k: v.to_numpy() for k, v in safetensors_io.read(out / "weights.safetensors").items()}


def _state(model: nn.Module) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each buffer and parameter: the object and a copy of its values."""
    named = [*model.named_buffers(), *model.named_parameters()]
    return {n: (t, t.detach().clone()) for n, t in named}


def _assert_kept(model: nn.Module, before: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    now = dict([*model.named_buffers(), *model.named_parameters()])
    assert now.keys() == before.keys()
    for n, (obj, values) in before.items():
        assert now[n] is obj, f"{n} was replaced"
        assert torch.equal(obj, values), f"{n} changed: {obj} (was {values})"


@pytest.mark.parametrize("level", LEVELS)
def test_buffer_written_in_forward_is_converted_from_the_state_given(level: str, tmp_path) -> None:
    m = CountCalls()
    before = _state(m)
    out = tmp_path / "o"
    report = rti.from_torch(m, (torch.ones(3),), out, decomposition=level)
    assert report.ok, report.summary()
    assert m.count.item() == 0
    _assert_kept(m, before)
    assert _weights(out)["count"].item() == 0.0  # stored as before the reference run
    np.testing.assert_array_equal(_reference(out)["output.output"], np.ones(3, dtype=np.float32))


@pytest.mark.parametrize("level", LEVELS)
def test_running_total_buffer(level: str, tmp_path) -> None:
    m = RunningTotal()
    before = _state(m)
    x = torch.randn(2, 3)
    out = tmp_path / "o"
    report = rti.from_torch(m, (x,), out, decomposition=level)
    assert report.ok, report.summary()
    _assert_kept(m, before)
    np.testing.assert_array_equal(_weights(out)["total"], np.array([0.5], dtype=np.float32))
    np.testing.assert_allclose(_reference(out)["output.output"], (x - (0.5 + x.sum())).numpy(), rtol=1e-6)


def test_buffer_written_under_dynamic_dims_at_sweep_points(tmp_path) -> None:
    m = RunningTotal()
    before = _state(m)
    x = torch.randn(4, 3)
    out = tmp_path / "o"
    report = rti.from_torch(m, (x,), out, dynamic_shapes={"x": {0: torch.export.Dim("n", min=1, max=16)}})
    assert report.ok, report.summary()
    assert report.sweep and all(row.ok for row in report.sweep), report.summary()
    _assert_kept(m, before)
    ref = _reference(out)
    points = {k.split(".")[1] for k in ref if k.startswith("sweep.")}
    assert len(points) >= 3
    for i in points:  # each point from the state given (0.5), not from what earlier runs left
        xi = ref[f"sweep.{i}.input.x"]
        np.testing.assert_allclose(ref[f"sweep.{i}.output.output"], xi - (0.5 + xi.sum()), rtol=1e-5, atol=1e-5)


def test_buffer_written_with_verify_inputs(tmp_path) -> None:
    m = RunningTotal()
    before = _state(m)
    out = tmp_path / "o"
    sets = [(torch.full((2, 3), 2.0),), "auto"]
    report = rti.from_torch(m, (torch.randn(2, 3),), out, verify_inputs=sets)
    assert report.ok, report.summary()
    assert len(report.input_sets) > 1 and all(row.ok for row in report.input_sets)
    _assert_kept(m, before)
    np.testing.assert_allclose(_reference(out)["set.0.output.output"], np.full((2, 3), 2.0 - 12.5, dtype=np.float32))


def test_returned_buffer_keeps_the_written_value(tmp_path) -> None:
    """An output that is the buffer itself: the reference holds the value the run wrote, though
    the module gets its state back."""

    class ReturnsBuffer(CountCalls):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.count += 1
            return x * self.count, self.count

    m = ReturnsBuffer()
    out = tmp_path / "o"
    report = rti.from_torch(m, (torch.ones(3),), out)
    assert report.ok, report.summary()
    assert m.count.item() == 0
    assert _reference(out)["output.output_1"].item() == 1.0


@pytest.mark.parametrize("level", LEVELS)
def test_parameter_written_in_forward(level: str, tmp_path) -> None:
    """A forward under no_grad may write a parameter in place (through a view here): the
    parameters the exported program writes are kept as given too."""

    class BumpWeight(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.w[1:].add_(1)
            return x * self.w

    m = BumpWeight()
    before = _state(m)
    out = tmp_path / "o"
    report = rti.from_torch(m, (torch.ones(3),), out, decomposition=level)
    assert report.ok, report.summary()
    _assert_kept(m, before)
    np.testing.assert_array_equal(_weights(out)["w"], np.zeros(3, dtype=np.float32))


def test_reassigned_buffer_is_put_back(tmp_path) -> None:
    class Reassign(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.count = self.count + x.sum()
            return x * self.count

    m = Reassign()
    before = _state(m)
    report = rti.from_torch(m, (torch.ones(2),), tmp_path / "o")
    assert report.ok, report.summary()
    _assert_kept(m, before)


def test_state_is_given_back_when_conversion_raises(tmp_path) -> None:
    class CountThenFail(CountCalls):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.count += 1
            return x.abs()  # abs of bool: eager refuses (see below)

    m = CountThenFail()
    before = _state(m)
    with pytest.raises(rti.InputError):
        rti.from_torch(m, (torch.tensor([True, False]),), tmp_path / "o")
    _assert_kept(m, before)


def test_input_and_buffer_written_together(tmp_path) -> None:
    class Both(RunningTotal):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total.add_(x.sum())
            x.mul_(2)
            return x + self.total

    m = Both()
    before = _state(m)
    x = torch.randn(2, 3)
    given = x.clone()
    out = tmp_path / "o"
    report = rti.from_torch(m, (x,), out)
    assert report.ok, report.summary()
    assert [o.name for o in report.outputs] == ["output", "mutated_x"]
    assert torch.equal(x, given)
    _assert_kept(m, before)
    np.testing.assert_allclose(_reference(out)["output.mutated_x"], (given * 2).numpy())
