"""Control flow torch.export keeps (cond, map, scan) and data-dependent values (`.item()`, shape
asserts), verified against PyTorch (issue 11)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from functorch.experimental.control_flow import map as torch_map
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti


class Branchy(nn.Module):
    """torch.cond on a tensor predicate; the true branch uses a weight, the false one does not."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: self.lin(x).relu(), lambda x: x.sin() * 2 - 1, (x,))


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true_branch_example", "false_branch_example"])
def test_cond_verifies_on_both_branches(sign: float, tmp_path) -> None:
    torch.manual_seed(0)
    model = Branchy().eval()
    example = torch.rand(3, 4) * sign
    report = rti.from_torch(model, (example,), tmp_path)
    assert report.ok, report.summary()
    ir = json.loads((tmp_path / "torch-ir.json").read_text())
    assert [c["kind"] for c in ir["control_flow"]] == ["cond"]
    assert not any("cond" in n["target"] for n in ir["nodes"])
    # The same bundle on an input taking the other branch.
    bundle = rti.BundleModel(tmp_path / "bundle")
    for x in (torch.rand(3, 4), -torch.rand(3, 4)):
        got = bundle.run([x.numpy()])["output"]
        with torch.no_grad():
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-6)


class MultiOut(nn.Module):
    """A cond with two outputs of different dtypes and a closure over a second input."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        def yes(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + y, (x > 0).long().sum(0)

        def no(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x * y, (y > 0).long().sum(0)

        return torch.cond(y.mean() > x.mean(), yes, no, (x, y))


def test_cond_with_two_outputs(tmp_path) -> None:
    torch.manual_seed(1)
    x, y = torch.randn(3, 5), torch.randn(3, 5) + 1
    report = rti.from_torch(MultiOut(), (x, y), tmp_path)
    assert report.ok, report.summary()
    bundle = rti.BundleModel(tmp_path / "bundle")
    got = bundle.run([y.numpy(), x.numpy()])  # swapped: the other branch
    want = MultiOut()(y, x)
    np.testing.assert_allclose(got["output_0"], want[0].numpy(), rtol=1e-6)
    np.testing.assert_array_equal(got["output_1"], want[1].numpy())


class Mapped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)

    def forward(self, xs: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch_map(lambda x, b: self.lin(x).tanh() + b, xs, bias)


def test_map(tmp_path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(Mapped().eval(), (torch.randn(5, 3, 4), torch.randn(2)), tmp_path)
    assert report.ok, report.summary()
    ir = json.loads((tmp_path / "torch-ir.json").read_text())
    assert ir["control_flow"] == [{"node": "map_impl", "kind": "map", "how": "unrolled over 5 steps, results stacked"}]


class Scanned(nn.Module):
    def forward(self, xs: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from torch._higher_order_ops.scan import scan

        def step(carry: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            new = torch.tanh(carry * 0.5 + x)
            return new, new.sum(-1)

        return scan(step, h, xs)


def test_scan(tmp_path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(Scanned(), (torch.randn(6, 2, 4), torch.randn(2, 4)), tmp_path)
    assert report.ok, report.summary()


class Looping(nn.Module):
    def forward(self, i: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from torch._higher_order_ops.while_loop import while_loop

        return while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2), (i, x))


def test_while_loop_is_refused_with_its_reason(tmp_path) -> None:
    with pytest.raises(
        rti.InputError, match=r"torch.while_loop \(node while_loop, File .*test_control_flow.py.*trip count"
    ):
        rti.from_torch(Looping(), (torch.tensor(0), torch.randn(3)), tmp_path / "o")
    assert not (tmp_path / "o").exists()


class ItemArithmetic(nn.Module):
    """`.item()` feeding only arithmetic (Python floats and ints, floor division, sym_max)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = x.abs().mean().item()
        n = (x > 0).sum().item()
        return x * s + y.mean() + s * 2 + (s // 0.25) + torch.sym_max(n, 2) - n % 3


def test_item_feeding_arithmetic_stays_a_tensor(tmp_path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(ItemArithmetic(), (torch.randn(4, 6), torch.randn(4, 6)), tmp_path)
    assert report.ok, report.summary()
    bundle = rti.BundleModel(tmp_path / "bundle")
    x, y = torch.randn(4, 6) * 3, torch.randn(4, 6)
    np.testing.assert_allclose(bundle.run([x.numpy(), y.numpy()])["output"], ItemArithmetic()(x, y).numpy(), rtol=1e-5)


class ShapeChecked(nn.Module):
    """Checks as LLaVA-style code writes them: torch._check on a count read from a tensor and on sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, image_mask: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
        n = image_mask.sum().item()
        torch._check(n >= 0)
        torch._check(n <= image_mask.numel())
        torch._check(feats.shape[0] == image_mask.shape[0])
        return self.proj(feats) * image_mask.unsqueeze(-1)


def test_shape_asserts_are_dropped_and_recorded(tmp_path) -> None:
    torch.manual_seed(0)
    report = rti.from_torch(ShapeChecked(), ((torch.rand(5) > 0.5).long(), torch.randn(5, 8)), tmp_path)
    assert report.ok, report.summary()
    ir = json.loads((tmp_path / "torch-ir.json").read_text())
    assert {d["target"] for d in ir["dropped"]} == {"aten._assert_scalar.default"}
    # torch's own check of the value read (u0 >= 0, which implies the user's), named by the line reading it
    assert [d["check"].split(":")[0] for d in ir["dropped"]] == ["n = image_mask.sum().item() at test_control_flow.py"]
    assert all(d["reason"] for d in ir["dropped"])


class ItemAsSize(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Identity()

    def forward(self, x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        n = k.item()
        return self.inner(torch.zeros(n) + x.sum())


def test_item_used_as_a_size_runs_in_a_size_stage(tmp_path) -> None:
    """`.item()` as a length: a size stage reads it, the graph runs at it (docs/design.md, decision aq)."""
    x = torch.randn(3)
    report = rti.from_torch(ItemAsSize(), (x, torch.tensor(4)), tmp_path / "o", verify_inputs=[(x, torch.tensor(7))])
    assert report.ok and report.input_sets[0].ok, report.summary()
    (out,) = rti.BundleModel(tmp_path / "o" / "bundle").run([x.numpy(), np.array(2)]).values()
    assert out.shape == (2,)


def test_cond_under_a_dynamic_batch(tmp_path) -> None:
    """The inlined branches and their where follow a dynamic dim through the sweep."""
    torch.manual_seed(0)
    report = rti.from_torch(
        Branchy().eval(), (torch.rand(3, 4),), tmp_path, dynamic_shapes={"x": {0: Dim("b", min=1, max=16)}}
    )
    assert report.ok and len(report.sweep) == 4, report.summary()


def test_scan_over_a_dynamic_length_is_refused(tmp_path) -> None:
    with pytest.raises(rti.InputError, match=r"scan \(node scan, File .*test_control_flow.py.*dynamic leading dim"):
        rti.from_torch(
            Scanned(),
            (torch.randn(6, 2, 4), torch.randn(2, 4)),
            tmp_path / "o",
            dynamic_shapes={"xs": {0: Dim("t", min=2, max=16)}, "h": None},
        )


def test_value_read_from_a_tensor_as_an_int_argument_is_refused() -> None:
    """An int argument other than an index or slice start (here cumsum's dim) that arrives as a
    value read from a tensor is an unsupported use naming the argument and the node."""
    from rlx_torch_import.lower import try_lower
    from rlx_torch_import.torchir import Node, OutputSpec, TensorSpec, TorchIR

    ir = TorchIR(
        name="m",
        decomposition="aten",
        weights=[],
        inputs=[TensorSpec("x", [3], "float32"), TensorSpec("i", [], "int64")],
        nodes=[
            Node("item", "aten.item.default", [{"tensor": "i"}], {}, [TensorSpec("item", [], "int64")]),
            Node(
                "cumsum",
                "aten.cumsum.default",
                [{"tensor": "x"}],
                {"dim": {"tensor": "item"}},
                [TensorSpec("cumsum", [3], "float32")],
            ),
        ],
        outputs=[OutputSpec("output", "cumsum", [3], "float32")],
    )
    program, (item,) = try_lower(ir)
    assert program is None
    assert item.node == "cumsum" and "argument 'dim' (int) is a value read from a tensor (node item" in item.reason


class TensorChecks(nn.Module):
    """`torch._check` on tensor values (`aten._is_all_true`, as Hugging Face LLaVA's forward does)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        torch._check_tensor_all(mask >= 0)
        torch._check((x > -100).all().item())
        return x * mask


def test_checks_of_tensor_values_are_dropped_with_a_note(tmp_path) -> None:
    report = rti.from_torch(TensorChecks(), (torch.randn(3, 4), torch.ones(3, 4)), tmp_path)
    assert report.ok, report.summary()
    ir = json.loads((tmp_path / "torch-ir.json").read_text())
    assert not any(n["target"] in ("aten._is_all_true.default", "aten.all.default") for n in ir["nodes"])
    checks = sorted(d["check"].split(" at test_control_flow.py:")[0] for d in ir["dropped"])
    assert checks == ["torch._check((x > -100).all().item())", "torch._check_tensor_all(mask >= 0)"], checks
    assert all("cannot raise" in d["reason"] for d in ir["dropped"])  # one record per check, named by its code
    assert sum("torch._check" in n and "cannot raise" in n for n in report.notes) == 2


class SizeCond(nn.Module):
    """torch.cond on a predicate computed from two dynamic sizes."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        pred = (x.shape[0] > 4) & (y.shape[1] <= x.shape[0] * 2) | (x.shape[0] == 7)
        return torch.cond(pred, lambda x, y: x * 2 + y.sum(), lambda x, y: x - 1, (x, y))


def test_cond_on_sizes_takes_each_bindings_branch(tmp_path) -> None:
    ds = ({0: Dim("b", min=1, max=12)}, {1: Dim("c", min=1, max=12)})
    report = rti.from_torch(SizeCond(), (torch.randn(3, 4), torch.randn(2, 5)), tmp_path, dynamic_shapes=ds)
    assert report.ok and report.sweep, report.summary()
    assert any("predicate computed from sizes" in n for n in report.notes)
    bundle = rti.BundleModel(tmp_path / "bundle", binding_cache=1)
    taken = set()
    for b, c in [(1, 1), (4, 8), (5, 10), (5, 11), (7, 12), (12, 3), (6, 12)]:
        x, y = np.random.rand(b, 4).astype(np.float32), np.random.rand(2, c).astype(np.float32)
        with torch.no_grad():
            want = SizeCond()(torch.from_numpy(x), torch.from_numpy(y)).numpy()
        taken.add(bool((b > 4) & (c <= b * 2) | (b == 7)))
        np.testing.assert_allclose(bundle.call(x, y), want, rtol=1e-6, atol=1e-6)
    assert taken == {True, False}


class SizeArithmeticCond(nn.Module):
    """A size predicate through sym_max, %, // and sym_not, with a size minus a constant that goes negative."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        n, w = x.shape[0], y.shape[0]
        pred = (torch.sym_max(n, 4) == 4) | ((n % 3 == 0) & torch.sym_not(n // 2 > w - 3))
        return torch.cond(pred, lambda x, y: x * 2, lambda x, y: x - 1, (x, y))


def test_cond_on_size_arithmetic_takes_each_bindings_branch(tmp_path) -> None:
    ds = ({0: Dim("b", min=1, max=16)}, {0: Dim("w", min=1, max=16)})
    report = rti.from_torch(SizeArithmeticCond(), (torch.randn(6, 3), torch.randn(5, 3)), tmp_path, dynamic_shapes=ds)
    assert report.ok, report.summary()
    bundle = rti.BundleModel(tmp_path / "bundle", binding_cache=1)
    taken, wrong = set(), []
    for b in range(1, 17):  # every batch size: sym_max is 4 below 4, a fit from the probes alone would not be
        for w in (1, 2, 9, 16):
            x, y = np.random.rand(b, 3).astype(np.float32), np.random.rand(w, 3).astype(np.float32)
            want = SizeArithmeticCond()(torch.from_numpy(x), torch.from_numpy(y)).numpy()
            taken.add(bool(np.array_equal(want, x * 2)))
            if not np.array_equal(bundle.call(x, y), want):
                wrong.append((b, w))
    assert wrong == [] and taken == {True, False}


def test_a_size_predicate_of_another_form_is_refused_clearly(tmp_path) -> None:
    class FloatSize(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.shape[0] / 3 > 1.5, lambda x: x * 2, lambda x: x - 1, (x,))

    with pytest.raises(rti.DynamicShapeError, match=r"torch.cond \(node cond.*line \d+.*truediv") as caught:
        rti.from_torch(FloatSize(), (torch.randn(3, 4),), tmp_path / "o", dynamic_shapes=({0: Dim("b", min=1, max=8)},))
    assert caught.value.exit_code == 3 and "torch.sym_not" in caught.value.message
    assert not (tmp_path / "o").exists()
