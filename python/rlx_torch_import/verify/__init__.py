"""Parity of RLX results against PyTorch's eager outputs."""

from .parity import Budget, OutputParity, ParityReport, budget_for, compare_output

__all__ = ["Budget", "OutputParity", "ParityReport", "budget_for", "compare_output"]
