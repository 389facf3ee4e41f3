"""The explicit list of op families (modules of `lower/ops/`); importing this module registers every lowering."""

from importlib import import_module
from types import ModuleType

NAMES = (
    "arithmetic",
    "attention",
    "backward",
    "complex",
    "conv",
    "convert",
    "creation",
    "data_sized",
    "embedding",
    "fft",
    "grid_sample",
    "image",
    "indexing",
    "linalg",
    "logical",
    "moe",
    "norm",
    "pool",
    "prims",
    "quantized",
    "random",
    "reduce",
    "rnn",
    "scalars",
    "shape",
    "unary",
    "upsample",
)

FAMILIES: tuple[ModuleType, ...] = tuple(import_module(f"{__package__}.ops.{name}") for name in NAMES)
