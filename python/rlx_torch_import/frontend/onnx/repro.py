"""The ONNX door's repro folder (`door.Door.write_repro`, which `verify.diagnose` calls for the node
per-node parity chose against ONNX Runtime, `nodes.node_values`): `node.onnx` (the
node alone; its float inputs are graph inputs, its integer and bool inputs constants holding ONNX
Runtime's values), `inputs.safetensors` (ONNX Runtime's values of those inputs), `outputs.safetensors`
(`onnxruntime.<i>`, `rlx.<i>`), `node.json` and `repro.py`, which runs the node in ONNX Runtime and
compares it with RLX's stored output (and, with rlx_torch_import installed, converts it again)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ... import safetensors_io
from ...errors import InputError
from ...outdir import write_text
from ...verify.nodes import NodeReport
from ...verify.report import NodeParity
from .driver import SOURCE
from .nodes import local_model
from .source import read


def write_repro(directory: Path, found: NodeReport, row: NodeParity, target: Path) -> Path:
    """Write the repro folder of the node of `row` into `target` (module docstring)."""
    import onnx

    model = read(directory / SOURCE).model
    index = next(i for i, n in enumerate(model.graph.node) if row.value in n.output)
    others = set(range(len(model.graph.node))) - {index}
    alone, feed, outs = local_model(model, dict(found.expected), others)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the repro folder {target}: {e.strerror or e}") from e
    onnx.save(alone, str(target / "node.onnx"))
    safetensors_io.write(target / "inputs.safetensors", {k: _entry(v) for k, v in feed.items()})
    stored: dict[str, Any] = {}
    for i, name in enumerate(outs):
        value = name.split(":", 1)[1]
        stored[f"onnxruntime.{i}"] = _entry(found.expected[value])
        if value in found.local:
            stored[f"rlx.{i}"] = _entry(found.local[value])
    safetensors_io.write(target / "outputs.safetensors", stored)
    node = model.graph.node[index]
    doc = {
        "op_type": node.op_type,
        "domain": node.domain or "ai.onnx",
        "node": row.node,
        "outputs": outs,
        "budget": {"max_abs": row.local.allowed_abs if row.local else None, "kind": row.kind},
        "local_error": None if row.local is None else {"max_abs": row.local.max_abs, "ulp": row.local.ulp},
    }
    write_text(target / "node.json", json.dumps(doc, indent=1, allow_nan=False) + "\n")
    write_text(target / "repro.py", REPRO_SCRIPT)
    error = f"max abs {row.local.max_abs:.3g} over a budget of {row.local.allowed_abs:.3g}" if row.local else ""
    write_text(
        target / "README.md",
        f"# Repro: ONNX {node.op_type} at node `{row.node}`\n\n"
        f"RLX's import of this one node, fed ONNX Runtime's own input values, differs from ONNX Runtime: {error}.\n\n"
        "Run `python repro.py` (needs onnxruntime and safetensors). Files: `node.onnx` (the node alone),\n"
        "`inputs.safetensors` (its real inputs), `outputs.safetensors` (`onnxruntime.<i>`, `rlx.<i>`).\n",
    )
    return target


def _entry(arr: np.ndarray) -> safetensors_io.TensorEntry:
    arr = np.array(arr, order="C", copy=True)
    return (str(arr.dtype), tuple(arr.shape), arr.tobytes())


REPRO_SCRIPT = '''\
"""One ONNX node where RLX and ONNX Runtime disagree (written by rlx-torch-import diagnose).

python repro.py   -> ONNX Runtime's and RLX's results and their difference; exit 1 when over budget.
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from safetensors.numpy import load_file

HERE = Path(__file__).resolve().parent
node = json.loads((HERE / "node.json").read_text(encoding="utf-8"))
inputs = load_file(str(HERE / "inputs.safetensors"))
stored = load_file(str(HERE / "outputs.safetensors"))
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
sess = ort.InferenceSession(str(HERE / "node.onnx"), opts, providers=["CPUExecutionProvider"])
results = sess.run(node["outputs"], inputs)
budget = node["budget"]["max_abs"] or 0.0
worst = 0.0
print(f"ONNX {node['op_type']} at node {node['node']}")
for i, expected in enumerate(results):
    rlx = stored.get(f"rlx.{i}")
    if rlx is None:
        continue
    diff = np.abs(rlx.astype(np.float64).reshape(expected.shape) - expected.astype(np.float64))
    err = float(np.nan_to_num(diff, nan=np.inf).max()) if diff.size else 0.0
    worst = max(worst, err)
    print(f"output {i}: {list(expected.shape)} {expected.dtype}; max abs difference {err:.6g} (budget {budget:.3g})")
sys.exit(1 if worst > budget else 0)
'''
