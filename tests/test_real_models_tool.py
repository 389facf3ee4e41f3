"""tools/real_models (issue 39's before/after harness) is a developer tool, not part of the suite:
these only check that it lists its models, refuses an unknown name and reports a model whose
package is missing without running anything, and put two saved runs side by side, all without the
models' packages."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tools.real_models.__main__ import main, run_one
from tools.real_models.models import BY_NAME, SPECS
from tools.real_models.spec import Spec
from tools.real_models.table import table
from tools.real_models.worker import MISSING


def test_list_names_every_model_without_importing_their_packages(capsys) -> None:
    assert main(["--list"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 1)[0] for line in printed] == [s.name for s in SPECS]
    assert {"yolov8n", "reformer", "vits", "idefics3", "fnet", "informer", "speecht5-tts", "rt-detr"} <= set(BY_NAME)


def test_help_describes_the_tool(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "--compare" in capsys.readouterr().out


def test_an_unknown_name_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SystemExit, match=r"unknown model.*no-such-model.*known: yolov8n"):
        main(["--only", "no-such-model"])


def test_a_missing_package_is_a_row_not_a_run() -> None:
    def never() -> tuple:  # pragma: no cover - a missing package must not build anything
        raise AssertionError("built a model whose package is missing")

    spec = Spec("ghost", "rti_no_such_package_39", "tools.real_models.ghost_models", "control", "", never)
    row = run_one(spec, argparse.Namespace(timeout=5.0, work=None))
    assert (row.outcome, row.detail) == (MISSING, "rti_no_such_package_39 is not importable")
    assert (
        table([row])[2]
        == "| ghost | ghost | control | package missing | 0.0 | rti_no_such_package_39 is not importable |"
    )


def test_compare_puts_two_saved_runs_side_by_side(tmp_path, capsys) -> None:
    def saved(rows: list[dict]) -> Path:
        path = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"rti": str(path), "date": "d", "rows": rows}))
        return path

    common = {"name": "fnet", "source": "transformers_models", "kind": "complex / FFT"}
    before = saved(
        [{**common, "outcome": "error", "error_class": "UnsupportedOpsError", "exit_code": 3, "detail": "x|y"}]
    )
    after = saved([{**common, "outcome": "verified", "seconds": 2.5}])
    assert main(["--compare", str(before), str(after)]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == "| fnet | complex / FFT | error: UnsupportedOpsError, exit 3 | 0.0 | verified | 2.5 |  | x\\|y |"
