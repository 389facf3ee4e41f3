"""Quantized models: bundle size, latency and accuracy cost of int8 and int4 against float.

    python -m tools.bench.quantized [--threads N] [--runs N] [--models resnet18,llama]

- resnet18 and mobilenet_v3_small (tools/bench/models.py, random weights, batch norms randomized):
  PT2E static int8 with the X86 Inductor quantizer (torchao `prepare_pt2e`, 8 calibration batches,
  `convert_pt2e`), converted with `from_torch` (verified against the quantized model's eager outputs);
  ONNX Runtime on `torch.onnx.export(..., dynamo=True)` of the same quantized graph where the exporter
  produces one.
- the benchmark Llama and BERT: weight-only int8 and int4 (`from_torch(..., quantize=...)`), verified
  against eager running the same dequantized weights.

Each quantized bundle is compared with the float bundle of the same model (converted in the same process):
weight bytes (bundle/weights.safetensors), latency (median of `--runs` after 3 warm-up runs, RLX and eager
interleaved model by model), and accuracy cost against the float model's eager outputs on the example:
max abs error, cosine, and top-1 agreement over the last axis (classes, vocabulary); and against eager PyTorch
running the same quantized model ("max abs vs quantized eager": the PT2E graph, or the model on its
dequantized weights). "parity" is the conversion's own verdict (`report.ok`) against that reference (for a
PT2E graph, codes one step off at rounding boundaries are judged as the report says, decision am).
Targets (`TARGETS`): weight-only int8 <= 0.3x the float bundle's weight bytes and faster than the float
bundle on the Llama; int4 <= 0.16x; PT2E int8 verifies. Prints markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel
from tools.bench.measure import timed_ms

CROSS, TIMES = "\N{BALLOT X}", "\N{MULTIPLICATION SIGN}"
TARGETS = {"int8": 0.3, "int4": 0.16}  # weight bytes / the float bundle's
PT2E_MODELS = ("resnet18", "mobilenet_v3_small")
WEIGHT_ONLY_MODELS = ("llama", "bert")


@dataclass
class Row:
    model: str
    scheme: str
    parity: str = "-"
    weight_mib: float = 0.0
    size_ratio: float | None = None
    rlx_ms: float | None = None
    float_rlx_ms: float | None = None
    eager_ms: float | None = None
    ort_ms: float | None = None
    vs_quantized: float | None = None  # max abs error against eager PyTorch running the same quantized model
    max_abs: float | None = None
    cosine: float | None = None
    top1: float | None = None
    notes: list[str] = field(default_factory=list)


def _bundle_bytes(out: Path) -> int:
    return (out / "bundle" / "weights.safetensors").stat().st_size


def _median(fn: Callable[[], object], runs: int) -> float:
    return statistics.median(timed_ms(fn, runs, 3))


def _accuracy(got: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    """(max abs error, cosine, top-1 agreement over the last axis) of `got` against the float model's `ref`."""
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    cosine = float(g @ r / max(np.linalg.norm(g) * np.linalg.norm(r), 1e-300))
    top1 = float(np.mean(got.argmax(-1) == ref.argmax(-1)))
    return float(np.abs(g - r).max()), cosine, top1


def _first_output(model: BundleModel, feed: dict[str, np.ndarray]) -> np.ndarray:
    return next(iter(model.run(feed).values()))


def _convert(
    model: Any, inputs: tuple[torch.Tensor, ...], out: Path, **kwargs: Any
) -> tuple[rti.ParityReport, BundleModel]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = rti.from_torch(model, inputs, out, per_node=False, **kwargs)
    return report, BundleModel(out / "bundle")


def _feed(bundle: BundleModel, inputs: tuple[torch.Tensor, ...]) -> dict[str, np.ndarray]:
    return {name: t.numpy() for name, t in zip(bundle.input_names, inputs, strict=True)}


def _quantizer(kind: str) -> Any:
    if kind == "X86":
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

        return x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
    import torchao.testing.pt2e._xnnpack_quantizer as xnnpack

    return xnnpack.XNNPACKQuantizer().set_global(xnnpack.get_symmetric_quantization_config(is_per_channel=True))


