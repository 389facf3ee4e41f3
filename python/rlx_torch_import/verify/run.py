"""Verification of a bundle against PyTorch: run it at the example, each sweep point and each input set
of a conversion's reference.safetensors, compare each output (`parity.compare_output`), and write the
report. `api.py` calls these after the bundle is written (`from_torch`, `build`) or as it is
(`reverify`)."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import _core, torchir
from ..budgets import is_exact
from ..bundle.model import BundleModel, tree_children
from ..conversion import Conversion
from ..devices import check_device
from ..door import front_end
from ..errors import BundleError, InputError, RlxError, RtiError, TorchIRError
from ..layout import TORCH_IR, output_key, report_stem, set_prefix, sweep_prefix
from ..lower.ops.quantized import pt2e_note
from ..outdir import write_texts
from ..progress import Progress
from ..sizes import evaluate_shape, values_of
from . import ties
from .codes import quantizes
from .compare import OutputParity, compare_output
from .judge import Judge
from .report import InputSetRow, ParityReport, SweepRow
from .stages import staged_notes


def new_report(
    ir: torchir.TorchIR, out_dir: Path, device: str | None, ops: dict[str, int], aten: dict[str, int] | None = None
) -> ParityReport:
    """An unverified report of the conversion of `ir` in `out_dir` that will be verified on `device`
    (None: it will not be, and the report names no device)."""
    info = check_device(device) if device is not None else None
    return ParityReport(
        name=ir.name,
        ok=True,
        verified=False,
        out_dir=str(out_dir),
        device=info.description if info else "",
        device_settings=list(info.settings) if info else [],
        op_histogram=ops,
        aten_histogram=aten if aten is not None else dict(Counter(n.target for n in ir.nodes)),
        decomposition=ir.made_by,
        auto_decomposed_ops=list(ir.auto_decomposed),
        rlx_version=_core.rlx_version(),
        torch_version=ir.producer.get("torch", ""),
        notes=_notes(ir),
        reference=front_end(ir).label,
        node_reference=front_end(ir).node_label(ir),
    )


def verify_bundle(
    report: ParityReport,
    conv: Conversion,
    bundle_dir: Path,
    prog: Progress,
    device: str,
    *,
    meta: dict[str, Any] | None = None,
) -> None:
    """Run the bundle in `bundle_dir` on `device` at the example, each sweep point and each input
    set of the conversion's reference.safetensors; fill `report`'s rows and verdict. `meta`: a new
    bundle's meta.json, not written yet (`bundle.format.write_meta` writes it after this); on the CPU its
    `flush_denormals` is decided here (`_flush_denormals`)."""
    ir = conv.ir
    with prog.phase(f"verify ({device})" if device != "cpu" else "verify"):
        ref = conv.reference
        model = BundleModel(bundle_dir, device=device, meta=meta)
        feed = conv.feed()
        got = model.run(feed)
        if meta is not None and device == "cpu":
            meta["flush_denormals"] = _flush_denormals(model, feed, got)
        judge = Judge(conv)
        exact = exact_outputs(conv)
        example = values_of(ir.symbols) if ir.is_dynamic else None
        report.outputs = _compare_outputs(ir, got, ref, "", judge, exact, example)
        report.outputs += _compare_values(model, ir, {}, None)
        if ir.is_dynamic:
            with prog.phase(f"sweep ({len(ir.sweep)} points)"):
                _verify_sweep(model, conv, report, judge, exact, prog)
        if ir.input_sets:
            with prog.phase(f"input sets ({len(ir.input_sets)})"):
                _verify_input_sets(model, conv, report, judge, exact, prog)
        verified_sets = {r.label for r in report.input_sets}
        report.notes += staged_notes(model, conv, verified_sets)  # sizes that depend on tensor values (decision ax)
        report.verified = True
        report.ok = all(o.ok for o in report.outputs) and all(r.ok for r in report.sweep)
        report.ok = report.ok and all(r.ok for r in report.input_sets)


def _notes(ir: torchir.TorchIR) -> list[str]:
    """What the front end baked in, inlined or left out, one line each (its own first: `Door.notes`)."""
    notes = front_end(ir).notes(ir)
    notes += [  # dims asked to be dynamic that torch.export fixed (Dim.AUTO; a named Dim is an error): decision ba
        f"input {s['input']!r} axis {s['axis']} ({s['label']}) was asked to be dynamic but is static at size "
        f"{s['size']}: {s['reason']}"
        for s in ir.specialized
    ]
    notes += [f"{c['kind']} (node {c['node']}): {c['how']}" for c in ir.control_flow]
    notes += [f"dropped {d['target']} (node {d['node']}, {d['check']}): {d['reason']}" for d in ir.dropped]
    notes += [pt2e] if (pt2e := pt2e_note(ir.nodes)) else []
    if not ir.outputs:
        notes.append(
            "forward returns no tensor: RLX computes nothing; its outputs are Python values (constants, and sizes "
            "computed at each binding), each checked equal to eager PyTorch's"
        )
    return notes


def _verify_sweep(
    model: BundleModel, conv: Conversion, report: ParityReport, judge: Judge, exact: set[str], prog: Progress
) -> None:
    """One report row per sweep point: the bundle at the point's sizes against eager PyTorch there."""
    ir, ref = conv.ir, conv.reference
    report.symbols = {s.label: [s.min, s.max] for s in ir.symbols}
    meta = model.meta.get("lowered_at", {})
    report.probes, report.unreproduced = meta.get("probes", []), meta.get("unreproduced", [])
    labels = {s.name: s.label for s in ir.symbols}
    for i, point in prog.items(list(enumerate(ir.sweep)), "sweep points"):
        binding = {labels[k]: v for k, v in point["binding"].items()}
        row = SweepRow(point["label"], binding, ok=False)
        report.sweep.append(row)
        if "error" in point:
            row.outputs.append(_failed("eager PyTorch", f"eager PyTorch raised at this point: {point['error']}"))
            continue
        feed = conv.feed(sweep_prefix(i))
        try:
            compiles = model.compiles
            start = time.perf_counter()
            model.compile_binding(model.binding(feed))
            row.compile_ms = (time.perf_counter() - start) * 1e3 if model.compiles > compiles else 0.0
            start = time.perf_counter()
            got = model.run(feed)
            row.run_ms = (time.perf_counter() - start) * 1e3
        except (InputError, BundleError) as e:
            row.outputs.append(_failed("RLX", e.message))
            continue
        row.outputs = _compare_outputs(ir, got, ref, sweep_prefix(i), judge, exact, dict(point["binding"]))
        row.outputs += _compare_values(model, ir, point["binding"], point.get("values", {}))
        row.ok = all(o.ok for o in row.outputs)


