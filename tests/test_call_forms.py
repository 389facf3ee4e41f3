"""Models called the way people call them: keyword and nested inputs, Python values among the
inputs and the outputs, verified against PyTorch (issue 11)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti


class Nested(nn.Module):
    """A dict and a list of tensors, a float and a str baked in, an optional keyword tensor;
    returns a dict holding a tuple, a list, an int and a bool next to tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, d, xs, scale=2.0, mode="add", mask=None):
        y = self.lin(x * scale + d["a"] - d["b"]) + xs[0] - xs[1]
        y = y + 1 if mode == "add" else y - 1
        if mask is not None:
            y = y * mask
        return {"out": y, "pair": (y.sum(), [y.relu()]), "rows": x.shape[0], "flag": True, "ratio": 0.5}


def _nested_call() -> tuple[tuple, dict]:
    torch.manual_seed(0)
    args = (torch.randn(2, 3), {"a": torch.randn(2, 3), "b": torch.randn(3)}, [torch.randn(3), torch.randn(2, 3)])
    return args, {"scale": 3.0, "mode": "add", "mask": (torch.rand(2, 3) > 0.3).float()}


def test_dict_list_keyword_and_python_values(tmp_path) -> None:
    model = Nested().eval()
    args, kwargs = _nested_call()
    report = rti.from_torch(model, args, tmp_path, kwargs=kwargs)
    assert report.ok, report.summary()
    names = [o.name for o in report.outputs]
    assert names == ["out", "pair.0", "pair.1.0", "rows", "flag", "ratio"]
    meta = json.loads((tmp_path / "bundle" / "meta.json").read_text())
    assert [(i["name"], i["path"]) for i in meta["inputs"]] == [
        ("x", "x"),
        ("d_a", "d.a"),
        ("d_b", "d.b"),
        ("xs_0", "xs.0"),
        ("xs_1", "xs.1"),
        ("mask", "mask"),
    ]
    assert meta["constant_inputs"] == [{"path": "scale", "value": 3.0}, {"path": "mode", "value": "add"}]
    assert meta["call_args"] == ["x", "d", "xs", "scale", "mode", "mask"]  # forward's positional parameters
    assert meta["output_tree"]["dict"]["rows"] == {"constant": 2, "name": "rows"}

    # The bundle called like the model: nested numpy inputs in, forward's structure out.
    bundle = rti.BundleModel(tmp_path / "bundle")
    np_args = (args[0].numpy(), {k: v.numpy() for k, v in args[1].items()}, [t.numpy() for t in args[2]])
    got = bundle.call(*np_args, mask=kwargs["mask"].numpy())
    with torch.no_grad():
        want = model(*args, **kwargs)
    assert set(got) == {"out", "pair", "rows", "flag", "ratio"}
    np.testing.assert_allclose(got["out"], want["out"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["pair"][1][0], want["pair"][1][0].numpy(), rtol=1e-5, atol=1e-6)
    assert (got["rows"], got["flag"], got["ratio"]) == (2, True, 0.5)
    # run() takes inputs by name or by path
    by_path = bundle.run(
        {
            "x": np_args[0],
            "d.a": np_args[1]["a"],
            "d.b": np_args[1]["b"],
            "xs.0": np_args[2][0],
            "xs.1": np_args[2][1],
            "mask": kwargs["mask"].numpy(),
        }
    )
    np.testing.assert_array_equal(by_path["out"], got["out"])
    with pytest.raises(rti.InputError, match=r"missing input 'xs\.1'"):
        bundle.call(np_args[0], np_args[1], np_args[2][:1], mask=kwargs["mask"].numpy())


def test_hugging_face_keywords(tmp_path) -> None:
    """A causal LM called as Hugging Face models are: input_ids and attention_mask keywords, a
    padded row, a dynamic sequence length; every output (logits and the cache's tensors) verified
    at the example and at each sweep point, named by its path."""
    T = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = T.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = T.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, :3] = 0  # left padding
    seq = Dim("seq", min=2, max=32)
    report = rti.from_torch(
        model,
        (),
        tmp_path,
        kwargs={"input_ids": ids, "attention_mask": mask},
        dynamic_shapes={"input_ids": {1: seq}, "attention_mask": {1: seq}},
    )
    assert report.ok, report.summary()
    assert len(report.sweep) == 4 and all(row.ok for row in report.sweep)
    names = [o.name for o in report.outputs]
    assert names[0] == "logits" and len(names) == 1 + 2 * cfg.num_hidden_layers
    ids, mask = torch.randint(0, 128, (2, 13)), torch.ones(2, 13, dtype=torch.int64)
    mask[0, :5] = 0
    got = rti.BundleModel(tmp_path / "bundle").call(input_ids=ids.numpy(), attention_mask=mask.numpy())
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask).logits
    np.testing.assert_allclose(got["logits"], want.numpy(), rtol=1e-4, atol=1e-4)


