"""rlx-torch-import: PyTorch nn.Module -> RLX model, verified against PyTorch."""

__version__ = "0.1.0"

from .api import build, from_torch  # noqa: E402
from .errors import (  # noqa: E402
    BundleError,
    ExitCode,
    ExportError,
    InputError,
    ModelLoadError,
    RtiError,
    TorchIRError,
    UnsupportedOpsError,
)
from .runtime import BundleModel, run_bundle  # noqa: E402
from .verify.parity import ParityReport  # noqa: E402

__all__ = [
    "BundleError",
    "BundleModel",
    "ExitCode",
    "ExportError",
    "InputError",
    "ModelLoadError",
    "ParityReport",
    "RtiError",
    "TorchIRError",
    "UnsupportedOpsError",
    "__version__",
    "build",
    "from_torch",
    "run_bundle",
]