def _verify_input_sets(
    model: BundleModel, conv: Conversion, report: ParityReport, judge: Judge, exact: set[str], prog: Progress
) -> None:
    """One report row per extra input set (torch-ir `input_sets`): the bundle on the set's inputs
    (a dynamic bundle at the sizes they give) against eager PyTorch's outputs on them."""
    ir = conv.ir
    for k, entry in prog.items(list(enumerate(ir.input_sets)), "input sets"):
        row = InputSetRow(entry["label"], entry.get("description", ""), ok=False)
        report.input_sets.append(row)
        if "error" in entry:
            row.outputs.append(_failed("input set", entry["error"]))
            continue
        feed = conv.feed(set_prefix(k))
        try:
            got = model.run(feed)
            binding = model.binding(feed)
        except (InputError, BundleError) as e:
            if entry.get("implicit") and isinstance(e, RlxError) and " is 0 on these inputs" in e.message:
                report.input_sets.pop()  # a set the tool chose hit RLX's empty-dim limit: said, not judged
                report.notes.append(f"input set {entry['label']} (chosen by the tool) not verified: {e.message}")
                continue
            row.outputs.append(_failed("RLX", e.message))
            continue
        names = {s.label: s.name for s in ir.symbols}  # PyTorch's reference runs bind torch's names
        at = {names[k]: v for k, v in binding.items()} if binding else None
        row.outputs = _compare_outputs(ir, got, conv.reference, set_prefix(k), judge, exact, at)
        row.outputs += _compare_values(model, ir, binding, entry.get("values", {}))
        row.ok = all(o.ok for o in row.outputs)


