"""report.html: the parity report as one self-contained page (no network: styles and the plot are inline).

Sections: verdict, notes, outputs, sweep and extra input sets (when present), the first divergence,
the error along the graph (inline SVG, `verify/plot.py`), the per-node
table, and the ATen and RLX op histograms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from .compare import OutputParity
from .plot import EPSILON, error_plot_svg
from .render_md import NO_ACCURACY_COST, quantization_line, worst_feature_cell
from .report import InputSetRow, NodeError, ParityReport, SweepRow

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td { white-space: nowrap; } td.wrap { white-space: normal; min-width: 16em; }
.scroll { overflow-x: auto; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fde8e8; } tr.first td { background: #fff3b0; font-weight: 600; }
.pass { color: #1a7f37; font-weight: 600; } .fail { color: #c62828; font-weight: 600; }
.verdict { font-size: 1.3em; } .note { color: #555; font-style: italic; }
.box { border-left: 4px solid #e0a800; background: #fff8dc; padding: .5em 1em; margin: .5em 0; }
.side { display: flex; gap: 2em; flex-wrap: wrap; align-items: flex-start; }
.plot svg { max-width: 100%; height: auto; }
code { background: #f3f3f3; padding: 0 3px; }
"""


def _g(x: float) -> str:
    return f"{x:.3g}"


def _verdict(ok: bool) -> str:
    return '<span class="pass">pass</span>' if ok else '<span class="fail">FAIL</span>'


def _table(head: Sequence[str], rows: Iterable[str], head_html: str | None = None) -> str:
    """A table: `head` plain column names (or ready-made `head_html`), `rows` ready-made <tr> strings."""
    th = head_html or "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
    return f'<div class="scroll"><table><thead>{th}</thead><tbody>\n' + "\n".join(rows) + "\n</tbody></table></div>\n"


def _tr(cells: Sequence[str], cls: str = "", row_id: str = "") -> str:
    """A row of ready-made <td> strings."""
    attrs = (f' class="{cls}"' if cls else "") + (f' id="{row_id}"' if row_id else "")
    return f"<tr{attrs}>" + "".join(cells) + "</tr>"


def _td(text: object, num: bool = False, wrap: bool = False) -> str:
    cls = "num" if num else "wrap" if wrap else ""
    return f'<td class="{cls}">{escape(str(text))}</td>' if cls else f"<td>{escape(str(text))}</td>"


def _outputs_table(outputs: Sequence[OutputParity]) -> str:
    head = [
        "output",
        "verdict",
        "dtype",
        "shape",
        "max abs",
        "allowed abs",
        "max rel",
        "cosine",
        "differing",
        "reasons",
    ]

    def row(o: OutputParity) -> str:
        value = o.python_value is not None  # a Python value: compared by equality, no error columns
        _, (_, _, _, differ) = o.shown()
        return _tr(
            [
                _td(o.name),
                f"<td>{_verdict(o.ok)}</td>",
                _td(f"Python {o.expected_dtype}" if value else o.dtype),
                _td("-" if value else o.shape),
                _td("-" if value else _g(o.max_abs_error), True),
                _td("-" if value else "bit-exact" if o.criterion == "bit-exact" else _g(o.allowed_abs_error), True),
                _td("-" if value else _g(o.max_rel_error), True),
                _td("-" if value else f"{o.cosine:.8f}", True),
                _td(differ, wrap=True),
                _td("; ".join(o.reasons + [f"note: {n}" for n in o.notes]), wrap=True),
            ],
            "" if o.ok else "bad",
        )

    return _table(head, [row(o) for o in outputs])


def _rows_summary(rows: Sequence[SweepRow | InputSetRow]) -> tuple[list[str], list[str]]:
    """Per row: the largest max abs error and the smallest cosine over its outputs, formatted."""
    abs_ = [_g(max((o.max_abs_error for o in r.outputs), default=0.0)) for r in rows]
    cos = [f"{min((o.cosine for o in r.outputs), default=1.0):.8f}" for r in rows]
    return abs_, cos


def _sweep_section(report: ParityReport) -> str:
    if not report.sweep:
        return ""
    ranges = ", ".join(f"{k} in {lo}..{'inf' if hi is None else hi}" for k, (lo, hi) in report.symbols.items())
    abs_, cos = _rows_summary(report.sweep)
    rows = [
        _tr(
            [
                _td(r.label),
                _td(", ".join(f"{k}={v}" for k, v in r.binding.items())),
                f"<td>{_verdict(r.ok)}</td>",
                _td(a, True),
                _td(c, True),
                _td(f"{r.compile_ms:.1f}", True),
                _td(f"{r.run_ms:.2f}", True),
                _td(r.failures(), wrap=True),
            ],
            "" if r.ok else "bad",
        )
        for r, a, c in zip(report.sweep, abs_, cos, strict=True)
    ]
    head = ["point", "binding", "verdict", "max abs", "min cosine", "compile ms", "run ms", "failing outputs"]
    probes = "; ".join(", ".join(f"{k}={v}" for k, v in b.items()) for b in report.probes)
    odd = "; ".join(", ".join(f"{k}={v}" for k, v in b.items()) for b in report.unreproduced)
    return (
        f"<h2>Sweep over the dynamic dims ({escape(ranges)})</h2>\n"
        "<p>One row per sweep point; eager PyTorch at those sizes is the reference.</p>\n"
        + (f"<p>Generalized from the lowerings at {escape(probes)}.</p>\n" if probes else "")
        + (f"<p>At {escape(odd)} the lowering itself differs from the symbolic graph.</p>\n" if odd else "")
        + _table(head, rows)
    )


