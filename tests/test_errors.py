"""Unsupported ops are all reported at once; bad input gets a clear error; nothing half-written is left."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import of_inputs
from rlx_torch_import.errors import ExitCode


class Gaps(nn.Module):
    """Two ops the registry lacks (torch can only decompose them into prims) plus one unsupported argument value."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Sequential(nn.Conv2d(3, 4, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(x)
        y = y + torch.randint(0, 2**30, y.shape)  # a range wider than one float32 draw's 24 random bits
        return torch.lgamma(y + 1) + torch.digamma(y + 1)


def test_unsupported_ops_are_listed_at_once(tmp_path) -> None:
    out = tmp_path / "o"
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(Gaps(), (torch.randn(2, 3, 12, 12),), out, decomposition="aten", auto_decompose=False)
    err = info.value
    assert err.targets == ["aten.digamma.default", "aten.lgamma.default", "aten.randint.low"]
    nodes = {i.target: i.node for i in err.items}
    assert nodes["aten.lgamma.default"] == "lgamma" and nodes["aten.digamma.default"] == "digamma"
    text = err.explain()
    assert "2**24" in text and "node lgamma" in text and "node digamma" in text
    assert err.exit_code == ExitCode.UNSUPPORTED
    assert not out.exists(), "a failed run must not leave an output directory"
    assert not list(tmp_path.iterdir()), "staging folders must be cleaned up"


def test_failed_run_keeps_previous_output(tmp_path) -> None:
    out = tmp_path / "o"
    rti.from_torch(nn.Linear(3, 2), (torch.randn(1, 3),), out)
    before = (out / "torch-ir.json").read_text()
    with pytest.raises(rti.UnsupportedOpsError):
        rti.from_torch(Gaps(), (torch.randn(2, 3, 12, 12),), out, auto_decompose=False)
    assert (out / "torch-ir.json").read_text() == before
    assert (out / "bundle" / "model.hir.json").is_file()


def test_refuses_to_replace_a_foreign_directory(tmp_path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(rti.InputError, match="not an rlx-torch-import output"):
        rti.from_torch(nn.Linear(3, 2), (torch.randn(1, 3),), out)
    assert (out / "thesis.tex").read_text() == "precious"
    file_out = tmp_path / "file"
    file_out.write_text("x")
    with pytest.raises(rti.InputError, match="not a directory"):
        rti.from_torch(nn.Linear(3, 2), (torch.randn(1, 3),), file_out)


class DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


def test_data_dependent_control_flow_is_an_export_error(tmp_path) -> None:
    with pytest.raises(rti.ExportError) as info:
        rti.from_torch(DataDependent(), (torch.randn(3),), tmp_path / "o")
    assert "torch.export failed" in info.value.message
    assert "torch.where" in (info.value.hint or "") or "torch.cond" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("inputs", "needle"),
    [((np.zeros(2),), "input input is a ndarray"), ("x", "str")],
)
def test_non_tensor_inputs_are_rejected(inputs, needle, tmp_path) -> None:
    """Leaves torch.export does not take are refused by path (Python scalars alone are a model with no
    tensor input: tests/test_no_tensor_inputs.py)."""
    with pytest.raises(rti.InputError) as info:
        rti.from_torch(nn.Identity(), inputs, tmp_path / "o")
    assert needle in info.value.message


def test_bad_options_are_rejected(tmp_path) -> None:
    x = (torch.randn(2, 2),)
    with pytest.raises(rti.InputError, match="decomposition"):
        rti.from_torch(nn.ReLU(), x, tmp_path / "o", decomposition="full")
    with pytest.raises(rti.InputError, match="emit target"):
        rti.from_torch(nn.ReLU(), x, tmp_path / "o", emit=("wheel",))
    with pytest.raises(rti.InputError, match="device"):
        rti.from_torch(nn.ReLU(), x, tmp_path / "o", device="tpu")
    with pytest.raises(rti.InputError, match=r"nn\.Module"):
        rti.from_torch(lambda t: t, x, tmp_path / "o")


