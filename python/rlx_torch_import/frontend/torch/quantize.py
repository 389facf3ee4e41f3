"""The torch side of weight-only quantization (`from_torch(..., quantize=...)`, `quant/schemes.py`): which
`Linear` weights are quantized, the model run on their dequantized values (the exact reference of the
quantized model) and, after, on its own float weights (the accuracy cost of quantizing).

`dequantized_weights` swaps each chosen weight's storage for its dequantized float32 values in place and
gives the original storage back on exit, also on error: the user's module comes back unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ... import safetensors_io
from ...layout import input_key, output_key, set_prefix
from ...quant.report import feature_errors, feature_magnitude
from ...quant.schemes import BLOCK, Scheme, dequantize, scale_fault
from ...torchir import TorchIR
from .inputs import ModelInputs
from .reference import eager_point
from .state import ModelState


def _float_reason(m: torch.nn.Linear | torch.nn.Embedding, scheme: Scheme) -> str:
    """Why `m`'s weight stays float ("" when it can be quantized): not float32, not a 2-D CPU weight, an inner
    dim that is not a multiple of 32, or float16 block scales that would overflow or lose precision
    (`quant.schemes.scale_fault`). An embedding table is quantized in the same blocks along its embedding dim and
    gathered as packed codes (`lower/ops/embedding.py`)."""
    w = m.weight
    if w.dtype != torch.float32:
        return f"{str(w.dtype).removeprefix('torch.')} weight: RLX's DequantMatMul multiplies float32 activations"
    if w.device.type != "cpu" or w.ndim != 2:
        return f"weight on {w.device.type}, {w.ndim}-D: only 2-D CPU weights are quantized at conversion"
    if w.shape[1] % BLOCK:
        what = "embedding_dim" if isinstance(m, torch.nn.Embedding) else "in_features"
        return f"{what} {w.shape[1]} is not a multiple of {BLOCK} ({scheme.rlx}'s block)"
    return scale_fault(w.detach().contiguous().numpy(), scheme)  # its float16 block scales over- or underflow


def choose(model: torch.nn.Module, scheme: Scheme) -> tuple[dict[str, torch.nn.Parameter], list[dict[str, str]]]:
    """The `Linear` weights and `Embedding` tables to quantize by state_dict key, and the weights left float
    with why ({"weight", "reason"}). A weight several modules share (an LM head tied to the embedding) is
    listed under each of its names, as torch.export may pick any of them; each use of it is quantized in
    the same blocks (a matmul on `DequantMatMul`, a lookup as a gather of its codes)."""
    names: dict[int, list[str]] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    chosen: dict[str, torch.nn.Parameter] = {}
    kept: list[dict[str, str]] = []
    seen: set[int] = set()
    modules = list(model.named_modules())
    linears_first = [pm for pm in modules if isinstance(pm[1], torch.nn.Linear)] + [
        pm for pm in modules if isinstance(pm[1], torch.nn.Embedding)
    ]
    for path, m in linears_first:
        if id(m.weight) in seen:  # a weight shared with a module already decided
            continue
        seen.add(id(m.weight))
        keys = names.get(id(m.weight), [f"{path}.weight"])
        if reason := _float_reason(m, scheme):
            kept.append({"weight": keys[0], "reason": reason})
        else:
            chosen.update((k, m.weight) for k in keys)
    return chosen, kept


@contextmanager
def dequantized_weights(model: Any, scheme: Scheme | None) -> Iterator[dict[str, Any]]:
    """Within: every chosen `Linear` weight of `model` holds its dequantized values (`quant.schemes.dequantize`);
    yields torch-ir's `quantize` record ({} without a scheme or a torch module). The float storage is
    put back on exit, error or not."""
    if scheme is None or not isinstance(model, torch.nn.Module):
        yield {}
        return
    chosen, kept = choose(model, scheme)
    saved: dict[str, torch.Tensor] = {}
    try:
        with torch.no_grad():
            for key, w in chosen.items():
                if any(w is chosen[k] for k in saved):  # a shared weight, under another name
                    continue
                saved[key] = w.data
                values = dequantize(w.detach().contiguous().numpy(), scheme)
                w.data = torch.from_numpy(values)
        yield {"scheme": scheme.name, "rlx": scheme.rlx, "block": BLOCK, "weights": list(chosen), "kept_float": kept}
    finally:
        for key, data in saved.items():
            chosen[key].data = data


def _metrics(float_out: np.ndarray, quant_out: np.ndarray, classes: bool) -> dict[str, Any]:
    """Max abs error and cosine; with `classes` (the last axis is classes or a vocabulary), the share of
    rows whose argmax over it agrees (top-1 agreement)."""
    a, b = float_out.astype(np.float64), quant_out.astype(np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    diff = np.abs(a - b)[finite]
    norm = float(np.linalg.norm(a[finite]) * np.linalg.norm(b[finite]))
    found: dict[str, Any] = {
        "max_abs_error": float(diff.max()) if diff.size else 0.0,
        "cosine": float(np.dot(a[finite], b[finite]) / norm) if norm > 0 else 1.0,
    }
    if classes and a.ndim >= 1 and a.shape[-1] >= 2 and a.size:
        rows_a, rows_b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
        found["top1_agreement"] = float(np.mean(rows_a.argmax(-1) == rows_b.argmax(-1)))
    return found


def accuracy_cost(
    model: Any, ir: TorchIR, example: ModelInputs, reference: Path, state: ModelState
) -> list[dict[str, Any]]:
    """The float model (its own weights, after `dequantized_weights`) against the quantized one's eager
    outputs in `reference` (reference.safetensors), on the example and each input set eager PyTorch ran:
    one row per point and float output ({"point", "output", "max_abs_error", "cosine", "top1_agreement"?,
    "features", "flagged_features", "worst_feature"?}). Top-1 agreement is given for outputs read as classes or
    a vocabulary on their last axis: one named `*logits*` or `*scores*`, or the model's only float output. Each
    output feature (last-axis element) is also measured against its own magnitude, its largest |float value|
    over the rows of every point (so a feature near 0 on one input set of identical rows is judged by its size
    over all of them), and flagged past `quant.report.FEATURE_LIMIT` (`quant.report.feature_errors`):
    cosine over the whole output hides a small feature that quantization destroyed."""
    stored = safetensors_io.read(reference)
    points: list[tuple[str, str, tuple[torch.Tensor, ...]]] = [("example", "", example.tensors)]
    for k, entry in enumerate(ir.input_sets):
        if "error" not in entry:
            prefix = set_prefix(k)
            tensors = tuple(torch.from_numpy(stored[input_key(s.name, prefix)].to_numpy().copy()) for s in ir.inputs)
            points.append((str(entry["label"]), prefix, tensors))
    floats = [o.name for o in ir.outputs if o.dtype in ("float32", "float16", "bfloat16", "float64")]
    classes = {n for n in floats if len(floats) == 1 or "logit" in n.lower() or "score" in n.lower()}
    measured: list[tuple[str, str, np.ndarray, np.ndarray]] = []  # (point, output, float, quantized)
    for label, prefix, tensors in points:
        outputs, _ = eager_point(model, ir, example, tensors, state)
        for name, t in outputs.items():
            key = output_key(name, prefix)
            if t.is_floating_point() and key in stored:
                measured.append((label, name, t.float().numpy(), stored[key].to_numpy()))
    scale: dict[tuple[str, int], np.ndarray] = {}  # (output, features) -> largest |float| over every point
    for _, name, values, _ in measured:
        size = feature_magnitude(values)
        key2 = (name, size.size)
        scale[key2] = np.maximum(scale[key2], size) if key2 in scale else size
    return [
        {
            "point": label,
            "output": name,
            **_metrics(values, quant, name in classes),
            **feature_errors(values, quant, scale[(name, values.shape[-1] if values.ndim else 1)]),
        }
        for label, name, values, quant in measured
    ]
