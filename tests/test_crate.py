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
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.crate.rust_names import RustNames, comment, rust_str
from rlx_torch_import.crate.style import CrateStyleError

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


def cargo(crate: Path, *args: str, code: int = 0) -> str:
    env = {**os.environ, "CARGO_TARGET_DIR": TARGET}
    done = subprocess.run(["cargo", *args], cwd=crate, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == code, (
        f"cargo {' '.join(args)} exited {done.returncode} in {crate}:\n{done.stdout}\n{done.stderr}"
    )
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
    model, inputs = torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 4, 2)).eval(), (torch.randn(1, 3, 4, 4),)
    with pytest.raises(CrateStyleError) as err:
        rti.from_torch(model, inputs, tmp_path / "o", emit=("bundle", "crate"), emit_style="tensor")
    assert "ConvTranspose2d" in err.value.message and "conv_transpose2d" in err.value.message
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


_BUDGET_ROW = re.compile(
    r'\(\s*"(\w+)",\s*Budget\s*\{\s*atol:\s*([^,\s]+),\s*rtol:\s*([^,\s]+),\s*min_cosine:\s*([^,}\s]+),?\s*\}\s*,?\s*\)'
)


def rust_budgets(host_rs: str) -> dict[str, tuple[float, float, float]]:
    """The FLOAT_BUDGETS table of a generated src/host.rs, parsed back."""
    table = host_rs.split("pub const FLOAT_BUDGETS", 1)[1].split("];", 1)[0]
    return {d: (float(a), float(r), float(c)) for d, a, r, c in _BUDGET_ROW.findall(table)}


def test_crate_budgets_are_the_python_verifier_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """host.rs gets its float budgets from budgets.py when written, so the two cannot drift."""
    from rlx_torch_import import budgets
    from rlx_torch_import.crate import sources

    python = {d: (b.atol, b.rtol, b.min_cosine) for d, b in budgets.float_budgets().items()}
    assert rust_budgets(sources.host_rs()) == python
    template = (REPO / "python/rlx_torch_import/crate/templates/host.rs").read_text()
    assert "@@FLOAT_BUDGETS@@" in template and not rust_budgets(template), "no budget is hard-coded in Rust"
    changed = {**budgets._BUDGETS, "float32": budgets.Budget(atol=3e-5, rtol=2.5e-6, min_cosine=0.123456789)}
    monkeypatch.setattr(budgets, "_BUDGETS", changed)
    assert rust_budgets(sources.host_rs())["float32"] == (3e-5, 2.5e-6, 0.123456789)


def test_generated_crate_carries_the_budgets(tmp_path: Path) -> None:
    from rlx_torch_import.budgets import float_budgets

    crate = convert("mlp", tmp_path / "o", "graph")
    python = {d: (b.atol, b.rtol, b.min_cosine) for d, b in float_budgets().items()}
    assert rust_budgets((crate / "src/host.rs").read_text()) == python


