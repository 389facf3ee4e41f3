"""report.md: the parity report as Markdown (`ParityReport.markdown`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compare import OutputParity
    from .report import NodeError, ParityReport

# Names come from the user's model (module paths, output names, node names): in a report each is one
# line, `|`-safe for a table cell, and at most this long (the full text is in report.json).
_NAME_CHARS = 200


def one_line(text: object) -> str:
    """`text` on one line (newlines and other control characters escaped), cut to _NAME_CHARS."""
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return flat if len(flat) <= _NAME_CHARS else f"{flat[:_NAME_CHARS]}... ({len(flat) - _NAME_CHARS} more)"


# More per-node rows than this: report.md lists only the failing nodes and the first divergence.
_MARKDOWN_NODES = 40


def _md(text: object) -> str:
    """`text` for a markdown table cell or inline span: one line, `|` escaped, cut to _NAME_CHARS."""
    return one_line(text).replace("|", "\\|").replace("`", "'")


def _device_text(report: ParityReport) -> str:
    """`, device cuda: NVIDIA H200 with RLX_CUDA_PARITY=1, ...` (nothing when nothing ran)."""
    if not report.device:
        return ""
    settings = f" with {', '.join(map(_md, report.device_settings))}" if report.device_settings else ""
    return f", device {_md(report.device)}{settings}"


def markdown(report: ParityReport) -> str:
    """report.md: the verdict, one row per output, then sweep, input sets and per-node parity."""

    def row(o: OutputParity) -> str:
        what, (max_abs, max_rel, cosine, differ) = o.shown()
        allowed = "-" if o.python_value is not None else f"{o.allowed_abs_error:.3g}"
        allowed = "bit-exact" if o.criterion == "bit-exact" else allowed
        return (
            f"| {_md(o.name)} | {'pass' if o.ok else 'FAIL'} | {_md(what)} | {max_abs} | {allowed} | {max_rel} | "
            f"{cosine} | {_md(differ)} | {_md('; '.join(o.reasons))} |"
        )

    rows = "\n".join(row(o) for o in report.outputs)
    return (
        f"# Parity report: {_md(report.name)}\n\n"
        f"Verdict: **{'not verified' if not report.verified else report.verdict}** "
        f"(against {report.reference}; decomposition `{report.decomposition}`, torch {report.torch_version}, "
        f"RLX {report.rlx_version}"
        f"{_device_text(report)})\n\n"
        + (f"Auto-decomposed: {', '.join(report.auto_decomposed_ops)}\n\n" if report.auto_decomposed_ops else "")
        + "".join(f"- {n}\n" for n in report.notes)
        + ("\n" if report.notes else "")
        + "| output | verdict | dtype shape | max abs | allowed abs | max rel | cosine | differing elements "
        "| reasons |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        + rows
        + "\n"
        + "".join(f"\n- `{_md(o.name)}`: {_md(n)}" for o in report.outputs for n in o.notes)
        + ("\n" if any(o.notes for o in report.outputs) else "")
        + _sweep_markdown(report)
        + _input_sets_markdown(report)
        + _nodes_markdown(report)
        + _quantization_markdown(report.quantization)
    )


def quantization_line(q: dict[str, Any]) -> str:
    """One line on a quantized conversion: scheme, weights packed and kept float, bundle weight bytes."""
    packed = len({r["weight"] for r in q["quantized"]})  # a tied weight packed for two uses counts once
    return (
        f"weight-only {q['scheme']} ({q['rlx_scheme']}, blocks of {q['block']}): {packed} weight(s) "
        f"packed, {len(q['kept_float'])} kept float; bundle weights {q['bundle_weight_bytes']} bytes vs "
        f"{q['float_weight_bytes']} float ({q['ratio']:.3f}x)"
    ) + flagged_features_line(q)


def flagged_features_line(q: dict[str, Any]) -> str:
    """Empty, or when the accuracy cost flagged output features (error against the float model past
    `feature_limit` of their own magnitude, `quant.report.feature_errors`), a WARNING naming how many and
    the worst (output, input, feature index, relative error)."""
    flagged = [c for c in q.get("accuracy_cost", []) if c.get("flagged_features")]
    if not flagged:
        return ""
    worst = max(flagged, key=lambda c: c["worst_feature"]["relative_error"])
    w = worst["worst_feature"]
    return (
        f"; WARNING: {sum(c['flagged_features'] for c in flagged)} output feature(s) over {len(flagged)} "
        f"output/input pair(s) differ from the float model by more than {q.get('feature_limit', 0.5):g} of their "
        f"own magnitude (worst: {worst['output']} feature {w['index']} on {worst['point']}, error "
        f"{w['max_abs_error']:.3g} for magnitude {w['magnitude']:.3g})"
    )


def worst_feature_cell(c: dict[str, Any]) -> str:
    """An accuracy-cost row's worst feature: "index: error / magnitude (relative)", or "-" without one."""
    w = c.get("worst_feature")
    if w is None:
        return "-"
    return f"{w['index']}: {w['max_abs_error']:.3g} / {w['magnitude']:.3g} ({w['relative_error']:.3g})"


