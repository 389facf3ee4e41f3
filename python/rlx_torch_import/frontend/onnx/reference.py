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
    """ORT's outputs (all, or `names`) on `inputs`, by output name. Raises ModelLoadError when ORT
    cannot load or run the model."""
    sess = session(path)
    wanted = names if names is not None else [o.name for o in sess.get_outputs()]
    try:
        values = sess.run(wanted, inputs)
    except Exception as e:
        raise ModelLoadError(f"ONNX Runtime failed running the model ({type(e).__name__}: {str(e)[:300]})") from None
    return {n: np.asarray(v) for n, v in zip(wanted, values, strict=True)}
