"""The coverage tool (python -m tools.coverage): OpInfo samples in every dtype -> per Core ATen op x dtype
status, as Markdown and JSON."""

from __future__ import annotations

import json

import pytest

from tools.coverage import cli, samples

pytest.importorskip("expecttest")


def test_core_aten_op_list() -> None:
    ops = samples.core_aten_ops()
    assert len(ops) > 150 and "aten.add.Tensor" in ops and "aten.convolution.default" in ops


def test_coverage_run_on_a_few_ops(tmp_path, monkeypatch) -> None:
    from rlx_torch_import.lower import REGISTRY

    monkeypatch.delitem(REGISTRY, "aten.sub.Tensor")  # make one op a known gap (in this process: --jobs 0)
    argv = ["--out", str(tmp_path), "--ops", "add,sub", "--dtypes", "float32", "--samples-per-op", "1", "--jobs", "0"]
    assert cli.main(argv) == 0
    doc = json.loads((tmp_path / "coverage.json").read_text())
    table = doc["core_ops"]
    assert table["aten.add.Tensor"]["status"] == "verified"
    assert table["aten.sub.Tensor"]["status"] == "unsupported"
    assert "no lowering for this op overload" in table["aten.sub.Tensor"]["reason"]
    md = (tmp_path / "coverage.md").read_text()
    assert "| `aten.add.Tensor` | verified | core | add[0] | ok |" in md and "Core ATen ops: **" in md
    assert "| `aten.sub.Tensor` | float32 | unsupported | sub[0] | core | no lowering for this op overload" in md


def test_extra_project_samples_count(tmp_path) -> None:
    samples = tmp_path / "samples.py"
    samples.write_text(
        "import torch\n"
        "class Neg(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return -x\n"
        "SAMPLES = [('neg', Neg(), (torch.randn(3),))]\n"
    )
    out = tmp_path / "out"
    argv = ["--out", str(out), "--ops", "add", "--dtypes", "float32", "--samples-per-op", "1", "--jobs", "0"]
    assert cli.main([*argv, "--extra-samples", str(samples)]) == 0
    doc = json.loads((out / "coverage.json").read_text())
    assert doc["meta"]["extra_samples"] == 1
    verdict = {"status": "verified", "reason": "", "via": "extra:neg[0]", "level": "core"}
    assert doc["core_ops"]["aten.neg.default"] == {**verdict, "dtypes": {"float32": {**verdict, "failed": []}}}
    assert "plus 1 project samples" in (out / "coverage.md").read_text()
    neg = [r for r in doc["samples"] if r["opinfo"] == "extra:neg"]
    assert [r["level"] for r in neg] == ["core"], "no aten-level run when the core graph has every Core ATen op"


def _run_extra(tmp_path, source: str, *extra_args: str) -> dict:
    samples = tmp_path / "samples.py"
    samples.write_text("import torch\nA = torch.ops.aten\n" + source)
    out = tmp_path / "out"
    argv = ["--out", str(out), "--ops", "neg", "--dtypes", "float32", "--samples-per-op", "1"]
    argv += ["--extra-samples", str(samples), *(extra_args or ("--jobs", "0"))]
    assert cli.main(argv) == 0
    return json.loads((out / "coverage.json").read_text())


def test_ops_the_core_table_decomposes_are_judged_at_aten_level(tmp_path) -> None:
    """squeeze.dim and fill.Scalar are tagged core, yet torch's core table decomposes them."""
    doc = _run_extra(
        tmp_path,
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return A.fill.Scalar(x, 2.0) + x.squeeze(1)\n"
        "SAMPLES = [('squeeze_fill', M(), (torch.randn(3, 1),))]\n",
    )
    table = doc["core_ops"]
    verdict = {"status": "verified", "reason": "", "via": "extra:squeeze_fill[0]", "level": "aten"}
    assert table["aten.squeeze.dim"] == {**verdict, "dtypes": {"float32": {**verdict, "failed": []}}}
    assert table["aten.fill.Scalar"]["level"] == "aten" and table["aten.fill.Scalar"]["status"] == "verified"
    assert table["aten.add.Tensor"]["level"] == "core", "an equal verdict keeps the core run"
    runs = [r["level"] for r in doc["samples"] if r["opinfo"] == "extra:squeeze_fill"]
    assert runs == ["core", "aten"] and doc["meta"]["aten_runs"] >= 1


def test_ops_that_cannot_verify_say_why(tmp_path) -> None:
    doc = _run_extra(
        tmp_path,
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x + torch.rand(3)\n"
        "SAMPLES = [('rand', M(), (torch.randn(3),))]\n",
    )
    table = doc["core_ops"]
    assert table["aten.rand.default"]["status"] not in ("verified", "verified-decomposed")
    assert table["aten.rand.default"]["reason"] == samples.NOT_NATIVE["aten.rand.default"]
    assert "random output" in (tmp_path / "out" / "coverage.md").read_text()


def test_every_dtype_gets_its_own_cell(tmp_path) -> None:
    argv = ["--out", str(tmp_path), "--ops", "add", "--dtypes", "float32,int64", "--samples-per-op", "1"]
    assert cli.main([*argv, "--jobs", "0"]) == 0
    doc = json.loads((tmp_path / "coverage.json").read_text())
    add = doc["core_ops"]["aten.add.Tensor"]
    assert set(add["dtypes"]) == {"float32", "int64"}
    assert all(cell["status"] == "verified" for cell in add["dtypes"].values())
    runs = {(r["opinfo"], r["index"], r["dtype"]) for r in doc["samples"]}
    assert runs == {("add", 0, "float32"), ("add", 0, "int64")}, "one sample per OpInfo and dtype"
    assert doc["meta"]["dtypes"] == ["float32", "int64"]
    md = (tmp_path / "coverage.md").read_text()
    assert "| Core ATen op | best | level | sample | f32 | i64 | reason |" in md
    assert "| `aten.add.Tensor` | verified | core | add[0] | ok | ok |  |" in md
    assert "| `aten.sub.Tensor` | no-sample |  |  | — | — |" in md
    assert "pairs with a sample: **2**" in md and "parity failed **0**" in md