NO_ACCURACY_COST = (
    "The accuracy cost against the float model is measured at conversion only (`from_torch`, the CLI's "
    "conversion): `build` and `verify` have the quantized model's files, not the float model."
)


def _quantization_markdown(q: dict[str, Any]) -> str:
    """The quantization section: what was packed and kept float (why), and the accuracy cost against the
    float model (eager PyTorch on the original weights vs on the dequantized ones)."""
    if not q:
        return ""
    packed = "".join(
        f"| `{_md(r['weight'])}` | {r.get('use', 'matmul')} | {r['dims'][0]}x{r['dims'][1]} | {r['float_bytes']} | "
        f"{r['packed_bytes']} |\n"
        for r in q["quantized"]
    )
    kept = "".join(f"- `{_md(k['weight'])}`: {_md(k['reason'])}\n" for k in q["kept_float"])
    cost = "".join(
        f"| {_md(c['point'])} | {_md(c['output'])} | {c['max_abs_error']:.3g} | {c['cosine']:.6f} | "
        f"{c['top1_agreement'] if 'top1_agreement' in c else '-'} | "
        f"{'**' + str(c['flagged_features']) + '**' if c.get('flagged_features') else 0} / {c.get('features', '-')} "
        f"| {worst_feature_cell(c)} |\n"
        for c in q["accuracy_cost"]
    )
    return (
        f"\n## Quantization\n\n{_md(quantization_line(q))}. Verification above is against eager PyTorch on the "
        "dequantized weights (the quantized model's exact reference).\n\n"
        "| weight | use | dims | float bytes | packed bytes |\n|---|---|---|---|---|\n"
        + packed
        + (f"\nKept float:\n\n{kept}" if kept else "")
        + (
            "\nAccuracy cost against the float model (eager PyTorch, original weights vs dequantized). A feature "
            "(an element of the last axis) is flagged when its largest error exceeds "
            f"{q.get('feature_limit', 0.5):g} of its own largest magnitude; worst feature: index: max abs error / "
            "magnitude (relative):\n\n"
            "| input | output | max abs error | cosine | top-1 agreement | flagged features | worst feature |\n"
            "|---|---|---|---|---|---|---|\n" + cost
            if cost
            else f"\n{NO_ACCURACY_COST}\n"
        )
    )


def _input_sets_markdown(report: ParityReport) -> str:
    if not report.input_sets:
        return ""
    rows = "\n".join(
        f"| {_md(r.label)} | {_md(r.description)} | {'pass' if r.ok else 'FAIL'} | "
        f"{max((o.max_abs_error for o in r.outputs), default=0.0):.3g} | "
        f"{min((o.cosine for o in r.outputs), default=1.0):.8f} | "
        f"{_md('; '.join([r.failures(), *(f'note: {n}' for n in r.notes())]).strip('; '))} |"
        for r in report.input_sets
    )
    return (
        "\n## Extra input sets\n\n"
        "| input set | what it exercises | verdict | max abs | min cosine | failing outputs |\n"
        "|---|---|---|---|---|---|\n" + rows + "\n"
    )


