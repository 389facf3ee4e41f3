"""aten -> RLX lowering: one module per op family, one decorated function per op."""

from . import families
from .registry import REGISTRY, lower, try_lower

__all__ = ["REGISTRY", "families", "lower", "try_lower"]
