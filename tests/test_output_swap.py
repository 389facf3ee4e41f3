"""The output swap is all or nothing even when the process is killed (`outdir.staged`, `outswap`;
docs/design.md (at)): killed between the two steps of either swap path (one exchange, then removing
the earlier copy; or the two renames where the file system has no exchange), the output folder holds
one whole output, and the next run leaves nothing else behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlx_torch_import import outdir, outswap
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.errors import BundleError, InputError

# Run in a child process: writes an output "new" to argv[1] through `staged` and is SIGKILLed between
# the swap's two steps (argv[2]: "exchange": right after the exchange; "fallback": no exchange, killed
# after the earlier output was moved aside and before the stage is renamed into place).
_KILLED_SWAP = """
import os, signal, sys
from pathlib import Path
from rlx_torch_import import outdir, outswap

out, mode = Path(sys.argv[1]), sys.argv[2]
def die():
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "exchange":
    real = outswap.exchange
    def exchange_then_die(a, b):
        if not real(a, b):
            sys.exit("no exchange on this file system")
        die()
    outswap.exchange = exchange_then_die
else:
    outswap.exchange = lambda a, b: False
    rename = os.rename
    def rename_or_die(src, dst, **kw):
        if Path(dst) == out:
            die()
        return rename(src, dst, **kw)
    outswap.os.rename = rename_or_die
with outdir.staged(out) as stage:
    (stage / "meta.json").write_text("new")
    (stage / "weights.safetensors").write_text("new weights")
"""


def _write(out: Path, text: str) -> None:
    with outdir.staged(out) as stage:
        (stage / "meta.json").write_text(text)
        (stage / "weights.safetensors").write_text(f"{text} weights")


def _whole(out: Path) -> str:
    """Which output `out` holds, asserting it is whole (both files, from the same run)."""
    meta = (out / "meta.json").read_text()
    assert (out / "weights.safetensors").read_text() == f"{meta} weights"
    assert sorted(p.name for p in out.iterdir()) == ["meta.json", "weights.safetensors"]
    return meta


def _kill_during_swap(out: Path, mode: str) -> None:
    run = subprocess.run([sys.executable, "-c", _KILLED_SWAP, str(out), mode], capture_output=True, text=True)
    if run.returncode == 1 and "no exchange on this file system" in run.stderr:
        pytest.skip(f"{out.parent}: the file system has no renameat2(RENAME_EXCHANGE)")
    assert run.returncode == -signal.SIGKILL, run.stderr


def test_the_swap_is_one_exchange_where_the_file_system_has_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "f").write_text("a")
    (b / "f").write_text("b")
    if not outswap.exchange(a, b):
        pytest.skip(f"{tmp_path}: the file system has no renameat2(RENAME_EXCHANGE)")
    assert ((a / "f").read_text(), (b / "f").read_text()) == ("b", "a")
    with pytest.raises(FileNotFoundError):
        outswap.exchange(a, tmp_path / "missing")


def test_killed_after_the_exchange_the_new_output_is_whole_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, "old")
    _kill_during_swap(out, "exchange")
    assert _whole(out) == "new"  # the exchange happened: the name never lacked a whole output
    left = [p.name for p in tmp_path.iterdir() if p.name != "out"]
    assert len(left) == 1 and left[0].startswith(".out.partial-")  # the earlier output, not removed yet
    _write(out, "next")
    assert _whole(out) == "next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_killed_between_the_two_renames_the_next_run_restores_the_earlier_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _write(out, "old")
    _kill_during_swap(out, "fallback")
    assert not out.exists()  # what the killed run left: the earlier output hidden in .out.old-*/previous
    (old,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.old-")]
    assert (old / "previous" / "meta.json").read_text() == "old" and (old / "target").read_text() == "out"
    # reading the missing output (or the bundle inside it) says where the earlier output is
    for missing in (out, out / "bundle"):
        with pytest.raises(BundleError, match="no such directory") as e:
            BundleModel(missing)
        assert e.value.hint is not None and str(old / "previous") in e.value.hint
    assert outswap.recover(out, "out")[0].startswith(f"restored {out}")
    assert _whole(out) == "old"  # the killed run did not finish: the output is as it was before it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # its stage is gone too
    # the whole path through `staged`, without an exchange, killed again: the next run recovers and replaces
    _kill_during_swap(out, "fallback")
    monkeypatch.setattr(outswap, "exchange", lambda a, b: False)
    with outdir.staged(out) as stage:
        assert _whole(out) == "old"  # recovered before anything is written
        (stage / "meta.json").write_text("next")
        (stage / "weights.safetensors").write_text("next weights")
    assert _whole(out) == "next"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_failed_second_rename_puts_the_earlier_output_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    _write(out, "old")
    monkeypatch.setattr(outswap, "exchange", lambda a, b: False)
    rename = os.rename

    def refuse_into_place(src, dst, **kw):  # type: ignore[no-untyped-def]
        if Path(dst) == out and Path(src).name.startswith(".out.partial-"):
            raise PermissionError(13, "Permission denied")
        return rename(src, dst, **kw)

    monkeypatch.setattr(outswap.os, "rename", refuse_into_place)
    with pytest.raises(InputError, match=rf"cannot move the output into {out}: Permission denied"):
        _write(out, "new")
    assert _whole(out) == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_recovery_leaves_alone_what_a_live_run_holds_and_other_outputs_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, "old")
    live, fd = outswap.locked_folder(".out.partial-", tmp_path)  # a run writing now
    try:
        # a killed run of another output whose name starts alike ("out" is its first 40 characters' part
        # only when both are long): simulate with a record naming another output
        other = tmp_path / ".out.old-abcdefgh"
        (other / "previous").mkdir(parents=True)
        (other / "target").write_text("out-with-a-longer-name")
        dead = tmp_path / ".out.partial-zzzzzzzz"  # killed while writing: nobody holds it
        dead.mkdir()
        (dead / "meta.json").write_text("half")
        unrelated = tmp_path / ".out.partial-notours"  # not a name staged makes
        unrelated.mkdir()
        done = outswap.recover(out, "out")
        assert done == ["removed .out.partial-zzzzzzzz"]
        assert live.is_dir() and other.is_dir() and unrelated.is_dir() and _whole(out) == "old"
    finally:
        os.close(fd)
    assert outswap.recover(out, "out") == [f"removed {live.name}"]  # its run is gone now


def test_an_old_folder_without_a_record_is_recovered_when_the_name_is_whole(tmp_path: Path) -> None:
    """`.old-*` folders left by versions before the record: the prefix is the whole name, so it is ours."""
    out = tmp_path / "out"
    legacy = tmp_path / ".out.old-k3j4h5g6"
    (legacy / "previous").mkdir(parents=True)
    (legacy / "previous" / "meta.json").write_text("old")
    (legacy / "previous" / "weights.safetensors").write_text("old weights")
    assert outswap.recover(out, "out") == [
        f"restored {out} from {legacy.name}/previous (a run was killed while moving it)",
        f"removed {legacy.name}",
    ]
    assert _whole(out) == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    long = tmp_path / ("o" * 60)
    legacy = tmp_path / f".{'o' * 40}.old-k3j4h5g6"
    (legacy / "previous").mkdir(parents=True)
    assert outswap.recover(long, "o" * 40) == [] and legacy.is_dir()  # cut name, no record: not ours to say
