"""report.html: self-contained (no network), with the tables and the inline error plot; the HF Llama
conversion's page opens in headless Chromium with no console messages and a screenshot shows it."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import rlx_torch_import as rti
from rlx_torch_import.verify.compare import compare_output
from rlx_torch_import.verify.render_html import report_html
from rlx_torch_import.verify.report import InputSetRow, NodeError, NodeParity, ParityReport


def _self_contained(page: str) -> None:
    low = page.lower()
    for ref in ("http://", "https://", "<script src", "<link", "@import"):
        assert ref not in low, ref
    assert not re.search(r"url\((?!#)", low)  # only references inside the page (SVG clip paths)


def _err(max_abs: float, allowed: float = 1e-4) -> NodeError:
    return NodeError(
        max_abs=max_abs, max_rel=max_abs * 10, ulp=max_abs * 1e7, cosine=1.0, allowed_abs=allowed, ok=max_abs <= allowed
    )


def _node(i: int, local: NodeError | None, cumulative: NodeError | None, note: str = "") -> NodeParity:
    return NodeParity(
        index=i,
        node=f"mm_{i}",
        value=f"mm_{i}",
        aten="aten.mm.default",
        module_path=f"layers.{i}.mlp",
        source="modeling.py:12",
        shape=[8, 64],
        dtype="float32",
        kind="reduction",
        reduction=64,
        local=local,
        cumulative=cumulative,
        note=note,
    )


def _report(nodes: list[NodeParity], first: NodeParity | None = None) -> ParityReport:
    x = np.ones((2, 3), np.float32)
    out = compare_output("logits", x, x, "float32", "float32")
    return ParityReport(
        name="toy <net>",
        ok=first is None,
        verified=True,
        out_dir="/tmp/toy",
        outputs=[out],
        notes=["input scale = 3.0 baked in"],
        op_histogram={"MatMul": 3},
        aten_histogram={"aten.mm.default": 3},
        nodes=nodes,
        first_divergence=first,
        drift="cumulative error grows 10x at mm_2" if first is None else "",
        input_sets=[InputSetRow(label="auto:zeros", description="all-zero inputs", ok=True, outputs=[out])],
    )


def test_report_html_is_self_contained_with_tables_and_plot() -> None:
    nodes = [
        _node(0, _err(0.0), _err(1e-6)),
        _node(1, None, None, note="fused away into mm_2"),
        _node(2, _err(3e-3), _err(5e-3)),
        _node(3, _err(1e-7), _err(float("inf"))),
    ]
    page = report_html(_report(nodes, first=nodes[2]))
    _self_contained(page)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "toy &lt;net&gt;" in page  # escaped
    assert page.count("<svg") == 1 and "</svg>" in page
    assert "<td>mm_0</td>" in page and "<td>aten.mm.default</td>" in page and "<td>layers.2.mlp</td>" in page
    assert "fused away into mm_2" in page  # the note instead of the numbers
    assert 'id="first-divergence"' in page and 'href="#first-divergence"' in page
    assert "input scale = 3.0 baked in" in page and "auto:zeros" in page and "all-zero inputs" in page
    assert "<td>logits</td>" in page and "MatMul" in page
    assert "drawn at 1e-12" in page  # zeros floored on the log axis, and said so
    rows = re.findall(r"<tr[^>]*>\s*<td class=\"num\">(\d+)</td>", page)
    assert rows == ["0", "1", "2", "3"]


def test_report_html_without_nodes_says_so_and_draws_nothing() -> None:
    report = _report([])
    page = report_html(report)
    _self_contained(page)
    assert "<svg" not in page and "Per-node parity was not computed" in page
    assert "<td>logits</td>" in page
    md = report.markdown()
    assert "input scale = 3.0 baked in" in md and "| auto:zeros | all-zero inputs | pass |" in md
    assert "**Drift**: cumulative error grows 10x at mm_2" in md


def test_markdown_lists_only_failing_nodes_when_many() -> None:
    nodes = [_node(i, _err(1e-6), _err(1e-6)) for i in range(50)]
    nodes[7] = _node(7, _err(1e-2), _err(1e-2))
    nodes[30] = _node(30, _err(1e-6), _err(1e-3))
    md = _report(nodes, first=nodes[7]).markdown()
    assert "50 values, 2 over budget; 2 shown" in md
    assert "| 7 | **mm_7** |" in md and "| 30 | mm_30 |" in md and "| 8 | mm_8 |" not in md
    assert "**First divergence**: #7 `mm_7`" in md
    few = _report(nodes[:10], first=nodes[7]).markdown()
    assert "| 8 | mm_8 |" in few  # 40 or fewer: every node


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_llama_report_opens_in_headless_chromium(tmp_path) -> None:
    pytest.importorskip("transformers")
    from PIL import Image

    from tools.verify_bench import hf_llama_small  # the test suite's HF Llama, logits only

    model, (ids,) = hf_llama_small()
    report = rti.from_torch(model, (ids,), tmp_path / "llama")
    assert report.ok, report.summary()
    page_path = tmp_path / "llama" / "report.html"
    page = page_path.read_text(encoding="utf-8")
    _self_contained(page)
    assert "<td>logits</td>" in page or "<td>output</td>" in page
    assert ("<svg" in page) == bool(report.nodes)

    shot = tmp_path / "report.png"
    r = subprocess.run(
        [
            "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            page_path.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # Chromium logs every JS console message (console.error included) as an INFO:CONSOLE line; the
    # page has no script, so any console line at all is a fault.
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    assert shot.is_file() and shot.stat().st_size > 20_000
    with Image.open(shot) as img:
        rgb = np.asarray(img.convert("RGB"), dtype=np.int32)
    assert (rgb.min(axis=(0, 1)) != rgb.max(axis=(0, 1))).any()  # not a single colour
    if report.nodes:  # the plot is on screen: pixels of its local (blue) and cumulative (orange) lines
        for colour in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E)):
            assert (np.abs(rgb - colour).max(axis=2) < 24).sum() > 200, colour
