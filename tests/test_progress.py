"""Progress (progress.py): phase lines, and a tqdm bar over a long phase's items, only when enabled."""

from __future__ import annotations

from rlx_torch_import.progress import Progress


def test_items_show_a_bar_only_when_enabled(capsys) -> None:
    quiet = Progress(False)
    with quiet.phase("sweep"):
        assert list(quiet.items([1, 2, 3], "sweep points")) == [1, 2, 3]
    assert capsys.readouterr().err == "" and "sweep" in quiet.timings

    shown = Progress(True)
    with shown.phase("sweep"):
        assert list(shown.items([1, 2, 3], "sweep points")) == [1, 2, 3]
    err = capsys.readouterr().err
    assert "[rlx-torch-import] sweep ..." in err and "[rlx-torch-import] sweep points" in err and "/3 " in err