def _pt2e(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], kind: str) -> torch.nn.Module:
    """`model` through torchao's PT2E flow with the `kind` quantizer ("X86" or "XNNPACK"), 8 calibration batches."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    exported = torch.export.export(model, inputs).module()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_pt2e(exported, _quantizer(kind))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(8):
            prepared(*(t + 0.1 * torch.randn(t.shape, generator=gen) for t in inputs))
    return convert_pt2e(prepared)


def _ort_ms(
    model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], work: Path, threads: int, runs: int
) -> tuple[float | None, str]:
    from tools.bench.peers import PeerError, onnx_runtime_peer

    try:
        peer = onnx_runtime_peer(model, inputs, [t.numpy() for t in inputs], work, threads)
        peer.run()
        return _median(peer.run, runs), ""
    except PeerError as e:
        return None, str(e)
    except Exception as e:  # the int8 graph the exporter wrote but ONNX Runtime cannot run
        return None, f"ONNX Runtime: {type(e).__name__}: {str(e)[:160]}"


def _measure(
    name: str,
    scheme: str,
    make: Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]],
    args: argparse.Namespace,
    work: Path,
) -> list[Row]:
    """The float bundle and each quantized variant of one model."""
    model, inputs = make()
    with torch.no_grad():
        reference = model(*inputs)
    ref = (reference[0] if isinstance(reference, (tuple, list)) else reference).numpy()
    float_report, float_bundle = _convert(model, inputs, work / f"{name}-float")
    float_bytes = _bundle_bytes(work / f"{name}-float")
    feed = _feed(float_bundle, inputs)
    rows = [Row(name, "float32", "ok" if float_report.ok else "FAIL", float_bytes / 2**20, 1.0)]
    variants = ("int8",) if scheme == "pt2e" else ("int8", "int4")
    quantized: dict[str, tuple[BundleModel, Any]] = {}
    for variant in variants:
        out = work / f"{name}-{variant}"
        row = Row(name, f"PT2E {variant} (X86)" if scheme == "pt2e" else f"weight-only {variant}")
        try:
            if scheme == "pt2e":
                try:
                    qmodel = _pt2e(model, inputs, "X86")
                except ValueError as e:  # torchao 0.18's X86 quantizer on residual conv-add-relu graphs
                    row.scheme = f"PT2E {variant} (XNNPACK)"
                    row.notes.append(f"the X86 quantizer failed ({e}); XNNPACK's per-channel static int8 instead")
                    qmodel = _pt2e(model, inputs, "XNNPACK")
                report, bundle = _convert(qmodel, inputs, out)
            else:
                qmodel = model
                report, bundle = _convert(model, inputs, out, quantize=variant)
        except rti.RtiError as e:
            row.parity, row.notes = "error", [str(e).splitlines()[0][:200]]
            rows.append(row)
            continue
        row.parity = "ok" if report.ok else "FAIL"
        row.weight_mib = _bundle_bytes(out) / 2**20
        row.size_ratio = _bundle_bytes(out) / float_bytes
        got = _first_output(bundle, feed)
        row.max_abs, row.cosine, row.top1 = _accuracy(got, ref)
        row.vs_quantized = _vs_quantized_eager(out, report, got)
        quantized[variant] = (bundle, qmodel)
        if scheme == "pt2e":
            row.ort_ms, why = _ort_ms(qmodel, inputs, out, args.threads, args.runs)
            if why:
                row.notes.append(f"ORT n/a: {why}")
        rows.append(row)
    torch.set_num_threads(args.threads)
    rows[0].rlx_ms = _median(lambda: float_bundle.run(feed), args.runs)
    with torch.no_grad():
        rows[0].eager_ms = _median(lambda: model(*inputs), args.runs)
    for row in rows[1:]:
        variant = "int8" if "int8" in row.scheme else "int4"
        if variant not in quantized:
            continue
        bundle, qmodel = quantized[variant]
        row.rlx_ms = _median(lambda b=bundle: b.run(feed), args.runs)
        row.float_rlx_ms = rows[0].rlx_ms
        if scheme == "pt2e":
            with torch.no_grad():
                row.eager_ms = _median(lambda q=qmodel: q(*inputs), args.runs)
    return rows


def _vs_quantized_eager(out: Path, report: rti.ParityReport, got: np.ndarray) -> float:
    """Max abs error of the bundle's first output against eager PyTorch running the same quantized model (the
    conversion's reference.safetensors: the PT2E graph, or the model on its dequantized weights)."""
    from rlx_torch_import import safetensors_io
    from rlx_torch_import.layout import REFERENCE, output_key

    expected = safetensors_io.read(out / REFERENCE)[output_key(report.outputs[0].name)].to_numpy()
    return float(np.abs(got.astype(np.float64) - expected.astype(np.float64)).max())


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "n/a" if v is None else format(v, spec)


def table(rows: list[Row]) -> str:
    """The markdown table (and its notes)."""
    head = (
        "| model | scheme | parity | weights MiB | size/float | RLX ms | RLX/float RLX | eager ms | ORT ms | "
        "max abs vs quantized eager | max abs vs float | cosine vs float | top-1 vs float |"
    )
    lines = [head, "|" + "---|" * 13]
    notes: list[str] = []
    for r in rows:
        ratio = _fmt(r.size_ratio)
        target = next((t for k, t in TARGETS.items() if r.scheme == f"weight-only {k}"), None)
        if target is not None and r.size_ratio is not None and r.size_ratio > target:
            ratio += f" {CROSS}"
        speed = None if r.rlx_ms is None or r.float_rlx_ms is None else r.rlx_ms / r.float_rlx_ms
        speed_text = _fmt(speed)
        if r.model == "llama" and r.scheme == "weight-only int8" and speed is not None and speed >= 1:
            speed_text += f" {CROSS}"
        parity = r.parity + (f" {CROSS}" if r.parity not in ("ok", "-") else "")
        lines.append(
            f"| {r.model} | {r.scheme} | {parity} | {r.weight_mib:.1f} | {ratio} | {_fmt(r.rlx_ms)} | {speed_text} | "
            f"{_fmt(r.eager_ms)} | {_fmt(r.ort_ms)} | {_fmt(r.vs_quantized, '.3g')} | {_fmt(r.max_abs, '.3g')} | "
            f"{_fmt(r.cosine, '.6f')} | "
            f"{_fmt(r.top1, '.3f')} |"
        )
        notes += [f"- {r.model} {r.scheme}: {n}" for n in r.notes]
    return "\n".join(lines + (["", *notes] if notes else []))


def main(argv: list[str] | None = None) -> int:
    from rlx_torch_import import rlx_config
    from tools.bench.models import registry

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=rlx_config.available_cpus())
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--models", default=",".join(PT2E_MODELS + WEIGHT_ONLY_MODELS))
    args = parser.parse_args(argv)
    rlx_config.set_threads(args.threads)
    models, _ = registry()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            scheme = "pt2e" if name in PT2E_MODELS else "weight-only"
            print(f"[quantized] {name} ...", file=sys.stderr)
            rows += _measure(name, scheme, models[name].make, args, Path(tmp))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
