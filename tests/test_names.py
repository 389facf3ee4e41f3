"""Hostile names (issue 13, "names"): weight, node, module and model names with path separators,
`..`, quotes, backslashes, line breaks, NUL, Rust keywords, placeholders, bidi controls, other
unicode and 10,000 characters never leave the output folder, never break or inject into the
generated crate (Rust source, Cargo.toml, README, tests) and never make a file name too long.

Every place a name reaches a path or source text:
- the crate folder and package `rlx-<name>` / library `rlx_<name>`: `crate.crate_names`;
- the staging folders `.<out>.partial-*`: `outdir.staged`;
- the repro folder `repro-<node>` of `diagnose`: `outdir.path_component`;
- Rust identifiers of inputs, weights and nodes: `rust_names.RustNames`;
- Rust string literals (NAME, INPUTS/OUTPUTS/PARAMS names, symbols, sweep keys): `rust_str`;
- `//`, `//!` and `#` comments (provenance, headers, Cargo.toml): `comment`;
- Markdown (crate README, doc comments, repro README): `code_span`;
- the templates themselves, filled in one pass: `fill`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.crate.rust_names import (
    MAX_COMMENT,
    MAX_IDENT,
    MAX_SLUG,
    RustNames,
    code_span,
    comment,
    crate_names,
    fill,
    rust_str,
)
from rlx_torch_import.errors import ExportError, InputError
from rlx_torch_import.outdir import MAX_COMPONENT, path_component, staged

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the table headers are still checked
    tomllib = None  # type: ignore[assignment]

CARGO = shutil.which("cargo")
TARGET = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/rlx-torch-import/target")
LONG = "L" * 10_000
# Each kind of trouble, alone; names below combine them.
HOSTILE = [
    "../../escape",
    "/abs/path",
    "a\\b",
    "..",
    ".",
    "",
    'q"uote',
    "s'ingle",
    "new\nline",
    "cr\rlf",
    "nul\0byte",
    "tab\there",
    "fn",
    "self",
    "Self",
    "crate",
    "super",
    "r#type",
    "gen",
    "cat",
    "f32",
    "ü模型",
    "\u202eevil\u202c",
    "zero\u200bwidth",
    "line\u2028sep",
    "@@LOAD@@",
    "@@NAME@@",
    "*/ } fn evil() { /*",
    "`tick` and ``ticks``",
    "$(rm -rf ~)",
    "<script>x</script>",
    "# heading",
    LONG,
]
IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
RUST_KEYWORDS = set(
    "as async await break const continue crate dyn else enum extern false fn for gen if impl in let loop match "
    "mod move mut pub ref return self static struct super trait true type unsafe use where while abstract become "
    "box do final macro override priv typeof unsized virtual yield try union".split()
)


def unrust(literal: str) -> str:
    """Decode a Rust string literal as rust_str prints it (a test oracle, independent of it)."""
    assert literal[0] == literal[-1] == '"', literal
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        assert ch != '"', f"unescaped quote in {literal!r}"
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in '"\\':
            out.append(nxt)
            i += 2
        elif nxt == "u":
            end = body.index("}", i)
            out.append(chr(int(body[i + 3 : end], 16)))
            i = end + 1
        else:
            raise AssertionError(f"unexpected escape \\{nxt} in {literal!r}")
    return "".join(out)


# --- the helpers, on every kind of name ---------------------------------------------------------


def test_identifiers_are_valid_unique_stable_and_short() -> None:
    names = RustNames()
    idents = [names(n) for n in HOSTILE]
    assert all(IDENT.match(i) for i in idents), idents
    assert not set(idents) & RUST_KEYWORDS, "no keyword is an identifier"
    assert len(set(idents)) == len(idents), "different names never share an identifier"
    assert all(len(i) <= MAX_IDENT + 4 for i in idents), max(idents, key=len)
    assert [names(n) for n in HOSTILE] == idents, "the same name maps to the same identifier"
    again = RustNames()
    assert [again(n) for n in HOSTILE] == idents, "and alike in a fresh table (deterministic)"
    long_a, long_b = RustNames()(LONG + "a"), RustNames()(LONG + "b")
    assert long_a != long_b, "two long names sharing a start stay distinct (hash of the whole name)"
    assert names("cat") != "cat", "the tensor style's `cat` function is never shadowed"
    assert names("w", "w_") == "w_w" and names("0.weight", "w_") == "w_0_weight"


def test_string_literals_round_trip_and_hold_no_raw_control_or_non_ascii() -> None:
    for name in [*HOSTILE, "\x7f\x80\x9f", "😀"]:
        literal = rust_str(name)
        assert literal.isascii() and literal.isprintable(), repr(literal)
        assert unrust(literal) == name
    assert unrust(rust_str("lone\udc80")) == "lone\ufffd", "a lone surrogate cannot be a Rust char"


def test_comments_are_one_line_without_bidi_or_invisible_characters() -> None:
    for name in [*HOSTILE, "a\x1bb", "x\x85y", "\ufeffbom"]:
        text = comment(name)
        assert not any(c in text for c in LINE_BREAKS), repr(text)
        assert not any(c in text for c in BIDI), repr(text)
        assert all(c.isprintable() for c in text), repr(text)
        assert len(text) <= MAX_COMMENT + 40
    assert comment("\u202eevil") == "\\u{202e}evil", "escaped, so it stays visible"
    assert comment("ü模型") == "ü模型", "ordinary unicode is kept"
    assert comment(LONG).endswith(f"... ({len(LONG) - MAX_COMMENT} more characters)")


def test_code_spans_stay_one_code_span() -> None:
    for name in HOSTILE:
        span = code_span(name)
        fence = re.match(r"`+", span).group(0)  # type: ignore[union-attr]
        assert span.endswith(fence)
        inner = span[len(fence) : -len(fence)]
        assert fence not in inner, f"the fence {fence!r} does not occur inside {span!r}"
    assert code_span("mlp") == "`mlp`"
    assert code_span("`a``b`") == "``` `a``b` ```"


def test_templates_are_filled_in_one_pass() -> None:
    assert fill("@@A@@ @@B@@", {"A": "@@B@@", "B": "b"}) == "@@B@@ b", "inserted text is not searched again"
    with pytest.raises(KeyError, match=r"lib.rs: no value for placeholder @@C@@"):
        fill("@@C@@", {}, "lib.rs")


def test_template_lines_replace_a_placeholder_alone_on_its_line() -> None:
    """A value given as lines fills a placeholder that stands alone on its line: each line ends in a
    newline, and no lines remove the placeholder's line (a crate's optional `use` lines, spec rows)."""
    template = "a\n@@ROWS@@\nb @@X@@\n"
    assert fill(template, {"ROWS": ["r1", "@@X@@"], "X": "x"}) == "a\nr1\n@@X@@\nb x\n"
    assert fill(template, {"ROWS": [], "X": "x"}) == "a\nb x\n"
    assert fill(template, {"ROWS": "one", "X": "x"}) == "a\none\nb x\n", "a string keeps its line"
    with pytest.raises(ValueError, match=r"Cargo.toml: @@X@@ takes lines but is not alone on its line"):
        fill(template, {"ROWS": [], "X": ["x"]}, "Cargo.toml")


def test_crate_names_are_cargo_names_and_short() -> None:
    seen = {}
    for name in [*HOSTILE, "Model", "MLP2", "-", "模型"]:
        names = crate_names(name)
        assert re.fullmatch(r"rlx-[a-z0-9]+(-[a-z0-9]+)*", names.package), names
        assert names.library == names.package.replace("-", "_") and IDENT.match(names.library)
        assert len(names.package) <= len("rlx-") + MAX_SLUG
        assert crate_names(name) == names, "deterministic"
        seen[name] = names.package
    assert crate_names(LONG + "a").package != crate_names(LONG + "b").package
    assert seen["ü模型"] == "rlx-model" and seen["../../escape"] == "rlx-escape"


def test_path_components_are_one_safe_distinct_name() -> None:
    made = {}
    for name in HOSTILE:
        part = path_component(name, "node")
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", part), (name, part)
        assert ".." not in part and part not in (".", "..") and len(part) <= MAX_COMPONENT
        assert path_component(name, "node") == part
        made[name] = part
    assert len(set(made.values())) == len(made), "two names never share a folder"
    assert path_component("add_1") == "add_1", "an ordinary node name is kept as it is"


def test_staging_folder_names_stay_short(tmp_path: Path) -> None:
    out = tmp_path / ("o" * 250)  # a legal name; `.<name>.partial-XXXXXXXX` would not be
    with staged(out) as stage:
        assert len(stage.name) < 80
        (stage / "torch-ir.json").write_text("{}")
    assert (out / "torch-ir.json").is_file()
    with pytest.raises(InputError, match=r"output path .*o{300}.*: File name too long"):
        with staged(tmp_path / ("o" * 300)):
            pass


# --- end to end: a model whose every name is hostile ---------------------------------------------

# torch's own limits: a module or parameter name cannot hold "." or be empty, and quotes, line
# breaks and NUL break its decompositions (test below), so the end-to-end model exports at
# `aten` to carry them into the crate.
MODULE_NAMES = [
    "fn",
    "self",
    "crate",
    "r#type",
    "q\"uo'te",
    "back\\slash",
    "new\nline",
    "sl/ash",
    "ü模型",
    "\u202eevil",
    "@@LOAD@@",
    "nul\0",
    "*/ }",
    "z" * 10_000,
]
WEIGHT_NAME = 'w/"e\\ird\n@@NAME@@\u202e'
MODEL_NAME = '../../evil"\n}@@LOAD@@ \u202e`ü` fn crate ' + "A" * 10_000
NODE_NAMES = [
    "../../x",
    "fn",
    "self",
    'a"b',
    "a\\b",
    "new\nline",
    "ü模型",
    "\u202erev",
    "*/ }",
    "nul\0",
    "y" * 10_000,
    "crate",
    "r#type",
    "@@LOAD@@",
]


class Hostile(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for n in MODULE_NAMES:
            self.add_module(n, nn.Linear(4, 4))
        self.register_parameter(WEIGHT_NAME, nn.Parameter(torch.randn(4)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for n in MODULE_NAMES:
            x = getattr(self, n)(x)
        return x * getattr(self, WEIGHT_NAME)


def rename_nodes(out: Path, names: list[str]) -> dict[str, str]:
    """Give torch-ir's nodes hostile names (a torch-ir file can say anything), consistently."""
    path = out / "torch-ir.json"
    doc = json.loads(path.read_text())
    renamed: dict[str, str] = {}
    for i, node in enumerate(doc["nodes"]):
        new = names[i] if i < len(names) else f"{names[i % len(names)]}#{i}"
        renamed[node["name"]] = new
        node["name"] = new
        for o in node["outputs"]:
            o["name"] = renamed.setdefault(o["name"], new)

    def fix(arg: object) -> object:
        if isinstance(arg, dict):
            if set(arg) == {"tensor"} and arg["tensor"] in renamed:
                return {"tensor": renamed[arg["tensor"]]}
            return {k: fix(v) for k, v in arg.items()}
        return [fix(a) for a in arg] if isinstance(arg, list) else arg

    for node in doc["nodes"]:
        node["args"], node["kwargs"] = fix(node["args"]), fix(node["kwargs"])
    for o in doc["outputs"]:
        o["value"] = renamed.get(o["value"], o["value"])
    path.write_text(json.dumps(doc, indent=1))
    return renamed


