"""The peer runtimes RLX is timed against, each on its own export of the same module: ONNX Runtime and OpenVINO.

A builder (`onnx_runtime_peer`, `openvino_peer`) exports and compiles the module and returns a `Peer`: a callable
that runs one inference on the benchmark inputs, and the settings the runtime reports back. It raises
`PeerError` (a one-line reason) when the runtime is not installed or the export or compilation fails;
the benchmark shows such a peer as `n/a` with a footnote. `compare` checks a peer's output against
PyTorch eager. `time_peers` builds, checks and times each peer asked for with `ModelResult.time`
(measure.py), as RLX and eager are timed.

Both runtimes are imported with `importlib` when a builder runs: they are optional, and neither ships
type information.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:  # measure.py imports this module
    from tools.bench.measure import ModelResult

# A peer's output "differs from eager" when its largest absolute error exceeds this share of the
# largest absolute value eager produced (float32 kernels that order their sums differently stay far below).
TOLERANCE = 1e-3

# OpenVINO settings read back from the compiled model and shown in the configuration lines.
OV_READ_BACK = (
    "INFERENCE_NUM_THREADS",
    "INFERENCE_PRECISION_HINT",
    "PERFORMANCE_HINT",
    "NUM_STREAMS",
    "ENABLE_CPU_PINNING",
)


class PeerError(Exception):
    """A peer runtime could not be set up for a model; the message says why, in one line."""


@dataclass
class Peer:
    """A peer runtime compiled for one model.

    `run()` runs one inference on the benchmark inputs and returns the first output as a numpy
    array (a copy the runtime made, as each runtime hands its outputs back by default). `label`
    names the runtime in notes; `settings` is what the runtime reports about its configuration
    (name -> value as text); `setup_s` the seconds export and compilation took; `remark` a note on
    how it was built that belongs beside its number (None: built the usual way).
    """

    label: str
    run: Callable[[], np.ndarray]
    settings: dict[str, str] = field(default_factory=dict)
    setup_s: float = 0.0
    remark: str | None = None


def short(err: BaseException | str, limit: int = 300) -> str:
    """One line: an exception as "Type: first line of its message", a string's first line; at most `limit`."""
    lines = str(err).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(err, BaseException):
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compare(label: str, got: np.ndarray, expected: np.ndarray) -> tuple[float | None, str | None]:
    """A peer's output against eager's: (largest absolute error, None when the shapes differ; a remark
    when the shapes differ or the error exceeds `TOLERANCE` of eager's largest absolute value, else None)."""
    if got.shape != expected.shape:
        return None, f"{label} output shape {list(got.shape)} differs from eager {list(expected.shape)}"
    if got.size == 0:
        return 0.0, None
    err = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
    scale = float(np.max(np.abs(expected.astype(np.float64)))) or 1.0
    if not err / scale <= TOLERANCE:  # also catches NaN
        return (
            err,
            f"{label} output differs from eager (max abs error {err:.2e}, {err / scale:.2e} of the largest value)",
        )
    return err, None


def _import(module: str, label: str) -> Any:
    """The optional runtime `module` (typed Any: it ships no type information); PeerError when missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise PeerError(f"{label}: {module} is not installed ({short(e)})") from e


def onnx_runtime_peer(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], feed: list[np.ndarray], workdir: Path, threads: int
) -> Peer:
    """ONNX Runtime (CPUExecutionProvider, `intra_op_num_threads=threads`, `inter_op_num_threads=1`) on
    `torch.onnx.export(model, inputs, dynamo=True)` written to `workdir/model.onnx`; `feed` are the inputs
    as numpy arrays, in the module's order. Raises `PeerError` when the export or the session fails."""
    ort = _import("onnxruntime", "ONNX Runtime")
    path = workdir / "model.onnx"
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore")
            torch.onnx.export(model, inputs, str(path), dynamo=True, verbose=False)
    except Exception as e:
        raise PeerError(f"ONNX export failed: {short(e)}") from e
    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
    except Exception as e:
        raise PeerError(f"ONNX Runtime failed: {short(e)}") from e
    if len(names) != len(feed):
        raise PeerError(f"the ONNX model takes {len(names)} inputs, the module {len(feed)}")
    ort_feed = dict(zip(names, feed, strict=True))
    settings = {"intra_op_num_threads": str(threads), "inter_op_num_threads": "1"}
    return Peer("ORT", lambda: np.asarray(session.run(None, ort_feed)[0]), settings, time.perf_counter() - start)


def openvino_config(threads: int) -> dict[str, str | int]:
    """The CPU plugin properties the benchmark compiles with: float32 inference (no bf16/f16 downcast on
    CPUs that have them), `threads` threads, and the latency hint (one stream: one inference at a time)."""
    return {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}


def _ov_text(value: object) -> str:
    """An OpenVINO property value as text: element types by their short name ("f32"), enums by their name."""
    to_string = getattr(value, "to_string", None)
    if callable(to_string):
        return str(to_string())
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value)


