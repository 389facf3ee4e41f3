"""aten -> RLX lowering: one module per op family, one decorated function per op."""

from . import families
from .registry import REGISTRY, find_unsupported, lower

__all__ = ["REGISTRY", "families", "find_unsupported", "lower"]
