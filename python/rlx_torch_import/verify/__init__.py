"""Parity of RLX results against PyTorch's eager outputs."""

from .parity import Budget, OutputParity, ParityReport, budget_for, compare_output, float_budgets, is_exact

__all__ = ["Budget", "OutputParity", "ParityReport", "budget_for", "compare_output", "float_budgets", "is_exact"]