def _input_sets_section(report: ParityReport) -> str:
    if not report.input_sets:
        return ""
    abs_, cos = _rows_summary(report.input_sets)
    rows = [
        _tr(
            [
                _td(r.label),
                _td(r.description, wrap=True),
                f"<td>{_verdict(r.ok)}</td>",
                _td(a, True),
                _td(c, True),
                _td(r.failures(), wrap=True),
            ],
            "" if r.ok else "bad",
        )
        for r, a, c in zip(report.input_sets, abs_, cos, strict=True)
    ]
    head = ["input set", "what it exercises", "verdict", "max abs", "min cosine", "failing outputs"]
    return "<h2>Extra input sets</h2>\n" + _table(head, rows)


def _quantization_section(report: ParityReport) -> str:
    """Weight-only quantization: the summary line, the weights kept float, the accuracy cost vs the float model."""
    q = report.quantization
    if not q:
        return ""
    kept = [_tr([_td(k["weight"]), _td(k["reason"], wrap=True)]) for k in q["kept_float"]]
    cost = [
        _tr(
            [
                _td(c["point"]),
                _td(c["output"]),
                _td(_g(c["max_abs_error"]), True),
                _td(f"{c['cosine']:.6f}", True),
                _td(c.get("top1_agreement", "-"), True),
                _td(f"{c.get('flagged_features', '-')} / {c.get('features', '-')}", True),
                _td(worst_feature_cell(c), True),
            ],
            "bad" if c.get("flagged_features") else "",
        )
        for c in q["accuracy_cost"]
    ]
    return (
        f"<h2>Quantization</h2>\n<p>{escape(quantization_line(q))}; verified against eager PyTorch on the dequantized "
        "weights.</p>\n"
        + (_table(["kept float", "why"], kept) if kept else "")
        + (
            f"<p>A feature (an element of the last axis) is flagged when its largest error against the float "
            f"model exceeds {q.get('feature_limit', 0.5):g} of its own largest magnitude.</p>\n"
            + _table(
                [
                    "input",
                    "output",
                    "max abs vs float",
                    "cosine",
                    "top-1 agreement",
                    "flagged features",
                    "worst feature: error / magnitude (relative)",
                ],
                cost,
            )
            if cost
            else f"<p>{escape(NO_ACCURACY_COST)}</p>\n"
        )
    )


def _error_cells(err: NodeError | None, note: str) -> list[str]:
    if err is None:
        return [f'<td colspan="6" class="note wrap">{escape(note or "no RLX value")}</td>']
    return [
        _td(_g(err.max_abs), True),
        _td(_g(err.max_rel), True),
        _td(_g(err.ulp), True),
        _td(f"{err.cosine:.8f}", True),
        _td(f"bit-exact ({err.bits_differ} differ)" if err.bit_exact else _g(err.allowed_abs), True),
        f"<td>{_verdict(err.ok)}</td>",
    ]


def _nodes_section(report: ParityReport) -> str:
    if not report.nodes:
        return "<h2>Per-node parity</h2>\n<p>Per-node parity was not computed for this run: no table, no plot.</p>\n"
    metrics = "".join(f"<th>{h}</th>" for h in ("max abs", "max rel", "ULP", "cosine", "budget", "verdict"))
    fixed = ("#", "node", "ATen op", "module path", "source line", "shape", "dtype")
    head_html = (
        "<tr>"
        + "".join(f'<th rowspan="2">{escape(h)}</th>' for h in fixed)
        + f'<th colspan="6">local (fed {escape(report.node_reference or report.reference)}\'s inputs)</th>'
        + '<th colspan="6">cumulative (fed the model inputs)</th>'
        + "</tr><tr>"
        + metrics * 2
        + "</tr>"
    )
    rows = []
    for n in report.nodes:
        label = escape(n.node if n.value in ("", n.node) else f"{n.node} ({n.value})")
        if n.note and n.local is not None and n.cumulative is not None:  # a remark beside the numbers
            label += f'<br><span class="note wrap">{escape(n.note)}</span>'
        cells = [
            _td(n.index, True),
            f"<td>{label}</td>",
            _td(n.aten),
            _td(n.module_path),
            _td(n.source),
            _td(n.shape),
            _td(n.dtype),
        ]
        if n.local is None and n.cumulative is None:
            cells.append(f'<td colspan="12" class="note wrap">{escape(n.note or "no RLX value")}</td>')
        else:
            cells += _error_cells(n.local, n.note) + _error_cells(n.cumulative, n.note)
        first = n.same_value(report.first_divergence)
        rows.append(_tr(cells, "first" if first else "bad" if n.failed() else "", "first-divergence" if first else ""))
    failing = sum(n.failed() for n in report.nodes)
    return (
        "<h2>Per-node parity</h2>\n"
        f"<p>{len(report.nodes)} values, {failing} over budget. <em>local</em>: the node's own RLX computation "
        f"fed with {escape(report.node_reference or report.reference)}'s values of its inputs (the op's error "
        "alone); <em>cumulative</em>: RLX run on the "
        "model inputs up to this node.</p>\n" + _table((), rows, head_html)
    )


