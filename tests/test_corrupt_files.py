"""Corrupt or inconsistent files: safetensors headers, torch-ir.json, weights and reference vs torch-ir,
and a bundle's meta.json / weights / HIR. Each is refused with an error naming the file, the field or
tensor and the bad value (exit 2), never an abort, an internal error or silently wrong numbers."""

from __future__ import annotations

import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import limits, safetensors_io, torchir
from rlx_torch_import.bundle.model import BundleModel, _core_failure
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import BundleError, ExitCode, RlxError, TorchIRError

HUGE = 2**31  # [HUGE, HUGE] float32 is 16 EiB: over any machine's memory


@pytest.fixture(scope="module")
def conversion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small verified conversion (torch-ir, weights, reference, bundle) the tests copy and break."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    out = tmp_path_factory.mktemp("corrupt") / "o"
    report = rti.from_torch(model, (torch.randn(3, 6),), out, per_node=False)
    assert report.ok, report.summary()
    return out


@pytest.fixture
def copy(conversion: Path, tmp_path: Path) -> Path:
    """A private copy of the conversion, free to break."""
    return Path(shutil.copytree(conversion, tmp_path / "o"))


def _edit_ir(directory: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = directory / "torch-ir.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _edit_tensors(path: Path, edit: Callable[[dict[str, tuple[str, tuple[int, ...], bytes]]], None]) -> None:
    """Rewrite a safetensors file after `edit` changed its {name: (dtype, shape, bytes)}."""
    tensors = {k: (t.dtype, t.shape, t.data.tobytes()) for k, t in safetensors_io.read(path).items()}
    edit(tensors)
    safetensors_io.write(path, dict(tensors))


def _build(directory: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`rlx-torch-import build DIR` in this process: (exit code, stderr)."""
    code = cli_main(["build", str(directory), "-q", "--no-per-node"])
    return code, capsys.readouterr().err


def _raw(header: Any = None, data: bytes = b"", *, text: bytes | None = None) -> bytes:
    blob = text if text is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(blob)) + blob + data


def _f32(shape: list[int], start: int = 0) -> dict[str, Any]:
    return {"dtype": "F32", "shape": shape, "data_offsets": [start, start + 4 * int(np.prod(shape))]}


# ---- safetensors_io.read: the header is validated before any view is made ----

SAFETENSORS_CASES = {
    "empty file": (b"", r"0 bytes, shorter than the 8-byte header length it starts with"),
    "header length garbage": (
        (2**60).to_bytes(8, "little") + b"{}",
        r"header length \(first 8 bytes, little-endian\) is 1152921504606846976, but only 2 bytes follow it",
    ),
    "not UTF-8": (_raw(text=b'{"a\xff": 1}'), r"header is not UTF-8 \(byte 3 of the header"),
    "not JSON": (_raw(text=b'{"a":'), r"header: not valid JSON \(Expecting value"),
    "deeply nested": (_raw(text=b"[" * 100_000), r"header: not valid JSON \(maximum recursion depth"),
    "not an object": (_raw([1, 2]), r"header is a JSON list, not an object of tensors"),
    "duplicate key": (
        _raw(text=b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {}}', data=bytes(4)),
        r"header: key 'a' appears twice in one JSON object",
    ),
    "metadata not strings": (
        _raw({"__metadata__": {"k": 1}}),
        r"header field '__metadata__'\['k'\] is 1, not a string",
    ),
    "entry not an object": (_raw({"w": [1]}), r"tensor 'w': header entry is \[1\], not an object"),
    "missing field": (
        _raw({"w": {"dtype": "F32", "shape": [1]}}, bytes(4)),
        r"tensor 'w': header entry has no field 'data_offsets'",
    ),
    "unknown dtype": (
        _raw({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)),
        r"tensor 'w': field 'dtype' is 'C64', not one of F32, F16, BF16",
    ),
    "negative dim": (_raw({"w": _f32([-1])}, bytes(4)), r"tensor 'w': field 'shape': dim 0 of shape \[-1\] is -1"),
    "bool dim": (_raw({"w": {**_f32([1]), "shape": [True]}}, bytes(4)), r"dim 0 of shape \[True\] is True"),
    "shape over memory": (
        _raw({"w": {"dtype": "F32", "shape": [HUGE, HUGE], "data_offsets": [0, 4]}}, bytes(4)),
        r"tensor 'w': field 'shape': float32\[2147483648, 2147483648\] is 4611686018427387904 elements, .* more "
        r"than this machine's physical memory",
    ),
    "offsets not a pair": (
        _raw({"w": {**_f32([1]), "data_offsets": [0]}}, bytes(4)),
        r"tensor 'w': field 'data_offsets' is \[0\], not \[start, end\]",
    ),
    "offsets past the data": (
        _raw({"w": {**_f32([2]), "data_offsets": [0, 16]}}, bytes(8)),
        r"tensor 'w': field 'data_offsets' is \[0, 16\], outside the data section \(0 <= start <= end <= 8",
    ),
    "offsets reversed": (
        _raw({"w": {**_f32([0]), "data_offsets": [4, 0]}}, bytes(8)),
        r"field 'data_offsets' is \[4, 0\], outside the data section",
    ),
    "byte count vs shape": (
        _raw({"w": {**_f32([2]), "data_offsets": [0, 4]}}, bytes(8)),
        r"tensor 'w': field 'data_offsets' \[0, 4\] holds 4 bytes, but its dtype and shape, F32 \[2\], take 8",
    ),
    "overlapping tensors": (
        _raw({"a": _f32([2]), "b": _f32([1], start=4)}, bytes(8)),
        r"tensors 'a' and 'b' overlap: 'a' ends at byte 8 of the data, 'b' starts at 4",
    ),
}


@pytest.mark.parametrize("case", list(SAFETENSORS_CASES))
def test_corrupt_safetensors_is_named(case: str, tmp_path: Path) -> None:
    blob, message = SAFETENSORS_CASES[case]
    path = tmp_path / "w.safetensors"
    path.write_bytes(blob)
    with pytest.raises(BundleError, match=message) as info:
        safetensors_io.read(path)
    assert str(path) in info.value.message and info.value.exit_code == ExitCode.BAD_INPUT


def test_header_over_the_format_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as f:  # a sparse file: the header length fits the file, not the format's cap
        f.write((safetensors_io.MAX_HEADER + 1).to_bytes(8, "little"))
        f.truncate(8 + safetensors_io.MAX_HEADER + 1)
    with pytest.raises(BundleError, match=r"header length .* is 100000001, but a header may hold at most 100000000"):
        safetensors_io.read(path)


def test_valid_safetensors_still_reads(tmp_path: Path) -> None:
    """Empty tensors, metadata and gaps between tensors are fine; the values come back exactly."""
    values = np.arange(6, dtype=np.float32)
    header = {"__metadata__": {"format": "pt"}, "a": _f32([2, 3]), "e": _f32([0, 5], start=24), "z": _f32([1], 28)}
    path = tmp_path / "ok.safetensors"
    path.write_bytes(_raw(header, values.tobytes() + bytes(8)))
    found = safetensors_io.read(path)
    assert {k: t.shape for k, t in found.items()} == {"a": (2, 3), "e": (0, 5), "z": (1,)}
    np.testing.assert_array_equal(found["a"].to_numpy(), values.reshape(2, 3))


# ---- torch-ir.json: sizes, dtypes, duplicate names, field paths ----


def _dup_node(doc: dict[str, Any]) -> None:
    doc["nodes"].append({**doc["nodes"][0], "outputs": [{**doc["nodes"][0]["outputs"][0], "name": "other"}]})


TORCH_IR_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "input over memory": (
        lambda d: d["inputs"][0].update(shape=[HUGE, HUGE]),
        r"inputs\[0\]\.shape: float32\[2147483648, 2147483648\] is 4611686018427387904 elements, about 2\^64 bytes "
        r".*more than this machine's physical memory \(\d+ bytes",
    ),
    "node output over memory": (
        lambda d: d["nodes"][0]["outputs"][0].update(shape=[2**40, 4]),
        r"nodes\[0\]\.outputs\[0\]\.shape: float32\[1099511627776, 4\] is 4398046511104 elements, 17592186044416 bytes",
    ),
    "weight over memory": (
        lambda d: d["weights"][0].update(shape=[HUGE, HUGE, HUGE]),
        r"weights\[0\]\.shape: float32\[2147483648, 2147483648, 2147483648\]",
    ),
    "negative dim": (lambda d: d["inputs"][0].update(shape=[3, -6]), r"inputs\[0\]\.shape\[1\]: -6 is not a size"),
    "boolean dim": (lambda d: d["outputs"][0].update(shape=[True, 2]), r"outputs\[0\]\.shape\[0\]: True is not a size"),
    "unknown dtype": (
        lambda d: d["nodes"][1]["outputs"][0].update(dtype="float33"),
        r"nodes\[1\]\.outputs\[0\]\.dtype: dtype 'float33' is not a known dtype name",
    ),
    "dtype none on an input": (
        lambda d: d["inputs"][0].update(dtype="none"),
        r"inputs\[0\]\.dtype: dtype 'none' is not a known dtype name",
    ),
    "duplicate node name": (
        _dup_node,
        r"nodes\[3\]\.name: node name 'linear' is defined twice \(first at nodes\[0\]\.name\)",
    ),
    "value defined twice": (
        lambda d: d["nodes"][1]["outputs"][0].update(name="input"),
        r"nodes\[1\]\.outputs\[0\]\.name: value 'input' is defined twice \(first at inputs\[0\]\.name\)",
    ),
    "weight name twice": (
        lambda d: d["weights"][1].update(name=d["weights"][0]["name"]),
        r"weights\[1\]\.name: value 'p_0_weight' is defined twice \(first at weights\[0\]\.name\)",
    ),
    "weight key twice": (
        lambda d: d["weights"][1].update(key=d["weights"][0]["key"]),
        r"weights\[1\]\.key: weight key '0\.weight' is defined twice \(first at weights\[0\]\.key\)",
    ),
    "output name twice": (
        lambda d: d["outputs"].append(dict(d["outputs"][0])),
        r"outputs\[1\]\.name: output name 'output' is defined twice \(first at outputs\[0\]\.name\)",
    ),
    "wrong field type": (
        lambda d: d["nodes"][2].update(target=7),
        r"nodes\[2\]\.target: expected a string, found int 7",
    ),
    "list payload not a list": (
        lambda d: d["nodes"][0]["args"].append({"list": 5}),
        r"nodes\[0\]\.args\[3\]\.list: expected a list, found int 5",
    ),
    "malformed dropped entry": (
        lambda d: d.update(dropped=[{"node": "n"}]),
        r"dropped\[0\]: missing field 'target'",
    ),
}


@pytest.mark.parametrize("case", list(TORCH_IR_CASES))
def test_torch_ir_declarations_are_checked(case: str, conversion: Path) -> None:
    edit, message = TORCH_IR_CASES[case]
    doc = json.loads((conversion / "torch-ir.json").read_text())
    edit(doc)
    with pytest.raises(TorchIRError, match=message) as info:
        torchir.parse(doc, "torch-ir.json")
    assert info.value.message.startswith("torch-ir.json: ")


def _symbolic_doc(conversion: Path, example: int, hi: int | None) -> dict[str, Any]:
    """The static conversion's torch-ir with its batch dim made a symbol `s0` (example, max `hi`)."""
    doc = json.loads((conversion / "torch-ir.json").read_text())
    doc["symbols"] = [{"id": 0, "name": "s0", "label": "batch", "min": 1, "max": hi, "example": example}]
    for spec in [doc["inputs"][0], *(o for n in doc["nodes"] for o in n["outputs"]), doc["outputs"][0]]:
        spec["shape"][0] = "s0"
    return doc


def test_symbolic_shapes_are_checked_at_the_max_the_example_and_each_binding(conversion: Path) -> None:
    with pytest.raises(
        TorchIRError,
        match=r"torch-ir.json: inputs\[0\]\.shape \['s0', 6\] at the symbols' max \(s0=1099511627776\) "
        r"\(\[1099511627776, 6\]\): float32\[1099511627776, 6\] is 6597069766656 elements",
    ):
        torchir.parse(_symbolic_doc(conversion, 3, 2**40), "torch-ir.json")
    with pytest.raises(TorchIRError, match=r"inputs\[0\]\.shape \['s0', 6\] at the example sizes"):
        torchir.parse(_symbolic_doc(conversion, 2**40, None), "torch-ir.json")
    ir = torchir.parse(_symbolic_doc(conversion, 3, None), "torch-ir.json")  # unbounded: fine until bound
    assert torchir.specialize(ir, {"s0": 5}).inputs[0].shape == [5, 6]
    with pytest.raises(
        TorchIRError, match=r"torch-ir.json: inputs\[0\]\.shape \['s0', 6\] at s0=1099511627776 .* more than this"
    ):
        torchir.specialize(ir, {"s0": 2**40})  # refused before anything is lowered at that binding
    with pytest.raises(TorchIRError, match=r"inputs\[0\]\.shape: \['s0', 6\] is \[-1, 6\] at s0=-1: a negative size"):
        torchir.specialize(ir, {"s0": -1})
    doc = _symbolic_doc(conversion, 3, 8)
    doc["sweep"] = [{"label": "batch=max", "binding": {"s7": 8}}]
    with pytest.raises(TorchIRError, match=r"sweep\[0\]\.binding: 's7' is not a declared symbol \(s0\)"):
        torchir.parse(doc, "torch-ir.json")


def test_torch_ir_with_repeated_json_keys_is_refused(copy: Path) -> None:
    text = (copy / "torch-ir.json").read_text()
    (copy / "torch-ir.json").write_text(text.replace('"name": "sequential"', '"name": "a", "name": "sequential"', 1))
    with pytest.raises(TorchIRError, match=r"torch-ir.json: key 'name' appears twice in one JSON object"):
        torchir.load(copy)


def test_size_limit_is_physical_memory() -> None:
    import os

    assert limits.memory_limit() == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert limits.check_tensor_size([2, 3], "bfloat16", "x", TorchIRError) == 12
    limit = limits.memory_limit()
    assert limits.check_tensor_size([limit], "uint8", "x", TorchIRError) == limit  # at the limit: fine
    with pytest.raises(TorchIRError, match=rf"x: uint8\[{limit + 1}\] is {limit + 1} elements"):
        limits.check_tensor_size([limit + 1], "uint8", "x", TorchIRError)


# ---- `build DIR`: every file checked against torch-ir before anything is lowered (exit 2) ----


def _w(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda d: _edit_tensors(d / "weights.safetensors", edit)


def _r(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda d: _edit_tensors(d / "reference.safetensors", edit)


def _garbage_length(path: Path) -> None:
    blob = bytearray(path.read_bytes())
    blob[:8] = (2**60).to_bytes(8, "little")
    path.write_bytes(bytes(blob))


BUILD_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "input declared [2**31, 2**31]": (
        lambda d: _edit_ir(d, lambda doc: doc["inputs"][0].update(shape=[HUGE, HUGE])),
        r"torch-ir.json: inputs\[0\]\.shape: float32\[2147483648, 2147483648\] is 4611686018427387904 elements",
    ),
    "node output declared huge": (
        lambda d: _edit_ir(d, lambda doc: doc["nodes"][1]["outputs"][0].update(shape=[2**40, 4])),
        r"torch-ir.json: nodes\[1\]\.outputs\[0\]\.shape: float32\[1099511627776, 4\]",
    ),
    "duplicate node": (
        lambda d: _edit_ir(d, _dup_node),
        r"torch-ir.json: nodes\[3\]\.name: node name 'linear' is defined twice",
    ),
    "torch-ir not JSON": (
        lambda d: (d / "torch-ir.json").write_text("{nope"),
        r"torch-ir.json: not valid JSON",
    ),
    "weights header length garbage": (
        lambda d: _garbage_length(d / "weights.safetensors"),
        r"weights.safetensors: not a safetensors file: header length \(first 8 bytes, little-endian\) is "
        r"1152921504606846976, but only \d+ bytes follow it",
    ),
    "weight of another shape": (
        _w(lambda t: t.update({"0.bias": ("float32", (5,), bytes(20))})),
        r"weights.safetensors: tensor '0\.bias' is float32\[5\]; .*torch-ir.json weights\[1\] \(p_0_bias\) declares "
        r"float32\[4\]",
    ),
    "weight of another dtype": (
        _w(lambda t: t.update({"0.bias": ("float64", (4,), bytes(32))})),
        r"weights.safetensors: tensor '0\.bias' is float64\[4\]; .*torch-ir.json weights\[1\] \(p_0_bias\) declares "
        r"float32\[4\]",
    ),
    "weight missing": (
        _w(lambda t: t.pop("2.weight")),
        r"weights.safetensors: 1 weight\(s\) .*torch-ir.json declares are missing: '2\.weight' \(float32\[2, 4\], "
        r"weights\[2\]\)",
    ),
    "reference without input.*": (
        _r(lambda t: t.pop("input.input")),
        r"reference.safetensors: no tensor 'input\.input' \(.*torch-ir.json inputs\[0\] \(the example\): "
        r"float32\[3, 6\]\); the file holds output\.output",
    ),
    "reference output of another shape": (
        _r(lambda t: t.update({"output.output": ("float32", (2, 3), bytes(24))})),
        r"reference.safetensors: tensor 'output\.output' is float32\[2, 3\]; .*torch-ir.json outputs\[0\] "
        r"\(the example\) is float32\[3, 2\]",
    ),
    "reference input of another dtype": (
        _r(lambda t: t.update({"input.input": ("float64", (3, 6), bytes(144))})),
        r"reference.safetensors: tensor 'input\.input' is float64\[3, 6\]; .*inputs\[0\] \(the example\) is "
        r"float32\[3, 6\]",
    ),
}


@pytest.mark.parametrize("case", list(BUILD_CASES))
def test_build_refuses_inconsistent_files(case: str, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corrupt, message = BUILD_CASES[case]
    corrupt(copy)
    code, err = _build(copy, capsys)
    assert code == ExitCode.BAD_INPUT, err
    assert err.startswith("error: ") and "internal error" not in err, err
    assert len(re.findall(message, err)) == 1, err


def test_build_notes_undeclared_weights(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _w(lambda t: t.update({"stray": ("float32", (2,), bytes(8))}))(copy)
    code, err = _build(copy, capsys)
    assert code == ExitCode.OK, err
    notes = json.loads((copy / "report.json").read_text())["notes"]
    assert "weights.safetensors holds 1 tensor(s) torch-ir.json does not declare (not used): stray" in notes


def test_reference_sweep_and_set_entries_are_checked(conversion: Path) -> None:
    from rlx_torch_import.torchir import check_reference

    ir = torchir.load(conversion)
    ref = conversion / "reference.safetensors"
    ir.sweep = [{"label": "batch=max (3)", "binding": {}}]
    message = (
        r"reference.safetensors: no tensor 'sweep\.0\.input\.input' \(.*torch-ir.json inputs\[0\] \(at sweep\[0\], "
        r"batch=max \(3\)\): float32\[3, 6\]\)"
    )
    with pytest.raises(BundleError, match=message):
        check_reference(ir, ref)
    ir.sweep = [{"label": "batch=max (3)", "binding": {}, "error": "eager raised"}]  # none stored: fine
    ir.input_sets = [{"label": "inputs:0", "description": "mine"}]
    with pytest.raises(
        BundleError,
        match=r"no tensor 'set\.0\.input\.input' \(.*torch-ir.json inputs\[0\] \(in "
        r"input_sets\[0\], inputs:0\): float32\[3, 6\]\); the file holds "
        r"input\.input, output\.output",
    ):
        check_reference(ir, ref)
    ir.input_sets = [{"label": "inputs:0", "description": "mine", "error": "eager raised"}]  # none stored: fine
    assert set(check_reference(ir, ref)) == {"input.input", "output.output"}


# ---- a bundle: meta.json, weights.safetensors vs params, model.hir.json ----


def _edit_meta(bundle: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    meta = json.loads((bundle / "meta.json").read_text())
    edit(meta)
    (bundle / "meta.json").write_text(json.dumps(meta))


BUNDLE_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "meta.json not JSON": (lambda b: (b / "meta.json").write_text("{"), r"meta.json: not valid JSON \(Expecting"),
    "meta.json repeats a key": (
        lambda b: (b / "meta.json").write_text('{"format": 1, "format": 2}'),
        r"meta.json: key 'format' appears twice in one JSON object",
    ),
    "meta.json a list": (lambda b: (b / "meta.json").write_text("[]"), r"meta.json: top level is a JSON list"),
    "meta.json without params": (
        lambda b: _edit_meta(b, lambda m: m.pop("params")),
        r"meta.json: missing field 'params'",
    ),
    "input dtype of the wrong type": (
        lambda b: _edit_meta(b, lambda m: m["inputs"][0].update(dtype=3)),
        r"meta.json: inputs\[0\]\.dtype: expected a string, found int 3",
    ),
    "unknown output dtype": (
        lambda b: _edit_meta(b, lambda m: m["outputs"][0].update(dtype="complex64")),
        r"meta.json: outputs\[0\]\.dtype: 'complex64' is not one of float64, float32, float16, bfloat16",
    ),
    "half rlx_dtype at the boundary": (
        lambda b: _edit_meta(b, lambda m: m["inputs"][0].update(rlx_dtype="float16")),
        r"meta.json: inputs\[0\]\.rlx_dtype: 'float16' is not a dtype RLX takes at the boundary",
    ),
    "input shape over memory": (
        lambda b: _edit_meta(b, lambda m: m["inputs"][0].update(shape=[HUGE, HUGE])),
        r"meta.json: inputs\[0\]\.shape: float32\[2147483648, 2147483648\] is 4611686018427387904 elements",
    ),
    "negative param dim": (
        lambda b: _edit_meta(b, lambda m: m["params"][0].update(shape=[-4])),
        r"meta.json: params\[0\]\.shape\[0\]: -4 is not a size",
    ),
    "input named twice": (
        lambda b: _edit_meta(b, lambda m: m["inputs"].append(dict(m["inputs"][0]))),
        r"meta.json: inputs\[1\]\.name: 'input' is already the name of inputs\[0\]",
    ),
    "output_tree naming no output": (
        lambda b: _edit_meta(b, lambda m: m.update(output_tree={"output": "ghost"})),
        r"meta.json: output_tree\.output: 'ghost' is not one of the outputs",
    ),
    "weight of another shape than its param": (
        lambda b: _edit_tensors(
            b / "weights.safetensors", lambda t: t.update({"0.bias": ("float32", (3,), bytes(12))})
        ),
        r"weights.safetensors: tensor '0\.bias' is float32\[3\]; meta.json params declares float32\[4\]",
    ),
    "weight of another dtype than its param": (
        lambda b: _edit_tensors(b / "weights.safetensors", lambda t: t.update({"0.bias": ("int32", (4,), bytes(16))})),
        r"weights.safetensors: tensor '0\.bias' is int32\[4\]; meta.json params declares float32\[4\]",
    ),
    "weight missing and one extra": (
        lambda b: _edit_tensors(b / "weights.safetensors", lambda t: t.update(stray=t.pop("2.bias"))),
        r"weights.safetensors: tensors do not match meta.json's params \(missing '2\.bias'; not in meta.json's "
        r"params: 'stray'\)",
    ),
    "weights header garbage": (
        lambda b: _garbage_length(b / "weights.safetensors"),
        r"weights.safetensors: not a safetensors file: header length",
    ),
    "model.hir.json not JSON": (
        lambda b: (b / "model.hir.json").write_text("{not json"),
        r"RLX could not load the bundle: model.hir.json is not valid RLX HIR",
    ),
}


@pytest.mark.parametrize("case", list(BUNDLE_CASES))
def test_corrupt_bundle_is_a_bad_input(case: str, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corrupt, message = BUNDLE_CASES[case]
    bundle = copy / "bundle"
    corrupt(bundle)
    with pytest.raises(BundleError, match=message) as info:
        BundleModel(bundle)
    assert not isinstance(info.value, RlxError) and info.value.exit_code == ExitCode.BAD_INPUT
    np.savez(copy / "in.npz", input=np.zeros((3, 6), np.float32))
    assert cli_main(["run", str(bundle), "--inputs", str(copy / "in.npz")]) == ExitCode.BAD_INPUT
    assert "error: " in capsys.readouterr().err


def test_core_refusals_and_failures_map_to_their_errors() -> None:
    """A CheckError from the core (a refused input) is a BundleError, exit 2; a RuntimeError (RLX failed on
    checked input) an RlxError, exit 5."""
    from rlx_torch_import import _core

    check_error = getattr(_core, "CheckError", ValueError)
    refused = _core_failure(check_error("input 'x': 8 bytes, expected 12"), "b: RLX failed while running")
    assert type(refused) is BundleError and refused.exit_code == ExitCode.BAD_INPUT
    assert refused.message == "b: RLX failed while running: input 'x': 8 bytes, expected 12"
    failed = _core_failure(RuntimeError("RLX panicked while running: index out of bounds"), "b: running")
    assert type(failed) is RlxError and failed.exit_code == ExitCode.INTERNAL
