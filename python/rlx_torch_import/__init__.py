"""rlx-torch-import: PyTorch nn.Module -> RLX model, verified against PyTorch.

The entry points load on first use (`__getattr__`): `import rlx_torch_import` costs the errors and the
process set-up only, so a program that only runs bundles (`BundleModel`) never loads the lowering registry,
and the CLI loads what its command needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import rlx_config
from .version import __version__

rlx_config.prepare_process()  # before the Rust core (and OpenBLAS with it) loads

# ruff: noqa: E402

from .errors import (
    BundleError,
    DeviceError,
    DynamicShapeError,
    ExitCode,
    ExportError,
    InputError,
    ModelLoadError,
    RlxError,
    RtiError,
    TimeLimitError,
    TorchIRError,
    UnsupportedOpsError,
    WriteError,
)

if TYPE_CHECKING:
    from .api import build, from_onnx, from_torch, reverify
    from .bundle.model import BundleModel, run_bundle
    from .verify.report import ParityReport

# Public name -> the module (relative to this package) that defines it, imported when first asked for.
_LAZY = {
    "build": "api",
    "from_onnx": "api",
    "from_torch": "api",
    "reverify": "api",
    "BundleModel": "bundle.model",
    "run_bundle": "bundle.model",
    "ParityReport": "verify.report",
}


def __getattr__(name: str) -> Any:
    """The entry point `name`, its module imported now (then kept as this package's attribute)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "BundleError",
    "BundleModel",
    "DeviceError",
    "DynamicShapeError",
    "ExitCode",
    "ExportError",
    "InputError",
    "ModelLoadError",
    "ParityReport",
    "RlxError",
    "RtiError",
    "TimeLimitError",
    "TorchIRError",
    "UnsupportedOpsError",
    "WriteError",
    "__version__",
    "build",
    "from_onnx",
    "from_torch",
    "reverify",
    "run_bundle",
]