def _compare_outputs(
    ir: torchir.TorchIR,
    got: dict[str, np.ndarray],
    ref: dict[str, Any],
    prefix: str,
    judge: Judge,
    exact: set[str],
    binding: dict[str, int] | None = None,
) -> list[OutputParity]:
    """Each bundle output against PyTorch's, `<prefix>output.<name>` in reference.safetensors; where
    an output has outliers (elements beyond their own magnitude's budget), PyTorch's float64 run of the
    point judges them (`verify/judge.py`). A float output whose value is exactly determined
    (`exact`, from `exact_outputs`) is judged bit for bit."""
    found = []
    for spec in ir.outputs:
        expected = ref[output_key(spec.name, prefix)]
        actual = got[spec.name]
        dtype = _result_dtype(actual, spec.dtype)
        bit_exact = spec.name in exact
        row = compare_output(spec.name, actual, expected.to_numpy(), dtype, expected.dtype, bit_exact=bit_exact)
        if row.wants_judge:
            wide, why = judge.outputs(prefix, binding)
            row = compare_output(
                spec.name,
                actual,
                expected.to_numpy(),
                dtype,
                expected.dtype,
                wide.get(spec.name),
                no_judge=why or "PyTorch's float64 run gives no float value for it",
            )
        if not row.ok and quantizes(ir) and not is_exact(expected.dtype) and not bit_exact:  # codes: equal
            row = _fed("codes", row, actual, dtype, expected.dtype, judge.codes(prefix, binding))
        if not row.ok and ties.reorders(ir):  # topk/sort indices: a choice among tied values
            row = _fed("ties", row, actual, dtype, expected.dtype, judge.ties(prefix, binding), bit_exact)
        found.append(row)
    return found


def exact_outputs(conv: Conversion) -> set[str]:
    """The float outputs of `conv` judged bit for bit: those its front end recorded in torch-ir's
    `producer["exact_outputs"]` (a JSON list of output names; a front end whose reference runtime is not
    the one that computes torch-ir's nodes, ONNX Runtime, records them from its own graph), else those
    `verify/exactness.py` finds among torch-ir's nodes (eager PyTorch computes the reference from them)."""
    from .exactness import exact_outputs as from_nodes

    recorded = conv.ir.producer.get("exact_outputs")
    if recorded is None:
        return from_nodes(conv.ir)
    try:
        names = json.loads(recorded)
    except ValueError:
        names = None
    if not isinstance(names, list):
        raise TorchIRError(f"{conv.path(TORCH_IR)}: producer['exact_outputs'] is not a JSON list of names")
    return {o.name for o in conv.ir.outputs if o.name in names}


# The graphs PyTorch is re-run with RLX's own choices fed in where either answer is right (`verify/codes.py`:
# quantization codes at a rounding boundary; `verify/tie_fed.py`: indices among tied values): what a failing
# row is then judged by, how its note reads, and its label when the re-run does not pass it either.
_FED = {
    "codes": ("quantization codes", "against PyTorch itself", "code-fed reference"),
    "ties": ("tie choice", "against PyTorch's own choice", "tie-fed reference"),
}


def _fed(
    kind: str,
    row: OutputParity,
    actual: np.ndarray,
    dtype: str,
    expected_dtype: str,
    fed: tuple[dict[str, Any], str],
    bit_exact: bool = False,
) -> OutputParity:
    """A failing output `row` judged against PyTorch's graph fed RLX's choices (`_FED[kind]`), with the
    same budgets: that row, noted, where it passes; else `row` with why not."""
    judged_by, against, label = _FED[kind]
    values, note = fed
    if row.name in values:
        again = compare_output(row.name, actual, values[row.name], dtype, expected_dtype, bit_exact=bit_exact)
        if again.ok:
            note += f" ({against}: max abs error {row.max_abs_error:.3g})"
            again.judged_by, again.notes = judged_by, [*again.notes, note]
            return again
        note = f"{note}; it still differs from that"
    row.notes.append(f"{label}: {note}")
    return row


