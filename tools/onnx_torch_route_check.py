"""Measure the ONNX torch route (`frontend.onnx.torch_route.to_module`) on the ONNX node conformance suite.

    python tools/onnx_torch_route_check.py [--only OP,...] [--export] [--show wrong,untranslatable,error]
        [--json FILE]

A developer check, not a test. Every in-scope case of `collect_testcases()` (the classification of
`tools/onnx_coverage/cases.py`) is translated with `to_module` and run in eager torch; each output is
compared with the case's expected output: same shape, same dtype, values within rtol 1e-4 / atol 1e-5
for float32, 1e-7 / 1e-9 for float64, 1e-3 / 1e-3 for float16, 1e-2 / 1e-2 for bfloat16, exact for
integers and bool (NaN matches NaN). A case is `pass`, `wrong`, `untranslatable` (Untranslatable: its
reasons) or `error` (any other exception). With --export, each passing case's module also goes through
`torch.export.export(module, args)` and the run of the exported program is compared again.
Prints per-op-type counts and totals.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.onnx_coverage import cases as case_source

TOL = {"float32": (1e-4, 1e-5), "float64": (1e-7, 1e-9), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


def _compare(name: str, got: torch.Tensor, want: np.ndarray, dtype: str) -> str:
    """'' when `got` matches the expected output, else why not."""
    got_dtype = str(got.dtype).removeprefix("torch.")
    if got_dtype != dtype:
        return f"{name}: dtype {got_dtype}, expected {dtype}"
    if tuple(got.shape) != tuple(want.shape):
        return f"{name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    g = got.detach().to(torch.float64 if dtype in TOL else torch.int64).numpy() if dtype != "uint64" else None
    if g is None:
        g = got.detach().view(torch.int64).numpy().view(np.uint64)
    if dtype == "bool":
        g = got.detach().numpy()
    w = np.asarray(want)
    if dtype in TOL:
        rtol, atol = TOL[dtype]
        w = w.astype(np.float64)
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(g - w)) if g.size else 0.0
            return f"{name}: max abs error {err:.3g}"
        return ""
    if not np.array_equal(g.astype(w.dtype) if dtype != "bool" else g, w):
        return f"{name}: values differ ({int(np.sum(g != w))} of {w.size})"
    return ""


def _check_outputs(outs: tuple[torch.Tensor, ...], case: Any) -> str:
    names = list(case.expected)
    if len(outs) != len(names):
        return f"{len(outs)} outputs, expected {len(names)}"
    whys = [_compare(n, o, case.expected[n], case.dtypes[n]) for n, o in zip(names, outs, strict=True)]
    return "; ".join(w for w in whys if w)


def _freeze(model: onnx.ModelProto, names: list[str], inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Make graph inputs `names` initializers holding the case's values (in the declared element type);
    the remaining inputs."""
    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    for n in names:
        arr = np.asarray(inputs[n]).astype(onnx.helper.tensor_dtype_to_np_dtype(declared[n]))
        model.graph.initializer.append(onnx.numpy_helper.from_array(arr, n))
    kept = [v for v in model.graph.input if v.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return {k: v for k, v in inputs.items() if k not in names}


def run_case(case: Any, export: bool, freeze: bool = False) -> tuple[str, str, str]:
    """(status, reason, export status) of one case; `freeze`: graph inputs a node needs constant (shape
    operands) become initializers and the case is translated again (status `pass-frozen`, ...)."""
    from rlx_torch_import.frontend.onnx.torch_route import Untranslatable, to_module

    model = onnx.load_from_string(case.model)
    inputs, suffix = case.inputs, ""
    try:
        for attempt in range(8):
            try:
                module, args, _ = to_module(model, inputs)
                break
            except Untranslatable as e:
                if not (freeze and e.inputs_needed_constant) or attempt == 7:
                    raise
                inputs, suffix = _freeze(model, e.inputs_needed_constant, inputs), "-frozen"
        with torch.no_grad():
            outs = module(*args)
    except Untranslatable as e:
        return "untranslatable" + suffix, "; ".join(f"{w}: {r}" for _, w, r in e.items), ""
    except Exception as e:
        return "error", f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}", ""
    why = _check_outputs(outs, case)
    if why:
        return "wrong" + suffix, why, ""
    if not export:
        return "pass" + suffix, "", ""
    try:
        ep = torch.export.export(module, args)
        with torch.no_grad():
            why = _check_outputs(ep.module()(*args), case)
        return "pass" + suffix, "", "export-wrong: " + why if why else "exported"
    except Exception as e:
        return "pass" + suffix, "", f"export-error: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--only", help="only these op types (comma-separated, case-insensitive)")
    p.add_argument("--export", action="store_true", help="also torch.export the passing cases")
    p.add_argument("--show", default="wrong,error", help="statuses whose cases are listed (default wrong,error)")
    p.add_argument(
        "--freeze",
        action="store_true",
        help="when a node needs a graph input constant (a shape operand), make it an initializer and retry "
        "(counted apart: pass-frozen, ...)",
    )
    p.add_argument("--json", type=Path, help="write every case's record here")
    a = p.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    only = {s.strip() for s in a.only.split(",")} if a.only else None
    cases, _ = case_source.load(only)
    per_op: dict[str, Counter[str]] = defaultdict(Counter)
    exports: Counter[str] = Counter()
    records = []
    show = set(a.show.split(","))
    t0 = time.time()
    for case in cases:
        status, why, exp = run_case(case, a.export, a.freeze)
        per_op[case.op_type][status] += 1
        if exp:
            exports[exp.split(":")[0]] += 1
        records.append({"name": case.name, "op_type": case.op_type, "status": status, "reason": why, "export": exp})
        if status.removesuffix("-frozen") in show or (exp and exp != "exported" and "export" in show):
            print(f"  {status:14s} {case.name}: {why or exp}"[:400])
    cols = ["pass", "wrong", "untranslatable", "error"]
    cols += [f"{c}-frozen" for c in cols] if a.freeze else []
    print(f"\n{'op type':32s} " + " ".join(f"{c[:4]}{'-f' if 'frozen' in c else ''}" for c in cols))
    for op in sorted(per_op, key=str.lower):
        print(f"{op:32s} " + " ".join(f"{per_op[op][c]:4d}{'  ' if 'frozen' in c else ''}" for c in cols))
    tot: Counter[str] = sum(per_op.values(), Counter())
    n = sum(tot.values())
    print(f"\ntotal {n}: " + ", ".join(f"{c} {tot[c]}" for c in cols) + f"  [{time.time() - t0:.0f}s]")
    print(
        f"pass {100 * tot['pass'] / max(n, 1):.1f}%; with frozen shape inputs "
        f"{100 * (tot['pass'] + tot['pass-frozen']) / max(n, 1):.1f}%"
    )
    if a.export:
        print(f"export of the passing cases: {dict(exports)}")
    if a.json:
        a.json.write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
