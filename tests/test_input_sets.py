"""Extra input sets (`verify_inputs`): the caller's sets and the adversarial "auto" sets are run
in eager PyTorch at conversion, stored with the reference, and verified on the bundle, also by
`build DIR` from the files alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import import layout, safetensors_io, torchir
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode, InputError


def _sets(out: Path) -> dict[str, tuple[int, dict]]:
    """torch-ir `input_sets` by label: (k, entry)."""
    return {e["label"]: (k, e) for k, e in enumerate(torchir.load(out).input_sets)}


def _stored(out: Path, key: str) -> torch.Tensor:
    raw = safetensors_io.read(out / layout.REFERENCE)[key]
    t = torch.from_numpy(raw.to_numpy().copy())
    return t.to(torch.bfloat16) if raw.dtype == "bfloat16" else t


def _rows(report: rti.ParityReport) -> dict[str, object]:
    return {r.label: r for r in report.input_sets}


class FloorDiv(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.floor_divide(x, y), torch.div(x, 3, rounding_mode="floor"), torch.round(x / 7)


def test_auto_rounding_boundaries_floor_divide(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(4, 8) * 10, torch.rand(4, 8) + 0.5
    report = rti.from_torch(FloorDiv().eval(), (x, y), tmp_path / "o", verify_inputs="auto")
    assert report.ok, report.summary()
    rows = _rows(report)
    assert {"auto:rounding", "auto:ties", "auto:large", "auto:zeros", "auto:negative"} <= set(rows)
    assert not {"auto:masked-row", "auto:int-min", "auto:int-max"} & set(rows)  # no mask, no integer input
    assert all(r.ok and r.outputs for r in report.input_sets), report.summary()
    k, entry = _sets(tmp_path / "o")["auto:rounding"]
    assert "rounding" in entry["description"] and "error" not in entry
    sx, sy = _stored(tmp_path / "o", f"set.{k}.input.x"), _stored(tmp_path / "o", f"set.{k}.input.y")
    assert sx.shape == x.shape and sy.shape == y.shape and sx.dtype == sy.dtype == torch.float32
    # Every value is an integer or a half, exactly; the halves and multiples of 3 and 7 are there.
    assert torch.equal(sx * 2, torch.round(sx * 2)) and torch.equal(sy * 2, torch.round(sy * 2))
    have = set(sx.flatten().tolist())
    assert {0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 21.0, -21.0, 42.0, 7.0, -7.0, 3.0, -3.0} <= have
    assert {3.0, 7.0, -3.0, -7.0, 0.5} <= set(sy.flatten().tolist()) and not (sy == 0).any()
    # Quotients land exactly on integers (21 / 3, 7 / -7, 1.5 / 0.5, ...) and on halves.
    q = sx / sy
    assert (q == torch.round(q)).sum() >= 8 and ((q - 0.5) == torch.floor(q)).any()
    assert ((sx / 3) == torch.floor(sx / 3)).any() and ((sx / 7) == torch.round(sx / 7)).any()
    # The reference is eager PyTorch on exactly these inputs.
    assert torch.equal(_stored(tmp_path / "o", f"set.{k}.output.output_0"), torch.floor_divide(sx, sy))
    assert torch.equal(_stored(tmp_path / "o", f"set.{k}.output.output_1"), torch.div(sx, 3, rounding_mode="floor"))
    # The other sets: exact zeros in the first float input, large magnitudes, all negative.
    kz, _ = _sets(tmp_path / "o")["auto:zeros"]
    assert not _stored(tmp_path / "o", f"set.{kz}.input.x").any()
    kl, _ = _sets(tmp_path / "o")["auto:large"]
    big = _stored(tmp_path / "o", f"set.{kl}.input.x").abs()
    assert big.max() <= 80 and (big >= 30).all()  # no zeros: a divisor stays non-zero here
    kn, _ = _sets(tmp_path / "o")["auto:negative"]
    assert (_stored(tmp_path / "o", f"set.{kn}.input.y") < 0).all()


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def test_auto_fully_masked_attention_row(tmp_path: Path) -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 6, 8) for _ in range(3))
    mask = torch.ones(6, 6, dtype=torch.bool).tril().expand(2, 1, 6, 6).clone()  # [B, 1, L, L]
    report = rti.from_torch(Attention().eval(), (q, k, v, mask), tmp_path / "o", verify_inputs="auto")
    n, entry = _sets(tmp_path / "o")["auto:masked-row"]
    assert "error" not in entry and "(inputs attn_mask)" in entry["description"]
    stored = _stored(tmp_path / "o", f"set.{n}.input.attn_mask")
    assert stored.dtype == torch.bool and stored.shape == mask.shape
    assert not stored[0, 0, 0].any()  # one query row fully masked (all False) ...
    assert stored[0, 0, 1].all()  # ... and the next one not masked at all
    assert torch.equal(stored[1:], mask[1:])  # the rest of the mask is the example's
    # What eager PyTorch gives for the fully masked row is the reference. torch 2.15's SDPA gives
    # zeros there (not NaN); RLX's bundle matches it: the set passes.
    ref = _stored(tmp_path / "o", f"set.{n}.output.output")
    sq, sk, sv = (_stored(tmp_path / "o", f"set.{n}.input.{name}") for name in "qkv")
    assert torch.equal(ref, F.scaled_dot_product_attention(sq, sk, sv, attn_mask=stored))
    assert torch.equal(ref[0, :, 0], torch.zeros(2, 8))
    assert _rows(report)["auto:masked-row"].ok, report.summary()
    assert report.ok, report.summary()


class Dense(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, d: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.fc(d["a"]) * d["b"]


def test_explicit_sets_dict_file_tuple_and_an_eager_error(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Dense().eval()
    a, b = torch.randn(2, 4), torch.randn(2, 3)
    file = tmp_path / "set.safetensors"
    a2 = torch.randn(2, 4)
    safetensors_io.write(file, dict(safetensors_io.iter_torch({"input.d_a": a2, "d.b": torch.ones(2, 3)})))
    sets = [
        {"d.a": torch.full((2, 4), 0.5)},  # by path; d_b left out: the example's
        file,
        (torch.randn(2, 5), torch.randn(2, 3)),  # wrong width: eager PyTorch raises
        {"d_a": torch.randn(2, 4, dtype=torch.float64)},  # the wrong dtype: not run
    ]
    report = rti.from_torch(model, ({"a": a, "b": b},), tmp_path / "o", verify_inputs=sets)
    rows = report.input_sets
    assert [r.label for r in rows] == ["inputs:0", "file:set.safetensors", "inputs:2", "inputs:3"]
    assert rows[0].ok and rows[1].ok, report.summary()
    assert "d_b from the example" in rows[0].description
    assert not rows[2].ok and "eager PyTorch raised RuntimeError" in rows[2].failures()
    assert not rows[3].ok and "input d_a is float64, the model's input is float32" in rows[3].failures()
    assert all(o.ok for o in report.outputs) and not report.ok  # the example passes; the failing sets fail it
    summary = report.summary()
    assert "BAD input set inputs:2: input set: eager PyTorch raised RuntimeError" in summary
    assert "BAD input set inputs:3" in summary and "inputs:0" not in summary
    out = tmp_path / "o"
    with torch.no_grad():
        assert torch.equal(_stored(out, "set.1.output.output"), model({"a": a2, "b": torch.ones(2, 3)}))
    assert torch.equal(_stored(out, "set.0.input.d_b"), b)
    entries = torchir.load(out).input_sets
    assert "error" in entries[2] and "set.2.input.d_a" not in safetensors_io.read(out / layout.REFERENCE)
    assert json.loads((out / "report.json").read_text())["input_sets"][2]["ok"] is False
    # Mistakes in the call itself are bad input, before anything runs or after capture names the inputs.
    with pytest.raises(InputError, match="no input named 'z'"):
        rti.from_torch(model, ({"a": a, "b": b},), tmp_path / "p", verify_inputs=[{"z": a}])
    with pytest.raises(InputError, match="no such file"):
        rti.from_torch(model, ({"a": a, "b": b},), tmp_path / "p", verify_inputs=[tmp_path / "none.safetensors"])
    with pytest.raises(InputError, match="has 1 tensor"):
        rti.from_torch(model, ({"a": a, "b": b},), tmp_path / "p", verify_inputs=[(a,)])
    assert not (tmp_path / "p").exists()


def test_build_reverifies_the_sets_from_the_files(tmp_path: Path) -> None:
    torch.manual_seed(0)
    out = tmp_path / "o"
    x, y = torch.randn(3, 5) * 4, torch.rand(3, 5) + 1
    first = rti.from_torch(FloorDiv().eval(), (x, y), out, verify_inputs=["auto", (x + 1, y)])
    assert first.ok, first.summary()
    again = rti.build(out)  # no model: the sets come from torch-ir.json and reference.safetensors
    assert [(r.label, r.ok) for r in again.input_sets] == [(r.label, r.ok) for r in first.input_sets]
    assert again.ok and len(again.input_sets) == 6
    # Change one stored eager output: build now reports that set (and only it) failing.
    ref = {k: torch.from_numpy(t.to_numpy().copy()) for k, t in safetensors_io.read(out / layout.REFERENCE).items()}
    ref["set.5.output.output_1"] = ref["set.5.output.output_1"] + 1
    safetensors_io.write(out / layout.REFERENCE, dict(safetensors_io.iter_torch(ref)))
    broken = rti.build(out)
    assert not broken.ok and [r.ok for r in broken.input_sets] == [True] * 5 + [False]
    assert "BAD input set inputs:1: output_1" in broken.summary()
    # diagnose judges the example's outputs: a failing extra set is not "accumulated drift"
    assert cli_main(["diagnose", str(out)]) == ExitCode.OK


def test_unknown_keys_in_a_set_file_and_sets_without_verification(tmp_path: Path) -> None:
    x, y = torch.randn(3, 5), torch.rand(3, 5) + 1
    path = tmp_path / "set.safetensors"
    safetensors_io.write(path, dict(safetensors_io.iter_torch({"x": x, "maks": y, "output.output_0": x})))
    with pytest.raises(InputError, match="no input named 'maks'"):
        rti.from_torch(FloorDiv().eval(), (x, y), tmp_path / "o", verify_inputs=[path])
    report = rti.from_torch(FloorDiv().eval(), (x, y), tmp_path / "n", verify=False, verify_inputs=["auto"])
    assert any("not verified" in n for n in report.notes)
    assert "Verdict: **not verified**" in (tmp_path / "n" / "report.md").read_text()


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.emb(input_ids) * attention_mask[..., None]
        return self.head(h).softmax(-1)


def test_auto_token_ids_stay_in_range(tmp_path: Path) -> None:
    torch.manual_seed(0)
    ids = torch.randint(2, 40, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[1, 5:] = 0
    out = tmp_path / "o"
    report = rti.from_torch(Embed().eval(), (ids, mask), out, verify_inputs="auto")
    assert report.ok, report.summary()
    sets = _sets(out)
    assert all("error" not in e for _, e in sets.values())
    assert {"auto:rounding", "auto:ties", "auto:masked-row", "auto:int-min", "auto:int-max"} <= set(sets)
    lo, hi = int(ids.min()), int(ids.max())
    for label, (k, _) in sets.items():
        got = _stored(out, f"set.{k}.input.input_ids")
        assert got.dtype == torch.int64 and got.shape == ids.shape
        assert lo <= int(got.min()) and int(got.max()) <= hi, label  # never an index past the embedding
    assert (_stored(out, f"set.{sets['auto:int-min'][0]}.input.input_ids") == lo).all()
    assert (_stored(out, f"set.{sets['auto:int-max'][0]}.input.input_ids") == hi).all()
    k, _ = sets["auto:masked-row"]
    assert torch.equal(_stored(out, f"set.{k}.input.attention_mask")[0], torch.zeros(7, dtype=torch.int64))
    assert torch.equal(_stored(out, f"set.{k}.input.input_ids"), ids)  # token ids unchanged there


def test_dynamic_sets_at_other_sizes(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(4, 6) * 5, torch.rand(4, 6) + 1
    batch = Dim("batch", min=2, max=8)
    ds = {"x": {0: batch}, "y": {0: batch}}
    sets = ["auto", (torch.randn(7, 6), torch.rand(7, 6) + 1), (torch.randn(9, 6), torch.rand(9, 6) + 1)]
    report = rti.from_torch(FloorDiv().eval(), (x, y), tmp_path / "o", dynamic_shapes=ds, verify_inputs=sets)
    rows = _rows(report)
    assert all(r.ok for label, r in rows.items() if label != "inputs:2"), report.summary()
    assert not rows["inputs:2"].ok and "batch" in rows["inputs:2"].failures()  # 9 is past the range
    k, _ = _sets(tmp_path / "o")["auto:rounding"]
    assert _stored(tmp_path / "o", f"set.{k}.input.x").shape == (4, 6)  # auto sets: the example's sizes


def test_cli_verify_inputs(tmp_path: Path) -> None:
    model_file = tmp_path / "m.py"
    model_file.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.div(x, 3, rounding_mode='floor').softmax(-1)\n"
        "model = M().eval()\n"
        "example_inputs = (torch.randn(2, 6),)\n"
    )
    data = tmp_path / "x.safetensors"
    safetensors_io.write(data, dict(safetensors_io.iter_torch({"x": torch.arange(12.0).reshape(2, 6)})))
    code = cli_main(
        [str(model_file), "-o", str(tmp_path / "o"), "-q", "--verify-inputs", str(data), "--verify-inputs", "auto"]
    )
    assert code == ExitCode.OK
    labels = [e["label"] for e in torchir.load(tmp_path / "o").input_sets]
    assert labels[0] == "file:x.safetensors" and "auto:rounding" in labels
    assert np.array_equal(_stored(tmp_path / "o", "set.0.input.x").numpy(), np.arange(12.0).reshape(2, 6))
    assert cli_main([str(model_file), "-o", str(tmp_path / "p"), "-q", "--verify-inputs", "x.npz"]) == 2


class TopK(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values, indices = torch.topk(x, 3, dim=-1)
        return x.argmax(-1), values, indices


def test_auto_ties_find_topk_tie_order(tmp_path: Path) -> None:
    """A finding of the tie sets (RLX 0.2.19, torch 2.15): on tied values RLX's TopK returns the
    lowest indices first, PyTorch's CPU topk another order (libstdc++'s nth_element: 8, 6, 7 in a row of
    ten zeros). The values agree, and so does argmax; the indices pass as a tie choice (`verify/ties.py`),
    and the row says so."""
    torch.manual_seed(0)
    report = rti.from_torch(TopK().eval(), (torch.randn(4, 10),), tmp_path / "o", verify_inputs="auto")
    assert report.ok, report.summary()
    rows = _rows(report)
    for label in ("auto:ties", "auto:zeros"):
        chosen = {o.name for o in rows[label].outputs if o.judged_by == "tie choice"}
        assert chosen == {"output_2"}, rows[label].outputs  # topk's indices only
    k, _ = _sets(tmp_path / "o")["auto:zeros"]
    assert not _stored(tmp_path / "o", f"set.{k}.input.x").any()
