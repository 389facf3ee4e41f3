"""Converting the same model twice gives the same bytes (issue 13, "determinism"): torch-ir.json,
weights.safetensors, reference.safetensors, bundle/* and every crate file, whatever the output
folder is called, in the same process or in another one with another hash seed and working
directory. Only the reports differ, and only in their timings and the output path."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

import rlx_torch_import as rti
from models import make
from rlx_torch_import.frontend.torch.model_file import load_model_file

REPO = Path(__file__).resolve().parents[1]
REPORTS = ("report.json", "report.md", "report.html")
# report.json fields that measure this run rather than describe the conversion
VOLATILE = {"timings_s", "out_dir", "compile_ms", "run_ms"}


def digests(root: Path) -> dict[str, str]:
    """SHA-256 of every file under `root` by relative path (the reports left out), plus every
    folder (an empty one too)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            found[rel + "/"] = "dir"
        elif rel not in REPORTS:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def report_facts(root: Path) -> Any:
    """report.json without the fields that measure the run."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in VOLATILE}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return strip(json.loads((root / "report.json").read_text()))


def assert_same(a: Path, b: Path, expect: tuple[str, ...]) -> None:
    first, second = digests(a), digests(b)
    for rel in expect:  # the comparison covers every output kind
        assert rel in first, f"{rel} was not written in {a}: {sorted(first)}"
    assert first.keys() == second.keys(), sorted(first.keys() ^ second.keys())
    changed = sorted(k for k in first if first[k] != second[k])
    assert not changed, f"{a} and {b} differ in {changed}"
    assert report_facts(a) == report_facts(b), "the reports differ beyond timings and paths"


CORE = (
    "torch-ir.json",
    "weights.safetensors",
    "reference.safetensors",
    "bundle/model.hir.json",
    "bundle/weights.safetensors",
    "bundle/meta.json",
)


def crate_files(package: str, *extra: str) -> tuple[str, ...]:
    rels = (
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "src/lib.rs",
        "src/graph.rs",
        "src/host.rs",
        "src/weights.rs",
        "examples/run.rs",
        "tests/parity.rs",
        "testdata/reference.safetensors",
        *extra,
    )
    return tuple(f"{package}/{r}" for r in rels)


def test_small_mlp_twice_and_rebuilt(tmp_path: Path) -> None:
    for run in ("a", "b"):
        model, inputs = make("mlp")
        assert rti.from_torch(model, inputs, tmp_path / run, emit="crate").ok
    assert_same(tmp_path / "a", tmp_path / "b", CORE + crate_files("rlx-mlp"))
    before = digests(tmp_path / "a")
    assert rti.build(tmp_path / "a", emit="crate").ok  # lowering the same torch-ir again
    assert digests(tmp_path / "a") == before, "build rewrote the bundle or the crate differently"


def test_bundled_example_in_process_and_in_a_subprocess(tmp_path: Path) -> None:
    """examples/mlp.py through the API here, and through the CLI in a fresh interpreter with
    another PYTHONHASHSEED (set and dict-of-set orders change), another working directory and a
    relative output path."""
    model, inputs, kwargs = load_model_file(REPO / "examples/mlp.py")
    assert rti.from_torch(model, inputs, tmp_path / "here", kwargs=kwargs, emit="crate").ok
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlx_torch_import.cli",
            str(REPO / "examples/mlp.py"),
            "-o",
            "there",
            "--emit",
            "crate",
            "-q",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert_same(tmp_path / "here", elsewhere / "there", CORE + crate_files("rlx-mlp"))


def test_dynamic_model_with_a_crate_twice(tmp_path: Path) -> None:
    from torch.export import Dim

    from models import MaskedBlock

    for run in ("first", "second"):
        torch.manual_seed(0)
        ds = {"x": {0: Dim("batch", min=1, max=4), 1: Dim("seq", min=2, max=24)}}
        report = rti.from_torch(
            MaskedBlock(causal=True).eval(),
            (torch.randn(2, 7, 64),),
            tmp_path / run,
            dynamic_shapes=ds,
            emit="crate",
            name="dynamic_block",
        )
        assert report.ok and report.sweep, report.summary()
    expect = (*CORE, "bundle/model.rlxmodel", *crate_files("rlx-dynamic-block", "src/model.rlxmodel"))
    assert_same(tmp_path / "first", tmp_path / "second", expect)


UNICODE_MODEL = """\
import pytest
import torch
from torch import nn


class Unicode(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("ü模型", nn.Linear(3, 3))

    def forward(self, x):
        return getattr(self, "ü模型")(x).relu()


torch.manual_seed(0)
model = Unicode().eval()
example_inputs = (torch.randn(2, 3),)
"""


def test_the_locale_does_not_change_the_bytes(tmp_path: Path) -> None:
    """Text files are UTF-8 whatever the locale: a model with non-ASCII names converted under the
    POSIX locale (no UTF-8 mode, no locale coercion: Python's default encoding is ASCII) gives the
    bytes it gives under UTF-8."""
    path = tmp_path / "m.py"
    path.write_text(UNICODE_MODEL, encoding="utf-8")
    outs = {}
    for label, extra in (
        ("utf8", {"PYTHONUTF8": "1"}),
        ("posix", {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}),
    ):
        env = {**os.environ, **extra}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlx_torch_import.cli",
                str(path),
                "-o",
                str(tmp_path / label),
                "--emit",
                "crate",
                "--name",
                "ü",
                "-q",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{label}: {done.stderr}"
        outs[label] = tmp_path / label
    assert_same(outs["utf8"], outs["posix"], CORE + crate_files("rlx-model"))
