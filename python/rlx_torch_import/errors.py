"""One exception hierarchy; each error knows its CLI exit code and how to explain itself."""

from __future__ import annotations

from dataclasses import dataclass, field


class ExitCode:
    """Documented CLI exit codes (README "Exit codes")."""

    OK = 0
    PARITY_FAILED = 1
    BAD_INPUT = 2
    UNSUPPORTED = 3
    EXPORT_FAILED = 4
    INTERNAL = 5
    TIMED_OUT = 6
    DEVICE = 7
    WRITE_FAILED = 8
    RANDOM = 9


class RtiError(Exception):
    """Base of every error rlx-torch-import raises on purpose."""

    exit_code: int = ExitCode.INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def explain(self) -> str:
        """One paragraph for a person: what went wrong, then what to try."""
        return self.message if not self.hint else f"{self.message}\nhint: {self.hint}"


def describe(exc: BaseException) -> str:
    """`Type: message` of an exception, even one from the user's code whose `__str__` raises."""
    try:
        text = str(exc)
    except Exception:  # the user's exception class may fail to format itself
        text = "(its message could not be formatted)"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ModelLoadError(RtiError):
    """The model file could not be run, or did not provide a model and inputs."""

    exit_code = ExitCode.BAD_INPUT


class InputError(RtiError):
    """Arguments to the API/CLI are wrong (non-tensor inputs, bad option values, ...)."""

    exit_code = ExitCode.BAD_INPUT


class IndexRangeError(InputError, IndexError):
    """An input that feeds an index (an embedding's ids, a gather's or x[idx]'s indices) holds a value
    outside the range torch allows there (`bundle/ranges.py`): names the input, the position and value,
    the valid range and the op it indexes. Also an IndexError, as eager PyTorch raises."""

    exit_code = ExitCode.BAD_INPUT


class ExportError(RtiError):
    """torch.export failed; wraps torch's own message with a hint."""

    exit_code = ExitCode.EXPORT_FAILED


class TorchIRError(RtiError):
    """A torch-ir directory or file is malformed; names the file and field."""

    exit_code = ExitCode.BAD_INPUT


class BundleError(RtiError):
    """A bundle, safetensors file or set of inputs is missing, corrupt, or does not match its
    declarations (`meta.json`, `model.hir.json`, torch-ir); names the file, field and value."""

    exit_code = ExitCode.BAD_INPUT


class RlxError(BundleError):
    """RLX could not compile or run a graph that passed every check made before calling it: a
    defect in RLX or in rlx-torch-import (the core turns RLX panics into this, never a crash)."""

    exit_code = ExitCode.INTERNAL


class DeviceError(RtiError):
    """The device asked for (`device="cuda"`, `--device cuda`) is not in this build of the Rust
    core (built without its `cuda` feature) or not on this machine (no NVIDIA driver or GPU), or
    cannot run this program as the parity budgets need (on CUDA: float64 values, or integers
    float32 does not hold exactly); the message says which (`devices.py`, `src/device.rs`)."""

    exit_code = ExitCode.DEVICE


class WriteError(RtiError):
    """A file of the output could not be written: the file system is full, over quota, read-only
    or failing (an I/O error). Names the file (as it would have been called in the output) and the
    cause; nothing half-written is left: a conversion leaves no output folder (an earlier one stays
    as it was), a rewritten file keeps its earlier content (`outdir.replacing`)."""

    exit_code = ExitCode.WRITE_FAILED

    def __init__(self, path: str, cause: str, *, hint: str | None = None) -> None:
        super().__init__(f"cannot write {path}: {cause}", hint=hint)
        self.path = path
        self.cause = cause


class TimeLimitError(RtiError):
    """The model's own code (running the model file, torch.export, an eager PyTorch run) took longer
    than `--timeout` seconds (`timeout.user_code`); names the phase and the line it was running."""

    exit_code = ExitCode.TIMED_OUT


class DynamicShapeError(RtiError):
    """A model with dynamic dims whose RLX graph is not the same at every size (an op lowers to a
    constant or a structure that depends on a size): unsupported at dynamic sizes, named by node."""

    exit_code = ExitCode.UNSUPPORTED


class LoweringError(RtiError):
    """A registered lowering failed on a call it accepted: a bug, reported with the node."""

    exit_code = ExitCode.INTERNAL


@dataclass(frozen=True)
class Unsupported:
    """One thing the registry cannot lower: an op overload or one argument value."""

    target: str
    node: str
    module_path: str
    reason: str
    source: str = ""
    decomposed_from: str = ""

    def line(self) -> str:
        where = f"node {self.node}"
        if self.module_path:
            where += f" in {self.module_path}"
        if self.source:
            where += f" ({self.source})"
        if self.decomposed_from:
            where += f", decomposed from {self.decomposed_from}"
        return f"{self.target}: {self.reason} [{where}]"


@dataclass
class UnsupportedOpsError(RtiError):
    """Every unsupported op overload and argument value in a graph, all at once."""

    items: list[Unsupported] = field(default_factory=list)
    # The decomposition level the graph was exported at ("" when unknown). At `core` everything
    # is already Core ATen, so the hint does not suggest it again.
    decomposition: str = ""
    # A front end whose own importer decides what converts gives its hint here (the ONNX door's).
    frontend_hint: str = ""

    def __post_init__(self) -> None:
        targets = sorted({i.target for i in self.items})
        lines = "\n".join(f"  - {i.line()}" for i in self.items)
        if self.frontend_hint:
            hint = self.frontend_hint
        elif all(i.target.startswith(("<quantize", "quantized_decomposed.")) for i in self.items):
            # quantization schemes: neither decomposing nor a new lowering of an ATen op helps
            hint = "see README.md, 'Quantized models', for the schemes RLX runs"
        elif self.decomposition == "core" or all(i.target.startswith("<") for i in self.items):
            # already Core ATen, or only non-op gaps (a weight's dtype): decomposing cannot help
            hint = "see docs/adding-an-op.md to add a lowering"
        else:
            hint = (
                "try --decomposition core to decompose high-level ops into Core ATen, "
                "or see docs/adding-an-op.md to add a lowering"
            )
        super().__init__(
            f"{len(self.items)} unsupported op use(s) across {len(targets)} op(s) ({', '.join(targets)}):\n{lines}",
            hint=hint,
        )

    exit_code = ExitCode.UNSUPPORTED

    @property
    def targets(self) -> list[str]:
        """Distinct unsupported op overloads, sorted."""
        return sorted({i.target for i in self.items})
