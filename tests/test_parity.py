"""Parity metrics and budgets, on hand-made arrays (no model needed)."""

from __future__ import annotations

import numpy as np

from rlx_torch_import.verify import budget_for, compare_output


def test_close_float_passes_and_reports_metrics() -> None:
    ref = np.linspace(-2, 2, 100, dtype=np.float32).reshape(10, 10)
    got = ref + np.float32(1e-6)
    p = compare_output("y", got, ref, "float32", "float32")
    assert p.ok and p.count == 100 and p.nonfinite_match
    assert 0 < p.max_abs_error < 2e-6 and p.cosine > 0.999999


def test_error_over_budget_fails_with_reason() -> None:
    ref = np.ones(8, dtype=np.float32)
    got = ref.copy()
    got[3] += 1e-2
    p = compare_output("y", got, ref, "float32", "float32")
    assert not p.ok and any("max abs error" in r for r in p.reasons)


def test_budget_scales_with_magnitude() -> None:
    ref = np.full(4, 1e4, dtype=np.float32)
    got = ref + np.float32(0.5)  # 5e-5 relative: fine at this magnitude
    assert compare_output("y", got, ref, "float32", "float32").ok


def test_all_nan_never_passes_even_when_reference_is_nan() -> None:
    nan = np.full(5, np.nan, dtype=np.float32)
    p = compare_output("y", nan, nan.copy(), "float32", "float32")
    assert not p.ok and "output is entirely NaN" in p.reasons


def test_nan_and_inf_positions_must_match() -> None:
    ref = np.array([1.0, np.inf, np.nan, -np.inf], dtype=np.float32)
    assert compare_output("y", ref.copy(), ref, "float32", "float32").ok
    moved = np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    assert not compare_output("y", moved, ref, "float32", "float32").ok
    flipped = np.array([1.0, -np.inf, np.nan, -np.inf], dtype=np.float32)
    assert not compare_output("y", flipped, ref, "float32", "float32").ok


def test_shape_and_dtype_mismatch_fail() -> None:
    ref = np.zeros((2, 3), dtype=np.float32)
    assert not compare_output("y", np.zeros((3, 2), np.float32), ref, "float32", "float32").ok
    p = compare_output("y", ref.copy(), ref, "float16", "float32")
    assert not p.ok and "dtype float16 != float32" in p.reasons


def test_integers_must_be_exact() -> None:
    assert budget_for("int64").atol == 0.0
    ref = np.arange(6, dtype=np.int64)
    assert compare_output("i", ref.copy(), ref, "int64", "int64").ok
    off = ref.copy()
    off[2] += 1
    assert not compare_output("i", off, ref, "int64", "int64").ok


def test_budget_by_dtype_is_never_zero_for_floats() -> None:
    for dtype in ("float64", "float32", "float16", "bfloat16"):
        b = budget_for(dtype)
        assert b.atol > 0 and b.rtol > 0 and b.min_cosine < 1
