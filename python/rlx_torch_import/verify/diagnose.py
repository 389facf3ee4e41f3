"""`rlx-torch-import diagnose OUT/`: the first node whose own error is over its budget, and a
self-contained repro folder for it (a bug report's attachment).

The repro folder holds the node's real input tensors (`inputs.safetensors`, PyTorch's values
there), both outputs (`outputs.safetensors`: `torch.<i>`, `rlx.<i>`), the node as torch-ir
records it (`node.json`), the RLX graph it lowers to alone (`rlx.hir.json`) and `repro.py`,
which runs the ATen op with torch on those inputs, compares with RLX's stored output and, where
rlx_torch_import is installed, runs `rlx.hir.json` on RLX again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import _core, safetensors_io
from ..conversion import Conversion
from ..crate.rust_names import code_span, comment
from ..door import front_end
from ..errors import InputError
from ..layout import REFERENCE, REPORT, TORCH_IR
from ..outdir import path_component, write_text
from ..torchir import Node, OutputSpec, TensorSpec
from .nodes import NodeReport, node_parity
from .report import NodeParity


@dataclass
class Diagnosis:
    """What `diagnose` found: the per-node report, the node it chose (the first divergence, or
    the one asked for) and where its repro folder went."""

    report: NodeReport
    node: NodeParity | None
    repro: Path | None


def diagnose(directory: Path | str, *, node: str | None = None, repro_dir: Path | str | None = None) -> Diagnosis:
    """Per-node parity of the conversion in `directory`; a repro folder for `node` (default: the
    first divergence) in `repro_dir` (default `<directory>/repro-<node>`, the node's name made a
    safe folder name by `outdir.path_component`: a torch-ir file can name a node anything). Raises
    InputError for a directory that is not a conversion or a node name it does not have."""
    directory = Path(directory)
    if not directory.is_dir():
        what = "not a directory" if directory.exists() else "no such directory"
        raise InputError(f"{directory}: {what}", hint="point at the OUT/ directory of a conversion")
    if not (directory / TORCH_IR).exists() or not (directory / REFERENCE).exists():
        raise InputError(
            f"{directory}: not a conversion directory (needs {TORCH_IR} and {REFERENCE})",
            hint="point at the OUT/ directory from_torch or the CLI wrote",
        )
    outputs_ok = True  # the example's outputs in report.json (not the sweep or extra input sets)
    report_json = directory / f"{REPORT}.json"
    if report_json.is_file():  # outputs that depend on random draws (`verify/randomness.py`) are not failures here
        doc = json.loads(report_json.read_text(encoding="utf-8"))
        random = set(doc.get("random_outputs", []))
        outputs_ok = all(o.get("ok", True) or o.get("name") in random for o in doc.get("outputs", []))
    conv = Conversion.load(directory)
    found = node_parity(conv, outputs_ok=outputs_ok)
    chosen = found.first_divergence
    if node is not None:
        chosen = next((r for r in found.nodes if node in (r.node, r.value)), None)
        if chosen is None:
            raise InputError(
                f"{directory}: no node {node!r} among the {len(found.nodes)} values per-node parity compares",
                hint="`rlx-torch-import diagnose OUT --all` lists every node",
            )
    if chosen is None:
        return Diagnosis(found, None, None)
    target = Path(repro_dir) if repro_dir is not None else directory / f"repro-{path_component(chosen.node, 'node')}"
    if conv.ir.boundary_only:  # the node is the front end's graph's (an ONNX node): its own repro folder
        repro = front_end(conv.ir).write_repro
        assert repro is not None, f"front end {conv.ir.frontend!r} writes no repro folder"
        repro(directory, found, chosen, target)
    else:
        write_repro(found, chosen, target)
    return Diagnosis(found, chosen, target)


def write_repro(found: NodeReport, row: NodeParity, target: Path) -> Path:
    """Write the repro folder of node `row` (module docstring) into `target`. Raises InputError
    when `target` cannot be created (a file there, a name too long)."""
    import torch

    ir = found.ir
    assert ir is not None, "a NodeReport from node_parity"
    node = next(n for n in ir.nodes if n.name == row.node)
    inputs: dict[str, Any] = {}
    specs: list[TensorSpec] = []

    def bind(arg: dict[str, Any], label: str) -> dict[str, Any]:
        ((tag, payload),) = arg.items()
        if tag == "list":
            return {"list": [bind(a, f"{label}.{i}") for i, a in enumerate(payload)]}
        if tag != "tensor":
            return arg
        value = inputs[label] = found.expected[payload]  # weights are there too, by placeholder name
        specs.append(TensorSpec(label, list(value.shape), str(value.dtype).removeprefix("torch.")))
        return {"tensor": label}

    args = [bind(a, f"arg{i}") for i, a in enumerate(node.args)]
    kwargs = {k: bind(v, k) for k, v in node.kwargs.items()}
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the repro folder {target}: {e.strerror or e}") from e
    tensors = {k: v.detach().contiguous() for k, v in inputs.items()}
    safetensors_io.write(target / "inputs.safetensors", dict(safetensors_io.iter_torch(tensors)))
    outs: dict[str, Any] = {}
    for i, spec in enumerate(o for o in node.outputs if o.dtype != "none"):
        if spec.name in found.expected:
            outs[f"torch.{i}"] = found.expected[spec.name].detach().contiguous()
        if spec.name in found.local:
            local = torch.from_numpy(found.local[spec.name].copy())
            outs[f"rlx.{i}"] = local.to(torch.bfloat16) if spec.dtype == "bfloat16" else local
    safetensors_io.write(target / "outputs.safetensors", dict(safetensors_io.iter_torch(outs)))
    alone = replace(
        ir,
        inputs=specs,
        weights=[],
        symbols=[],
        nodes=[replace(node, args=args, kwargs=kwargs)],
        outputs=[
            OutputSpec(f"rlx.{i}", o.name, list(o.shape), o.dtype)
            for i, o in enumerate(o for o in node.outputs if o.dtype != "none")
        ],
    )
    from ..lower import lower

    hir = _core.program_to_hir_json(lower(alone, optimize=False).to_core_json())
    write_text(target / "rlx.hir.json", hir)
    doc = {
        "target": node.target,
        "args": args,
        "kwargs": kwargs,
        "outputs": [{"name": o.name, "shape": o.shape, "dtype": o.dtype} for o in node.outputs],
        "node": node.name,
        "module_path": node.module_path,
        "source": node.source,
        "budget": {
            "max_abs": row.local.allowed_abs if row.local else None,
            "kind": row.kind,
            "bit_exact": bool(row.local and row.local.bit_exact),
        },
        "local_error": None if row.local is None else {"max_abs": row.local.max_abs, "ulp": row.local.ulp},
        "producer": {**ir.producer, "rlx": _core.rlx_version()},
    }
    write_text(target / "node.json", json.dumps(doc, indent=1, allow_nan=False, default=str) + "\n")
    write_text(target / "repro.py", REPRO_SCRIPT)
    write_text(target / "README.md", _readme(node, row))
    return target


def _readme(node: Node, row: NodeParity) -> str:
    where = ", ".join(code_span(x) for x in (row.module_path, row.source) if x)
    error = f"max abs {row.local.max_abs:.3g} over a budget of {row.local.allowed_abs:.3g}" if row.local else ""
    if row.local is not None and row.local.bit_exact:
        error = f"{row.local.bits_differ} elements differ in bits (a value-exact op: judged bit-exact)"
    # every name is flattened to one line and fenced: a torch-ir file can hold any text
    return (
        f"# Repro: {comment(node.target)} at node {code_span(node.name)}{f' ({where})' if where else ''}\n\n"
        f"RLX's lowering of this one op, fed PyTorch's own input values, differs from PyTorch: {error}.\n\n"
        "Run `python repro.py` (needs torch and safetensors; with rlx_torch_import installed it also\n"
        "reruns `rlx.hir.json` on RLX). Files: `inputs.safetensors` (the op's real inputs),\n"
        "`outputs.safetensors` (`torch.<i>`: PyTorch, `rlx.<i>`: RLX), `node.json` (the call),\n"
        "`rlx.hir.json` (the RLX graph of the op).\n"
    )


REPRO_SCRIPT = '''\
"""One ATen op where RLX and PyTorch disagree, with its real inputs (written by rlx-torch-import diagnose).

