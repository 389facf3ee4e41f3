"""Per-output parity metrics and the pass budget by dtype.

A float output passes when shapes and dtypes match, NaN/±inf sit at the same
positions, cosine similarity of the finite values is at least `min_cosine`, and
every finite element is within `atol + rtol * max|reference|` (error scaled to
the output's magnitude). Integer and bool outputs must match exactly. An output
that is entirely NaN never passes.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Budget:
    """How far a result may be from PyTorch and still pass."""

    atol: float
    rtol: float
    min_cosine: float


_BUDGETS = {
    "float64": Budget(atol=1e-9, rtol=1e-7, min_cosine=0.9999999),
    "float32": Budget(atol=1e-4, rtol=1e-4, min_cosine=0.99999),
    "float16": Budget(atol=2e-3, rtol=2e-3, min_cosine=0.999),
    "bfloat16": Budget(atol=1.6e-2, rtol=1.6e-2, min_cosine=0.995),
}
# Integers and bool: every element equal. Cosine is reported but not judged (it is
# computed in float64 and can round below 1.0 for identical large integers).
EXACT = Budget(atol=0.0, rtol=0.0, min_cosine=-1.0)


def budget_for(dtype: str) -> Budget:
    """The pass budget for an output of this torch-ir dtype (exact for integers and bool)."""
    return _BUDGETS.get(dtype, EXACT)


@dataclass
class OutputParity:
    """Parity of one output against PyTorch."""

    name: str
    ok: bool
    shape: list[int]
    expected_shape: list[int]
    dtype: str
    expected_dtype: str
    count: int
    nonfinite_match: bool
    max_abs_error: float
    max_rel_error: float
    cosine: float
    allowed_abs_error: float
    reasons: list[str] = field(default_factory=list)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def compare_output(
    name: str, actual: np.ndarray, expected: np.ndarray, actual_dtype: str, expected_dtype: str
) -> OutputParity:
    """All metrics for one output; `ok` applies the dtype's budget."""
    budget = budget_for(expected_dtype)
    reasons: list[str] = []
    if actual_dtype != expected_dtype:
        reasons.append(f"dtype {actual_dtype} != {expected_dtype}")
    if tuple(actual.shape) != tuple(expected.shape):
        reasons.append(f"shape {list(actual.shape)} != {list(expected.shape)}")
        return OutputParity(
            name,
            False,
            list(actual.shape),
            list(expected.shape),
            actual_dtype,
            expected_dtype,
            int(actual.size),
            False,
            math.inf,
            math.inf,
            0.0,
            0.0,
            reasons,
        )
    a = actual.astype(np.float64).ravel()
    e = expected.astype(np.float64).ravel()
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    a_inf, e_inf = np.isinf(a), np.isinf(e)
    nonfinite_match = bool(
        np.array_equal(a_nan, e_nan) and np.array_equal(a_inf, e_inf) and np.array_equal(a[a_inf], e[e_inf])
    )
    if not nonfinite_match:
        reasons.append(
            f"NaN/inf positions differ (RLX {int(a_nan.sum())} NaN {int(a_inf.sum())} inf, "
            f"PyTorch {int(e_nan.sum())} NaN {int(e_inf.sum())} inf)"
        )
    if a.size and bool(a_nan.all()):
        reasons.append("output is entirely NaN")
    finite = np.isfinite(a) & np.isfinite(e)
    diff = np.abs(a[finite] - e[finite])
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(e[finite]).max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(e[finite]), 1e-12) if diff.size else diff
    max_rel = float(rel.max()) if diff.size else 0.0
    cosine = _cosine(a[finite], e[finite])
    allowed = budget.atol + budget.rtol * scale
    if max_abs > allowed:
        reasons.append(f"max abs error {max_abs:.3g} > allowed {allowed:.3g}")
    if cosine < budget.min_cosine:
        reasons.append(f"cosine {cosine:.8f} < {budget.min_cosine}")
    return OutputParity(
        name,
        not reasons,
        list(actual.shape),
        list(expected.shape),
        actual_dtype,
        expected_dtype,
        int(a.size),
        nonfinite_match,
        max_abs,
        max_rel,
        cosine,
        allowed,
        reasons,
    )


@dataclass
class ParityReport:
    """Result of one conversion: `ok` is True only when every output passed (or verify was off)."""

    name: str
    ok: bool
    verified: bool
    out_dir: str
    outputs: list[OutputParity] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)
    op_histogram: dict[str, int] = field(default_factory=dict)
    aten_histogram: dict[str, int] = field(default_factory=dict)
    decomposition: str = "high"
    auto_decomposed_ops: list[str] = field(default_factory=list)
    rlx_version: str = ""
    torch_version: str = ""

    def to_json(self) -> str:
        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return str(x)
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x

        return json.dumps(clean(asdict(self)), indent=1, allow_nan=False) + "\n"

    def summary(self) -> str:
        """A few lines for a terminal."""
        head = "PASS" if self.ok else "FAIL"
        if not self.verified:
            head = "NOT VERIFIED"
        lines = [f"{head} {self.name} ({self.decomposition}) -> {self.out_dir}"]
        if self.auto_decomposed_ops:
            lines.append(f"  auto-decomposed: {', '.join(self.auto_decomposed_ops)}")
        for o in self.outputs:
            mark = "ok " if o.ok else "BAD"
            lines.append(
                f"  {mark} {o.name} {o.dtype}{o.shape}: max_abs={o.max_abs_error:.3g} "
                f"max_rel={o.max_rel_error:.3g} cosine={o.cosine:.8f}"
                + ("" if o.ok else "  <- " + "; ".join(o.reasons))
            )
        return "\n".join(lines)

    def markdown(self) -> str:
        rows = "\n".join(
            f"| {o.name} | {'pass' if o.ok else 'FAIL'} | {o.dtype} {o.shape} | {o.max_abs_error:.3g} | "
            f"{o.allowed_abs_error:.3g} | {o.max_rel_error:.3g} | {o.cosine:.8f} | {'; '.join(o.reasons)} |"
            for o in self.outputs
        )
        return (
            f"# Parity report: {self.name}\n\n"
            f"Verdict: **{'PASS' if self.ok else 'FAIL' if self.verified else 'not verified'}** "
            f"(decomposition `{self.decomposition}`, torch {self.torch_version}, RLX {self.rlx_version})\n\n"
            + (f"Auto-decomposed: {', '.join(self.auto_decomposed_ops)}\n\n" if self.auto_decomposed_ops else "")
            + "| output | verdict | dtype shape | max abs | allowed abs | max rel | cosine | reasons |\n"
            "|---|---|---|---|---|---|---|---|\n" + rows + "\n"
        )
