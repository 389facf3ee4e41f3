"""The package's shape stays one a reader can follow (issue 25): no module over MODULE_LINES lines,
no function over FUNCTION_LINES (its lines without its docstring: a public entry point documents every
parameter there), except the ones listed below with why they stay. A list entry
that no longer exceeds its limit fails too, so the list only shrinks. The Rust core too (issue 40): no
file of src/ over RUST_LINES lines before its test module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "rlx_torch_import"
MODULE_LINES = 500
FUNCTION_LINES = 80
CRATE = Path(__file__).resolve().parents[1]
RUST_LINES = 600

# module (relative to the package) -> why it stays longer
LONG_MODULES: dict[str, str] = {}
# "module:function" -> why it stays longer
LONG_FUNCTIONS: dict[str, str] = {
    "lower/passes/batch_norm.py:fold_batch_norm": "one pattern match over shared state (the producer map, use "
    "counts, the convolution found, the transposes around it): splitting it passes that state around whole",
    "frontend/torch/export.py:export_program": "torch.export's calling sequence in order (checks, eval/no_grad, the "
    "export with its error translation, the decomposition with its own); each step is a few lines of torch's API",
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def long_modules() -> dict[str, int]:
    found = {}
    for path in _modules():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MODULE_LINES:
            found[_rel(path)] = n
    return found


def long_functions() -> dict[str, int]:
    found = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                doc = node.body[0] if node.body else None
                if (
                    isinstance(doc, ast.Expr)
                    and isinstance(doc.value, ast.Constant)
                    and isinstance(doc.value.value, str)
                ):
                    n -= (doc.end_lineno or doc.lineno) - doc.lineno + 1
                if n > FUNCTION_LINES:
                    found[f"{_rel(path)}:{node.name}"] = n
    return found


def test_no_module_over_the_limit() -> None:
    found = long_modules()
    new = {k: v for k, v in found.items() if k not in LONG_MODULES}
    assert not new, f"modules over {MODULE_LINES} lines (split them, or list them with why): {new}"
    stale = sorted(set(LONG_MODULES) - set(found))
    assert not stale, f"listed as long but no longer are (remove them from LONG_MODULES): {stale}"


def test_no_function_over_the_limit() -> None:
    found = long_functions()
    new = {k: v for k, v in found.items() if k not in LONG_FUNCTIONS}
    assert not new, f"functions over {FUNCTION_LINES} lines (split them, or list them with why): {new}"
    stale = sorted(set(LONG_FUNCTIONS) - set(found))
    assert not stale, f"listed as long but no longer are (remove them from LONG_FUNCTIONS): {stale}"


def rust_code_lines(text: str) -> int:
    """Lines of a Rust file before its test module: those before the first line that starts with
    `#[cfg(test)]` (an indented one, on an item inside a function or module, does not end the count)."""
    lines = text.splitlines()
    return next((i for i, line in enumerate(lines) if line.startswith("#[cfg(test)]")), len(lines))


def rust_files() -> list[Path]:
    return sorted((CRATE / "src").rglob("*.rs"))


def long_rust_files() -> dict[str, int]:
    found = {}
    for path in rust_files():
        n = rust_code_lines(path.read_text(encoding="utf-8"))
        if n > RUST_LINES:
            found[path.relative_to(CRATE).as_posix()] = n
    return found


def test_rust_lines_stop_at_the_test_module() -> None:
    code = "//! A module.\nuse std::fmt;\n\nfn f() {}\n"
    tests = "#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n"
    assert rust_code_lines(code + tests) == 4
    assert rust_code_lines(code) == 4
    assert rust_code_lines(code + "#[cfg(test)]\n") == 4
    assert rust_code_lines("fn f() {\n    #[cfg(test)]\n    let x = 1;\n}\n" + tests) == 4
    assert rust_code_lines('#[cfg(feature = "x")]\nmod a;\n' + tests + "#[cfg(test)]\nmod more;\n") == 2
    assert rust_code_lines("") == 0


def test_no_rust_file_over_the_limit() -> None:
    names = {p.relative_to(CRATE).as_posix() for p in rust_files()}
    assert {"src/lib.rs", "src/runner.rs", "src/python.rs"} <= names, sorted(names)
    found = long_rust_files()
    assert not found, f"Rust files over {RUST_LINES} lines before their #[cfg(test)] module (split them): {found}"