python repro.py   -> prints PyTorch's and RLX's results and their difference; exit 1 when over budget.
"""

import json
import math
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

HERE = Path(__file__).resolve().parent
node = json.loads((HERE / "node.json").read_text(encoding="utf-8"))
inputs = load_file(str(HERE / "inputs.safetensors"))
stored = load_file(str(HERE / "outputs.safetensors"))


def decode(arg):
    (tag, payload), = arg.items()
    if tag == "tensor":
        return inputs[payload]
    if tag == "list":
        return [decode(a) for a in payload]
    if tag == "float":
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(payload, payload)
    if tag == "dtype":
        return getattr(torch, payload)
    if tag in ("layout", "memory_format"):
        return getattr(torch, payload)
    if tag == "device":
        return torch.device("cpu")
    return None if tag == "none" else payload


ns, packet, overload = node["target"].split(".", 2)
op = getattr(getattr(getattr(torch.ops, ns), packet), overload)
result = op(*[decode(a) for a in node["args"]], **{k: decode(v) for k, v in node["kwargs"].items()})
results = list(result) if isinstance(result, (tuple, list)) else [result]
where = ", ".join(x for x in (node["module_path"], node["source"]) if x)
print(f"{node['target']} at node {node['node']}" + (f" ({where})" if where else ""))
budget = node["budget"]["max_abs"] or 0.0
worst = 0.0
for i, torch_out in enumerate(r for r in results if isinstance(r, torch.Tensor)):
    rlx_out = stored.get(f"rlx.{i}")
    if rlx_out is None:
        continue
    diff = (rlx_out.double() - torch_out.double()).abs()
    diff = torch.where(torch.isnan(rlx_out.double()) & torch.isnan(torch_out.double()), 0.0, diff)
    err = float(diff.nan_to_num(math.inf).max()) if diff.numel() else 0.0
    worst = max(worst, err)
    if node["budget"].get("bit_exact"):  # a value-exact op: every bit pattern (NaN equals NaN), signed zeros too
        a, e = rlx_out.double(), torch_out.double()
        same = ((a == e) & (torch.signbit(a) == torch.signbit(e))) | (torch.isnan(a) & torch.isnan(e))
        print(f"output {i}: {int((~same).sum())} elements differ in bits (judged bit-exact)")
        worst = math.inf if not bool(same.all()) else worst
    where = tuple(int(j) for j in torch.nonzero(diff == diff.max())[0]) if diff.numel() else ()
    print(f"output {i}: {list(torch_out.shape)} {torch_out.dtype}; max abs difference {err:.6g} (budget {budget:.3g})")
    print(f"  worst at {where}: PyTorch {torch_out[where].item()!r} vs RLX {rlx_out[where].item()!r}")
try:
    import numpy as np
    from rlx_torch_import import _core
except ImportError:
    print("(rlx_torch_import is not installed: RLX's stored output is used)")
else:
    model = _core.CompiledModel((HERE / "rlx.hir.json").read_text(encoding="utf-8"))
    feed = []
    for name, t in inputs.items():
        carried = (torch.bfloat16, torch.float16, torch.bool, torch.int8, torch.uint8, torch.int16)
        arr = t.float().numpy() if t.dtype in carried else t.numpy()
        dtype = {"float32": "F32", "float64": "F64", "int64": "I64", "int32": "I32"}[str(arr.dtype)]
        feed.append((name, np.ascontiguousarray(arr).reshape(-1).view(np.uint8), dtype))
    try:
        fresh = model.run(feed)
        for i, (data, dtype, dims) in enumerate(fresh):
            host = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}.get(str(dtype))
            if host is None or i >= len(results):
                continue
            again = torch.from_numpy(np.frombuffer(bytes(data), dtype=host).reshape(dims).copy())
            err = float((again.double() - results[i].double()).abs().nan_to_num(0).max()) if again.numel() else 0.0
            print(f"RLX rerun of rlx.hir.json, output {i}: max abs difference from PyTorch {err:.6g}")
    except Exception as e:  # the inputs may need the boundary casts rlx-torch-import adds
        print(f"RLX rerun skipped: {e}")
sys.exit(1 if worst > budget else 0)
'''
