"""Probe which raw RLX ops and dtypes take the process down (a developer tool, not a test).

Every case builds a tiny program and runs it through the Rust core in its own Python
process, so a kernel that corrupts the heap only kills that child:

* `op` cases isolate one RLX op kind on one dtype: float32 graph inputs are Cast into the
  dtype inside the graph, the op runs, and its result is Cast back to float32, so the
  kernel is probed apart from the graph boundary;
* `boundary` cases put the dtype at the boundary itself: a graph input, a graph output,
  a parameter of that dtype, and an input or parameter that is itself an output
  ([n, 16 n] elements: a 1-byte output read 4 bytes per element faults only when large);
* `lie` cases declare a node output smaller than the op writes (a hand-edited HIR);
* `oob` cases index out of range at run time (a Gather index past the table).

Each case is classified `ok` (ran), `error` (a Python exception: RLX refused or panicked,
or the core's checks refused it) or `crash` (killed by a signal, heap corruption;
`hang` past the time limit); `broken` when the child could not even load the core.
Children run with glibc's malloc checks (libc_malloc_debug, MALLOC_CHECK_=3) where
available, which turns silent heap damage into an abort (or, seen too, a hang).

By default the children set RLX_TORCH_IMPORT_PROBE_RAW_KERNELS=1, which makes the core
skip its table of known-crashing (op, dtype) pairs (src/defects.rs) so that RLX itself is
probed; every crash found is then run again with the table on (`checked` column) to
show that the core refuses it. `--checked` probes through the table only.

    python scripts/probe_core_safety.py                     # every case (~13 min on 2 cores)
    python scripts/probe_core_safety.py --ops MatMul,Gather --dtypes I8,F32 --sizes 64
    python scripts/probe_core_safety.py --groups boundary --json out/boundary.json

The table lists every (group, op, dtype) with a result other than `ok` at any size; the
JSON file (default out/core-safety-probe.json) holds every case. Exit status 1 when a crash
is not refused by the core with its table on.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DTYPES = ["F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "Bool", "U32"]
SIZES = [4, 64, 256]
RAW_ENV = "RLX_TORCH_IMPORT_PROBE_RAW_KERNELS"
MALLOC_DEBUG = [Path("/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"), Path("/lib64/libc_malloc_debug.so.0")]

# An input of an op case: name, dims, role. Roles: "data" (float32 cast into the probed dtype),
# "index" (int64 values), "cond" (float32 cast to Bool), "f32" (float32 as is).
In = tuple[str, list[int], str]


@dataclass
class Spec:
    """One op case at one size: its inputs, the op (rlx-ir serde JSON), its output dims and dtype
    (None: the probed dtype), and the index values (by input name) to feed."""

    inputs: list[In]
    op: Any
    out: list[int]
    out_dtype: str | None = None
    index: dict[str, list[int]] = field(default_factory=dict)


def _x(n: int) -> list[In]:
    return [("x", [n, n], "data")]


def _xy(n: int) -> list[In]:
    return [("x", [n, n], "data"), ("y", [n, n], "data")]


ACTIVATIONS = ["Relu", "Exp", "Neg", "Abs", "Sign", "Floor", "Round", "Sigmoid", "Gelu", "Erf", "Sqrt", "Recip"]
BINARIES = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Mod", "BitAnd"]
COMPARES = ["Eq", "Lt"]
REDUCES = ["Sum", "Mean", "Max", "Min", "Prod"]


def _conv_spec(n: int) -> Spec:
    op = {"Conv": {"kernel_size": [3, 3], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}}
    return Spec([("x", [1, 2, n, n], "data"), ("w", [3, 2, 3, 3], "data")], op, [1, 3, n - 2, n - 2])


def _conv_t_spec(n: int) -> Spec:
    geometry = {"stride": [2, 2], "padding": [0, 0], "dilation": [1, 1], "output_padding": [0, 0], "groups": 1}
    op = {"ConvTranspose2d": {"kernel_size": [2, 2], **geometry}}
    return Spec([("x", [1, 2, n, n], "data"), ("w", [2, 3, 2, 2], "data")], op, [1, 3, 2 * n, 2 * n])


def _conv3d_spec(n: int) -> Spec:
    m = min(n, 32)
    op = {"Conv3d": {"stride": [1, 1, 1], "padding": [0, 0, 0], "dilation": [1, 1, 1], "groups": 1}}
    return Spec([("x", [1, 2, m, m, m], "data"), ("w", [3, 2, 3, 3, 3], "data")], op, [1, 3, m - 2, m - 2, m - 2])


def _conv_t3d_spec(n: int) -> Spec:
    m = min(n, 16)
    geometry = {"stride": [2, 2, 2], "padding": [0, 0, 0], "dilation": [1, 1, 1], "output_padding": [0, 0, 0]}
    op = {"ConvTranspose3d": {**geometry, "groups": 1}}
    return Spec([("x", [1, 2, m, m, m], "data"), ("w", [2, 3, 2, 2, 2], "data")], op, [1, 3, 2 * m, 2 * m, 2 * m])


def _attention_spec(n: int, mask: str) -> Spec:
    op = {
        "Attention": {
            "num_heads": 1,
            "head_dim": 8,
            "v_head_dim": None,
            "mask_kind": mask,
            "score_scale": 0.5,
            "attn_logit_softcap": None,
        }
    }
    inputs: list[In] = [("q", [2, n, 8], "data"), ("k", [2, n, 8], "data"), ("v", [2, n, 8], "data")]
    if mask == "Bias":
        inputs.append(("bias", [2, 1, n, n], "data"))
    return Spec(inputs, op, [2, n, 8])


def _scatter_elements(n: int, reduction: str) -> Spec:
    op = {"ScatterElements": {"axis": 1, "reduction": reduction}}
    index = [n - 1 - (i % n) for i in range(n * n)]  # a permutation of each row
    inputs: list[In] = [("x", [n, n], "data"), ("i", [n, n], "index"), ("u", [n, n], "data")]
    return Spec(inputs, op, [n, n], index={"i": index})


def _scatter_nd(n: int, reduction: str) -> Spec:
    inputs: list[In] = [("x", [n, n], "data"), ("i", [n, 1], "index"), ("u", [n, n], "data")]
    return Spec(inputs, {"ScatterNd": {"reduction": reduction}}, [n, n], index={"i": list(range(n - 1, -1, -1))})


FP16 = {"exp_bits": 5, "man_bits": 10, "bias": 15, "max_normal": 65504.0}

# Op cases: key -> spec at size n. The key's first part (before ':' or '@') is the RLX op kind.
OPS: dict[str, Callable[[int], Spec]] = {
    "Cast": lambda n: Spec(_x(n), {"Cast": {"to": "F32"}}, [n, n], "F32"),
    "Constant": lambda n: Spec([], "Constant", [n, n]),  # data filled in by `program`
    **{f"Activation:{a}": (lambda n, a=a: Spec(_x(n), {"Activation": a}, [n, n])) for a in ACTIVATIONS},
    **{f"Binary:{b}": (lambda n, b=b: Spec(_xy(n), {"Binary": b}, [n, n])) for b in BINARIES},
    "Binary:Add@broadcast": lambda n: Spec([("x", [n, n], "data"), ("y", [1, n], "data")], {"Binary": "Add"}, [n, n]),
    **{f"Compare:{c}": (lambda n, c=c: Spec(_xy(n), {"Compare": c}, [n, n], "Bool")) for c in COMPARES},
    "Where": lambda n: Spec([("c", [n, n], "cond"), *_xy(n)], "Where", [n, n]),
    "MatMul": lambda n: Spec(_xy(n), "MatMul", [n, n]),
    "MatMul@batched": lambda n: Spec([("x", [2, n, n], "data"), ("y", [2, n, n], "data")], "MatMul", [2, n, n]),
    **{
        f"Reduce:{r}": (lambda n, r=r: Spec(_x(n), {"Reduce": {"op": r, "axes": [1], "keep_dim": False}}, [n]))
        for r in REDUCES
    },
    "Reshape": lambda n: Spec(_x(n), {"Reshape": {"new_shape": [n * n]}}, [n * n]),
    "Transpose": lambda n: Spec([("x", [n, 2 * n], "data")], {"Transpose": {"perm": [1, 0]}}, [2 * n, n]),
    "Narrow": lambda n: Spec(_x(n), {"Narrow": {"axis": 1, "start": 1, "len": n // 2}}, [n, n // 2]),
    "Slice": lambda n: Spec(_x(n), {"Slice": {"axis": 1, "start": 0, "len": n // 2, "step": 2}}, [n, n // 2]),
    "Roll": lambda n: Spec(_x(n), {"Roll": {"shifts": [1], "dims": [1]}}, [n, n]),
    "Concat": lambda n: Spec(_xy(n), {"Concat": {"axis": 1}}, [n, 2 * n]),
    "Expand": lambda n: Spec([("x", [1, n], "data")], {"Expand": {"target_shape": [n, n]}}, [n, n]),
    "Gather": lambda n: Spec(
        [("x", [n, n], "data"), ("i", [n], "index")], {"Gather": {"axis": 0}}, [n, n], index={"i": list(range(n))[::-1]}
    ),
    "GatherElements": lambda n: Spec(
        [("x", [n, n], "data"), ("i", [n, n], "index")],
        {"GatherElements": {"axis": 1}},
        [n, n],
        index={"i": [n - 1 - (k % n) for k in range(n * n)]},
    ),
    "ScatterElements:None": lambda n: _scatter_elements(n, "None"),
    "ScatterElements:Add": lambda n: _scatter_elements(n, "Add"),
    "ScatterNd:None": lambda n: _scatter_nd(n, "None"),
    "ScatterNd:Add": lambda n: _scatter_nd(n, "Add"),
    "Reverse": lambda n: Spec(_x(n), {"Reverse": {"axes": [1]}}, [n, n]),
    "Pad": lambda n: Spec(_x(n), {"Pad": {"pads": [[1, 1], [1, 1]], "mode": {"Constant": 0.0}}}, [n + 2, n + 2]),
    "Tile": lambda n: Spec(_x(n), {"Tile": {"reps": [1, 2]}}, [n, 2 * n]),
    "Trilu": lambda n: Spec(_x(n), {"Trilu": {"upper": False, "diagonal": 0}}, [n, n]),
    "Clamp": lambda n: Spec(_x(n), {"Clamp": {"min": -1.0, "max": 2.0}}, [n, n]),
    "Cumsum": lambda n: Spec(_x(n), {"Cumsum": {"axis": -1, "exclusive": False}}, [n, n]),
    "CumProd": lambda n: Spec(_x(n), {"CumProd": {"axis": -1, "exclusive": False}}, [n, n]),
    "Sort": lambda n: Spec(_x(n), {"Sort": {"axis": 1, "descending": False}}, [n, n]),
    "ArgSort": lambda n: Spec(_x(n), {"ArgSort": {"axis": 1, "descending": False}}, [n, n], "F32"),
    "TopK": lambda n: Spec(_x(n), {"TopK": {"k": 2}}, [n, 2], "F32"),
    "ArgMax": lambda n: Spec(_x(n), {"ArgMax": {"axis": 1, "keep_dim": False}}, [n], "F32"),
    "ArgMin": lambda n: Spec(_x(n), {"ArgMin": {"axis": 1, "keep_dim": False}}, [n], "F32"),
    "Softmax": lambda n: Spec(_x(n), {"Softmax": {"axis": 1}}, [n, n]),
    "LayerNorm": lambda n: Spec(
        [*_x(n), ("w", [n], "data"), ("b", [n], "data")], {"LayerNorm": {"axis": -1, "eps": 1e-5}}, [n, n]
    ),
    "RmsNorm": lambda n: Spec(
        [*_x(n), ("w", [n], "data"), ("b", [n], "data")], {"RmsNorm": {"axis": -1, "eps": 1e-5}}, [n, n]
    ),
    "GroupNorm": lambda n: Spec(
        [("x", [1, 4, n, n], "data"), ("w", [4], "data"), ("b", [4], "data")],
        {"GroupNorm": {"num_groups": 2, "eps": 1e-5}},
        [1, 4, n, n],
    ),
    "BatchNormInference": lambda n: Spec(
        [("x", [1, 4, n, n], "data"), *[(p, [4], "data") for p in ("g", "b", "m", "v")]],
        {"BatchNormInference": {"eps": 1e-5}},
        [1, 4, n, n],
    ),
    "Conv": _conv_spec,
    "ConvTranspose2d": _conv_t_spec,
    "Conv3d": _conv3d_spec,
    "ConvTranspose3d": _conv_t3d_spec,
    **{
        f"Pool:{k}": (
            lambda n, k=k: Spec(
                [("x", [1, 2, n, n], "data")],
                {"Pool": {"kind": k, "kernel_size": [2, 2], "stride": [2, 2], "padding": [0, 0]}},
                [1, 2, n // 2, n // 2],
            )
        )
        for k in ("Max", "Mean")
    },
    **{f"Attention:{m}": (lambda n, m=m: _attention_spec(n, m)) for m in ("None", "Causal", "Bias")},
    "Rope": lambda n: Spec(
        [("q", [2, n, 8], "data"), ("c", [n, 4], "data"), ("s", [n, 4], "data")],
        {"Rope": {"head_dim": 8, "n_rot": 8, "style": "NeoX"}},
        [2, n, 8],
    ),
    "RoundToFormat": lambda n: Spec(
        _x(n),
        {"RoundToFormat": {"format": FP16, "scaling": "None"}},
        [n, n],
    ),
}
# The index dtype of the indexing ops is probed too (data float32, indices cast to the dtype).
INDEX_OPS = ["Gather", "GatherElements", "ScatterElements:None", "ScatterNd:None"]
# input: a graph input of the dtype, Cast to float32; output: a float32 input Cast to the dtype, the
# output; moved-output: that Cast reshaped, the output; param: a parameter of the dtype, Cast to float32;
# passthrough: a graph input that is also the output (moved-passthrough: reshaped); param-output: a
# parameter that is the output.
BOUNDARY = ["input", "output", "moved-output", "param", "passthrough", "moved-passthrough", "param-output"]
# A declared output smaller than what the op writes (as a hand-edited model.hir.json could hold).
LIES = [o for o in OPS if o not in ("Constant", "Binary:Add@broadcast", "MatMul@batched")]


@dataclass
class Case:
    group: str  # "op", "index", "boundary", "lie", "oob"
    op: str
    dtype: str
    n: int
    raw: bool = True  # skip the core's table of known-crashing (op, dtype) pairs


@dataclass
class Result:
    case: Case
    status: str  # ok, error, crash, hang, broken
    detail: str
    seconds: float
    checked: str = ""  # for a crash: the status with the core's table on


# ── the child: build one program, run it ──────────────────────────────────────────────────


def _shape(dims: list[int], dtype: str) -> dict[str, Any]:
    return {"dims": [{"Static": int(d)} for d in dims], "dtype": dtype}


def _values(count: int) -> list[float]:
    """Small non-negative integers (exact in every probed dtype)."""
    return [float(k % 4) for k in range(count)]


def _encode(values: list[float], dtype: str) -> bytes:
    import numpy as np

    np_dtype = {
        "F32": "<f4",
        "F64": "<f8",
        "F16": "<f2",
        "I64": "<i8",
        "I32": "<i4",
        "I16": "<i2",
        "I8": "i1",
        "U8": "u1",
        "Bool": "?",
        "U32": "<u4",
    }.get(dtype)
    if dtype == "BF16":
        return (np.asarray(values, "<f4").view("<u4") >> 16).astype("<u2").tobytes()
    return np.asarray(values).astype(np_dtype).tobytes()


def program(case: Case) -> tuple[dict[str, Any], list[tuple[str, bytes, str]], list[tuple[str, bytes, str]]]:
    """(program JSON, run feed, params to bind) of a case."""
    if case.group == "boundary":
        return _boundary(case)
    d, n = case.dtype, case.n
    op_key = case.op
    spec = OPS[op_key](n)
    index_dtype = d if case.group == "index" else "I64"
    data_dtype = "F32" if case.group == "index" else d
    inputs, nodes, feed = [], [], []
    names = []
    for name, dims, role in spec.inputs:
        count = 1
        for k in dims:
            count *= k
        if role == "index":
            values = spec.index[name]
            if case.group == "oob":
                values = [n + 7 if k % 2 else -1 for k in range(len(values))]  # past the end, and negative
            inputs.append({"name": name, "shape": _shape(dims, "I64")})
            feed.append((name, _encode([float(v) for v in values], "I64"), "I64"))
            target = index_dtype
        else:
            inputs.append({"name": name, "shape": _shape(dims, "F32")})
            feed.append((name, _encode(_values(count), "F32"), "F32"))
            target = {"data": data_dtype, "cond": "Bool", "f32": "F32"}[role]
        if target != inputs[-1]["shape"]["dtype"]:
            cast = {"Cast": {"to": target}}
            nodes.append({"id": f"{name}.c", "op": cast, "inputs": [name], "shape": _shape(dims, target)})
            names.append(f"{name}.c")
        else:
            names.append(name)
    out_dtype = spec.out_dtype or data_dtype
    out_dims = [1] if case.group == "lie" else spec.out
    op = spec.op
    if op == "Constant":
        count = n * n
        op = {"Constant": {"data": list(_encode(_values(count), d))}}
    nodes.append({"id": "op", "op": op, "inputs": names, "shape": _shape(out_dims, out_dtype)})
    out = "op"
    if out_dtype != "F32":
        nodes.append({"id": "out", "op": {"Cast": {"to": "F32"}}, "inputs": ["op"], "shape": _shape(out_dims, "F32")})
        out = "out"
    doc = {"name": "probe", "inputs": inputs, "params": [], "nodes": nodes, "outputs": [out]}
    return doc, feed, []


def _boundary(case: Case) -> tuple[dict[str, Any], list[tuple[str, bytes, str]], list[tuple[str, bytes, str]]]:
    """The dtype at the graph boundary: an input Cast to float32, a float32 input Cast to an output
    of the dtype, a parameter Cast to float32, or an input that is itself the output."""
    d, n = case.dtype, case.n
    dims = [n, 16 * n]  # a 1- or 2-byte output read 4 bytes per element faults past 256 x 4096
    values = _values(16 * n * n)
    where = case.op
    inputs, params, nodes, feed, bind = [], [], [], [], []
    if where == "input":
        inputs.append({"name": "x", "shape": _shape(dims, d)})
        feed.append(("x", _encode(values, d), d))
        nodes.append({"id": "out", "op": {"Cast": {"to": "F32"}}, "inputs": ["x"], "shape": _shape(dims, "F32")})
        out = "out"
    elif where == "output":
        inputs.append({"name": "x", "shape": _shape(dims, "F32")})
        feed.append(("x", _encode(values, "F32"), "F32"))
        nodes.append({"id": "out", "op": {"Cast": {"to": d}}, "inputs": ["x"], "shape": _shape(dims, d)})
        out = "out"
    elif where == "param":
        params.append({"name": "w", "shape": _shape(dims, d)})
        bind.append(("w", _encode(values, d), d))
        nodes.append({"id": "out", "op": {"Cast": {"to": "F32"}}, "inputs": ["w"], "shape": _shape(dims, "F32")})
        out = "out"
    elif where == "moved-output":
        inputs.append({"name": "x", "shape": _shape(dims, "F32")})
        feed.append(("x", _encode(values, "F32"), "F32"))
        nodes.append({"id": "c", "op": {"Cast": {"to": d}}, "inputs": ["x"], "shape": _shape(dims, d)})
        flat = [16 * n * n]
        nodes.append({"id": "out", "op": {"Reshape": {"new_shape": flat}}, "inputs": ["c"], "shape": _shape(flat, d)})
        out = "out"
    elif where == "moved-passthrough":
        inputs.append({"name": "x", "shape": _shape(dims, d)})
        feed.append(("x", _encode(values, d), d))
        flat = [16 * n * n]
        nodes.append({"id": "out", "op": {"Reshape": {"new_shape": flat}}, "inputs": ["x"], "shape": _shape(flat, d)})
        out = "out"
    elif where == "param-output":
        params.append({"name": "w", "shape": _shape(dims, d)})
        bind.append(("w", _encode(values, d), d))
        out = "w"
    else:
        inputs.append({"name": "x", "shape": _shape(dims, d)})
        feed.append(("x", _encode(values, d), d))
        out = "x"
    doc = {"name": "probe", "inputs": inputs, "params": params, "nodes": nodes, "outputs": [out]}
    return doc, feed, bind


def child(case: Case) -> int:
    """Compile and run `case` twice; prints one JSON line. Exit 0: ran; 1: a Python exception."""
    import gc
    import importlib.machinery
    import importlib.util

    import numpy as np

    # The extension alone, not the package (whose __init__ imports everything): a case probes the core.
    spec = importlib.util.find_spec("rlx_torch_import")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    path = next(p for p in package.glob("_core*") if p.suffix in importlib.machinery.EXTENSION_SUFFIXES)
    loader = importlib.machinery.ExtensionFileLoader("rlx_torch_import._core", str(path))
    found = importlib.util.spec_from_file_location("rlx_torch_import._core", path, loader=loader)
    assert found is not None
    _core = importlib.util.module_from_spec(found)
    loader.exec_module(_core)
    print(json.dumps({"status": "started"}), flush=True)
    try:
        doc, feed, bind = program(case)
        model = _core.CompiledModel(_core.program_to_hir_json(json.dumps(doc)))
        for name, data, dtype in bind:
            model.set_param(name, np.frombuffer(data, np.uint8), dtype)
        arrays = [(name, np.frombuffer(data, np.uint8), dtype) for name, data, dtype in feed]
        for _ in range(2):
            outs = model.run(arrays)
            _ = [bytes(data) for data, _dtype, _dims in outs]
        del model, outs
        gc.collect()
        junk = [bytearray(k * 97) for k in range(1, 200)]  # stir the heap: damage shows as an abort
        del junk
    except Exception as e:
        print(json.dumps({"status": "error", "type": type(e).__name__, "message": str(e).splitlines()[0][:300]}))
        return 1
    print(json.dumps({"status": "ok"}))
    return 0


# ── the parent: run every case in a child ─────────────────────────────────────────────────


def _env(raw: bool, malloc_check: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(RAW_ENV, None)
    if raw:
        env[RAW_ENV] = "1"
    env.setdefault("RLX_WORKERS", "1")  # one RLX thread per child: the probe runs children in parallel
    lib = next((p for p in MALLOC_DEBUG if p.exists()), None)
    if malloc_check and lib is not None:
        env["LD_PRELOAD"] = str(lib)
        env["MALLOC_CHECK_"] = "3"
    return env


def run_case(case: Case, timeout: float, malloc_check: bool) -> Result:
    start = time.monotonic()
    cmd = [sys.executable, __file__, "--child", json.dumps(asdict(case))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(case.raw, malloc_check))
    except subprocess.TimeoutExpired:
        return Result(case, "hang", f"no result after {timeout:.0f} s", time.monotonic() - start)
    took = time.monotonic() - start
    lines = [s for s in proc.stdout.splitlines() if s.startswith("{")]
    line = lines[-1] if lines else ""
    tail = " ".join(proc.stderr.strip().splitlines()[-2:])[-300:]
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return Result(case, "crash", f"killed by {name}: {tail}", took)
    if not lines:  # the child died before the case ran (e.g. no core to import): not a finding
        return Result(case, "broken", f"exit {proc.returncode} before the case ran: {tail}", took)
    found = json.loads(line)
    if found["status"] == "started":
        return Result(case, "crash", f"exit {proc.returncode} without a result: {tail}", took)
    if proc.returncode == 0 and found["status"] == "ok":
        return Result(case, "ok", "", took)
    if proc.returncode == 1 and found["status"] == "error":
        return Result(case, "error", f"{found['type']}: {found['message']}", took)
    return Result(case, "crash", f"exit {proc.returncode}: {tail}", took)


def cases(args: argparse.Namespace) -> list[Case]:
    ops = [o for o in OPS if not args.ops or o in args.ops or o.split(":")[0].split("@")[0] in args.ops]
    raw = not args.checked
    found: list[Case] = []
    for n in args.sizes:
        if "op" in args.groups:
            found += [Case("op", o, d, n, raw) for o in ops for d in args.dtypes]
        if "index" in args.groups:
            found += [Case("index", o, d, n, raw) for o in INDEX_OPS if o in ops for d in args.dtypes]
        if "boundary" in args.groups:
            found += [Case("boundary", b, d, n, raw) for b in BOUNDARY for d in args.dtypes]
        if "lie" in args.groups and n > 4:
            found += [Case("lie", o, "F32", n, raw) for o in LIES if o in ops]
        if "oob" in args.groups and n > 4:
            found += [Case("oob", o, "F32", n, raw) for o in INDEX_OPS if o in ops]
    return found


def summary(results: list[Result]) -> list[tuple[str, str, str, dict[int, str], str]]:
    """(group, op, dtype, {size: status}, first detail) for every row with a result other than ok."""
    rows: dict[tuple[str, str, str], dict[int, Result]] = {}
    for r in results:
        rows.setdefault((r.case.group, r.case.op, r.case.dtype), {})[r.case.n] = r
    out = []
    for (group, op, dtype), by_size in rows.items():
        if all(r.status == "ok" for r in by_size.values()):
            continue
        statuses = {}
        for n, r in sorted(by_size.items()):
            statuses[n] = r.status + (f"->{r.checked}" if r.checked else "")
        worst = next((r for r in by_size.values() if r.status in ("crash", "hang")), None) or next(
            r for r in by_size.values() if r.status != "ok"
        )
        out.append((group, op, dtype, statuses, worst.detail))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    split = lambda s: [x for x in s.split(",") if x]  # noqa: E731
    parser.add_argument("--ops", type=split, default=[], help="op keys or kinds (default: all)")
    parser.add_argument("--dtypes", type=split, default=DTYPES)
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in split(s)], default=SIZES)
    parser.add_argument("--groups", type=split, default=["op", "index", "boundary", "lie", "oob"])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--checked", action="store_true", help="probe through the core's table of known crashes")
    parser.add_argument("--no-malloc-check", action="store_true")
    parser.add_argument("--no-recheck", action="store_true", help="do not run crashes again with the table on")
    parser.add_argument("--json", type=Path, default=Path("out/core-safety-probe.json"))
    args = parser.parse_args(argv)
    if args.child:
        return child(Case(**json.loads(args.child)))
    todo = cases(args)
    malloc_check = not args.no_malloc_check
    print(f"{len(todo)} cases, {args.jobs} at a time", file=sys.stderr)
    start = time.monotonic()
    done = 0

    def one(case: Case) -> Result:
        nonlocal done
        r = run_case(case, args.timeout, malloc_check)
        if r.status in ("crash", "hang") and case.raw and not args.no_recheck:
            again = run_case(Case(case.group, case.op, case.dtype, case.n, raw=False), args.timeout, malloc_check)
            r.checked = again.status
            r.detail += f" | checked: {again.detail}" if again.detail else ""
        done += 1
        if done % 50 == 0:
            print(f"  {done}/{len(todo)} ({time.monotonic() - start:.0f} s)", file=sys.stderr)
        return r

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, todo))
    rows = summary(results)
    print(f"| group | op | dtype | {' | '.join(str(n) for n in args.sizes)} | first failure |")
    print("|---|---|---|" + "---|" * len(args.sizes) + "---|")
    for group, op, dtype, statuses, detail in rows:
        cells = " | ".join(statuses.get(n, "") for n in args.sizes)
        print(f"| {group} | {op} | {dtype} | {cells} | {detail[:160]} |")
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    print(f"\n{len(results)} cases in {time.monotonic() - start:.0f} s: {counts}", file=sys.stderr)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(f"wrote {args.json}", file=sys.stderr)
    unrefused = [r for r in results if r.status in ("crash", "hang") and r.checked not in ("error", "")]
    if args.checked:
        unrefused = [r for r in results if r.status in ("crash", "hang")]
    return 1 if unrefused else 0


if __name__ == "__main__":
    sys.exit(main())
