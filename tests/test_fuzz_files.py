"""Fuzzing (hypothesis): random byte and field corruptions of every file a conversion writes.

A small model is converted once; each example copies the conversion, damages one file (flipped,
inserted or truncated bytes; a garbage safetensors header length; a JSON field deleted, retyped,
duplicated or set to a hostile value: huge, negative, unicode, nested) and hands it to the code that
reads it (`build` for torch-ir.json / weights.safetensors / reference.safetensors, `BundleModel` +
`run` for the bundle's meta.json / model.hir.json / weights.safetensors). Each must either work or
raise one of our own errors (`RtiError`): never another exception type, a Rust panic crossing the
FFI boundary (PyO3's PanicException is a BaseException), or a crash of the process (which would end
this test run). `--hypothesis-show-statistics` prints how each example ended (`event`)."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import rlx_torch_import as rti
from rlx_torch_import.errors import RtiError

RUNS = 60  # hypothesis examples per file kind and mutation family


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)
        self.register_buffer("steps", torch.arange(5, dtype=torch.int64))

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) + self.steps[ids].to(x.dtype)[:, None]


@pytest.fixture(scope="module")
def conversion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("base") / "out"
    torch.manual_seed(0)
    inputs = (torch.randn(3, 6), torch.tensor([4, 0, 2]))
    assert rti.from_torch(Small(), inputs, out, per_node=False).ok
    return out


FEED = {"x": np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32), "ids": np.array([4, 0, 2])}

# Hostile JSON values: what a damaged or malicious file may hold where a field is expected.
HOSTILE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, -1, 2**31, 2**63, 2**64, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["../../etc/passwd", "a" * 10_000, 'naïve\n"quote', "F32", "I8", "float32", "Bool"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and list positions) into a JSON document."""
    found = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*prefix, i))
    return found


@st.composite
def json_mutations(draw: st.DrawFn, doc: Any) -> tuple[str, Any]:
    """A copy of `doc` with one field damaged, and what was done (for the statistics)."""
    doc = json.loads(json.dumps(doc))
    path = draw(st.sampled_from(_paths(doc)[1:]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    how = draw(st.sampled_from(["delete", "replace", "duplicate", "swap"]))
    if how == "delete":
        del parent[key]
    elif how == "replace":
        parent[key] = draw(HOSTILE)
    elif how == "duplicate" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key])))
    elif how == "swap" and isinstance(parent, list) and len(parent) > 1:
        other = draw(st.integers(0, len(parent) - 1))
        parent[key], parent[other] = parent[other], parent[key]
    else:
        parent[key] = draw(HOSTILE)
        how = "replace"
    return how, doc


