"""The last step of a staged output (`outdir.staged`), all or nothing even when the process is killed
(docs/design.md (at)):

- `swap`: a finished staging folder takes the output's name. Where the output exists and the file
  system can, the two folders are exchanged in one step (Linux `renameat2(RENAME_EXCHANGE)`: ext4,
  xfs, btrfs, tmpfs, ...), so the name always holds one whole output, old or new; the earlier
  output, now under the staging name, is then removed. Elsewhere (no `renameat2`, or a file system
  that refuses the flag) it takes two renames: the earlier output into a hidden `.<name>.old-*`
  folder (as `previous`, beside a record of the output's name), then the stage into place.
- `recover`: run first by the next staged write of the same output. A `.<name>.old-*` folder a
  killed run left between the two renames puts `previous` back when the output is missing (the
  killed run did not finish, so the output stays as it was before it), and is removed; staging
  folders of runs that are gone (`.<name>.partial-*`: killed while writing, or holding the earlier
  output after an exchange) are removed.

Every folder this writes is created locked (`flock` on the folder, held until the run is done), so
`recover` touches only folders of runs that are gone; a folder it cannot lock (in use, or a file
system without locks) is left alone. POSIX only (`fcntl`), as the rest of the package."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import glob
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

# renameat2(2): swap the two names in one step (Linux 3.15+; glibc 2.28+ exports the call).
RENAME_EXCHANGE = 2
_AT_FDCWD = -100
# errno values that say the system or the file system has no exchange: fall back to two renames.
NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})
# The name of the output a `.old-*` folder holds the earlier copy of (its output's full name: the
# folder's own name keeps only the first `outdir._STAGE_NAME` characters).
TARGET = "target"
PREVIOUS = "previous"
# tempfile.mkdtemp's random part: 8 of [a-z0-9_].
_RANDOM = r"[a-z0-9_]{8}"


@functools.cache
def _renameat2() -> Any:
    """libc's renameat2, or None where the C library has none (macOS, musl before 1.2.5, old glibc)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap what the paths `a` and `b` name, in one step (both must exist). Returns False, having
    changed nothing, where the C library, the kernel or the file system has no exchange
    (`NO_EXCHANGE`); raises OSError (naming `b`) for any other failure."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(b))


def locked_folder(prefix: str, parent: Path) -> tuple[Path, int]:
    """A new folder `parent/<prefix>XXXXXXXX` (`tempfile.mkdtemp`) and a descriptor holding an
    exclusive `flock` on it, taken before anyone else can: a `recover` that removed it between its
    creation and the lock makes another. The caller closes the descriptor (which releases the lock).
    Where the file system has no locks the folder comes unlocked (`recover` then never touches it)."""
    while True:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks only while a `recover` removes it
        except OSError:
            return path, fd  # no locks here: `recover` cannot lock it either
        if _same(path, fd):
            return path, fd
        os.close(fd)


def _same(path: Path, fd: int) -> bool:
    """Whether `path` still names the folder `fd` is open on."""
    try:
        here = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _try_lock(path: Path) -> int | None:
    """A descriptor holding `path`'s lock, or None when another run holds it, the file system has no
    locks, or `path` is gone or no folder."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    if not _same(path, fd):
        os.close(fd)
        return None
    return fd


def _remove(path: Path) -> None:
    """Remove `path`: a folder with everything in it, or a link or file (never what a link points to)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _left_behind(name: str, short: str) -> str | None:
    """`old` or `partial` when `name` is one of those folders for an output whose name starts
    with `short` (the part staging names keep), else None."""
    found = re.fullmatch(re.escape(f".{short}.") + rf"(old|partial)-{_RANDOM}", name)
    return found.group(1) if found else None


def recover(out_dir: Path, short: str) -> list[str]:
    """Clean up what killed runs left beside `out_dir` (absolute; `short`: the start of its name the
    staging names keep). A `.old-*` folder of this output (its `target` record names it; a folder
    written before the record existed counts when `short` is the whole name) puts its `previous`
    back as `out_dir` when `out_dir` is missing, and is removed; `.partial-*` folders of runs that
    are gone are removed. Folders another run holds (locked) are left alone. Returns what it did,
    one line each (for logs and tests). Raises OSError when the parent folder cannot be read."""
    done: list[str] = []
    if not out_dir.parent.is_dir():
        return done
    for entry in sorted(out_dir.parent.iterdir()):
        kind = _left_behind(entry.name, short)
        if kind is None:
            continue
        fd = _try_lock(entry)
        if fd is None:
            continue
        try:
            if kind == "old":
                record = entry / TARGET
                target = record.read_text("utf-8", "surrogateescape") if record.is_file() else None
                if target is None and short == out_dir.name:
                    target = out_dir.name  # left by a version without the record: the name is whole
                if target != out_dir.name:
                    continue  # another output whose name starts alike: its own next run recovers it
                previous = entry / PREVIOUS
                if previous.is_dir() and not out_dir.exists() and not out_dir.is_symlink():
                    os.rename(previous, out_dir)
                    done.append(f"restored {out_dir} from {entry.name}/{PREVIOUS} (a run was killed while moving it)")
            _remove(entry)
            done.append(f"removed {entry.name}")
        finally:
            os.close(fd)
    return done


def stranded(path: Path) -> Path | None:
    """Where a run killed between the two renames left the earlier copy of the missing output `path`
    (or of the missing folder holding it, a conversion's `bundle/`): its `.old-*` folder's `previous`,
    which the next staged write of that output puts back (`recover`); None when there is none."""
    for out in (path, path.parent):
        if out.exists() or not out.parent.is_dir():
            continue
        try:
            for entry in sorted(out.parent.glob(f".{glob.escape(out.name[:8])}*.old-*")):
                record = entry / TARGET
                target = (
                    record.read_text("utf-8", "surrogateescape")
                    if record.is_file()
                    else entry.name[1:].split(".old-")[0]
                )
                if target == out.name and (entry / PREVIOUS).is_dir():
                    return entry / PREVIOUS
        except OSError:  # only a hint for an error message: an unreadable folder gives none
            return None
    return None


def swap(stage: Path, out_dir: Path, short: str) -> None:
    """Put the finished `stage` in place as `out_dir`, replacing an earlier output there: one exchange
    where the file system has it, else two renames through a locked `.<short>.old-*` folder that
    `recover` undoes when the run is killed between them. On an OSError the earlier output is back
    as `out_dir` and the error raised (the caller removes `stage`)."""
    if not (out_dir.exists() or out_dir.is_symlink()):
        os.rename(stage, out_dir)
        return
    if exchange(stage, out_dir):
        _remove(stage)  # now the earlier output
        return
    old, fd = locked_folder(f".{short}.old-", out_dir.parent)
    try:
        try:
            (old / TARGET).write_text(out_dir.name, encoding="utf-8", errors="surrogateescape")
            os.rename(out_dir, old / PREVIOUS)
        except OSError:
            shutil.rmtree(old, ignore_errors=True)
            raise
        try:
            os.rename(stage, out_dir)
        except OSError:
            os.rename(old / PREVIOUS, out_dir)  # the earlier output stays as it was
            shutil.rmtree(old, ignore_errors=True)
            raise
        _remove(old)
    finally:
        os.close(fd)
