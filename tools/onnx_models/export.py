"""Each model exported to ONNX once per exporter, kept in a cache folder with its example inputs
and eager PyTorch's outputs on them; a later run reuses the files while the versions that made
them (torch, torchvision, transformers, onnxscript) and the model's description are unchanged.

Layout of one entry, `<cache>/<model>-<exporter>/`: `model.onnx` (and `model.onnx.data`, the
dynamo exporter's external weights), `io.npz` (`input.<name>`: the inputs, `eager.<name>`: eager's
outputs in the graph's output order, numpy arrays), `stamp.json` (what made them) and `export.log`
(what the exporter printed)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from .models import Spec

EXPORTERS = ("dynamo", "legacy")
# The legacy (TorchScript) exporter's opset; the dynamo exporter uses its own default.
LEGACY_OPSET = 17
FORMAT = 1  # bump when the entry's layout or the way it is made changes
MODEL = "model.onnx"
IO = "io.npz"
STAMP = "stamp.json"
LOG = "export.log"  # what the exporter printed


def default_cache() -> Path:
    """`$RLX_ONNX_MODELS_CACHE`, else ~/.cache/rlx-torch-import/onnx-models."""
    env = os.environ.get("RLX_ONNX_MODELS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rlx-torch-import" / "onnx-models"


def versions() -> dict[str, str]:
    """Versions of the packages that make (torch, torchvision, transformers, onnxscript) and read
    (onnx, onnxruntime) the files; "-" for one not installed."""
    found = {}
    for pkg in ("torch", "torchvision", "transformers", "onnxscript", "onnx", "onnxruntime"):
        try:
            found[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            found[pkg] = "-"
    return found


@dataclass
class Exported:
    """One model's export: the ONNX file, the inputs (ONNX input name -> array), eager PyTorch's
    outputs on them (ONNX output name -> array, graph order), the export's wall time in seconds
    (of the run that made the file; 0 when reused) and whether the cache had it."""

    path: Path
    inputs: dict[str, np.ndarray]
    eager: dict[str, np.ndarray]
    export_s: float
    cached: bool


def _stamp(spec: Spec, exporter: str) -> dict[str, object]:
    made_by = {k: v for k, v in versions().items() if k not in ("onnx", "onnxruntime")}
    return {"format": FORMAT, "model": spec.name, "description": spec.description, "exporter": exporter, **made_by}


def _read_cached(entry: Path, stamp: dict[str, object]) -> Exported | None:
    try:
        if json.loads((entry / STAMP).read_text()) != stamp or not (entry / MODEL).is_file():
            return None
        with np.load(entry / IO) as data:
            inputs = {k.removeprefix("input."): data[k] for k in data.files if k.startswith("input.")}
            eager = {k.removeprefix("eager."): data[k] for k in data.files if k.startswith("eager.")}
    except (OSError, ValueError, KeyError):
        return None
    return Exported(entry / MODEL, inputs, eager, 0.0, True)


def _eager(model: torch.nn.Module, inputs: dict[str, torch.Tensor], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    with torch.no_grad():
        out = model(**inputs)
    values = out if isinstance(out, tuple) else (out,)
    if len(values) != len(names):
        raise ValueError(f"the model returned {len(values)} tensors, its spec names {len(names)} outputs")
    return {n: v.detach().numpy().copy() for n, v in zip(names, values, strict=True)}


def _export(model: torch.nn.Module, inputs: dict[str, torch.Tensor], spec: Spec, exporter: str, path: Path) -> str:
    """Export with `exporter`, the graph's inputs named as `inputs` (forward's parameters, in
    order) and its outputs as the spec's; returns what the exporter printed."""
    log = io.StringIO()
    in_names, out_names, args = list(inputs), list(spec.outputs), tuple(inputs.values())
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(model, args, str(path), dynamo=True, input_names=in_names, output_names=out_names)
        else:
            torch.onnx.export(
                model,
                args,
                str(path),
                dynamo=False,
                opset_version=LEGACY_OPSET,
                input_names=in_names,
                output_names=out_names,
            )
    return log.getvalue()


def ensure(spec: Spec, exporter: str, cache: Path, *, refresh: bool = False) -> Exported:
    """The export of `spec` with `exporter` ("dynamo" or "legacy"), from the cache or made now.
    Raises whatever the exporter raises (the caller reports it); the cache entry is then removed."""
    if exporter not in EXPORTERS:
        raise ValueError(f"exporter {exporter!r}: expected one of {', '.join(EXPORTERS)}")
    entry = cache / f"{spec.name}-{exporter}"
    stamp = _stamp(spec, exporter)
    if not refresh and (found := _read_cached(entry, stamp)) is not None:
        return found
    shutil.rmtree(entry, ignore_errors=True)
    entry.mkdir(parents=True)
    model, inputs = spec.make()
    eager = _eager(model, inputs, spec.outputs)
    start = time.perf_counter()
    try:
        log = _export(model, inputs, spec, exporter, entry / MODEL)
    except BaseException:
        shutil.rmtree(entry, ignore_errors=True)
        raise
    seconds = time.perf_counter() - start
    arrays = {f"input.{k}": v.numpy() for k, v in inputs.items()} | {f"eager.{k}": v for k, v in eager.items()}
    np.savez(entry / IO, **arrays)  # type: ignore[arg-type]
    (entry / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    (entry / LOG).write_text(log)
    return Exported(entry / MODEL, {k: v.numpy() for k, v in inputs.items()}, eager, seconds, False)
