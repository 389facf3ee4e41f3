"""Measure Core ATen coverage: every OpInfo float32 sample, one op per module, converted and verified.

    rlx-torch-import coverage [--out docs] [--samples-per-op 3] [--ops add,mul]

For each PyTorch OpInfo entry (needs the `expecttest` package), up to N float32 samples
are wrapped in a one-op module, exported at the `core` level, converted with the default
automatic decomposition fallback, and verified against eager PyTorch. Each Core ATen op
(ops tagged `torch.Tag.core`) gets the best status of the samples that exercised it.
Writes `coverage.md` (op x status x reason) and `coverage.json`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

# OpInfos whose output is uninitialized memory or random: no parity verdict is meaningful.
NONDETERMINISTIC = (
    "empty",
    "rand",
    "randn",
    "randint",
    "bernoulli",
    "normal",
    "multinomial",
    "dropout",
    "uniform",
    "exponential",
    "geometric",
    "cauchy",
    "log_normal",
    "poisson",
)

# Best first: a Core ATen op takes the best status any of its samples reached.
STATUSES = ("verified", "verified-decomposed", "parity-failed", "unsupported", "export-failed", "error", "no-sample")


@dataclass
class SampleResult:
    """One OpInfo sample: which Core ATen ops it exercised and how the conversion ended."""

    opinfo: str
    index: int
    status: str
    reason: str
    core_ops: list[str] = field(default_factory=list)
    decomposed: list[str] = field(default_factory=list)


def core_aten_ops() -> list[str]:
    """Every ATen overload tagged `core`, as torch prints it."""
    ops = []
    for name in dir(torch.ops.aten):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not hasattr(packet, "overloads"):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags:
                ops.append(str(op))
    return sorted(ops)


class _OneOp(torch.nn.Module):
    """Call an OpInfo op with the sample's non-tensor arguments baked in."""

    def __init__(self, op: Any, spec: Any, leaves: list[Any]) -> None:
        super().__init__()
        self.op, self.spec, self.leaves = op, spec, leaves

    def forward(self, *tensors: torch.Tensor) -> Any:
        it = iter(tensors)
        leaves = [next(it) if isinstance(v, torch.Tensor) else v for v in self.leaves]
        inp, args, kwargs = torch.utils._pytree.tree_unflatten(leaves, self.spec)
        return self.op(inp, *args, **kwargs)


def _samples(opinfo: Any, limit: int) -> Iterator[tuple[int, _OneOp, tuple[torch.Tensor, ...]]]:
    try:
        samples = opinfo.sample_inputs("cpu", torch.float32, requires_grad=False)
        for i, s in enumerate(samples):
            if i >= limit:
                return
            leaves, spec = torch.utils._pytree.tree_flatten((s.input, s.args, s.kwargs))
            tensors = tuple(v for v in leaves if isinstance(v, torch.Tensor))
            if not tensors:
                continue
            yield i, _OneOp(opinfo.op, spec, leaves), tensors
    except Exception:  # an OpInfo whose sample generator fails on this build
        return


def _graph_ops(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[str]:
    from .frontend.export import export_program

    ep = export_program(module, inputs, decomposition="core")
    return sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)})


