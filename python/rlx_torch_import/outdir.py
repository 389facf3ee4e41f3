"""Write outputs into a staging folder and move them into place only at the end."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OURS = ("torch-ir.json", "meta.json")  # a from_torch output dir; a bundle dir


def check_replaceable(out_dir: Path) -> None:
    """Refuse to replace anything but an empty folder or an earlier output of ours."""
    from .errors import InputError

    out_dir = Path(out_dir)
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise InputError(f"output path {out_dir} exists and is not a directory")
    entries = {p.name for p in out_dir.iterdir()}
    if entries and not entries & set(OURS):
        raise InputError(
            f"output directory {out_dir} exists and is not an rlx-torch-import output "
            f"(it has {', '.join(sorted(entries)[:3])}{', ...' if len(entries) > 3 else ''})",
            hint="choose a new directory, or remove it first; rlx-torch-import replaces only its own outputs",
        )


@contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """Yield a fresh folder beside `out_dir`; on success it replaces `out_dir`, on error it is removed."""
    out_dir = Path(out_dir).absolute()
    check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    umask = os.umask(0)
    os.umask(umask)
    stage.chmod(0o777 & ~umask)  # mkdtemp makes 0700; the result should look like any new folder
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        out_dir.rename(old / "previous")
    stage.rename(out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