def _ov_reason(err: Exception) -> str:
    """One line for an OpenVINO conversion error: its "Summary:" lines (the operations it has no rule for,
    or failed on) where it has them (its first line only names the C++ check that failed), else `short`."""
    text = str(err)
    if "Summary:" not in text:
        return short(err)
    summary = [line.strip().removeprefix("-- ") for line in text.split("Summary:", 1)[1].splitlines()]
    return short(f"{type(err).__name__}: " + "; ".join(line for line in summary if line))


def _ov_convert(ov: Any, model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[Any, str | None]:
    """OpenVINO's PyTorch front-end on the module: (the ov.Model, None) from `convert_model(model,
    example_input=inputs)`, which traces it with TorchScript. Where that fails (say, the trace has an
    operation OpenVINO has no rule for), the front-end's other input, torch.export's ExportedProgram of
    the same module, is tried: (the ov.Model, a remark saying so and why). Raises `PeerError` when both fail."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            return ov.convert_model(model, example_input=inputs), None
        except Exception as e:
            traced = _ov_reason(e)
        try:
            ov_model = ov.convert_model(torch.export.export(model, inputs))
        except Exception as e:
            raise PeerError(
                f"OpenVINO convert_model failed on the module ({traced}) "
                f"and on its torch.export program ({_ov_reason(e)})"
            ) from e
    return ov_model, f"OpenVINO converted torch.export's program: convert_model(module) failed ({traced})"


def openvino_peer(model: nn.Module, inputs: tuple[torch.Tensor, ...], feed: list[np.ndarray], threads: int) -> Peer:
    """OpenVINO on its own PyTorch front-end (`_ov_convert`: `ov.convert_model(model, example_input=inputs)`,
    else on torch.export's program), compiled for "CPU" with `openvino_config(threads)`; `feed` are the
    inputs as numpy arrays, in the module's order, passed to one infer request. Raises `PeerError` when the
    conversion or the compilation fails."""
    ov = _import("openvino", "OpenVINO")
    start = time.perf_counter()
    ov_model, remark = _ov_convert(ov, model, inputs)
    try:
        compiled = ov.Core().compile_model(ov_model, "CPU", openvino_config(threads))
        request = compiled.create_infer_request()
        settings = {key: _ov_text(compiled.get_property(key)) for key in OV_READ_BACK}
    except Exception as e:
        raise PeerError(f"OpenVINO compile_model failed: {short(e)}") from e
    if len(compiled.inputs) != len(feed):
        raise PeerError(f"the OpenVINO model takes {len(compiled.inputs)} inputs, the module {len(feed)}")
    setup_s = time.perf_counter() - start
    return Peer("OpenVINO", lambda: np.asarray(request.infer(feed)[0]), settings, setup_s, remark)


def time_peer(
    result: ModelResult,
    key: str,
    build: Callable[[], Peer],
    expected: np.ndarray | None,
    runs: int,
    warmup: int,
    *,
    mismatch_is_na: bool,
) -> tuple[float | None, str | None]:
    """Build a peer runtime (`onnx_runtime_peer`, `openvino_peer`), check its output against eager's
    (`expected`; its max abs error goes to `result.peer_errors[key]`) and time it like RLX and eager
    (`ModelResult.time` under `key`; the checked first run counts as a warm-up run).

    Returns (median ms, None when the runtime failed; why it failed, or a remark on its output).
    With `mismatch_is_na`, a peer whose output differs from eager's is not timed: (None, the remark).
    Never raises: every failure of the peer becomes the returned reason.
    """
    try:
        peer = build()
    except PeerError as e:
        return None, str(e)
    except Exception as e:
        return None, f"{key} set-up failed: {short(e)}"
    result.peer_settings[key], result.peer_setup_s[key] = peer.settings, round(peer.setup_s, 3)
    try:
        got = peer.run()  # the first warm-up run; its output is checked
        note = None
        if expected is not None:
            err, note = compare(peer.label, got, expected)
            if err is not None:
                result.peer_errors[key] = err
        if note is not None and mismatch_is_na:
            return None, "; ".join(filter(None, (peer.remark, note)))
        ms = result.time(key, peer.run, runs, max(0, warmup - 1))
        return ms, "; ".join(filter(None, (peer.remark, note))) or None
    except Exception as e:
        return None, f"{peer.label} failed: {short(e)}"


def time_peers(
    result: ModelResult,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    feed: list[np.ndarray],
    expected: np.ndarray | None,
    workdir: Path,
    runs: int,
    warmup: int,
    *,
    onnx: bool,
    openvino: bool,
) -> None:
    """Time the peer runtimes asked for, one after the other (each released before the next is built),
    into `result.ort_ms`/`ort_note` and `result.ov_ms`/`ov_note`, with `result.threads` threads."""
    threads = result.threads
    if onnx:
        result.ort_ms, result.ort_note = time_peer(
            result,
            "ORT",
            lambda: onnx_runtime_peer(model, inputs, feed, workdir, threads),
            expected,
            runs,
            warmup,
            mismatch_is_na=False,
        )
    if openvino:
        result.ov_ms, result.ov_note = time_peer(
            result,
            "OV",
            lambda: openvino_peer(model, inputs, feed, threads),
            expected,
            runs,
            warmup,
            mismatch_is_na=True,
        )