def _compare_values(
    model: BundleModel, ir: torchir.TorchIR, binding: dict[str, int], eager: dict[str, Any] | None
) -> list[OutputParity]:
    """The outputs that are Python values, by equality: the bundle's (a constant, or a size
    evaluated at `binding`) against eager PyTorch's (`eager`, or the example's, recorded in the
    output tree, when None)."""
    rows = []
    got = model.values(binding)
    leaves = [n for n in _tree_leaves(ir.output_tree) if "name" in n]
    for leaf in leaves:
        name = leaf["name"]
        expected = leaf.get("example", leaf.get("constant")) if eager is None else eager.get(name)
        ok = type(got[name]) is type(expected) and got[name] == expected
        kind = "None" if expected is None else type(expected).__name__
        row = OutputParity(
            name=name,
            ok=ok,
            shape=[],
            expected_shape=[],
            dtype=type(got[name]).__name__,
            expected_dtype=kind,
            count=1,
            nonfinite_match=True,
            max_abs_error=0.0 if ok else math.inf,
            max_rel_error=0.0 if ok else math.inf,
            cosine=1.0 if ok else 0.0,
            allowed_abs_error=0.0,
            mismatches=0 if ok else 1,
            first_mismatch=None if ok else [],
            first_actual=None if ok else got[name],
            first_expected=None if ok else expected,
            reasons=[] if ok else [f"a Python {kind}: the bundle gives {got[name]!r}, eager PyTorch {expected!r}"],
            python_value=repr(got[name]),
        )
        rows.append(row)
    return rows


def _tree_leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
    children = tree_children(node)
    if children or any(k in node for k in ("tuple", "list", "dict")):
        return [leaf for c in children for leaf in _tree_leaves(c)]
    return [node] if node else []


def _failed(name: str, reason: str) -> OutputParity:
    """A parity row for a point that could not be compared."""
    return OutputParity(
        name=name,
        ok=False,
        shape=[],
        expected_shape=[],
        dtype="",
        expected_dtype="",
        count=0,
        nonfinite_match=False,
        max_abs_error=math.inf,
        max_rel_error=math.inf,
        cosine=0.0,
        allowed_abs_error=0.0,
        reasons=[reason],
        mismatches=None,
    )


def _flush_denormals(model: BundleModel, feed: dict[str, Any], got: dict[str, np.ndarray]) -> bool:
    """Whether meta.json records `flush_denormals`: when flushing subnormals leaves every verified output
    bit-identical, it is invisible in the results and only saves time (subnormal operands take
    a ~100x slower path in x86 FPUs; RLX's exp makes masked attention probabilities subnormal).
    Any difference keeps IEEE subnormals, as PyTorch has them. `model` is left in the mode chosen."""
    model.set_flush_denormals(True)
    flushed = model.run(feed)
    same = all(got[k].tobytes() == flushed[k].tobytes() for k in got)
    model.set_flush_denormals(same)
    return same


def _result_dtype(result: np.ndarray, declared: str) -> str:
    """The torch-ir dtype of a bundle result as it came back (numpy names the rest alike; a
    bfloat16 result is a float32 array of bfloat16 values), so a wrong dtype is seen."""
    if declared == "bfloat16" and result.dtype == np.float32:
        return "bfloat16"
    return str(result.dtype)


def write_reports(report: ParityReport, directory: Path, device: str | None = None) -> None:
    """report.json (machine-readable), report.md and report.html (for people; the page is
    self-contained), replaced together (all three or none); `report-<device>.*` with `device`."""
    from .render_html import report_html

    stem = report_stem(device)
    reports = (
        (f"{stem}.json", report.to_json()),
        (f"{stem}.md", report.markdown()),
        (f"{stem}.html", report_html(report)),
    )
    write_texts({directory / fname: text for fname, text in reports})  # the set all or none


# Per-node parity's default ("auto"): in full when verification failed (the report names the first node
# that diverges), and on a passing conversion only while the graph's values hold at most this many
# elements (4 MiB of float32); past it, its cost (every value computed by PyTorch and by two debug builds
# of the graph, then compared) outgrows torch.export's own (docs/design.md, decision ai).
AUTO_ELEMENTS = 1 << 20
PER_NODE_CHOICES = (True, False, "auto")


