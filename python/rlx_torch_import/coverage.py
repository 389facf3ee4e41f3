"""Measure Core ATen coverage: every OpInfo float32 sample, one op per module, converted and verified.

    rlx-torch-import coverage [--out docs] [--samples-per-op 3] [--ops add,mul] [--extra-samples FILE.py]

For each PyTorch OpInfo entry (needs the `expecttest` package), up to N float32 samples
are wrapped in a one-op module, exported, converted with the default automatic
decomposition fallback, and verified against eager PyTorch. Each sample is converted at
the `core` level, and also at the `aten` level when its aten-level graph holds Core ATen
ops its core-level graph does not: torch's own Core ATen decomposition table decomposes
some ops tagged core (reflection/replication pads, avg_pool1d, fill.Scalar, squeeze.dim,
var.dim, ...), so no `core` export can contain them. Each Core ATen op (ops tagged
`torch.Tag.core`) gets the best status over all runs that exercised it, and the level
that verdict came from. Ops that can never verify natively here carry their reason
(`NOT_NATIVE`). Writes `coverage.md` (op x status x level x reason) and `coverage.json`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from functools import cache
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

# Core ATen ops no sample can verify natively here, and why; this replaces the observed reason
# whenever such an op is not verified natively (each was checked to be the actual cause).
_RANDOM = "random output; no deterministic parity"
_SYMBOLIC = (
    "returns a symbolic size: appears only in graphs with data-dependent or dynamic shapes,"
    " which are unsupported (static shapes only)"
)
NOT_NATIVE = {
    "aten.rand.default": _RANDOM,
    "aten.randn.default": _RANDOM,
    "aten.randperm.default": _RANDOM,
    "aten._fft_r2c.default": "complex output: RLX has no complex dtype",
    "aten._fft_c2r.default": "complex input: RLX has no complex dtype",
    "aten.nonzero.default": "data-dependent output shape; RLX graphs have static shapes",
    "aten.sym_size.int": _SYMBOLIC,
    "aten.sym_numel.default": _SYMBOLIC,
    "aten.sym_stride.int": _SYMBOLIC,
    "aten.sym_storage_offset.default": _SYMBOLIC,
    "aten._local_scalar_dense.default": (
        "`.item()` returns a Python scalar (data-dependent), not a tensor; torch-ir records tensor values only"
    ),
    "aten.atan2.out": (
        "out= variant: `core` export functionalizes it to atan2.default; at `aten` level it writes `out`"
        " in place, which only the decomposition fallback (which functionalizes) lowers soundly"
    ),
}

# Best first: a Core ATen op takes the best status any of its samples reached.
STATUSES = ("verified", "verified-decomposed", "parity-failed", "unsupported", "export-failed", "error", "no-sample")


@dataclass
class SampleResult:
    """One OpInfo sample: which Core ATen ops it exercised and how the conversion ended."""

    opinfo: str
    index: int
    status: str
    reason: str
    core_ops: list[str] = field(default_factory=list)  # every op of the graph converted (all, not only core)
    decomposed: list[str] = field(default_factory=list)
    level: str = "core"


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


@cache
def _core_set() -> frozenset[str]:
    return frozenset(core_aten_ops())


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


def _ops(ep: torch.export.ExportedProgram) -> list[str]:
    return sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)})


def _graph_ops(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[list[str], list[str]]:
    """Ops of the aten-level graph and of its Core ATen decomposition (one torch.export)."""
    from .frontend.export import decomposition_table, export_program

    ep = export_program(module, inputs, decomposition="aten")
    return _ops(ep), _ops(ep.run_decompositions(decomposition_table("core")))


def _convert(
    name: str, index: int, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], level: str, ops: list[str]
) -> SampleResult:
    """Convert and verify one sample at one decomposition level; never raises."""
    from . import api
    from .errors import ExportError, UnsupportedOpsError

    def result(status: str, reason: str, decomposed: list[str] | None = None) -> SampleResult:
        return SampleResult(name, index, status, reason, ops, decomposed or [], level)

    with tempfile.TemporaryDirectory() as tmp:
        try:
            report = api.from_torch(module, inputs, Path(tmp) / "o", decomposition=level, name=name)
        except UnsupportedOpsError as e:
            return result("unsupported", "; ".join(sorted({f"{i.target}: {i.reason}" for i in e.items}))[:300])
        except ExportError as e:
            return result("export-failed", e.message[:200])
        except Exception as e:
            return result("error", f"{type(e).__name__}: {str(e)[:200]}")
    if not report.ok:
        why = "; ".join(r for o in report.outputs for r in o.reasons)[:300]
        return result("parity-failed", why, report.auto_decomposed_ops)
    status = "verified-decomposed" if report.auto_decomposed_ops else "verified"
    return result(status, "", report.auto_decomposed_ops)


def run_sample(name: str, index: int, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[SampleResult]:
    """Convert and verify one sample at `core`, and at `aten` only when that graph has Core ATen ops
    the core-level graph lacks (ops torch's core table decomposes); never raises."""
    try:
        aten_ops, core_ops = _graph_ops(module, inputs)
    except Exception as e:
        return [SampleResult(name, index, "export-failed", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")]
    results = [_convert(name, index, module, inputs, "core", core_ops)]
    if (set(aten_ops) & _core_set()) - set(core_ops):
        results.append(_convert(name, index, module, inputs, "aten", aten_ops))
    return results


def summarize(core: list[str], results: list[SampleResult]) -> dict[str, dict[str, str]]:
    """Core ATen op -> best status over all runs, the level it came from, and the reason (or the sample)."""
    generic = "no sample's graph contains it, at the `core` or the `aten` level"
    table = {op: {"status": "no-sample", "reason": generic, "via": "", "level": ""} for op in core}
    for r in results:
        for op in r.core_ops:
            if op not in table:
                continue
            status = r.status
            if status.startswith("verified"):  # per op: was this one lowered natively or decomposed?
                status = "verified-decomposed" if op in r.decomposed else "verified"
            if STATUSES.index(status) < STATUSES.index(table[op]["status"]):
                reason = r.reason if not status.startswith("verified") else ""
                table[op] = {"status": status, "reason": reason, "via": f"{r.opinfo}[{r.index}]", "level": r.level}
    for op, why in NOT_NATIVE.items():
        if op in table and table[op]["status"] != "verified":
            table[op]["reason"] = why
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
        + f" in {meta['seconds']:.0f} s. Every sample is converted at the `core` level, and also at `aten` "
        f"when its aten-level graph holds Core ATen ops that torch's core table decomposes ({meta.get('aten_runs', 0)} "
        "such runs); `level` says which run gave the verdict.",
        "",
        f"- Core ATen ops: **{total}**",
        f"- verified natively: **{counts['verified']}** ({100 * counts['verified'] / total:.1f}%)",
        f"- verified through automatic decomposition: **{counts['verified-decomposed']}**",
        f"- parity failed: {counts['parity-failed']}; unsupported: {counts['unsupported']}; "
        f"export failed: {counts['export-failed']}; error: {counts['error']}; no sample: {counts['no-sample']}",
        "",
        "| Core ATen op | status | level | sample | reason |",
        "|---|---|---|---|---|",
    ]
    for op, v in sorted(table.items()):
        reason = v["reason"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{op}` | {v['status']} | {v['level']} | {v['via']} | {reason} |")
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
    opinfo_samples = 0
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
            results += run_sample(label, index, module, inputs)
            opinfo_samples += 1
        print(f"[coverage] {n}/{len(infos)} {opinfo.name}", file=sys.stderr, flush=True)
    extra = _extra_samples(args.extra_samples) if args.extra_samples else []
    for name, module, inputs in extra:
        results += run_sample(f"extra:{name}", 0, module, tuple(inputs))
    table = summarize(core, results)
    meta = {
        "torch": torch.__version__,
        "rlx": _core.rlx_version(),
        "samples": opinfo_samples,
        "aten_runs": sum(1 for r in results if r.level == "aten"),
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