def test_internal_lowering_failure_names_the_node(tmp_path, monkeypatch) -> None:
    from rlx_torch_import.lower import REGISTRY
    from rlx_torch_import.lower.registry import Lowering

    def broken(b, call):
        raise KeyError("oops")

    low = REGISTRY["aten.relu.default"]
    monkeypatch.setitem(REGISTRY, "aten.relu.default", Lowering(low.target, broken, None, low.family))
    with pytest.raises(rti.RtiError) as info:
        rti.from_torch(nn.Sequential(nn.ReLU()), (torch.randn(2),), tmp_path / "o")
    assert "broken failed on aten.relu.default at node relu" in info.value.message
    assert info.value.exit_code == rti.ExitCode.INTERNAL


class NeedsFallback(nn.Module):
    """With their lowerings taken out (`_without`), torch decomposes leaky_relu and elu into ops that have one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(F.leaky_relu(x, 0.1), alpha=0.5)


def _without(monkeypatch: pytest.MonkeyPatch, *targets: str) -> None:
    """Unregister lowerings for one test, so the fallback tests do not depend on what is registered."""
    from rlx_torch_import.lower import REGISTRY

    for target in targets:
        monkeypatch.delitem(REGISTRY, target)


def test_auto_decomposition_fallback(tmp_path, monkeypatch) -> None:
    _without(monkeypatch, "aten.elu.default", "aten.leaky_relu.default")
    x = (torch.randn(4, 8),)
    report = rti.from_torch(NeedsFallback(), x, tmp_path / "o")
    assert report.ok, report.summary()
    assert report.auto_decomposed_ops == ["aten.elu.default", "aten.leaky_relu.default"]
    assert "auto-decomposed: aten.elu.default" in report.summary()
    ir = json.loads((tmp_path / "o" / "torch-ir.json").read_text())
    assert ir["auto_decomposed"] == report.auto_decomposed_ops
    assert {n["decomposed_from"] for n in ir["nodes"]} >= {"aten.leaky_relu.default", "aten.elu.default"}
    # and the same torch-ir re-lowers with the same verdict
    assert rti.build(tmp_path / "o").auto_decomposed_ops == report.auto_decomposed_ops

    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(NeedsFallback(), x, tmp_path / "off", auto_decompose=False)
    assert info.value.targets == ["aten.elu.default", "aten.leaky_relu.default"]


def test_undecomposable_op_is_a_reported_gap(tmp_path, monkeypatch) -> None:
    _without(monkeypatch, "aten.leaky_relu.default")

    class LgammaRelu(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.lgamma(F.leaky_relu(x) + 2)

    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(LgammaRelu(), (torch.randn(3, 5),), tmp_path / "o")
    assert info.value.targets == ["aten.lgamma.default"]  # leaky_relu was decomposed; lgamma could not be
    assert "auto-decomposition: decomposition emits prims." in info.value.message


@pytest.mark.parametrize(
    ("fn", "target", "needle"),
    [
        (lambda x: x + torch.randint(-(2**30), 2**30, x.shape), "aten.randint.low", "2**24"),
        (
            lambda x: torch.ops.aten.convolution_backward.default(
                x[:, :1], x, x[:1, :, :1, :1, :1], [1], [1] * 3, [0] * 3, [1] * 3, False, [0] * 3, 1, [True, True, True]
            )[1],
            "aten.convolution_backward.default",
            "3-D",
        ),
    ],
)
def test_training_time_checks_refuse(fn, target: str, needle: str, tmp_path) -> None:
    """A randint range RLX's draws cannot cover and 3-D convolution_backward are refused with a reason, not
    computed wrongly."""
    x = torch.randn(2, 2, 3, 3, 3)
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(of_inputs(fn), (x,), tmp_path / "o", decomposition="aten", auto_decompose=False)
    assert info.value.targets == [target]
    assert needle in info.value.explain()


def test_unsupported_hint_suggests_core_only_below_core(tmp_path) -> None:
    x = (torch.randn(2, 3, 12, 12),)
    for level in ("aten", "high"):
        with pytest.raises(rti.UnsupportedOpsError) as info:
            rti.from_torch(Gaps(), x, tmp_path / level, decomposition=level, auto_decompose=False)
        assert info.value.decomposition == level
        assert "--decomposition core" in (info.value.hint or "") and "docs/adding-an-op.md" in (info.value.hint or "")
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(Gaps(), x, tmp_path / "core", decomposition="core", auto_decompose=False)
    err = info.value
    assert err.decomposition == "core" and "aten.lgamma.default" in err.targets
    assert err.hint == "see docs/adding-an-op.md to add a lowering"
    assert "--decomposition core" not in err.explain()


@pytest.mark.parametrize("level", ["high", "core"])
def test_build_threads_the_decomposition_into_the_hint(level: str, tmp_path) -> None:
    """`build` re-lowers torch-ir: the level comes from the file (`lower(ir)` knows ir.decomposition)."""
    out = tmp_path / "o"
    assert rti.from_torch(nn.Sequential(nn.Linear(3, 2), nn.ReLU()), (torch.randn(1, 3),), out, decomposition=level).ok
    ir = json.loads((out / "torch-ir.json").read_text())
    relu = next(n for n in ir["nodes"] if n["target"] == "aten.relu.default")
    relu["target"] = "aten.lgamma.default"
    (out / "torch-ir.json").write_text(json.dumps(ir))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.build(out)
    assert info.value.targets == ["aten.lgamma.default"] and info.value.decomposition == level
    assert ("--decomposition core" in info.value.explain()) == (level != "core")


def test_output_a_lowering_does_not_compute_is_reported(tmp_path) -> None:
    """embedding_bag's offset2bag (a backward helper) is not computed in RLX; returning it is a reported gap
    (exit 3), not a KeyError from the driver (exit 5)."""
    bag = torch.ops.aten._embedding_bag.default
    model = of_inputs(lambda w, i: bag(w, i, torch.tensor([0, 2]), False, 0)[1])
    inputs = (torch.randn(6, 3), torch.tensor([0, 5, 2, 4]))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, inputs, tmp_path / "o", decomposition="aten")
    assert info.value.targets == ["<output>"] and info.value.exit_code == ExitCode.UNSUPPORTED
    assert "an output its producer does not compute in RLX" in info.value.message


def test_output_path_that_cannot_be_created_is_bad_input(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(rti.InputError, match="cannot create the output directory") as info:
        rti.from_torch(nn.Linear(3, 4), (torch.randn(2, 3),), blocker / "sub" / "out")
    assert info.value.exit_code == ExitCode.BAD_INPUT


def test_model_failing_in_eager_is_bad_input_even_when_export_fails_first(tmp_path) -> None:
    with pytest.raises(rti.InputError, match="raised RuntimeError when run eagerly") as info:
        rti.from_torch(nn.Linear(3, 4), (torch.randn(2, 5),), tmp_path / "o")
    assert info.value.exit_code == ExitCode.BAD_INPUT and not (tmp_path / "o").exists()


@pytest.mark.parametrize("level", ["high", "core"])
def test_linalg_error_checks_are_dropped_and_the_op_reported(level: str, tmp_path) -> None:
    """torch.export orders linalg's singular-matrix check by an effect token; the check is dropped and the
    op itself is what the error names (exit 3), never the token."""
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(of_inputs(torch.linalg.inv), (torch.randn(3, 3),), tmp_path / "o", decomposition=level)
    assert info.value.targets == ["aten.linalg_inv_ex.default"]
    assert "token" not in str(info.value).lower()


def test_emit_accepts_a_string(tmp_path) -> None:
    from rlx_torch_import.api import emit_targets

    assert emit_targets("crate") == ("crate",)
    assert emit_targets("bundle, crate") == ("bundle", "crate")
    assert emit_targets(["bundle", "crate"]) == ("bundle", "crate")
    report = rti.from_torch(nn.Linear(3, 4), (torch.randn(2, 3),), tmp_path / "o", emit="bundle")
    assert report.ok and (tmp_path / "o" / "bundle").is_dir()
    with pytest.raises(rti.InputError, match="emit target 'wheel'"):
        rti.from_torch(nn.Linear(3, 4), (torch.randn(2, 3),), tmp_path / "p", emit="bundle,wheel")