# Checks of the crate's own verdict (src/host.rs `compare`), compiled into the DtypeZoo crate.
VERDICT_RS = """
use @@LIB@@::{HostTensor, compare};

fn tensor(dtype: &str, dims: &[usize], data: Vec<u8>) -> HostTensor {
    HostTensor { dtype: dtype.into(), dims: dims.to_vec(), data }
}

fn i64s(dims: &[usize], v: &[i64]) -> HostTensor {
    tensor("int64", dims, v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

fn f64s(dims: &[usize], v: &[f64]) -> HostTensor {
    tensor("float64", dims, v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

#[test]
fn int64_beyond_2_pow_53_is_compared_exactly() {
    let p = compare("big", &i64s(&[2, 2], &[1, 2, 3, (1 << 53) + 1]), &i64s(&[2, 2], &[1, 2, 3, 1 << 53]));
    assert!(!p.ok(), "{p}");
    assert_eq!(p.mismatches, Some(1));
    let m = p.first_mismatch.clone().expect("a mismatch");
    assert_eq!(m.index, vec![1, 1]);
    assert_eq!((m.actual.as_str(), m.expected.as_str()), ("9007199254740993", "9007199254740992"));
    assert!(p.to_string().contains("1 differ, first at [1, 1]: RLX 9007199254740993 vs PyTorch 9007199254740992"));
    assert!(compare("same", &i64s(&[2], &[i64::MIN, i64::MAX]), &i64s(&[2], &[i64::MIN, i64::MAX])).ok());
}

#[test]
fn bool_and_dtype_mismatches_fail() {
    let p = compare("m", &tensor("bool", &[3], vec![1, 0, 1]), &tensor("bool", &[3], vec![1, 1, 1]));
    let m = p.first_mismatch.clone().expect("a mismatch");
    assert_eq!((m.index, m.actual.as_str(), m.expected.as_str()), (vec![1], "false", "true"));
    let wide = i64s(&[1], &[(1 << 53) + 1]);
    let p = compare("d", &f64s(&[1], &[9007199254740992.0]), &wide);
    assert!(!p.ok() && p.mismatches == Some(1), "{p}");
}

#[test]
fn shapes_must_match_even_with_equal_counts() {
    let p = compare("s", &f64s(&[2, 3], &[0.0; 6]), &f64s(&[3, 2], &[0.0; 6]));
    assert!(!p.ok() && p.mismatches.is_none(), "{p}");
}

#[test]
fn float64_is_not_compared_through_f32_and_cosine_does_not_overflow() {
    let p = compare("h", &f64s(&[2], &[1.001e300, 1.0]), &f64s(&[2], &[1e300, 1.0]));
    assert!(!p.ok() && p.mismatches == Some(1), "{p}");
    let p = compare("h", &f64s(&[3], &[1e300, -1e300, 5e299]), &f64s(&[3], &[1e300, -1e300, 5e299]));
    assert!(p.ok() && (p.cosine - 1.0).abs() < 1e-12, "{p}");
}
"""


def _check_verdict(crate: Path, tmp_path: Path) -> None:
    """The crate's own parity check is exact: unit checks of `compare`, and a planted int64 error."""
    lib = crate.name.replace("-", "_")
    (crate / "tests/verdict.rs").write_text(VERDICT_RS.replace("@@LIB@@", lib))
    cargo(crate, "test", "--release", "--quiet", "--test", "verdict")
    reference = safetensors_io.read(crate / "testdata/reference.safetensors")
    planted = {k: (t.dtype, t.shape, bytes(t.data)) for k, t in reference.items()}
    ids = reference["output.output_1"].to_numpy().copy()  # DtypeZoo's int64 output
    ids[1] += 1
    planted["output.output_1"] = ("int64", ids.shape, ids.tobytes())
    planted_path = tmp_path / "planted.safetensors"
    safetensors_io.write(planted_path, planted)
    args = [
        "run",
        "--release",
        "--quiet",
        "--example",
        "run",
        "--",
        "--reference",
        str(tmp_path / "planted.safetensors"),
    ]
    stdout = cargo(crate, *args, code=1)
    line = next(x for x in stdout.splitlines() if x.startswith("output_1:"))
    assert "FAIL" in line and f"1 differ, first at [1]: RLX {ids[1] - 1} vs PyTorch {ids[1]}" in line, stdout


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
    if name == "dtype_zoo":
        _check_verdict(crate, tmp_path)
    if name == "nested_io":  # the crate lists the outputs by the names of their pytree paths
        lib = (crate / "src" / "model.rs").read_text() if (crate / "src" / "model.rs").is_file() else ""
        lib += "".join(p.read_text() for p in (crate / "src").glob("*.rs"))
        assert all(f'"{n}"' in lib for n in ("hidden", "pair.0", "pair.1.0", "pair.1.1")), lib[:2000]


# A handful compile in the default suite; the rest are opt-in (-m slow).
DEFAULT = [("mlp", "graph"), ("mlp", "flow"), ("mlp", "tensor"), ("dtype_zoo", "graph"), ("nested_io", "graph")]
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


def _compile_options_body(rust: str) -> str:
    """The body of `fn compile_options()` with whitespace removed."""
    body = rust.split("fn compile_options() -> CompileOptions {", 1)[1].split("\n}\n", 1)[0]
    return re.sub(r"\s+", "", body)


