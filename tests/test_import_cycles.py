"""No import cycle among the package's modules: the graph is built from the source files (`ast`),
every `from .x import y` / `import rlx_torch_import.x` counted, at module level and inside
functions alike (an import deferred into a function to dodge a cycle is still a cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "rlx_torch_import"
ROOT = Path(__file__).resolve().parent.parent / "python" / PACKAGE


def _modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the package."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `name` (in `path`) imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = {  # `if TYPE_CHECKING:` imports never run: they make no cycle
        id(n) for block in ast.walk(tree) if _is_type_checking(block) for s in block.body for n in ast.walk(s)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                # `from . import x`: the submodule x; a name defined in the package's __init__: the package
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules or _is_extension(sub) else target)
    return {m for m in found if m in modules and m != name}


def _is_type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_extension(name: str) -> bool:
    """A compiled submodule of the package (`_core`), which imports nothing of the package."""
    stem = ROOT.parent.joinpath(*name.split("."))
    return stem.with_suffix(".pyi").is_file() or any(stem.parent.glob(f"{stem.name}.*.so"))


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through the component's first module, as `a -> b -> a`."""
    members = set(component)
    start = component[0]
    trail = [start]
    seen = {start}
    while True:
        nxt = sorted(graph[trail[-1]] & members)
        back = [m for m in nxt if m == start]
        if back and len(trail) > 1:
            return " -> ".join([*trail, start])
        step = next((m for m in nxt if m not in seen), None)
        if step is None:  # closes on a module already on the trail
            step = next(m for m in nxt if m in seen)
            return " -> ".join([*trail[trail.index(step) :], step])
        trail.append(step)
        seen.add(step)


def test_the_graph_sees_deferred_imports() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.frontend.torch.driver" in graph[f"{PACKAGE}.api"]  # imported inside from_torch
    assert f"{PACKAGE}.frontend.torch.provenance" in graph[f"{PACKAGE}.frontend.torch.control_flow"]


def test_no_import_cycle() -> None:
    graph = import_graph()
    new = cycles(graph)
    listed = "\n".join(f"  {_path(graph, c)}   (modules: {', '.join(c)})" for c in new)
    assert not new, f"import cycles among the package's modules:\n{listed}"


def test_no_cycle_in_frontend() -> None:
    graph = import_graph()
    inside = [c for c in cycles(graph) if any(m.startswith(f"{PACKAGE}.frontend") for m in c)]
    assert not inside, f"import cycles through frontend/: {inside}"


def _seam_side(module: str) -> bool:
    """The back half and the verifier: they reach a front end only through `door.py` (docs/design.md, bc)."""
    return module == f"{PACKAGE}.backend" or module == f"{PACKAGE}.verify" or module.startswith(f"{PACKAGE}.verify.")


def test_the_back_half_and_the_verifier_import_no_front_end() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.door" in graph[f"{PACKAGE}.backend"]  # the graph holds the seam's own imports
    found = {
        module: sorted(t for t in targets if t.startswith(f"{PACKAGE}.frontend"))
        for module, targets in graph.items()
        if _seam_side(module)
    }
    bad = {m: t for m, t in found.items() if t}
    assert not bad, f"backend.py and verify/ import front-end modules (go through door.py): {bad}"


def test_every_door_plugs_in_through_the_door_table() -> None:
    """Each front end in `door.FRONT_ENDS` is a module under frontend/ that registers the door of its name;
    a boundary-only door has the program hook, the oracle and the repro writer."""
    from rlx_torch_import import door

    graph = import_graph()
    assert set(door.FRONT_ENDS) == {"torch", "onnx"}
    for module in door.FRONT_ENDS.values():
        assert module.startswith(f"{PACKAGE}.frontend.") and module in graph, module
    doors = door.front_ends()
    assert {n: d.name for n, d in doors.items()} == {"torch": "torch", "onnx": "onnx"}
    assert (doors["torch"].label, doors["onnx"].label) == ("PyTorch", "ONNX Runtime")
    onnx = doors["onnx"]
    assert onnx.program and onnx.node_values and onnx.write_repro and onnx.op_kind
    assert (
        onnx.op_kind("onnx::MatMul", "float32") == "contraction" and onnx.op_kind("onnx::Relu", "float32") == "movement"
    )
    assert onnx.op_kind("onnx::MatMul", "int64") == "exact"


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every package module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for m in graph[todo.pop()] - seen:
            seen.add(m)
            todo.append(m)
    return seen


def test_low_modules_import_no_stage() -> None:
    """The records every stage may use stay below the stages (issue 40): `conversion` and `budgets` reach no
    stage package, the crate writer no verifier module, and decoding's numpy runtime not the torch export."""
    graph = import_graph()
    stages = tuple(f"{PACKAGE}.{s}" for s in ("lower", "verify", "frontend", "crate", "bundle"))
    for low in ("conversion", "budgets"):
        found = sorted(m for m in _reaches(graph, f"{PACKAGE}.{low}") if m.startswith(stages))
        assert not found, f"{low} reaches stage modules: {found}"
    crate = sorted(m for c in graph if c.startswith(f"{PACKAGE}.crate") for m in graph[c] if ".verify" in m)
    assert not crate, f"crate/ imports the verifier: {crate}"
    for runtime in ("generate", "state", "convention"):
        assert f"{PACKAGE}.decode.hf_export" not in _reaches(graph, f"{PACKAGE}.decode.{runtime}")