def _divergence_section(report: ParityReport) -> str:
    d = report.first_divergence
    if d is None and not report.drift:
        if not report.nodes:
            return ""
        return '<h2>First divergence</h2>\n<p class="pass">Every node is within its local budget.</p>\n'
    parts = ["<h2>First divergence</h2>\n"]
    if d is not None:
        err = d.local
        what = f"local max abs {_g(err.max_abs)} &gt; budget {_g(err.allowed_abs)}" if err is not None else ""
        if err is not None and err.bit_exact:
            what = f"{err.bits_differ} elements differ in bits from a value-exact op's (judged bit-exact)"
        parts.append(
            f'<div class="box">First node over its local budget: <a href="#first-divergence"><b>#{d.index} '
            f"{escape(d.node)}</b></a> (<code>{escape(d.aten)}</code>"
            + (f" in <code>{escape(d.module_path)}</code>" if d.module_path else "")
            + (f", {escape(d.source)}" if d.source else "")
            + f"): {what}</div>\n"
        )
    if report.drift:
        parts.append(f'<div class="box">Drift: {escape(report.drift)}</div>\n')
    return "".join(parts)


def _plot_section(report: ParityReport) -> str:
    if not report.nodes:
        return ""
    svg = error_plot_svg(report.nodes, report.first_divergence)
    return (
        "<h2>Error along the graph</h2>\n"
        f'<div class="plot">{svg}</div>\n'
        f"<p>Log axis: an error of exactly 0 is drawn at {EPSILON:g}; a node without an RLX value leaves a gap. "
        "Dashed steps: the budget (allowed abs error) per node, none for exact values (budget 0); "
        "red x: over budget.</p>\n"
    )


def _histogram(title: str, hist: dict[str, int]) -> str:
    rows = [_tr([_td(k), _td(v, True)]) for k, v in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "<div>" + _table((title, "count"), rows) + "</div>"


def _ops_section(report: ParityReport) -> str:
    return (
        "<h2>Ops</h2>\n"
        "<p>The report holds no per-ATen-op mapping to RLX ops, so both histograms are shown side by side "
        "(each RLX node's source ATen call is in <code>bundle/meta.json</code>, <code>provenance</code>).</p>\n"
        f'<div class="side">{_histogram("ATen op", report.aten_histogram)}'
        f"{_histogram('RLX op', report.op_histogram)}</div>\n"
    )


def report_html(report: ParityReport) -> str:
    """The whole report as one HTML page with no external references."""
    verdict = report.verdict
    cls = "pass" if report.ok and report.verified else "fail"
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in report.timings_s.items())
    head = (
        f'<p class="verdict">Verdict: <span class="{cls}">{verdict}</span></p>\n'
        f"<p>Against {escape(report.reference)}; decomposition <code>{escape(report.decomposition)}</code>, "
        f"torch {escape(report.torch_version)}, "
        f"RLX {escape(report.rlx_version)}"
        f"{' on ' + escape(' '.join([report.device, *report.device_settings])) if report.device else ''}; "
        f"written to <code>{escape(report.out_dir)}</code>.</p>\n"
        + (f"<p>Timings: {escape(timings)}.</p>\n" if timings else "")
        + (
            f"<p>Auto-decomposed: {escape(', '.join(report.auto_decomposed_ops))}</p>\n"
            if report.auto_decomposed_ops
            else ""
        )
    )
    notes = (
        "<h2>Notes</h2>\n<ul>" + "".join(f"<li>{escape(n)}</li>" for n in report.notes) + "</ul>\n"
        if report.notes
        else ""
    )
    body = (
        head
        + notes
        + "<h2>Outputs</h2>\n"
        + (_outputs_table(report.outputs) if report.outputs else "<p>No output was compared.</p>\n")
        + _sweep_section(report)
        + _input_sets_section(report)
        + _quantization_section(report)
        + _divergence_section(report)
        + _plot_section(report)
        + _nodes_section(report)
        + _ops_section(report)
    )
    title = escape(f"Parity report: {report.name}")
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n{body}</body>\n</html>\n"
    )