def inside(root: Path) -> list[Path]:
    """Every path under `root`, each checked to resolve inside it with a short enough name."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            assert p.resolve().is_relative_to(root.resolve()), p
            assert len(name.encode()) <= 255 and "\n" not in name and "\0" not in name, name
            found.append(p)
    return found


def check_crate_text(crate: Path, model_name: str) -> None:
    """What a hostile name could break in the crate's text: Cargo.toml parses with our package,
    NAME decodes to the model name, and no source has a raw bidi control or an unexpanded or
    injected placeholder."""
    toml = (crate / "Cargo.toml").read_text(encoding="utf-8")
    tables = re.findall(r"^\s*\[+([^\]]*)\]+", toml, flags=re.M)
    assert tables == ["package", "features", "dependencies", "profile.release"], "a name cannot add TOML tables"
    assert re.findall(r'^name = "(.*)"$', toml, flags=re.M) == [crate.name]
    if tomllib is not None:
        manifest = tomllib.loads(toml)
        assert manifest["package"]["name"] == crate.name
        assert set(manifest) == {"package", "features", "dependencies", "profile"}
    lib = (crate / "src/lib.rs").read_text(encoding="utf-8")
    (literal,) = re.findall(r'^pub const NAME: &str = (".*");$', lib, flags=re.M)
    assert unrust(literal) == model_name
    for path in crate.rglob("*"):
        if path.suffix in (".rs", ".toml", ".md"):
            text = path.read_text(encoding="utf-8")
            assert not any(c in text for c in BIDI), path
            assert "\0" not in text and "\r" not in text, path
            assert not re.search(r"@@[A-Z_]+@@", text.replace("@@LOAD@@", "").replace("@@NAME@@", "")), path
    readme = (crate / "README.md").read_text(encoding="utf-8")
    assert readme.splitlines()[0] == f"# {crate.name}", "the title is the package name, whole"
    assert readme.count("## ") == 5, "a name cannot add Markdown sections (Layout, Build, BLAS, GPU, Speed)"
    for rel in ("src/lib.rs", "src/graph.rs"):  # a name can only ever be in comments or literals
        code = [line for line in (crate / rel).read_text(encoding="utf-8").splitlines()]
        assert not any(line.lstrip().startswith(("fn evil", "}@@", "`ü`")) for line in code), rel


def cargo(crate: Path, *args: str) -> str:
    env = {**os.environ, "CARGO_TARGET_DIR": TARGET}
    done = subprocess.run(["cargo", *args], cwd=crate, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"cargo {' '.join(args)} in {crate}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.skipif(CARGO is None, reason="cargo is not installed")
def test_hostile_module_weight_node_and_model_names_build_a_crate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    torch.manual_seed(0)
    report = rti.from_torch(
        Hostile().eval(), (torch.randn(2, 4),), out, emit="crate", decomposition="aten", name=MODEL_NAME
    )
    assert report.ok, report.summary()
    # the nodes too: torch names them itself, so a hand-edited torch-ir gives them hostile names
    renamed = rename_nodes(out, NODE_NAMES)
    assert set(NODE_NAMES) <= set(renamed.values())
    report = rti.build(out, emit="crate")
    assert report.ok, report.summary()
    paths = inside(tmp_path)
    (crate,) = [p for p in out.iterdir() if p.name.startswith("rlx-")]
    assert crate.name == crate_names(MODEL_NAME).package and len(crate.name) <= 4 + MAX_SLUG
    assert not [p for p in paths if ".partial-" in p.name or ".old-" in p.name], "no staging folder left"
    check_crate_text(crate, MODEL_NAME)
    graph = (crate / "src/graph.rs").read_text(encoding="utf-8")
    assert '// w/"e\\ird @@NAME@@\\u{202e}: F32[4]' in graph, "the weight's name, flattened and escaped"
    assert "`new line`" in graph and "`nul `" in graph, "node names in provenance comments, flattened"
    params = re.findall(r'ParamSpec \{\s*name: (".*?(?<!\\)"),', (crate / "src/lib.rs").read_text(encoding="utf-8"))
    assert WEIGHT_NAME in {unrust(p) for p in params}, "the weight is bound by its exact name"
    cargo(crate, "clippy", "--release", "--quiet", "--all-targets", "--", "-D", "warnings")
    printed = cargo(crate, "test", "--release", "--quiet", "--test", "parity", "--", "--nocapture")
    assert "ok" in printed and "FAIL" not in printed, printed


def test_hostile_names_through_the_cli(tmp_path: Path, capsys) -> None:
    """`--name` takes any valid text; the crate folder is derived from it, never a path."""
    model = tmp_path / "m.py"
    model.write_text("import torch\nmodel = torch.nn.Linear(3, 2)\nexample_inputs = (torch.randn(1, 3),)\n")
    out = tmp_path / "o"
    name = "../x\n/y\\z\"'\0" + LONG
    assert cli_main([str(model), "-o", str(out), "--name", name, "--emit", "crate", "-q"]) == 0
    inside(tmp_path)
    (crate,) = out.glob("rlx-*")
    check_crate_text(crate, name)
    assert json.loads((out / "bundle/meta.json").read_text())["name"] == name
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli_main([str(model), "-o", str(out), "--name", "bad\udcff"])
    assert "--name: 'bad\\udcff' is not valid UTF-8" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main([str(model), "-o", str(out), "--name", "  "])
    assert "--name: the model name is empty" in capsys.readouterr().err


def test_diagnose_repro_folders_stay_inside_and_apart(tmp_path: Path) -> None:
    """A torch-ir file can name a node anything: `diagnose --node` writes `repro-<safe name>`
    inside OUT, a different folder for each node, and its README keeps each name on its line."""
    from rlx_torch_import.verify.diagnose import diagnose

    out = tmp_path / "out"
    torch.manual_seed(0)
    names = ["../../x", "a/b", "a\\b", "new\nline", "nul\0", "\u202erev", "ü模型", "y" * 10_000, "..", ".hidden"]
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in names]).eval()
    assert rti.from_torch(model, (torch.randn(2, 4),), out, per_node=False).ok
    assert set(rename_nodes(out, names).values()) == set(names)
    folders = set()
    for name in names:
        found = diagnose(out, node=name)
        assert found.repro is not None and found.repro.parent == out, found.repro
        assert found.repro.name.startswith("repro-") and found.repro.name not in folders
        folders.add(found.repro.name)
        assert json.loads((found.repro / "node.json").read_text())["node"] == name
        title = (found.repro / "README.md").read_text(encoding="utf-8").splitlines()[0]
        assert title.startswith("# Repro: aten.") and not any(c in title for c in BIDI), title
    inside(tmp_path)
    with pytest.raises(InputError, match=r"cannot create the repro folder .*: File name too long"):
        diagnose(out, node=names[0], repro_dir=tmp_path / ("r" * 300))


def test_diagnose_a_node_named_with_an_at_sign(tmp_path: Path) -> None:
    from rlx_torch_import.verify.diagnose import diagnose

    out = tmp_path / "out"
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    assert rti.from_torch(model, (torch.randn(2, 4),), out, per_node=False).ok
    rename_nodes(out, ["@@LOAD@@", "a@b", "c"])
    assert diagnose(out, node="a@b").repro is not None


def test_names_torch_cannot_decompose_are_named(tmp_path: Path) -> None:
    m = nn.Module()
    m.add_module('q"uo\nte', nn.Linear(2, 2))
    m.forward = lambda x: getattr(m, 'q"uo\nte')(x)  # type: ignore[method-assign]
    with pytest.raises(ExportError) as err:
        rti.from_torch(m, (torch.randn(1, 2),), tmp_path / "o")
    assert "'q\"uo\\nte'" in (err.value.hint or "") and "--decomposition aten" in (err.value.hint or "")


def test_names_that_are_not_unicode_are_refused(tmp_path: Path) -> None:
    m = nn.Module()
    m.add_module("bad\udc80", nn.Linear(2, 2))
    m.forward = lambda x: getattr(m, "bad\udc80")(x)  # type: ignore[method-assign]
    with pytest.raises(InputError, match=r"'bad\\udc80'.*not valid Unicode"):
        rti.from_torch(m, (torch.randn(1, 2),), tmp_path / "o")
    assert not (tmp_path / "o").exists()
