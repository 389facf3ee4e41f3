"""The explicit list of op families; importing this module registers every lowering."""

from importlib import import_module
from types import ModuleType

NAMES = (
    "attention",
    "backward",
    "conv",
    "convert",
    "creation",
    "elementwise",
    "embedding",
    "image",
    "indexing",
    "linalg",
    "moe",
    "norm",
    "pool",
    "prims",
    "reduce",
    "rnn",
    "scalars",
    "shape",
)

FAMILIES: tuple[ModuleType, ...] = tuple(import_module(f"{__package__}.{name}") for name in NAMES)
