"""ONNX Runtime runs of the file: the reference (CPU execution provider, every graph optimization
off, so it computes what the file says) and, for per-node parity, the same with intermediates
exposed as outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelLoadError


def session(model_or_path: Any, threads: int | None = None) -> Any:
    """An ORT session of an ONNX model (a path or a ModelProto) with graph optimizations off."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # no stubs, no py.typed

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    if threads:
        opts.intra_op_num_threads = threads
    what = str(model_or_path) if isinstance(model_or_path, (str, os.PathLike)) else model_or_path.SerializeToString()
    try:
        return ort.InferenceSession(what, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise ModelLoadError(
            f"ONNX Runtime cannot load the model ({type(e).__name__}: {str(e)[:300]})",
            hint="verification runs the file in ONNX Runtime; --no-verify converts without it",
        ) from None


def run(path: Path | Any, inputs: dict[str, np.ndarray], names: list[str] | None = None) -> dict[str, np.ndarray]:
    """ORT's outputs (all, or `names`) on `inputs`, by output name. bfloat16 values travel as their
    uint16 bits both ways (numpy has no bfloat16; our files keep the bits). Raises ModelLoadError when
    ORT cannot load or run the model."""
    import ctypes

    import onnxruntime as ort

    sess = session(path)
    wanted = names if names is not None else [o.name for o in sess.get_outputs()]
    bf16_in = {i.name for i in sess.get_inputs() if i.type == "tensor(bfloat16)"}
    try:
        if not bf16_in and all(o.type != "tensor(bfloat16)" for o in sess.get_outputs() if o.name in wanted):
            return {n: np.asarray(v) for n, v in zip(wanted, sess.run(wanted, inputs), strict=True)}
        feed = {
            n: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.array(a, np.uint16, order="C"), 16)
            if n in bf16_in
            else ort.OrtValue.ortvalue_from_numpy(np.array(a, order="C"))
            for n, a in inputs.items()
        }
        found = {}
        for n, v in zip(wanted, sess.run_with_ort_values(wanted, feed), strict=True):
            if v.data_type() == "tensor(bfloat16)":
                raw = ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()) if v.tensor_size_in_bytes() else b""
                found[n] = np.frombuffer(raw, np.uint16).reshape(v.shape()).copy()
            else:
                found[n] = np.asarray(v.numpy())
        return found
    except Exception as e:
        raise ModelLoadError(f"ONNX Runtime failed running the model ({type(e).__name__}: {str(e)[:300]})") from None
