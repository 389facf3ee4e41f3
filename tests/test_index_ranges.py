"""Index values out of range are an error, as in torch (docs/usage.md, "What is checked").

Run time: an input that feeds an index operand unchanged (an embedding's ids, index_select's / gather's /
x[idx]'s indices) is checked before RLX runs (`bundle/ranges.py`, meta.json `index_ranges`): a value torch
refuses raises IndexRangeError (an InputError, exit 2, and an IndexError) naming the input, the position and
value, the range and the op; values torch takes (negative indices where torch wraps them) give torch's answer.
Graph check: a hand-edited model.hir.json with a baked index or a slice past its axis is refused by the core
(src/bounds.rs) with a BundleError, exit 2, before RLX sees it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import BundleError, ExitCode, IndexRangeError, InputError


class Lookups(nn.Module):
    """An embedding (ids in [0, 10)), x[idx] (idx in [-5, 5), negatives wrap), index_select and gather
    (both [0, n)), the ids reaching the embedding through a view and a widening cast."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4)

    def forward(self, ids: torch.Tensor, x: torch.Tensor, idx: torch.Tensor, sel: torch.Tensor) -> Any:
        rows = self.emb(ids.view(-1).to(torch.int64))
        picked = x[idx]
        chosen = x.index_select(1, sel)
        gathered = x.gather(1, sel.view(1, -1).expand(5, -1))
        return rows, picked, chosen, gathered


def _feed(**changes: Any) -> dict[str, np.ndarray]:
    feed = {
        "ids": np.array([[1, 9, 0]], np.int32),
        "x": np.arange(30, dtype=np.float32).reshape(5, 6),
        "idx": np.array([4, -5, -1], np.int64),
        "sel": np.array([0, 5], np.int64),
    }
    return feed | {k: np.asarray(v, feed[k].dtype) for k, v in changes.items()}


def _eager(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in Lookups()(*(torch.from_numpy(v) for v in feed.values()))]


@pytest.fixture(scope="module")
def lookups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranges") / "o"
    example = tuple(torch.from_numpy(v) for v in _feed().values())
    report = rti.from_torch(Lookups(), example, out, per_node=False)
    assert report.ok, report.summary()
    return out / "bundle"


def test_the_ranges_torch_allows_are_recorded(lookups: Path) -> None:
    meta = json.loads((lookups / "meta.json").read_text())
    found = {(r["input"], r["op"], r["low"], r["high"], r["axis"]) for r in meta["index_ranges"]}
    assert found == {
        ("ids", "aten.embedding.default", 0, 10, 0),
        ("idx", "aten.index.Tensor", -5, 5, 0),
        ("sel", "aten.index_select.default", 0, 6, 1),
        ("sel", "aten.gather.default", 0, 6, 1),
    }


def test_values_in_range_give_torchs_answer_negatives_wrapping(lookups: Path) -> None:
    model = BundleModel(lookups)
    for feed in (_feed(), _feed(ids=[[9, 9, 9]], idx=[-1, -2, 0], sel=[5, 5])):
        got = list(model.run(feed).values())
        for g, want in zip(got, _eager(feed), strict=True):
            np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ids": [[10, 11, 10**6]]}, "input 'ids' holds 10 at position [0, 0], outside the valid range [0, 10)"),
        ({"ids": [[1, 2, -1]]}, "input 'ids' holds -1 at position [0, 2], outside the valid range [0, 10)"),
        ({"idx": [0, 5, 1]}, "input 'idx' holds 5 at position [1], outside the valid range [-5, 5)"),
        ({"idx": [-6, 0, 1]}, "input 'idx' holds -6 at position [0], outside the valid range [-5, 5)"),
        ({"sel": [0, 6]}, "input 'sel' holds 6 at position [1], outside the valid range [0, 6)"),
        ({"sel": [-1, 0]}, "input 'sel' holds -1 at position [0], outside the valid range [0, 6)"),
    ],
)
def test_an_index_torch_refuses_is_an_index_error(lookups: Path, changes: dict[str, Any], message: str) -> None:
    feed = _feed(**changes)
    with pytest.raises((IndexError, RuntimeError)):  # eager PyTorch refuses the same values
        _eager(feed)
    with pytest.raises(IndexRangeError, match=re.escape(message)) as caught:
        BundleModel(lookups).run(feed)
    assert isinstance(caught.value, InputError) and isinstance(caught.value, IndexError)
    assert caught.value.exit_code == ExitCode.BAD_INPUT
    assert "node " in caught.value.message and " of aten." in caught.value.message


