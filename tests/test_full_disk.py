"""A file system that refuses a write (full, over quota, read-only, failing): our WriteError naming the
file and the cause, exit 8, and nothing half-written left behind, for every file we write."""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import uuid
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import outdir, outswap
from rlx_torch_import.cli import main
from rlx_torch_import.errors import ExitCode, WriteError

REPO = Path(__file__).resolve().parents[1]


def _model() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval(), (torch.randn(2, 8),)


class _FullAfter(io.RawIOBase):
    """A file that takes `room` bytes, then fails as a full disk does."""

    def __init__(self, f: io.BufferedWriter, room: int) -> None:
        self.f, self.room = f, room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        n = len(memoryview(data).cast("B"))
        if n > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= n
        return self.f.write(data)

    def close(self) -> None:
        self.f.close()
        super().close()


def _disk_full_for(monkeypatch, name: str, room: int = 16) -> None:
    """Every write of a file called `name` (through `outdir.replacing`) fails after `room` bytes."""
    real = open

    def fake_open(path, mode="r", *args, **kwargs):
        f = real(path, mode, *args, **kwargs)
        final = Path(path).name.rsplit(".", 2)[0].removeprefix(".")  # .NAME.PID-THREAD.tmp -> NAME
        return _FullAfter(f, room) if "w" in mode and final == name else f

    monkeypatch.setattr(outdir, "open", fake_open, raising=False)


@pytest.mark.parametrize(
    "name",
    [
        "torch-ir.json",
        "weights.safetensors",
        "reference.safetensors",
        "model.hir.json",
        "meta.json",
        "report.json",
        "report.html",
        "Cargo.toml",
        "lib.rs",
    ],
)
def test_a_full_disk_names_the_file_and_leaves_nothing(name: str, tmp_path, monkeypatch) -> None:
    model, inputs = _model()
    _disk_full_for(monkeypatch, name)
    out = tmp_path / "out"
    with pytest.raises(WriteError, match=rf"cannot write {out}/\S*{name}: no space left on the device \(ENOSPC\)") as e:
        rti.from_torch(model, inputs, out, emit=("bundle", "crate"), per_node=False, name="tiny")
    assert e.value.exit_code == ExitCode.WRITE_FAILED == 8
    assert "partial" not in e.value.path and Path(e.value.path).is_relative_to(
        out
    )  # the output's name, not the stage's
    assert list(tmp_path.iterdir()) == []  # no output, no staging folder, no temporary file


def test_a_full_disk_keeps_the_earlier_output(tmp_path, monkeypatch) -> None:
    model, inputs = _model()
    out = tmp_path / "out"
    rti.from_torch(model, inputs, out, per_node=False)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    _disk_full_for(monkeypatch, "weights.safetensors")
    with pytest.raises(WriteError):
        rti.from_torch(model, inputs, out, per_node=False)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # `build` rewrites the bundle and the reports: the same on a full disk
    _disk_full_for(monkeypatch, "report.md")
    with pytest.raises(WriteError, match=rf"cannot write {out}/report.md: no space left"):
        rti.build(out, per_node=False)
    for name in ("report.json", "report.md", "report.html"):  # the three replaced together or not at all
        assert (out / name).read_bytes() == before[Path(name)]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_the_cli_exits_8_with_the_message_and_run_save_writes_all_or_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(REPO / "examples" / "mlp.py", tmp_path / "mlp.py")
    _disk_full_for(monkeypatch, "weights.safetensors")
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["mlp.py", "-o", "out", "-q", "--no-per-node"])
    assert code == ExitCode.WRITE_FAILED, err.getvalue()
    assert "error: cannot write out/weights.safetensors: no space left on the device (ENOSPC)" in err.getvalue()
    assert "hint: free space there, or write the output elsewhere" in err.getvalue()
    assert "Traceback" not in err.getvalue() and "bug" not in err.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.py"]
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        assert main(["mlp.py", "-o", "out", "-q", "--no-per-node"]) == 0
    np.savez(tmp_path / "x.npz", x=np.zeros((4, 64), np.float32))
    (tmp_path / "y.safetensors").write_bytes(b"earlier")
    _disk_full_for(monkeypatch, "y.safetensors")
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["run", "out/bundle", "--inputs", "x.npz", "--save", "y.safetensors"])
    assert code == ExitCode.WRITE_FAILED and "cannot write y.safetensors: no space left" in err.getvalue()
    assert (tmp_path / "y.safetensors").read_bytes() == b"earlier"  # the earlier file, not half of a new one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.py", "out", "x.npz", "y.safetensors"]


def test_no_room_for_the_output_folder_itself(tmp_path, monkeypatch) -> None:
    """On a full ext4 disk the first write to fail is creating the staging folder."""

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outswap.tempfile, "mkdtemp", full)
    model, inputs = _model()
    with pytest.raises(WriteError, match=rf"cannot write {tmp_path}/out: no space left on the device") as e:
        rti.from_torch(model, inputs, tmp_path / "out", per_node=False)
    assert e.value.exit_code == 8 and list(tmp_path.iterdir()) == []


def test_the_cause_is_named_per_errno(tmp_path) -> None:
    for code, cause in [
        (errno.EDQUOT, "disk quota exceeded (EDQUOT)"),
        (errno.EROFS, "read-only file system (EROFS)"),
        (errno.EIO, "I/O error (EIO)"),
        (errno.EFBIG, "file too large for the file system (EFBIG)"),
    ]:
        assert cause in outdir.write_failure(tmp_path / "f", OSError(code, os.strerror(code))).message


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def test_a_real_full_tmpfs(tmp_path) -> None:
    """On a real 256 KiB file system (root can mount one; elsewhere the simulated tests above stand)."""
    mount = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if not _mount_tmpfs(mount, "256k"):
        pytest.skip("cannot mount a tmpfs here (needs root); the simulated ENOSPC tests cover the same paths")
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 8)).eval()  # 0.5 MB of weights
        with pytest.raises(WriteError, match=r"cannot write .*/out/\S+: no space left on the device \(ENOSPC\)"):
            rti.from_torch(model, (torch.randn(2, 256),), mount / "out", per_node=False)
        assert list(mount.iterdir()) == []
        assert os.statvfs(mount).f_bfree == os.statvfs(mount).f_blocks  # every byte given back
    finally:
        subprocess.run(["umount", str(mount)], check=False)
