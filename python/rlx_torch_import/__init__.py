"""rlx-torch-import: PyTorch nn.Module -> RLX model, verified against PyTorch."""

from . import rlx_config
from .version import __version__

rlx_config.prepare_process()  # before the Rust core (and OpenBLAS with it) loads

# ruff: noqa: E402

from .api import build, from_onnx, from_torch, reverify
from .bundle.model import BundleModel, run_bundle
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
from .verify.report import ParityReport

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