def test_the_cli_run_exits_2_naming_the_id(lookups: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, **_feed(ids=[[1, 2, 10**6]]))
    assert cli_main(["run", str(lookups), "--inputs", str(path)]) == ExitCode.BAD_INPUT
    assert "input 'ids' holds 1000000 at position [0, 2]" in capsys.readouterr().err


def test_a_bundle_written_before_index_ranges_still_loads(lookups: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    for f in lookups.iterdir():
        (old / f.name).write_bytes(f.read_bytes())
    meta = json.loads((old / "meta.json").read_text())
    del meta["index_ranges"]
    (old / "meta.json").write_text(json.dumps(meta))
    got = list(BundleModel(old).run(_feed()).values())
    np.testing.assert_array_equal(got[0], _eager(_feed())[0])
    meta["index_ranges"] = [{"input": "nope", "op": "aten.embedding.default", "low": 0, "high": 1}]
    (old / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match=r"index_ranges\[0\]: .* is not an object with an input of the bundle"):
        BundleModel(old)


class Scatters(nn.Module):
    """scatter_add's index ([0, 5) on axis 1) and an EmbeddingBag's ids ([0, 7)); the bag offsets index nothing."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(7, 3, mode="sum")

    def forward(self, x: torch.Tensor, idx: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> Any:
        return x.scatter_add(1, idx, torch.ones_like(idx, dtype=x.dtype)), self.bag(ids, offsets)


def test_scatter_and_embedding_bag_indices_are_checked(tmp_path: Path) -> None:
    feed = {
        "x": np.zeros((2, 5), np.float32),
        "idx": np.array([[0, 4, 4], [1, 2, 3]]),
        "ids": np.array([0, 6, 3, 3]),
        "offsets": np.array([0, 2]),
    }
    example = tuple(torch.from_numpy(v) for v in feed.values())
    report = rti.from_torch(Scatters(), example, tmp_path / "o", per_node=False)
    assert report.ok, report.summary()
    model = BundleModel(tmp_path / "o" / "bundle")
    found = {(r["input"], r["op"], r["low"], r["high"], r["axis"]) for r in model.meta["index_ranges"]}
    assert found == {("idx", "aten.scatter_add.default", 0, 5, 1), ("ids", "aten._embedding_bag.default", 0, 7, 0)}
    for name, bad, message in (
        (
            "idx",
            np.array([[0, 5, 4], [1, 2, 3]]),
            "input 'idx' holds 5 at position [0, 1], outside the valid range [0, 5)",
        ),
        ("ids", np.array([0, 6, -1, 3]), "input 'ids' holds -1 at position [2], outside the valid range [0, 7)"),
    ):
        changed = feed | {name: bad}
        with pytest.raises((IndexError, RuntimeError)):  # eager PyTorch
            Scatters()(*(torch.from_numpy(v) for v in changed.values()))
        with pytest.raises(IndexRangeError, match=re.escape(message)):
            model.run(changed)


def test_an_onnx_gather_of_an_input_is_checked(tmp_path: Path) -> None:
    """The ONNX door (RLX's importer's program): ids past the table raise as ONNX Runtime does, and a
    negative id, which ONNX Runtime counts from the end but RLX's Gather reads as row 0, is refused."""
    import onnxruntime as ort

    from onnx_models import save_gather

    save_gather(tmp_path / "g.onnx")
    report = rti.from_onnx(tmp_path / "g.onnx", tmp_path / "o", inputs={"ids": np.array([1, 2, 3])})
    assert report.ok, report.summary()
    model, session = BundleModel(tmp_path / "o" / "bundle"), ort.InferenceSession(str(tmp_path / "g.onnx"))
    ids = np.array([9, 0, 4])
    np.testing.assert_array_equal(model.run({"ids": ids})["y"], session.run(None, {"ids": ids})[0])
    with pytest.raises(Exception, match="out of data bounds"):  # ONNX Runtime
        session.run(None, {"ids": np.array([1, 12, 2])})
    with pytest.raises(IndexRangeError, match=re.escape("holds 12 at position [1], outside the valid range [0, 10)")):
        model.run({"ids": np.array([1, 12, 2])})
    with pytest.raises(IndexRangeError, match=r"holds -1 at position \[1\], .*ONNX Runtime counts a negative"):
        model.run({"ids": np.array([1, -1, 2])})
    # an example holding a negative id: the importer's bundle cannot serve it, the auto route takes the torch
    # route (which wraps it as ONNX Runtime does); the importer route alone refuses it
    negative = {"ids": np.array([1, -1, -10])}
    report = rti.from_onnx(tmp_path / "g.onnx", tmp_path / "neg", inputs=negative)
    assert report.ok and any("torch route" in n for n in report.notes), report.summary()
    wrapped = BundleModel(tmp_path / "neg" / "bundle").run(negative)["y"]
    np.testing.assert_array_equal(wrapped, session.run(None, negative)[0])
    with pytest.raises(IndexRangeError):
        rti.from_onnx(tmp_path / "g.onnx", tmp_path / "neg_importer", inputs=negative, route="importer")


class Rows(nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return x[idx] * 2


def test_a_dynamic_table_size_is_evaluated_at_the_run(tmp_path: Path) -> None:
    x, idx = torch.randn(6, 3), torch.tensor([0, -2, 1])  # in range at every size of the sweep
    n = Dim("n", min=2, max=32)
    report = rti.from_torch(Rows(), (x, idx), tmp_path / "o", dynamic_shapes=({0: n}, None), per_node=False)
    assert report.ok, report.summary()
    model = BundleModel(tmp_path / "o" / "bundle")
    small = np.arange(12, dtype=np.float32).reshape(4, 3)
    got = model.run({"x": small, "idx": np.array([3, -4, 0])})[
        "output_0" if False else next(iter(model.meta["outputs"]))["name"]
    ]
    np.testing.assert_array_equal(got, small[[3, -4, 0]] * 2)
    with pytest.raises(IndexRangeError, match=re.escape("holds 4 at position [0], outside the valid range [-4, 4)")):
        model.run({"x": small, "idx": np.array([4, 0, 0])})


# ── the core's graph check: baked indices and slices ───────────────────────────────────────────


class Baked(nn.Module):
    """A narrow of x (start 2, length 2 on an axis of 8) and a lookup of table rows (10 of them)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(10, 4))

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> Any:
        return x.narrow(1, 2, 2) * 1.0, self.table[ids]


@pytest.fixture(scope="module")
def baked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("baked") / "o"
    report = rti.from_torch(Baked(), (torch.randn(3, 8), torch.tensor([1, 2, 3])), out, per_node=False)
    assert report.ok, report.summary()
    return out / "bundle"


def _edited(bundle: Path, tmp_path: Path, edit: Any) -> Path:
    """A copy of `bundle` whose model.hir.json `edit` changed (its nodes: {"id", "op", "inputs", "shape"})."""
    copy = tmp_path / "edited"
    copy.mkdir()
    for f in bundle.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    hir = json.loads((copy / "model.hir.json").read_text())
    edit(hir["nodes"])
    (copy / "model.hir.json").write_text(json.dumps(hir))
    return copy


def _op(node: dict[str, Any]) -> tuple[str, Any]:
    """(kind, fields) of a HIR node's op (`{"Mir": {"Narrow": {...}}}` -> ("Narrow", {...}))."""
    op = node["op"]
    op = op.get("Mir", op) if isinstance(op, dict) else op
    return next(iter(op.items())) if isinstance(op, dict) else (op, None)


def test_a_narrow_past_its_axis_in_a_hand_edited_bundle_is_refused(baked: Path, tmp_path: Path) -> None:
    BundleModel(baked)  # as written: accepted

    def edit(nodes: list[dict[str, Any]]) -> None:
        (fields,) = [f for n in nodes for k, f in [_op(n)] if k == "Narrow" and f["axis"] == 1]
        assert (fields["start"], fields["len"]) == (2, 2)
        fields["start"] = 7

    with pytest.raises(BundleError, match=r"start 7, length 2 reads positions \[7, 9\) of axis 1, which has 8") as e:
        BundleModel(_edited(baked, tmp_path, edit))
    assert e.value.exit_code == ExitCode.BAD_INPUT


def test_a_baked_gather_index_past_the_table_in_a_hand_edited_bundle_is_refused(
    baked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def edit(nodes: list[dict[str, Any]]) -> None:
        (gather,) = [n for n in nodes if _op(n)[0] == "Gather"]
        index = nodes[gather["inputs"][1]]  # the wrapped ids: baked instead as rows 1000, 2, 3
        data = list(np.array([1000, 2, 3], "<i8").view(np.uint8))
        index.update(op={"Mir": {"Constant": {"data": [int(b) for b in data]}}}, inputs=[])

    edited = _edited(baked, tmp_path, edit)
    message = (
        r"Gather\): baked index 1000 \(position 0 of node .* \(Constant\), input 1\) is outside \[0, 10\), "
        r"the range of axis 0 of input 0 \(F32 \[10, 4\]\)"
    )
    with pytest.raises(BundleError, match=message) as e:
        BundleModel(edited)
    assert e.value.exit_code == ExitCode.BAD_INPUT
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.zeros((3, 8), np.float32), ids=np.array([1, 2, 3]))
    assert cli_main(["run", str(edited), "--inputs", str(inputs)]) == ExitCode.BAD_INPUT
    assert "baked index 1000" in capsys.readouterr().err


class StoredIndices(nn.Module):
    """Index tensors stored in weights.safetensors: a buffer feeding index_select ([0, 8)) and an embedding
    ([0, 10)), and the list of `x[:, [0, 3, 7]]`, a constant torch.export lifts ([-8, 8), negatives wrap)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.register_buffer("idx", torch.tensor([0, 2, 4]))
        self.emb = nn.Embedding(10, 4)

    def forward(self, x: torch.Tensor) -> Any:
        return torch.index_select(x, 0, self.idx), x[:, [0, 3, 7]], self.emb(self.idx)


@pytest.mark.parametrize(
    ("weight", "value", "message"),
    [
        ("idx", 1000, r"weight 'idx' holds 1000 at position \[2\], outside the valid range \[0, 8\) .* index_select"),
        ("idx", -1, r"weight 'idx' holds -1 at position \[2\], outside the valid range \[0, 8\)"),
        ("lifted_tensor_0", 8, r"weight 'lifted_tensor_0' holds 8 .* range \[-8, 8\) .* aten.index.Tensor"),
    ],
)
def test_a_stored_index_past_its_axis_in_a_hand_edited_weights_file_is_refused(
    tmp_path: Path, weight: str, value: int, message: str
) -> None:
    from safetensors.numpy import load_file, save_file

    report = rti.from_torch(StoredIndices(), (torch.randn(8, 8),), tmp_path / "o", per_node=False)
    assert report.ok, report.summary()
    bundle = tmp_path / "o" / "bundle"
    recorded = {
        (r["weight"], r["low"], r["high"])
        for r in json.loads((bundle / "meta.json").read_text())["weight_index_ranges"]
    }
    assert recorded == {("idx", 0, 8), ("idx", 0, 10), ("lifted_tensor_0", -8, 8)}
    stored = load_file(str(bundle / "weights.safetensors"))
    BundleModel(bundle)  # as written: accepted
    edited = dict(stored)
    edited[weight] = stored[weight].copy()
    edited[weight][-1] = value
    save_file(edited, str(bundle / "weights.safetensors"))
    with pytest.raises(BundleError, match=message) as e:
        BundleModel(bundle)
    assert e.value.exit_code == ExitCode.BAD_INPUT


# ── generate: the prompt's ids, before the first step ───────────────────────────────────────────


class ToyStep(nn.Module):
    """A decode step by `generate`'s convention, as small as one: ids [1, T] and a cache [1, S, 8] in,
    logits [1, T, 64] and this step's cache entries out; the ids feed an Embedding(64, 8)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.head = nn.Embedding(64, 8), nn.Linear(8, 64)

    def forward(self, input_ids: torch.Tensor, cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.emb(input_ids)
        return self.head(h + torch.cat([cache, h], 1).sum(1, keepdim=True)), h


def test_generate_refuses_ids_outside_the_vocabulary(tmp_path: Path) -> None:
    from rlx_torch_import.decode.generate import generate

    t, s = Dim("T", min=1, max=4), Dim("S", min=0, max=16)
    example = (torch.tensor([[1, 2, 3]]), torch.zeros(1, 2, 8))
    report = rti.from_torch(ToyStep(), example, tmp_path / "o", dynamic_shapes=({1: t}, {1: s}), per_node=False)
    assert report.ok, report.summary()
    bundle = tmp_path / "o" / "bundle"
    assert generate(bundle, [[1, 63, 7]], 2).shape == (1, 5)
    with pytest.raises(IndexError):  # eager PyTorch
        ToyStep()(torch.tensor([[1, 64, 10**9]]), torch.zeros(1, 0, 8))
    # a prompt of 6 is fed in chunks of at most 4: the position is the prompt's, not the chunk's
    for prompt, bad in (([[1, 64, 10**9]], "64 at position [0, 1]"), ([[1, 2, 3, 4, 5, -1]], "-1 at position [0, 5]")):
        with pytest.raises(IndexRangeError, match=re.escape(f"holds {bad}, outside the valid range [0, 64)")):
            generate(bundle, prompt, 3)


# ── the generated crate: the same ranges, the same refusal ─────────────────────────────────────


def test_the_generated_crate_checks_the_same_ranges(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess

    from rlx_torch_import import safetensors_io

    example = tuple(torch.from_numpy(v) for v in _feed().values())
    report = rti.from_torch(Lookups(), example, tmp_path / "o", emit=("bundle", "crate"), per_node=False)
    assert report.ok, report.summary()
    (crate,) = (tmp_path / "o").glob("rlx-*")
    lib = (crate / "src" / "lib.rs").read_text()
    rows = re.findall(r"IndexRange \{\s*input: (\d+),\s*low: (-?\d+),\s*high: (\d+),\s*op: \"([^\"]+)\"", lib)
    assert sorted(rows) == sorted(
        [
            ("0", "0", "10", "aten.embedding.default"),
            ("2", "-5", "5", "aten.index.Tensor"),
            ("3", "0", "6", "aten.index_select.default"),
            ("3", "0", "6", "aten.gather.default"),
        ]
    ), lib
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed: the crate was checked as text only")
    reference = safetensors_io.read(crate / "testdata" / "reference.safetensors")
    planted = {k: (t.dtype, t.shape, bytes(t.data)) for k, t in reference.items()}
    planted["input.ids"] = ("int32", (1, 3), np.array([[1, 2, 10**6]], np.int32).tobytes())
    safetensors_io.write(tmp_path / "planted.safetensors", planted)
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/rlx-torch-import/target")
    done = subprocess.run(
        [
            "cargo",
            "run",
            "--release",
            "--quiet",
            "--example",
            "run",
            "--",
            "--reference",
            str(tmp_path / "planted.safetensors"),
        ],
        cwd=crate,
        env={**os.environ, "CARGO_TARGET_DIR": target},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'input "ids" holds 1000000 at position [0, 2], outside the valid range [0, 10)' in done.stderr, done.stderr


def test_an_importer_graph_the_core_refuses_falls_back_to_the_torch_route(tmp_path: Path) -> None:
    """RLX's importer lowers the empty piece of a Split ([8, 0] on an axis of 8) as a Narrow reading one
    element past the axis: the core's graph check refuses that bundle (exit 2, route importer), and the
    auto route converts the file through the torch route instead, matching ONNX Runtime."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    split = numpy_helper.from_array(np.array([8, 0], np.int64), "split")
    nodes = [
        helper.make_node("Split", ["x", "split"], ["a", "b"], axis=3),
        helper.make_node("Neg", ["a"], ["y"]),
        helper.make_node("Concat", ["y", "b"], ["z"], axis=3),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 8])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3, 4, 8])],
        [split],
    )
    path = tmp_path / "split.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    x = np.random.default_rng(0).random((2, 3, 4, 8), dtype=np.float32)
    with pytest.raises(BundleError, match=r"\(Narrow\): start 8, length 1 reads positions \[8, 9\) of axis 3") as e:
        rti.from_onnx(path, tmp_path / "importer", inputs={"x": x}, route="importer")
    assert e.value.exit_code == ExitCode.BAD_INPUT
    report = rti.from_onnx(path, tmp_path / "auto", inputs={"x": x})
    assert report.ok, report.summary()
    assert any("torch route" in n for n in report.notes) and any("Narrow" in n for n in report.notes)
