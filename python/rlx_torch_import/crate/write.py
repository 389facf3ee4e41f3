"""Write `rlx-<name>/`: a standalone Rust crate that builds, runs and checks the model.

The crate is printed from the same lowered program the bundle is built from (`sources`), then
formatted with rustfmt when it is installed.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

from ..errors import RtiError
from ..layout import REFERENCE
from ..outdir import copy_file, refused_write_in, write_bytes, write_failure, write_text
from ..program import Program
from ..torchir import TorchIR
from .graph import CONSTANTS_FILE
from .lock import lock_for
from .randomness import random_lines
from .rust_names import crate_names, fill
from .sources import (
    SYMBOLIC_FILE,
    cargo_config,
    cargo_toml,
    graph_rs,
    host_rs,
    lib_rs,
    readme,
    symbolic_graph_rs,
    template,
    tensor_graph_rs,
)
from .stages import is_staged, stage_files, stages_rs
from .style import check_style


def write_crate(
    program: Program, ir: TorchIR, reference: Path, root: Path, style: str = "graph", rlxmodel: str | None = None
) -> Path:
    """Write the crate into `root` (conventionally `OUT/rlx-<name>/`) and return it. A dynamic
    program (`ir.symbols`) needs its symbolic graph, `rlxmodel`, and the graph style."""
    check_style(program, style, ir.is_dynamic, staged=is_staged(ir))
    if ir.is_dynamic and rlxmodel is None:
        raise RtiError("a dynamic program's crate needs its symbolic graph (rlxmodel)")
    names = crate_names(program.name)
    (root / "src").mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {
        "Cargo.toml": cargo_toml(names, program, ir, style),
        "Cargo.lock": lock_for(style, names.package),
        "README.md": readme(names, program, style),
        "src/lib.rs": lib_rs(program, ir, style),
        "src/host.rs": host_rs(),
        "src/weights.rs": template("weights.rs"),
        "src/blas.rs": template("blas.rs"),
        ".cargo/config.toml": cargo_config(),
        "examples/run.rs": fill(
            template("run_example.rs"), {**random_lines(ir, " " * 8, ""), "LIB": names.library}, "run_example.rs"
        ),
        "tests/parity.rs": fill(
            template("parity_test.rs"), {**random_lines(ir, " " * 12, "  "), "LIB": names.library}, "parity_test.rs"
        ),
    }
    if rlxmodel is not None:
        files["src/graph.rs"] = symbolic_graph_rs(program, ir)
        files[f"src/{SYMBOLIC_FILE}"] = rlxmodel
    elif style == "tensor":
        files["src/graph.rs"] = tensor_graph_rs(program, ir)
    else:
        files["src/graph.rs"], constants = graph_rs(program, ir, style)
        if constants:
            write_bytes(root / "src" / CONSTANTS_FILE, constants)
    if style == "flow":
        files["src/flow.rs"] = template("flow.rs")
    if is_staged(ir):  # sizes that depend on tensor values, run in stages (decision ax)
        found = stage_files(ir)
        files |= {f"src/{name}": text for name, text in found.files.items()}
        files["src/stages.rs"] = stages_rs(found, template("stages.rs"))
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
    (root / "testdata").mkdir(exist_ok=True)
    copy_file(reference, root / "testdata" / REFERENCE)
    if not rustfmt(root):
        warnings.warn("rustfmt is not installed: the generated crate is valid but not formatted", stacklevel=2)
    return root


def rustfmt(root: Path) -> bool:
    """Format the crate's sources with rustfmt when it is installed; returns whether it ran."""
    exe = shutil.which("rustfmt")
    if exe is None:
        return False
    sources = sorted(str(p) for p in root.rglob("*.rs"))
    result = subprocess.run([exe, "--edition", "2024", *sources], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        refused = refused_write_in(result.stderr)  # rustfmt rewrites the files in place
        if refused is not None:
            raise write_failure(root, refused)
        raise RtiError(f"rustfmt rejected the generated crate in {root}: {result.stderr.strip()}")
    return True
