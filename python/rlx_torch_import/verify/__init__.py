"""Parity of RLX results against PyTorch's eager outputs."""

from .budgets import Budget, budget_for, float_budgets, is_exact
from .compare import OutputParity, compare_output
from .report import ParityReport

__all__ = ["Budget", "OutputParity", "ParityReport", "budget_for", "compare_output", "float_budgets", "is_exact"]