class SizeOut(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        return x.relu(), x.shape[0] * 2 + 1, x.shape[1]


def test_size_outputs_follow_the_binding(tmp_path) -> None:
    """An int computed from a dynamic size is an output checked by equality at every sweep point."""
    report = rti.from_torch(
        SizeOut(), (torch.randn(4, 3),), tmp_path, dynamic_shapes={"x": {0: Dim("n", min=2, max=9)}}
    )
    assert report.ok, report.summary()
    assert report.sweep and all(any(o.name == "output_1" and o.ok for o in row.outputs) for row in report.sweep)
    bundle = rti.BundleModel(tmp_path / "bundle")
    assert bundle.call(np.ones((7, 3), np.float32))[1:] == (15, 3)
    assert bundle.values({"n": 5}) == {"output_1": 11, "output_2": 3}


def test_model_file_with_example_kwargs(tmp_path) -> None:
    src = tmp_path / "kw.py"
    src.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x, *, bias, scale=1.0):\n"
        "        return {'y': x * scale + bias}\n"
        "model = M()\n"
        "example_inputs = (torch.randn(2, 3),)\n"
        "example_kwargs = {'bias': torch.randn(3), 'scale': 0.5}\n"
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", str(src), "-o", str(out), "--quiet"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    meta = json.loads((out / "bundle" / "meta.json").read_text())
    assert [i["path"] for i in meta["inputs"]] == ["x", "bias"] and meta["outputs"][0]["name"] == "y"


def test_unsupported_leaf_is_named(tmp_path) -> None:
    with pytest.raises(rti.InputError, match=r"input xs\.1 is a ndarray"):
        rti.from_torch(Nested(), (torch.randn(2, 3), {}, [torch.randn(3), np.zeros(3)]), tmp_path / "o")


class ItemOut(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, float, int, bool]:
        return x.relu(), x.sum().item(), (x > 0).sum().item(), (x > 2).any().item()


def test_python_values_read_from_tensors_are_outputs(tmp_path) -> None:
    """`.item()` results returned by forward: computed by RLX (0-d), compared with eager, returned as Python values."""
    torch.manual_seed(0)
    report = rti.from_torch(ItemOut(), (torch.randn(3, 4),), tmp_path)
    assert report.ok, report.summary()
    assert [o.dtype for o in report.outputs] == ["float32", "float32", "int64", "bool"]
    x = torch.randn(3, 4) * 2
    got = rti.BundleModel(tmp_path / "bundle").call(x.numpy())
    want = ItemOut()(x)
    assert isinstance(got[1], float) and got[1] == pytest.approx(want[1], abs=1e-5)  # float32 sums in another order
    assert (got[2], got[3]) == want[2:] and isinstance(got[2], int) and isinstance(got[3], bool)


