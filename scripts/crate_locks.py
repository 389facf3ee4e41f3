"""Regenerate the Cargo.lock templates of generated crates (one per style).

Run after changing RLX's pin or a generated crate's dependencies:

    python scripts/crate_locks.py

Each template is what cargo resolves for a crate of that style, seeded with the
core's own Cargo.lock so the versions the core is tested with stay pinned.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from rlx_torch_import.crate.lock import make_template
from rlx_torch_import.crate.rust_names import CrateNames
from rlx_torch_import.crate.sources import cargo_toml
from rlx_torch_import.crate.style import STYLES
from rlx_torch_import.program import Program

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "python/rlx_torch_import/crate/templates/locks"


def main() -> int:
    names = CrateNames(package="rlx-probe", library="rlx_probe")
    for style in STYLES:
        with tempfile.TemporaryDirectory() as tmp:
            probe = Path(tmp)
            (probe / "src").mkdir()
            (probe / "src/lib.rs").write_text("")
            toml = cargo_toml(names, Program(name="probe"), SimpleNamespace(producer={}), style)  # type: ignore[arg-type]
            (probe / "Cargo.toml").write_text(toml)
            shutil.copyfile(REPO / "Cargo.lock", probe / "Cargo.lock")
            subprocess.run(["cargo", "fetch", "--quiet"], cwd=probe, check=True)
            lock = (probe / "Cargo.lock").read_text()
        (LOCKS / f"{style}.lock").write_text(make_template(lock, names.package))
        print(f"{style}: {lock.count('[[package]]')} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
