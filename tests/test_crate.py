"""The generated RLX crate: layout, provenance, safe names, identical regeneration, and
(where cargo is installed) that it builds clippy-clean, passes its own parity test and
gives the bundle's outputs bit for bit."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import rlx_torch_import as rti
from models import make
from rlx_torch_import import _core, safetensors_io
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.emit.crate import CrateStyleError
from rlx_torch_import.emit.rust_names import RustNames, comment, rust_str
from rlx_torch_import.runtime import BundleModel

REPO = Path(__file__).resolve().parent.parent
CARGO = shutil.which("cargo")
TARGET = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/rlx-torch-import/target")
needs_cargo = pytest.mark.skipif(CARGO is None, reason="cargo is not installed")
IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def convert(name: str, out: Path, style: str) -> Path:
    """Convert a test model with a crate; returns the crate folder."""
    if name == "llama":
        from test_hf_models import Logits, llama

        torch.manual_seed(0)
        model, inputs = llama()
        model = Logits(model.eval())
    else:
        model, inputs = make(name)
    report = rti.from_torch(model, inputs, out, emit=("bundle", "crate"), emit_style=style, name=name)
    assert report.ok, report.summary()
    (crate,) = out.glob("rlx-*")
    return crate


def cargo(crate: Path, *args: str) -> str:
    env = {**os.environ, "CARGO_TARGET_DIR": TARGET}
    done = subprocess.run(["cargo", *args], cwd=crate, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"cargo {' '.join(args)} failed in {crate}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_names_become_unique_valid_identifiers() -> None:
    names = RustNames()
    hostile = ["a.b", "a_b", "A-B", "1x", "fn", "self", "", "ü", 'x"); std::process::exit(1); //', "a.b"]
    idents = [names(n) for n in hostile]
    assert all(IDENT.match(i) for i in idents), idents
    assert idents[0] == idents[-1], "the same name maps to the same identifier"
    assert len(set(idents[:-1])) == len(idents) - 1, "different names never collide"
    assert names("0.weight", "w_") == "w_0_weight"


def test_strings_and_comments_cannot_inject_code() -> None:
    assert rust_str('a"b\\c\nü') == '"a\\"b\\\\c\\u{a}\\u{fc}"'
    assert "\n" not in comment("x\n}\nfn evil() {}\r\u2028y")


def test_crate_layout_pins_and_provenance(tmp_path: Path) -> None:
    crate = convert("mlp", tmp_path / "o", "graph")
    for rel in ("Cargo.toml", "Cargo.lock", "README.md", "src/lib.rs", "src/graph.rs", "src/weights.rs"):
        assert (crate / rel).is_file(), rel
    assert (crate / "examples/run.rs").is_file() and (crate / "tests/parity.rs").is_file()
    toml = (crate / "Cargo.toml").read_text()
    rlx = _core.rlx_version()
    assert f'rlx-ir = "={rlx}"' in toml and f'version = "={rlx}"' in toml
    assert "path" not in toml and str(tmp_path) not in toml
    assert f'name = "{crate.name}"' in (crate / "Cargo.lock").read_text()
    graph = (crate / "src/graph.rs").read_text()
    header = graph.split("\n\n")[0]
    for needed in ("`mlp`", f"RLX {rlx}", f"torch {torch.__version__}", "`aten.linear.default` x 2"):
        assert needed in header, needed
    lines = graph.splitlines()
    statements = [i for i, line in enumerate(lines) if "g.add_node(" in line]
    assert statements
    for i in statements:  # provenance: ATen op, node, module path, source line; then the RLX signature
        assert lines[i - 2].strip().startswith("// aten.") and ".py:" in lines[i - 2], lines[i - 2]
        assert "->" in lines[i - 1] and "F32[" in lines[i - 1], lines[i - 1]
    assert "// aten.linear.default `linear` in fc1 at " in graph


@pytest.mark.parametrize("style", ["graph", "tensor", "flow"])
def test_regenerating_gives_identical_bytes(style: str, tmp_path: Path) -> None:
    first = files(convert("mlp", tmp_path / "a", style))
    second = files(convert("mlp", tmp_path / "b", style))
    assert first.keys() == second.keys()
    changed = [k for k in first if first[k] != second[k]]
    assert not changed, f"regenerated files differ: {changed}"


def test_tensor_style_names_the_op_it_cannot_express(tmp_path: Path) -> None:
    model, inputs = make("cnn")
    with pytest.raises(CrateStyleError) as err:
        rti.from_torch(model, inputs, tmp_path / "o", emit=("bundle", "crate"), emit_style="tensor")
    assert "BatchNormInference" in err.value.message and "batch_norm" in err.value.message
    assert "graph" in (err.value.hint or "")
    assert not (tmp_path / "o").exists(), "nothing is written when the style cannot express the model"


def test_cli_and_build_emit_crates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    args = [str(REPO / "examples/mlp.py"), "-o", str(out), "--emit", "crate", "--emit-style", "flow", "-q"]
    assert cli_main(args) == 0
    assert (out / "rlx-mlp/src/flow.rs").is_file() and (out / "bundle/meta.json").is_file()
    assert cli_main(["build", str(out), "--emit", "crate", "--emit-style", "tensor", "-q"]) == 0
    assert not (out / "rlx-mlp/src/flow.rs").exists(), "build replaced the crate with the tensor-style one"
    with pytest.raises(SystemExit) as bad:
        cli_main([str(REPO / "examples/mlp.py"), "-o", str(out), "--emit-style", "nope"])
    assert bad.value.code == 2 and "--emit-style" in capsys.readouterr().err


def _bundle_outputs(out: Path) -> dict[str, np.ndarray]:
    ref = safetensors_io.read(out / "reference.safetensors")
    feed = {k.removeprefix("input."): v.to_numpy() for k, v in ref.items() if k.startswith("input.")}
    return BundleModel(out / "bundle").run(feed)


def _check_crate(name: str, style: str, tmp_path: Path) -> None:
    out = tmp_path / "o"
    crate = convert(name, out, style)
    cargo(crate, "fmt", "--check")
    cargo(crate, "clippy", "--release", "--quiet", "--all-targets", "--", "-D", "warnings")
    cargo(crate, "test", "--release", "--quiet")
    cargo(crate, "run", "--release", "--quiet", "--example", "run", "--", "--save", str(tmp_path / "crate.safetensors"))
    got = safetensors_io.read(tmp_path / "crate.safetensors")
    for key, expected in _bundle_outputs(out).items():
        actual = got[f"output.{key}"].to_numpy()
        assert actual.tobytes() == np.ascontiguousarray(expected).tobytes(), f"{name}/{style}: output {key} differs"


# A handful compile in the default suite; the rest are opt-in (-m slow).
DEFAULT = [("mlp", "graph"), ("mlp", "flow"), ("mlp", "tensor"), ("dtype_zoo", "graph")]
SLOW = [
    ("transformer_block", "graph"),
    ("transformer_block", "flow"),
    ("transformer_block", "tensor"),
    ("cnn", "graph"),
    ("cnn", "flow"),
    ("llama", "graph"),
    ("llama", "flow"),
    ("llama", "tensor"),
    ("dtype_zoo", "flow"),
]


@needs_cargo
@pytest.mark.parametrize(("name", "style"), DEFAULT)
def test_crate_builds_passes_its_test_and_matches_the_bundle(name: str, style: str, tmp_path: Path) -> None:
    _check_crate(name, style, tmp_path)


@needs_cargo
@pytest.mark.slow
@pytest.mark.parametrize(("name", "style"), SLOW)
def test_more_crates_build_and_match_the_bundle(name: str, style: str, tmp_path: Path) -> None:
    _check_crate(name, style, tmp_path)