def run_sample(name: str, index: int, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> SampleResult:
    """Convert and verify one sample; never raises."""
    from . import api
    from .errors import ExportError, UnsupportedOpsError

    try:
        ops = _graph_ops(module, inputs)
    except Exception as e:
        return SampleResult(name, index, "export-failed", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            report = api.from_torch(module, inputs, Path(tmp) / "o", decomposition="core", name=name)
        except UnsupportedOpsError as e:
            why = "; ".join(sorted({f"{i.target}: {i.reason}" for i in e.items}))[:300]
            return SampleResult(name, index, "unsupported", why, ops)
        except ExportError as e:
            return SampleResult(name, index, "export-failed", e.message[:200], ops)
        except Exception as e:
            return SampleResult(name, index, "error", f"{type(e).__name__}: {str(e)[:200]}", ops)
    if not report.ok:
        why = "; ".join(r for o in report.outputs for r in o.reasons)[:300]
        return SampleResult(name, index, "parity-failed", why, ops, report.auto_decomposed_ops)
    status = "verified-decomposed" if report.auto_decomposed_ops else "verified"
    return SampleResult(name, index, status, "", ops, report.auto_decomposed_ops)


def summarize(core: list[str], results: list[SampleResult]) -> dict[str, dict[str, str]]:
    """Core ATen op -> best status and the reason (or the OpInfo that verified it)."""
    table = {op: {"status": "no-sample", "reason": "no OpInfo float32 sample exercises it", "via": ""} for op in core}
    for r in results:
        for op in r.core_ops:
            if op not in table:
                continue
            status = r.status
            if status.startswith("verified"):  # per op: was this one lowered natively or decomposed?
                status = "verified-decomposed" if op in r.decomposed else "verified"
            if STATUSES.index(status) < STATUSES.index(table[op]["status"]):
                reason = r.reason if not status.startswith("verified") else ""
                table[op] = {"status": status, "reason": reason, "via": f"{r.opinfo}[{r.index}]"}
    return table


def render(table: dict[str, dict[str, str]], meta: dict[str, Any]) -> str:
    counts = {s: sum(1 for v in table.values() if v["status"] == s) for s in STATUSES}
    total = len(table)
    lines = [
        "# Core ATen coverage",
        "",
        f"Generated by `rlx-torch-import coverage` with torch {meta['torch']}, RLX {meta['rlx']}, "
        f"{meta['samples']} OpInfo samples ({meta['samples_per_op']} per OpInfo)"
        + (
            f" plus {meta['extra_samples']} project samples from `{meta['extra_source']}` (rows marked `extra:`)"
            if meta.get("extra_samples")
            else ""
        )
        + f" in {meta['seconds']:.0f} s.",
        "",
        f"- Core ATen ops: **{total}**",
        f"- verified natively: **{counts['verified']}** ({100 * counts['verified'] / total:.1f}%)",
        f"- verified through automatic decomposition: **{counts['verified-decomposed']}**",
        f"- parity failed: {counts['parity-failed']}; unsupported: {counts['unsupported']}; "
        f"export failed: {counts['export-failed']}; error: {counts['error']}; no sample: {counts['no-sample']}",
        "",
        "| Core ATen op | status | sample | reason |",
        "|---|---|---|---|",
    ]
    for op, v in sorted(table.items()):
        reason = v["reason"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{op}` | {v['status']} | {v['via']} | {reason} |")
    return "\n".join(lines) + "\n"


def _extra_samples(path: Path) -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """The SAMPLES list of a Python file (its folder goes on sys.path so its imports resolve)."""
    import runpy

    sys.path.insert(0, str(path.resolve().parent))
    namespace = runpy.run_path(str(path), run_name="__rlx_coverage__")
    return list(namespace.get("SAMPLES", []))


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="rlx-torch-import coverage", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs"), help="where coverage.md/.json go (default: docs)")
    p.add_argument("--samples-per-op", type=int, default=3)
    p.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    p.add_argument(
        "--extra-samples",
        type=Path,
        metavar="FILE.py",
        help="also run the SAMPLES list [(name, module, inputs)] of this file (e.g. tests/test_ops.py)",
    )
    args = p.parse_args(argv)
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as e:
        print(f"error: PyTorch's OpInfo database needs the `expecttest` package ({e})", file=sys.stderr)
        return 2
    from . import _core

    wanted = set(args.ops.split(",")) if args.ops else None
    core = core_aten_ops()
    results: list[SampleResult] = []
    start = time.perf_counter()
    infos = [
        o
        for o in op_db
        if (wanted is None or o.name in wanted)
        and torch.float32 in o.dtypes
        and not any(word in o.name for word in NONDETERMINISTIC)
    ]
    for n, opinfo in enumerate(infos, 1):
        label = f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name
        for index, module, inputs in _samples(opinfo, args.samples_per_op):
            results.append(run_sample(label, index, module, inputs))
        print(f"[coverage] {n}/{len(infos)} {opinfo.name}", file=sys.stderr, flush=True)
    extra = _extra_samples(args.extra_samples) if args.extra_samples else []
    for name, module, inputs in extra:
        results.append(run_sample(f"extra:{name}", 0, module, tuple(inputs)))
    table = summarize(core, results)
    meta = {
        "torch": torch.__version__,
        "rlx": _core.rlx_version(),
        "samples": len(results) - len(extra),
        "samples_per_op": args.samples_per_op,
        "extra_samples": len(extra),
        "extra_source": str(args.extra_samples or ""),
        "seconds": time.perf_counter() - start,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coverage.md").write_text(render(table, meta))
    doc = {"meta": meta, "core_ops": table, "samples": [asdict(r) for r in results]}
    (args.out / "coverage.json").write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    print(render(table, meta).split("| Core ATen op")[0].strip())
    return 0