@st.composite
def byte_mutations(draw: st.DrawFn, data: bytes) -> tuple[str, bytes]:
    """`data` with bytes flipped, inserted or cut off, or (safetensors) a garbage header length."""
    how = draw(st.sampled_from(["flip", "insert", "truncate", "header-length"]))
    buf = bytearray(data)
    if how == "flip":
        for _ in range(draw(st.integers(1, 8))):
            pos = draw(st.integers(0, len(buf) - 1))
            buf[pos] ^= draw(st.integers(1, 255))
    elif how == "insert":
        pos = draw(st.integers(0, len(buf)))
        buf[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    elif how == "truncate":
        del buf[draw(st.integers(0, max(len(buf) - 1, 0))) :]
    else:
        buf[:8] = struct.pack("<Q", draw(st.integers(0, 2**64 - 1)))
    return how, bytes(buf)


@st.composite
def header_mutations(draw: st.DrawFn, data: bytes) -> tuple[str, bytes]:
    """A safetensors file whose JSON header has one field damaged (the length kept consistent)."""
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    how, header = draw(json_mutations(header))
    blob = json.dumps(header).encode()
    return how, struct.pack("<Q", len(blob)) + blob + data[8 + n :]


def _consume_conversion(directory: Path) -> str:
    report = rti.build(directory, per_node=False)
    return "verified" if report.ok else "parity failed"


def _consume_bundle(directory: Path) -> str:
    outputs = rti.BundleModel(directory / "bundle").run(FEED)
    assert set(outputs) == {"output"} and outputs["output"].shape == (3, 5), outputs
    return "ran"


def _check(
    conversion: Path, tmp: Path, file: str, mutate: Callable[[bytes], bytes], consume: Callable[[Path], str]
) -> None:
    """Damage `file` in a copy of the conversion and consume it: works, or raises our own error."""
    work = tmp / "c"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(conversion, work)
    target = work / file
    target.write_bytes(mutate(target.read_bytes()))
    try:
        event(consume(work))
    except RtiError as e:
        event(f"{type(e).__name__} (exit {e.exit_code})")
        assert str(e).strip(), "an error without a message"
    except BaseException as e:
        raise AssertionError(f"{file}: {type(e).__name__} escaped instead of our own error: {e}") from e


CONVERSION_FILES = ["torch-ir.json", "weights.safetensors", "reference.safetensors"]
BUNDLE_FILES = ["bundle/meta.json", "bundle/model.hir.json", "bundle/weights.safetensors"]
JSON_FILES = ["torch-ir.json", "bundle/meta.json", "bundle/model.hir.json"]
SAFETENSORS = ["weights.safetensors", "reference.safetensors", "bundle/weights.safetensors"]


def _consumer(file: str) -> Callable[[Path], str]:
    return _consume_bundle if file.startswith("bundle/") else _consume_conversion


FUZZ = settings(max_examples=RUNS, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("file", CONVERSION_FILES + BUNDLE_FILES)
@FUZZ
@given(data=st.data())
def test_byte_corruptions(conversion: Path, tmp_path: Path, file: str, data: st.DataObject) -> None:
    original = (conversion / file).read_bytes()
    how, damaged = data.draw(byte_mutations(original))
    event(how)
    _check(conversion, tmp_path, file, lambda _: damaged, _consumer(file))


@pytest.mark.parametrize("file", JSON_FILES)
@FUZZ
@given(data=st.data())
def test_json_field_corruptions(conversion: Path, tmp_path: Path, file: str, data: st.DataObject) -> None:
    how, doc = data.draw(json_mutations(json.loads((conversion / file).read_text())))
    event(how)
    _check(conversion, tmp_path, file, lambda _: json.dumps(doc).encode(), _consumer(file))


@pytest.mark.parametrize("file", SAFETENSORS)
@FUZZ
@given(data=st.data())
def test_safetensors_header_corruptions(conversion: Path, tmp_path: Path, file: str, data: st.DataObject) -> None:
    how, damaged = data.draw(header_mutations((conversion / file).read_bytes()))
    event(how)
    _check(conversion, tmp_path, file, lambda _: damaged, _consumer(file))


@pytest.fixture(scope="module")
def dynamic_conversion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dyn") / "out"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    assert rti.from_torch(model, (torch.randn(3, 4),), out, dynamic_shapes={"input": {0: batch}}, per_node=False).ok
    return out


OPS = ["MatMul", "Binary(Add)", "Activation(Relu)", "Param", "Reshape", "Cast", "Softmax", "Gather", "Nope"]


@st.composite
def text_mutations(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """`model.rlxmodel` (RLX's symbolic graph text) with a number, an op, a line or a dtype damaged."""
    import re

    lines = text.splitlines()
    how = draw(st.sampled_from(["number", "op", "drop-line", "repeat-line", "dtype", "dims"]))
    i = draw(st.integers(0, len(lines) - 1))
    if how == "number":
        spots = [m.span() for m in re.finditer(r"\d+", text)]
        start, end = draw(st.sampled_from(spots))
        value = draw(st.sampled_from(["0", "-1", str(2**31), str(2**64), str(10**40), "7"]))
        return how, text[:start] + value + text[end:]
    if how == "op":
        found = [op for op in OPS if op in lines[i]]
        if found:
            lines[i] = lines[i].replace(found[0], draw(st.sampled_from(OPS)), 1)
    elif how == "drop-line":
        del lines[i]
    elif how == "repeat-line":
        lines.insert(i, lines[i])
    elif how == "dtype":
        dtype = draw(st.sampled_from(["i8[", "bool[", "f64[", "u8[", "x["]))
        lines[i] = re.sub(r"\b(f32|i64|f64|i32|bool|i8)\[", dtype, lines[i], count=1)
    else:
        dims = draw(st.sampled_from(["batch_0, batch_0", "", "4294967296, 4"]))
        lines[i] = re.sub(r"\[([^\]]*)\]", f"[{dims}]", lines[i], count=1)
    return how, "\n".join(lines) + "\n"


def _consume_dynamic(directory: Path) -> str:
    model = rti.BundleModel(directory / "bundle")
    for batch in (1, 5, 16):
        out = model.run({"input": np.ones((batch, 4), np.float32)})
        assert list(out) == ["output"] and out["output"].shape == (batch, 2), out
    return "ran"


@FUZZ
@given(data=st.data())
def test_symbolic_graph_corruptions(dynamic_conversion: Path, tmp_path: Path, data: st.DataObject) -> None:
    file = "bundle/model.rlxmodel"
    if data.draw(st.booleans()):
        how, damaged = data.draw(text_mutations((dynamic_conversion / file).read_text(encoding="utf-8")))
        event(how)
        payload = damaged.encode()
    else:
        how, payload = data.draw(byte_mutations((dynamic_conversion / file).read_bytes()))
        event(how)
    _check(dynamic_conversion, tmp_path, file, lambda _: payload, _consume_dynamic)


@FUZZ
@given(data=st.data())
def test_dynamic_meta_corruptions(dynamic_conversion: Path, tmp_path: Path, data: st.DataObject) -> None:
    file = "bundle/meta.json"
    how, doc = data.draw(json_mutations(json.loads((dynamic_conversion / file).read_text(encoding="utf-8"))))
    event(how)
    _check(dynamic_conversion, tmp_path, file, lambda _: json.dumps(doc).encode(), _consume_dynamic)
