"""The benchmark's machinery (python -m tools.bench): one tiny model end to end, and the fused-op count.

No timing assertions: speed targets live in the benchmark's table, not in tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.bench import cli, measure, tables


def _row(text: str, name: str) -> dict[str, str]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == name:
            return dict(zip(header, cells, strict=True))
    raise AssertionError(f"no row for {name!r} in:\n{text}")


def test_bench_runs_the_tiny_mlp(tmp_path, capsys) -> None:
    out = tmp_path / "results.md"
    status = cli.main(
        [
            "--models",
            "tests.mlp",
            "--runs",
            "2",
            "--warmup",
            "1",
            "--no-onnx",
            "--no-openvino",
            "--no-blas",
            "--no-decode",
            "--no-cli-wall",
            "--no-kernels",
            "--no-dynamic",
            "--no-per-node",
            "--no-threads",
            "--out",
            str(out),
        ]
    )
    assert status == 0
    printed = capsys.readouterr().out
    row = _row(printed, "tests.mlp")
    assert row["parity"].split()[0] == "ok", printed  # a footnote may follow (e.g. noisy timings)
    assert row["ORT ms"] == "skipped"
    assert row["OV ms"] == "skipped"
    for col in ("RLX ms", "eager ms"):
        assert float(row[col]) > 0, row
    ratio = re.match(r"([0-9.]+)\N{MULTIPLICATION SIGN}", row["RLX/eager"])
    assert ratio and float(ratio[1]) > 0, row
    assert int(row["RLX nodes"]) > 0 and int(row["ATen nodes"]) > 0, row
    assert row["top RLX kernels"] != "—", row
    assert tables.TARGETS_LINE in printed
    written = out.read_text()
    assert _row(written, "tests.mlp")["parity"].split()[0] == "ok"
    assert "### tests.mlp" in written and "| kernel | ms/run |" in written
    assert "- tests.mlp: export " in written  # the conversion phases


def test_fused_source_nodes_are_counted_once() -> None:
    def prov(node: str, aten: str, module: str = "") -> dict[str, str]:
        return {"aten": aten, "node": node, "module_path": module, "source": ""}

    meta = {
        "op_histogram": {
            "LayerNorm": 1,
            "Transpose": 1,
            "MatMul": 1,
            "Reshape": 2,
            "Attention": 1,
            "Activation.Gelu": 1,
        },
        "aten_histogram": {"aten.layer_norm.default": 1, "aten.linear.default": 1, "aten.sdpa": 1, "aten.gelu": 1},
        "provenance": {
            "layer_norm#1": prov("layer_norm", "aten.layer_norm.default", "norm"),
            "linear#2": prov("linear", "aten.linear.default", "fc"),
            "linear#3": prov("linear", "aten.linear.default", "fc"),
            "sdpa#4": prov("sdpa", "aten.sdpa"),
            "sdpa#5": prov("sdpa", "aten.sdpa"),
            "sdpa#6": prov("sdpa", "aten.sdpa"),
            "gelu#7": prov("gelu", "aten.gelu"),
        },
    }
    ops = [
        {"LayerNorm": {"axis": -1, "eps": 1e-5}},
        {"Transpose": {"perm": [1, 0]}},
        "MatMul",
        {"Reshape": {"new_shape": [4, 8]}},
        {"Attention": {"num_heads": 1}},
        {"Reshape": {"new_shape": [1, 4, 8]}},
        {"Activation": "Gelu"},
    ]
    hir = {
        "nodes": [
            {"id": 0, "op": {"Input": {"name": "x"}}, "name": None},
            {"id": 1, "op": {"Param": {"name": "fc.weight"}}, "name": None},
            *(
                {"id": i + 2, "op": {"Mir": op}, "name": measure._label(p)}
                for i, (op, p) in enumerate(zip(ops, meta["provenance"].values(), strict=True))
            ),
        ]
    }
    counts = measure.node_counts(meta, hir)
    assert (counts.rlx, counts.aten, counts.aten_on_fused) == (7, 4, 2)  # layer_norm and sdpa; not gelu
    assert counts.fused_ops == {"Attention": 1, "LayerNorm": 1}
    assert counts.join == "provenance order"

    # without the provenance order (say, a node RLX added), the HIR names still give the source nodes
    hir["nodes"].insert(2, {"id": 99, "op": {"Mir": {"Softmax": {"axis": -1}}}, "name": "softmax <- aten.softmax"})
    counts = measure.node_counts(meta, hir)
    assert counts.join == "HIR node names"
    assert counts.aten_on_fused == 3
    assert counts.fused_ops == {"Attention": 1, "LayerNorm": 1, "Softmax": 1}


def test_fused_kinds() -> None:
    assert measure.is_fused("LayerNorm") and measure.is_fused("FusedSwiGLU") and measure.is_fused("Conv")
    assert not measure.is_fused("Activation.Gelu") and not measure.is_fused("Activation.Silu")
    assert not measure.is_fused("MatMul")


def test_kernel_rows_time_rlx_and_torch_on_the_same_op() -> None:
    """A kernel row runs the RLX op alone and PyTorch's op on the same data (no timing assertions)."""
    from tools import kernel_bench

    (case,) = [c for c in kernel_bench._cases() if c.key == "bias-add-channels"]
    row = kernel_bench.time_case(case, runs=2, warmup=1)
    assert row["rlx_ms"] > 0 and row["torch_ms"] > 0 and row["rlx_kernels_ms"] >= 0
    assert case.key in kernel_bench.markdown([row]) or case.what in kernel_bench.markdown([row])
    assert {k for k, _, _ in kernel_bench.cases_doc()} == {c.key for c in kernel_bench._cases()}


def test_dynamic_bench_times_new_and_cached_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.export import Dim

    from models import make
    from tools import dynamic_bench

    model, inputs = make("mlp")
    case = ("mlp", model, inputs, {"x": {0: Dim("batch", min=1, max=64)}}, [(32, 32)])
    monkeypatch.setattr(dynamic_bench, "_cases", lambda: [case])
    monkeypatch.setattr(dynamic_bench.subprocess, "run", lambda cmd, **_: dynamic_bench.convert(0, Path(cmd[-1])))
    table = dynamic_bench.rows(runs=2)
    assert table[0].startswith("| model | binding | first run at a new binding ms")
    example, other = table[2], table[3]
    assert "batch=4 (example)" in example and example.split("|")[6].strip() != "-"  # static bundle timed
    assert "batch=32 |" in other and other.split("|")[6].strip() == "-"
    assert float(other.split("|")[5].strip().removesuffix("x")) > 0


def test_thread_table_runs_one_bundle_from_4_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from models import make
    from tools import thread_bench

    monkeypatch.setattr(thread_bench, "_cases", lambda: [("mlp", lambda: make("mlp"))])
    head, _rule, row = thread_bench.rows(runs=8)
    cells = dict(
        zip(
            [c.strip() for c in head.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")], strict=True
        )
    )
    assert float(cells["1 thread runs/s"]) > 0 and float(cells["4 threads runs/s"]) > 0
    assert cells["results equal"] == "yes" and cells["4 / 1"].endswith("x")


def test_per_node_cost_table() -> None:
    from tools import verify_bench

    head, _rule, row = verify_bench.rows(["tests.transformer_block"], 1)
    cells = dict(
        zip(
            [c.strip() for c in head.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")], strict=True
        )
    )
    assert int(cells["nodes"]) > 10 and float(cells["per-node phase s"]) >= 0 and cells["extra"].endswith("%"), cells