def _nodes_markdown(report: ParityReport) -> str:
    d = report.first_divergence
    if not report.nodes and d is None and not report.drift:
        return ""

    def errs(e: NodeError | None, note: str) -> str:
        if e is None:
            return f"{note or 'no RLX value'} |" + " |" * 5
        budget = f"bit-exact ({e.bits_differ} differ)" if e.bit_exact else f"{e.allowed_abs:.3g}"
        return (
            f"{e.max_abs:.3g} | {e.max_rel:.3g} | {e.ulp:.3g} | {e.cosine:.8f} | {budget} | "
            f"{'pass' if e.ok else 'FAIL'} |"
        )

    failing = sum(n.failed() for n in report.nodes)
    shown = report.nodes
    head = f"{len(report.nodes)} values, {failing} over budget" if report.nodes else "No per-node values recorded"
    if len(report.nodes) > _MARKDOWN_NODES:
        shown = [n for n in report.nodes if n.failed() or n.same_value(d)]
        head += (
            f"; {len(shown)} shown (failing nodes and the first divergence; every node is in report.json "
            "and report.html)"
        )
    fed = report.node_reference or report.reference
    lines = [f"\n## Per-node parity\n\n{head}. local: the op fed {fed}'s inputs; cumulative: fed the model inputs.\n"]
    if d is not None:
        lim = f" (local max abs {d.local.max_abs:.3g} > {d.local.allowed_abs:.3g})" if d.local is not None else ""
        if d.local is not None and d.local.bit_exact:
            lim = f" ({d.local.bits_differ} elements differ in bits; a value-exact op is judged bit-exact)"
        where = f" in `{_md(d.module_path)}`" if d.module_path else ""
        lines.append(f"**First divergence**: #{d.index} `{_md(d.node)}` (`{d.aten}`{where}, {_md(d.source)}){lim}\n")
    if report.drift:
        lines.append(f"**Drift**: {report.drift}\n")
    if not shown:
        return "\n".join(lines) + "\n"
    metrics = ("max abs", "max rel", "ULP", "cosine", "budget", "verdict")
    lines.append(
        "| # | node | ATen op | module path | source | shape | dtype | "
        + " | ".join(f"{kind} {m}" for kind in ("local", "cumulative") for m in metrics)
        + " |\n|"
        + "---|" * 19
    )
    for n in shown:
        mark = "**" if n.same_value(d) else ""
        cells = f"| {n.index} | {mark}{_md(n.node)}{mark} | {n.aten} | {_md(n.module_path)} | {_md(n.source)} "
        cells += f"| {n.shape} "
        cells += f"| {n.dtype} |"
        if n.local is None and n.cumulative is None:
            cells += f" {n.note or 'no RLX value'} |" + " |" * 11
        else:
            cells += f" {errs(n.local, n.note)} {errs(n.cumulative, n.note)}"
        lines.append(cells)
    return "\n".join(lines) + "\n"


def _sweep_markdown(report: ParityReport) -> str:
    if not report.sweep:
        return ""
    ranges = ", ".join(f"{k} in {lo}..{'inf' if hi is None else hi}" for k, (lo, hi) in report.symbols.items())
    rows = "\n".join(
        f"| {r.label} | {', '.join(f'{k}={v}' for k, v in r.binding.items())} | {'pass' if r.ok else 'FAIL'} | "
        f"{max((o.max_abs_error for o in r.outputs), default=0.0):.3g} | "
        f"{min((o.cosine for o in r.outputs), default=1.0):.8f} | {r.compile_ms:.1f} | {r.run_ms:.2f} | "
        f"{_md('; '.join([r.failures(), *(f'note: {n}' for n in r.notes())]).strip('; '))} |"
        for r in report.sweep
    )
    probes = "; ".join(", ".join(f"{k}={v}" for k, v in b.items()) for b in report.probes)
    odd = "; ".join(", ".join(f"{k}={v}" for k, v in b.items()) for b in report.unreproduced)
    return (
        f"\n## Sweep over the dynamic dims ({ranges})\n\n"
        "One row per sweep point: eager PyTorch at those sizes is the reference. Each symbol moves alone "
        "(the others at their example sizes: typical), then all together (all=min, all=max, alternating).\n\n"
        + (
            f"The symbolic graph was generalized from the lowerings at {probes}, and checked against the "
            "lowering at every sweep point of sizes >= 2.\n\n"
            if probes
            else ""
        )
        + (
            f"At {odd} the lowering itself differs (a size equal to another dim changes a choice); "
            "the rows there compare the symbolic graph with PyTorch.\n\n"
            if odd
            else ""
        )
        + "| point | binding | verdict | max abs | min cosine | compile ms | run ms | failing outputs |\n"
        "|---|---|---|---|---|---|---|---|\n" + rows + "\n"
    )