def test_crates_compile_with_the_bundle_runner_options() -> None:
    """A crate gives the bundle's bits only when RLX compiles it the same way: the template's
    `compile_options()` must be the Rust core's (src/runner.rs)."""
    template = (REPO / "python/rlx_torch_import/crate/templates/lib.rs").read_text()
    core = (REPO / "src/runner.rs").read_text()
    assert _compile_options_body(template) == _compile_options_body(core)
    assert "no_weight_concat:true" in _compile_options_body(core)


def _dynamic_block(out: Path, style: str = "graph") -> rti.ParityReport:
    from torch.export import Dim

    from models import MaskedBlock

    torch.manual_seed(0)
    ds = {"x": {0: Dim("batch", min=1, max=4), 1: Dim("seq", min=2, max=24)}}
    return rti.from_torch(
        MaskedBlock(causal=True).eval(),
        (torch.randn(2, 7, 64),),
        out,
        dynamic_shapes=ds,
        emit=("bundle", "crate"),
        emit_style=style,
        name="dynamic_block",
    )


@needs_cargo
def test_dynamic_crate_runs_at_each_binding_and_matches_the_bundle(tmp_path: Path) -> None:
    """The graph crate of a dynamic model builds the graph per binding: its own test checks every
    sweep point, and at two bindings its outputs are the bundle's bit for bit."""
    out = tmp_path / "o"
    report = _dynamic_block(out)
    assert report.ok, report.summary()
    (crate,) = out.glob("rlx-*")
    cargo(crate, "fmt", "--check")
    cargo(crate, "clippy", "--release", "--quiet", "--all-targets", "--", "-D", "warnings")
    printed = cargo(crate, "test", "--release", "--quiet", "--test", "parity", "--", "--nocapture")
    assert printed.count("output shapes") == len(report.sweep) + 1, printed
    reference = safetensors_io.read(out / "reference.safetensors")
    bundle = BundleModel(out / "bundle")
    for point in (0, len(report.sweep) - 1):  # batch=min and seq=max: two bindings
        prefix = f"sweep.{point}."
        picked = {
            k.removeprefix(prefix): (t.dtype, t.shape, bytes(t.data))
            for k, t in reference.items()
            if k.startswith(prefix)
        }
        safetensors_io.write(tmp_path / "point.safetensors", picked)
        point_file, saved = str(tmp_path / "point.safetensors"), str(tmp_path / "crate.safetensors")
        cargo(
            crate, "run", "--release", "--quiet", "--example", "run", "--", "--reference", point_file, "--save", saved
        )
        got = safetensors_io.read(tmp_path / "crate.safetensors")["output.output"].to_numpy()
        feed = {"x": reference[f"{prefix}input.x"].to_numpy()}
        expected = bundle.run(feed)["output"]
        assert got.shape == expected.shape and got.tobytes() == expected.tobytes(), f"sweep point {point} differs"


def test_dynamic_models_get_graph_crates_only(tmp_path: Path) -> None:
    with pytest.raises(CrateStyleError, match="graph-style crate only"):
        _dynamic_block(tmp_path / "o", style="flow")


@needs_cargo
def test_dynamic_crate_of_a_graph_that_reads_an_input_only_for_its_size(tmp_path: Path) -> None:
    """RLX drops an input nothing reads when it compiles, then panics if it is fed: the crate feeds
    only what the compiled graph reads (as the bundle runner does), at every sweep point."""
    from torch.export import Dim

    class ReadsOneOfTwo(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int]:
            return x * 2, y.shape[0] + 1

    report = rti.from_torch(
        ReadsOneOfTwo(),
        (torch.randn(3, 4), torch.randn(2, 4)),
        tmp_path / "o",
        dynamic_shapes=({0: Dim("b", min=1, max=8)}, {0: Dim("c", min=1, max=8)}),
        emit=("bundle", "crate"),
        per_node=False,
        name="reads_one",
    )
    assert report.ok, report.summary()
    (crate,) = (tmp_path / "o").glob("rlx-*")
    printed = cargo(crate, "test", "--release", "--quiet", "--test", "parity", "--", "--nocapture")
    assert printed.count("output shapes") == len(report.sweep) + 1, printed