def test_more_float32_samples_than_other_dtypes(tmp_path) -> None:
    argv = ["--out", str(tmp_path), "--ops", "add", "--dtypes", "float32,int32", "--jobs", "0"]
    assert cli.main([*argv, "--samples-per-op", "2", "--samples-per-dtype", "1"]) == 0
    doc = json.loads((tmp_path / "coverage.json").read_text())
    runs = sorted((r["dtype"], r["index"]) for r in doc["samples"])
    assert runs == [("float32", 0), ("float32", 1), ("int32", 0)]


def test_unknown_dtype_is_refused(tmp_path, capsys) -> None:
    assert cli.main(["--out", str(tmp_path), "--dtypes", "float32,complex64"]) == 2
    assert "complex64" in capsys.readouterr().err


def test_worker_processes_give_the_same_verdicts(tmp_path, capfd) -> None:
    argv = ["--out", str(tmp_path), "--ops", "add,mul", "--dtypes", "float32,int32", "--samples-per-op", "1"]
    assert cli.main([*argv, "--jobs", "2"]) == 0
    doc = json.loads((tmp_path / "coverage.json").read_text())
    assert doc["meta"]["jobs"] == 2 and doc["meta"]["pool_restarts"] == 0
    for op in ("aten.add.Tensor", "aten.mul.Tensor"):
        assert {d: c["status"] for d, c in doc["core_ops"][op]["dtypes"].items()} == {
            "float32": "verified",
            "int32": "verified",
        }
    assert len(doc["samples"]) == 4
    err = capfd.readouterr().err
    assert "[coverage] 1/2 " in err and "[coverage] 2/2 " in err and "s elapsed)" in err


# A module that runs once eagerly (the coverage's own check), then does `action` on its next real
# (not traced) call: the reference run inside the conversion, after the sample's ops are published to the parent.
_SECOND_CALL = (
    "import os, time\n"
    "from torch._subclasses.fake_tensor import is_fake\n"
    "class Bad(torch.nn.Module):\n"
    "    calls = 0\n"
    "    def forward(self, x):\n"
    "        if not is_fake(x):\n"
    "            Bad.calls += 1\n"
    "            if Bad.calls > 1:\n"
    "                {action}\n"
    "        return x.abs()\n"
    "class Neg(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return -x\n"
    "SAMPLES = [('neg', Neg(), (torch.randn(3),)), ('bad', Bad(), (torch.randn(3),)),\n"
    "           ('neg2', Neg(), (torch.randn(4),))]\n"
)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_sample_that_kills_its_worker_is_recorded_and_the_run_goes_on(tmp_path, capfd, jobs: int) -> None:
    doc = _run_extra(tmp_path, _SECOND_CALL.format(action="os._exit(3)"), "--jobs", str(jobs))
    by_name = {r["opinfo"]: r for r in doc["samples"]}
    bad = by_name["extra:bad"]
    assert bad["status"] == "crashed" and "died running this sample alone" in bad["reason"]
    assert bad["ops"] == ["aten.abs.default"] and bad["dtype"] == "float32" and bad["level"] == "core"
    assert by_name["extra:neg"]["status"] == by_name["extra:neg2"]["status"] == "verified"
    assert by_name["neg"]["status"] == "verified", "the OpInfo task ran too"
    assert len(doc["samples"]) == 4 and doc["meta"]["pool_restarts"] >= 1
    abs_f32 = doc["core_ops"]["aten.abs.default"]["dtypes"]["float32"]
    assert abs_f32["status"] == "crashed" and abs_f32["failed"] == ["extra:bad[0] crashed"]
    deaths = {d["unit"]: d for d in doc["meta"]["worker_deaths"]}
    death = deaths["extra samples 0-2 extra:1"]
    assert death["outcome"] == "suspect" and death["crashed_alone"] is True
    if jobs == 1:  # one worker ran every sample, in order
        assert death["recent"][-1] == "extra:neg extra:0", "the samples that worker ran before"
    earlier = {"extra:neg extra:0", "extra:neg2 extra:2", "neg float32:0"}  # the other samples, by label and key
    assert set(death["recent"]) <= earlier, "only samples run before, never generation units or the dead one"
    assert not any(d["crashed_alone"] for unit, d in deaths.items() if unit != "extra samples 0-2 extra:1")
    md = (tmp_path / "out" / "coverage.md").read_text()
    assert "| `aten.abs.default` | float32 | crashed | extra:bad[0] | core |" in md
    assert "| extra:bad[0] | float32 | core | crashed | abs.default |" in md
    assert "| extra samples 0-2 extra:1 | crashes alone |" in md
    assert "re-running alone" in capfd.readouterr().err


def test_a_sample_past_its_time_limit_is_killed(tmp_path) -> None:
    # The limit must exceed a fresh worker's first conversion (torch.export's warm-up and the report's
    # plotting library: 5-6 s on a 2-core Xeon), since the sample after the killed one runs in a new worker.
    doc = _run_extra(tmp_path, _SECOND_CALL.format(action="time.sleep(600)"), "--jobs", "1", "--sample-timeout", "20")
    by_name = {r["opinfo"]: r for r in doc["samples"]}
    assert by_name["extra:bad"]["status"] == "timeout" and "within 20 s" in by_name["extra:bad"]["reason"]
    assert by_name["extra:neg2"]["status"] == "verified", "the task resumed after the killed sample"
