"""One sample: the statuses and dtypes of the coverage run, the one-op module around an OpInfo sample,
and the conversion of one sample at the `core` (and, where it matters, the `aten`) level."""

from __future__ import annotations

import itertools
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch

from rlx_torch_import.dtypes import RECORDS

# How run_sample reports progress to a coverage worker's parent: ("stage", {level, ops}), ("result", {...}).
Emit = Callable[[str, dict[str, Any]], None]

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
_RANDOM = (
    "random output: lowered to RLX's generator, which draws other values than torch's; its verdict is RANDOM,"
    ' not verified (docs/usage.md "Random ops")'
)
_SYMBOLIC = (
    "returns a symbolic size: appears only in graphs with dynamic or data-dependent shapes; the one-op"
    " OpInfo samples are exported with static shapes (dynamic shapes are supported: tests/test_dynamic.py)"
)
NOT_NATIVE = {
    "aten.rand.default": _RANDOM,
    "aten.randn.default": _RANDOM,
    "aten.randperm.default": (
        "random permutation: not lowered (RLX has no random permutation); its output has no deterministic parity"
    ),
    "aten.sym_size.int": _SYMBOLIC,
    "aten.sym_numel.default": _SYMBOLIC,
    "aten.sym_stride.int": _SYMBOLIC,
    "aten.sym_storage_offset.default": _SYMBOLIC,
    "aten.atan2.out": (
        "out= variant: `core` export functionalizes it to atan2.default; at `aten` level it writes `out`"
        " in place, which only the decomposition fallback (which functionalizes) lowers soundly"
    ),
}

# The dtypes OpInfo samples are drawn in, in table order, with their column headers.
DTYPES: dict[str, torch.dtype] = {
    d: getattr(torch, d)
    for d in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
}
SHORT = {d: RECORDS[d].short for d in DTYPES}

# Best first: a Core ATen op (per dtype, and over all dtypes) takes the best status any run reached.
STATUSES = (
    "verified",
    "verified-decomposed",
    "random",
    "parity-failed",
    "unsupported",
    "export-failed",
    "error",
    "timeout",
    "crashed",
    "blocked",
    "no-sample",
)
# One compact cell per op x dtype in coverage.md.
CELLS = {
    "verified": "ok",
    "verified-decomposed": "dec",
    "random": "rnd",
    "parity-failed": "FAIL",
    "unsupported": "uns",
    "export-failed": "exp",
    "error": "err",
    "timeout": "time",
    "crashed": "crash",
    "blocked": "blk",
    "no-sample": "—",
}
OTHER = ("export-failed", "error", "timeout", "crashed", "blocked")
SKIPPED = "skipped"  # a sample-level status only: generation or eager PyTorch raised, or gave only NaN
DEFAULT_SAMPLE_TIMEOUT = 300.0


@dataclass
class SampleResult:
    """One run of one sample: which ops its graph holds and how the conversion ended."""

    opinfo: str
    index: int  # the sample's index in OpInfo's generator; -1 for the (OpInfo, dtype) pair itself
    dtype: str
    status: str
    reason: str
    ops: list[str] = field(default_factory=list)  # every op of the graph converted (all, not only core)
    decomposed: list[str] = field(default_factory=list)
    level: str = "core"
    unsupported: dict[str, str] = field(default_factory=dict)  # op -> why, for status "unsupported"


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


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


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


def _brief(e: BaseException, n: int = 200) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0][:n] if lines else ''}"


def _ops(ep: torch.export.ExportedProgram) -> list[str]:
    return sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "getitem" not in str(n.target)})


def _level_ops(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], level: str) -> list[str]:
    """Ops of the sample's graph at `level` (torch.export, then that level's decomposition)."""
    from rlx_torch_import.frontend.torch.export import export_program

    return _ops(export_program(module, inputs, decomposition=level))


def _ir_ops(directory: Path) -> list[str] | None:
    """Ops of a converted torch-ir; None when the automatic fallback changed its graph (the ops that
    count are those before it, not its decomposition's products)."""
    from rlx_torch_import import torchir

    ir = torchir.load(directory)
    return None if ir.auto_decomposed else sorted({n.target for n in ir.nodes})


