"""The probe harness: run one raw RLX op (or a tiny graph) and compare it with numpy.

Probes (`probes.py`) use these to show how RLX is wrong; `run_raw` also serves the CUDA probes
(`cuda_defects.py`). `NP`/`BOUNDARY` say how RLX dtypes map to numpy and which cross RLX's
graph boundary natively (constant evaluation, `lower/passes/constants.py`, reads them too).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ... import _core
from ...dtypes import HALF_DTYPES, RECORDS
from ...program import Program, Provenance, RlxNode, ValueDecl

# RLX serde dtype -> numpy dtype (bool and narrow integers cross the boundary as F32, see `run_raw`).
NP = {r.rlx: r.numpy for r in RECORDS.values() if r.name not in HALF_DTYPES}
BOUNDARY = frozenset(r.rlx for r in RECORDS.values() if r.carrier == r.rlx)


def run_raw(
    op: Any,
    inputs: Sequence[tuple[Any, str]],
    out_dims: Sequence[int],
    out_dtype: str,
    *,
    consts: bool = False,
    device: str = "cpu",
) -> np.ndarray:
    """Run one raw RLX op (rlx-ir serde form) on numpy inputs given as (array, RLX dtype).

    Bool/narrow-integer inputs and outputs cross the graph boundary as F32 with a Cast inside
    (RLX cannot pass them natively, see `boundary-narrow`). With `consts`, the inputs are
    Constant nodes instead of graph inputs (to reach constant folding). Returns the output in
    `out_dtype`'s numpy dtype, computed on RLX's `device`. Raises RuntimeError when RLX fails.
    """
    where = Provenance("probe", "probe")
    program = Program("probe")
    feed, names = [], []
    for i, (array, dtype) in enumerate(inputs):
        arr = np.asarray(array)
        carrier = dtype if dtype in BOUNDARY else "F32"
        data = np.ascontiguousarray(arr.astype(NP[carrier]))
        name = f"in{i}"
        if consts:
            node = RlxNode(name, {"Constant": {"data": list(data.tobytes())}}, (), arr.shape, carrier, where)
            program.nodes.append(node)
        else:
            program.inputs.append(ValueDecl(name, tuple(arr.shape), carrier))
            feed.append((name, data.reshape(-1).view(np.uint8), carrier))
        if carrier != dtype:
            program.nodes.append(RlxNode(f"c{i}", {"Cast": {"to": dtype}}, (name,), arr.shape, dtype, where))
            name = f"c{i}"
        names.append(name)
    program.nodes.append(RlxNode("op", op, tuple(names), tuple(out_dims), out_dtype, where))
    out, carrier = "op", out_dtype if out_dtype in BOUNDARY else "F32"
    if carrier != out_dtype:
        program.nodes.append(RlxNode("out", {"Cast": {"to": "F32"}}, ("op",), tuple(out_dims), "F32", where))
        out = "out"
    program.outputs.append(out)
    model = _core.CompiledModel(_core.program_to_hir_json(program.to_core_json()), device)
    ((raw, dtype, dims),) = model.run(feed)
    array = np.frombuffer(raw, dtype=NP[dtype])  # type: ignore[call-overload]  # numpy: Buffer on 3.12+ only
    return array.reshape(dims).astype(NP[out_dtype])


def differs(got: np.ndarray, want: np.ndarray) -> str | None:
    """None when equal (NaN positions included), else a short description."""
    want = np.asarray(want)
    if got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f"):
        return None
    return f"got {got.ravel()[:6].tolist()}, expected {want.ravel()[:6].tolist()}"


def first(*checks: Callable[[], str | None]) -> str | None:
    """The first wrong result among several raw-op checks."""
    for check in checks:
        found = check()
        if found:
            return found
    return None


def same(op: Any, inputs: Sequence[tuple[Any, str]], want: Any, out_dtype: str, *, consts: bool = False) -> str | None:
    """Run `op` and compare exactly with `want` (None when RLX is right)."""
    want = np.asarray(want)
    try:
        got = run_raw(op, inputs, want.shape, out_dtype, consts=consts)
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    return differs(got, want)


def relative(op: Any, x: np.ndarray, want: np.ndarray, limit: float) -> str | None:
    """Run a float32 activation; None when every result is within `limit` relative error of `want`."""
    try:
        got = run_raw(op, [(x, "F32")], x.shape, "F32")
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    worst = float(np.max(np.abs(got - want) / np.abs(want)))
    return None if worst < limit else f"relative error up to {worst:.2g} (got {got.tolist()}, expected {want.tolist()})"


def close(op: Any, inputs: Sequence[tuple[Any, str]], want: Any, out_dtype: str) -> str | None:
    """Like `same`, for results that are rounded differently (relative error 1e-9)."""
    want = np.asarray(want)
    try:
        got = run_raw(op, inputs, want.shape, out_dtype)
    except (RuntimeError, _core.CheckError) as e:  # CheckError: a kernel the core refuses (src/defects.rs)
        return f"RLX failed: {str(e).splitlines()[0][:160]}"
    if np.allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True):
        return None
    return f"got {got.ravel()[:6].tolist()}, expected {want.ravel()[:6].tolist()}"


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Discard what is written to file descriptor 2 (Rust's panic hook writes there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