class Shapes(nn.Module):
    """Empty containers, None, a list and an in-place write among the inputs and outputs; dropout
    and a default argument; left in training mode by its user."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x, buf, scale=1.0, mode="a", extra=None):
        buf.add_(1)
        return self.drop(x) * scale, (), None, [x + 1, {"k": x.sum()}], {"e": []}


def test_structure_defaults_mutation_and_mode(tmp_path) -> None:
    model = Shapes()  # training mode, as a user may leave it
    report = rti.from_torch(model, (torch.randn(2, 3), torch.zeros(3)), tmp_path, kwargs={"scale": 0.5})
    assert report.ok, report.summary()
    assert model.training and model.drop.training  # the user's mode is given back
    assert report.notes[0].startswith("the model was in training mode")
    assert "input scale = 0.5 baked in" in report.notes[1] and len(report.notes) == 2  # defaults are not notes
    bundle = rti.BundleModel(tmp_path / "bundle")
    x, buf = np.ones((2, 3), np.float32), np.zeros(3, np.float32)
    got = bundle.call(x, buf, scale=0.5)
    want = Shapes().eval()(torch.ones(2, 3), torch.zeros(3), scale=0.5)
    assert got[1] == () and got[2] is None and got[4] == {"e": []} and isinstance(got[3], list)
    np.testing.assert_allclose(got[0], want[0].numpy())
    np.testing.assert_allclose(got[3][1]["k"], want[3][1]["k"].numpy())
    np.testing.assert_array_equal(buf, np.ones(3, np.float32))  # written in place, as torch writes it
    assert bundle.call(x, buf, 0.5, "a", None)[0].shape == (2, 3)  # the defaults forward used may be passed
    with pytest.raises(rti.InputError, match=r"input scale was baked into the bundle as 0\.5 at conversion; got 2\.0"):
        bundle.call(x, buf, scale=2.0)
    with pytest.raises(rti.InputError, match="input extra was baked into the bundle as None"):
        bundle.call(x, buf, extra=3)
    with pytest.raises(rti.InputError, match=r"argument\(s\) 'other' were not part of the call"):
        bundle.call(x, buf, other=1)
    with pytest.raises(rti.InputError, match="at most 5 positional"):
        bundle.call(x, buf, 0.5, "a", None, 1)


class VarArgs(nn.Module):
    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return args[0] + args[1] * args[2]


def test_dynamic_shapes_for_varargs_in_torchs_own_form(tmp_path) -> None:
    batch = Dim("batch", min=2, max=8)
    inputs = (torch.randn(3, 2), torch.randn(3, 2), torch.randn(3, 2))
    report = rti.from_torch(VarArgs(), inputs, tmp_path, dynamic_shapes={"args": ({0: batch}, {0: batch}, {0: batch})})
    assert report.ok and len(report.sweep) == 4, report.summary()


class Frames(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.unfold(1, 4, 2).sum(-1)


def test_unbounded_dim_under_a_size_dependent_op_says_to_give_a_max(tmp_path) -> None:
    with pytest.raises(rti.DynamicShapeError) as info:
        rti.from_torch(Frames(), (torch.randn(2, 12),), tmp_path / "o", dynamic_shapes={"x": {1: Dim("T", min=6)}})
    assert "give T a max" in (info.value.hint or "")


class Pair(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def test_a_shared_dim_marked_on_one_input_only_names_the_fix(tmp_path) -> None:
    with pytest.raises(rti.ExportError) as info:
        rti.from_torch(
            Pair(),
            (torch.randn(4, 3), torch.randn(4, 3)),
            tmp_path / "o",
            dynamic_shapes={"x": {0: Dim("n")}, "y": None},
        )
    assert "mark that axis of every such input" in (info.value.hint or "")


class Optional_(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, flag: bool = False) -> torch.Tensor:
        return (x * 2 if mask is None else x * mask) + int(flag)


def test_none_and_bool_arguments_are_baked_in(tmp_path) -> None:
    report = rti.from_torch(Optional_(), (torch.randn(2), None), tmp_path, kwargs={"flag": True})
    assert report.ok, report.summary()
    meta = json.loads((tmp_path / "bundle" / "meta.json").read_text())
    assert meta["constant_inputs"] == [{"path": "mask", "value": None}, {"path": "flag", "value": True}]
    got = rti.BundleModel(tmp_path / "bundle").call(np.ones(2, np.float32), None, flag=True)
    np.testing.assert_array_equal(got, np.full(2, 3.0, np.float32))


class SizeOnly(nn.Module):
    def forward(self, x: torch.Tensor) -> int:
        return x.shape[0] * 2


class ReadsOneOfTwo(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
        return x * 2, y.shape[0] + 1  # y is read for its size only: RLX's graph does not read it


def test_outputs_that_are_only_sizes_follow_the_binding(tmp_path) -> None:
    """No tensor output: the graph reads no input, and RLX drops inputs nothing reads (it then
    panicked when fed one). The value is computed at each binding, like other size outputs."""
    report = rti.from_torch(
        SizeOnly(), (torch.randn(3, 4),), tmp_path / "s", dynamic_shapes={"x": {0: Dim("b", min=1, max=16)}}
    )
    assert report.ok and report.sweep, report.summary()
    assert "forward returns no tensor" in report.summary() and "output = 6 (Python int" in report.summary()
    bundle = rti.BundleModel(tmp_path / "s" / "bundle")
    assert [bundle.call(np.zeros((n, 4), np.float32)) for n in (1, 5, 16)] == [2, 10, 32]
    assert bundle.run([np.zeros((5, 4), np.float32)]) == {}
    assert bundle.values({"b": 7}) == {"output": 14}
    for binding, message in [
        ({"b": 17}, "outside b"),
        ({"batch": 3}, "no symbol of the bundle"),
        ({"b": 2.5}, "integer"),
    ]:
        with pytest.raises(rti.InputError, match=message):
            bundle.values(binding)
    np.savez(tmp_path / "x.npz", x=np.zeros((7, 4), np.float32))
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlx_torch_import.cli",
            "run",
            str(tmp_path / "s" / "bundle"),
            "--inputs",
            str(tmp_path / "x.npz"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "binding: b=7" in printed and "output = 14 (Python int" in printed
    report = rti.from_torch(
        ReadsOneOfTwo(),
        (torch.randn(3, 4), torch.randn(2, 4)),
        tmp_path / "r",
        dynamic_shapes=({0: Dim("b", min=1, max=8)}, {0: Dim("c", min=1, max=8)}),
    )
    assert report.ok, report.summary()
    x = np.ones((2, 4), np.float32)
    got, size = rti.BundleModel(tmp_path / "r" / "bundle").call(x, np.ones((6, 4), np.float32))
    assert size == 7 and np.array_equal(got, x * 2)


class ReturnsNone(nn.Module):
    def forward(self, x: torch.Tensor) -> None:
        return None


def test_a_forward_returning_none_is_reported_as_a_python_value(tmp_path) -> None:
    report = rti.from_torch(ReturnsNone(), (torch.randn(3),), tmp_path)
    assert report.ok
    text = report.summary()
    assert "output = None (Python None, as eager PyTorch)" in text and "NoneType" not in text
    assert "| output | pass | Python None | - | - | - | - | None, equal to eager PyTorch's |" in report.markdown()
    assert "NoneType" not in (tmp_path / "report.html").read_text()
    assert rti.BundleModel(tmp_path / "bundle").call(np.zeros(3, np.float32)) is None