def _convert(
    name: str,
    index: int,
    dtype: str,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    level: str,
    ops: list[str] | None,
) -> SampleResult:
    """Convert and verify one sample at one decomposition level; never raises. The result's ops are
    those of the converted torch-ir; when conversion stops before writing it, or the automatic
    fallback decomposed some, `ops` or else those of the level's graph, decomposed again here."""
    from rlx_torch_import import api
    from rlx_torch_import.errors import ExportError, UnsupportedOpsError

    def result(status: str, reason: str, decomposed: list[str] | None = None) -> SampleResult:
        found = ops
        if found is None:
            try:
                found = _level_ops(module, inputs, level)
            except Exception:
                found = []
        reason = re.sub(re.escape(tmp) + r"[^\s:]*: ?", "", reason)  # this run's scratch paths say nothing
        return SampleResult(name, index, dtype, status, reason, found, decomposed or [], level)

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "o"
        try:
            report = api.from_torch(module, inputs, out, decomposition=level, name="sample")
        except UnsupportedOpsError as e:
            r = result("unsupported", "; ".join(sorted({f"{i.target}: {i.reason}" for i in e.items}))[:300])
            for i in e.items:
                r.unsupported.setdefault(i.target, i.reason[:200])
            return r
        except ExportError as e:
            return result("export-failed", e.message[:200])
        except Exception as e:
            return result("error", f"{type(e).__name__}: {str(e)[:200]}")
        try:
            ops = _ir_ops(out) or ops
        except Exception:  # the report stands; the ops come from a fresh decomposition
            pass
    if report.verdict == "RANDOM":  # only outputs that depend on the draws differ (docs/usage.md "Random ops")
        return result("random", "outputs depend on random draws: " + ", ".join(report.random_outputs))
    if not report.ok:
        why = "; ".join(r for o in report.outputs for r in o.reasons)[:300]
        return result("parity-failed", why, report.auto_decomposed_ops)
    status = "verified-decomposed" if report.auto_decomposed_ops else "verified"
    return result(status, "", report.auto_decomposed_ops)


def run_sample(
    name: str,
    index: int,
    dtype: str,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    exact_ops: bool = False,
    emit: Emit | None = None,
) -> list[SampleResult]:
    """Convert and verify one sample at `core`, and at `aten` only when that graph has Core ATen ops
    the core-level graph lacks (ops torch's core table decomposes); never raises. A sample whose eager
    run raises is `skipped`. With `emit`, each level's ops are sent before it runs (`"stage"`: at `core`,
    the aten-level graph's unless `exact_ops` asks for the core decomposition first) and each result
    after (`"result"`), so that a process dying in the middle leaves what it was doing behind."""
    results: list[SampleResult] = []

    def add(r: SampleResult) -> None:
        results.append(r)
        if emit is not None:
            emit("result", asdict(r))

    try:
        with torch.no_grad():
            eager = module(*inputs)
    except Exception as e:
        add(SampleResult(name, index, dtype, SKIPPED, f"eager PyTorch raised {_brief(e, 160)}"))
        return results
    leaves = [t for t in torch.utils._pytree.tree_leaves(eager) if isinstance(t, torch.Tensor)]
    if leaves and all(t.is_floating_point() and t.numel() and bool(t.isnan().all()) for t in leaves):
        # An all-NaN output passes the verdict only with a note (it proves nothing): no verdict here.
        add(SampleResult(name, index, dtype, SKIPPED, "eager PyTorch's result is entirely NaN: no verdict"))
        return results
    try:
        aten_ops = _level_ops(module, inputs, "aten")
        core_ops = _level_ops(module, inputs, "core") if exact_ops else None
    except Exception as e:
        add(SampleResult(name, index, dtype, "export-failed", _brief(e, 160)))
        return results
    if emit is not None:
        emit("stage", {"level": "core", "ops": core_ops if core_ops is not None else aten_ops})
    core = _convert(name, index, dtype, module, inputs, "core", core_ops)
    add(core)
    if (set(aten_ops) & _core_set()) - set(core.ops):
        if emit is not None:
            emit("stage", {"level": "aten", "ops": aten_ops})
        add(_convert(name, index, dtype, module, inputs, "aten", aten_ops))
    return results


@cache
def _op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


@cache
def _extra_samples_cached(path: str) -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    return _extra_samples(Path(path))


def _extra_samples(path: Path) -> list[tuple[str, torch.nn.Module, tuple[torch.Tensor, ...]]]:
    """The SAMPLES list of a Python file (its folder goes on sys.path so its imports resolve)."""
    import runpy

    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    namespace = runpy.run_path(str(path), run_name="__rlx_coverage__")
    return list(namespace.get("SAMPLES", []))


def opinfo_label(opinfo: Any) -> str:
    """An OpInfo's name in the coverage report: `name`, or `name.variant`."""
    return f"{opinfo.name}.{opinfo.variant_test_name}" if opinfo.variant_test_name else opinfo.name


def opinfo_samples(opinfo: Any, dtype: str, limit: int) -> list[Any]:
    """The first `limit` samples of an OpInfo in `dtype`, generated with a fixed seed: the same samples in
    every process (a sample is generated again in the worker that runs it)."""
    torch.manual_seed(0)
    return list(itertools.islice(opinfo.sample_inputs("cpu", DTYPES[dtype], requires_grad=False), limit))


def one_op(opinfo: Any, sample: Any) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]] | None:
    """A sample as a one-op module and its tensor inputs; None when it has no tensor to feed."""
    leaves, spec = torch.utils._pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    tensors = tuple(v for v in leaves if isinstance(v, torch.Tensor))
    return (_OneOp(opinfo.op, spec, leaves), tensors) if tensors else None
