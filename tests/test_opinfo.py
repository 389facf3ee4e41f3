"""The OpInfo-driven Core ATen coverage as a pytest selection, deselected by default (marker `opinfo`).

Each test is one OpInfo sample that docs/coverage.json records (the last full `python -m tools.coverage`
run): it is generated again (same seed), converted and verified in this process at the levels the
record has, and no level may end worse than recorded (a better verdict passes: regenerate the record).
Samples recorded as crashing or timing out their worker are skipped here (one would take pytest down);
`python -m tools.coverage` isolates those in worker processes.

    pytest -m opinfo tests/test_opinfo.py                        # every recorded sample (hours on 2 cores)
    pytest -m opinfo tests/test_opinfo.py -k "add and float32"   # a few
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tools.coverage.samples import SKIPPED, STATUSES, _op_db, one_op, opinfo_label, opinfo_samples, run_sample

pytestmark = pytest.mark.opinfo

RECORD = Path(__file__).resolve().parents[1] / "docs" / "coverage.json"


def _recorded() -> dict[tuple[str, str, int], dict[str, str]]:
    """(OpInfo, dtype, sample index) -> level -> recorded status, for every OpInfo sample with a verdict."""
    runs: dict[tuple[str, str, int], dict[str, str]] = {}
    for r in json.loads(RECORD.read_text())["samples"]:
        if r["opinfo"].startswith("extra:") or r["index"] < 0 or r["status"] == SKIPPED:
            continue
        runs.setdefault((r["opinfo"], r["dtype"], r["index"]), {})[r["level"]] = r["status"]
    return runs


RUNS = _recorded()


@cache
def _opinfos() -> dict[str, Any]:
    return {opinfo_label(o): o for o in _op_db()}


def _rank(status: str | None) -> int:
    return STATUSES.index(status) if status in STATUSES else len(STATUSES)


@pytest.mark.parametrize(("opinfo", "dtype", "index"), sorted(RUNS), ids=lambda v: str(v))
def test_opinfo_sample_is_no_worse_than_recorded(opinfo: str, dtype: str, index: int) -> None:
    pytest.importorskip("expecttest")
    recorded = RUNS[(opinfo, dtype, index)]
    if {"crashed", "timeout"} & set(recorded.values()):
        pytest.skip(f"recorded {recorded}: run it in a worker process, python -m tools.coverage --ops ...")
    info = _opinfos()[opinfo]
    made = one_op(info, opinfo_samples(info, dtype, index + 1)[index])
    assert made is not None, "the recorded sample has a tensor input"
    got = {r.level: r for r in run_sample(opinfo, index, dtype, *made)}
    worse = {
        level: f"{was} -> {got[level].status if level in got else 'not run'}"
        f"{': ' + got[level].reason if level in got else ''}"
        for level, was in recorded.items()
        if _rank(got[level].status if level in got else None) > _rank(was)
    }
    assert not worse, worse