def check_per_node(per_node: Any) -> bool | str:
    """`per_node` as given if it is one of PER_NODE_CHOICES (True: always, False: never, "auto"); else InputError."""
    if isinstance(per_node, bool) or per_node == "auto":
        return per_node
    raise InputError(f"per_node must be True, False or 'auto', got {per_node!r}")


def value_elements(ir: torchir.TorchIR) -> int:
    """Elements of every tensor value the graph's nodes compute (a dynamic graph at its example sizes):
    what per-node parity computes, holds and compares, three times over."""
    values = values_of(ir.symbols)
    return sum(math.prod(evaluate_shape(o.shape, values)) for n in ir.nodes for o in n.outputs if o.dtype != "none")


def auto_skips_nodes(report: ParityReport, conv: Conversion) -> str:
    """Why per-node parity's default ("auto") leaves this verified conversion out ("" when it runs):
    every output passed and the graph's values hold more than AUTO_ELEMENTS elements."""
    if not report.ok:
        return ""
    elements = value_elements(conv.ir)
    if elements <= AUTO_ELEMENTS:
        return ""
    return (
        f"per-node parity not run: every output passed and the graph's values hold {elements / 1e6:.1f}M elements, "
        f"more than the {AUTO_ELEMENTS / 1e6:.1f}M it runs on by default (it always runs when an output fails); "
        "`--per-node` (per_node=True) or `rlx-torch-import diagnose OUT` compares every node"
    )


def add_node_parity(
    report: ParityReport,
    conv: Conversion,
    prog: Progress | None = None,
    *,
    device: str = "cpu",
    per_node: bool | str = True,
) -> None:
    """Fill `report.nodes`, `first_divergence` and `drift` from the conversion `conv`
    (`verify.nodes.node_parity`, RLX on `device`) when `per_node` asks: True always, False never,
    "auto" unless `auto_skips_nodes` says why not (a note then says it). Diagnostics never change the
    verdict: if they cannot be computed, a note says why."""
    from .nodes import node_parity

    prog = prog or Progress(False)
    skipped = auto_skips_nodes(report, conv) if per_node == "auto" else ""
    if not per_node or skipped:
        report.notes += [skipped] if skipped else []
        return
    with prog.phase("per-node parity"):
        try:
            found = node_parity(conv, outputs_ok=all(o.ok for o in report.outputs), device=device, progress=prog)
        except RtiError as e:
            report.notes.append(f"per-node parity not computed: {e.message}")
        except Exception as e:  # a bug in the diagnostics must not cost the user the verified conversion
            report.notes.append(
                f"per-node parity not computed (internal error, please report): {type(e).__name__}: {e}"
            )
        else:
            report.nodes, report.first_divergence, report.drift = found.nodes, found.first_divergence, found.drift
    report.timings_s = dict(prog.timings)


def check_bundle_matches(ir: torchir.TorchIR, meta: dict[str, Any], bundle: Path) -> None:
    """BundleError unless the bundle's meta.json (`meta`) declares torch-ir's inputs and outputs (names, dtypes
    and, for a static program, shapes, in order): a bundle from another conversion would otherwise
    fail as if the inputs were wrong."""

    def seen(name: str, dtype: str, shape: Sequence[Any]) -> tuple[str, str, list[Any]]:
        return name, dtype, [] if ir.is_dynamic else [int(d) for d in shape]

    for what, declared, expected in (
        ("inputs", meta["inputs"], [seen(s.name, s.dtype, s.shape) for s in ir.inputs]),
        ("outputs", meta["outputs"], [seen(s.name, s.dtype, s.shape) for s in ir.outputs]),
    ):
        found = [seen(spec["name"], spec["dtype"], spec["shape"]) for spec in declared]
        if found != expected:
            show = lambda specs: ", ".join(f"{n}: {d}{s}" for n, d, s in specs) or "none"  # noqa: E731
            raise BundleError(
                f"{bundle}: not this conversion's bundle: its meta.json {what} are ({show(found)}), "
                f"{TORCH_IR}'s are ({show(expected)})",
                hint="convert again, or `rlx-torch-import build OUT` to write the bundle from torch-ir.json",
            )
