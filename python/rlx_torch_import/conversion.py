"""One conversion folder loaded: its torch-ir, weights and reference, each file read and checked once,
passed along the stages (`api.build`, `verify.run`, `verify.nodes`, `verify.diagnose`). The folder's
names and key scheme are `layout`'s. A low record every stage may use: it imports torch-ir and the
leaves only, no stage (the op check takes the lowering registry's targets from its caller)."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import safetensors_io, torchir
from .layout import REFERENCE, WEIGHTS, input_key
from .safetensors_io import RawTensor
from .torchir import TorchIR


@dataclass
class Conversion:
    """One conversion folder's torch-ir, weights and reference, each file read and checked once, when
    first needed: `ir` on construction (`Conversion.load`), then `check_ops(...)`, `weights` (checked
    against torch-ir, its notes in `weight_notes`), `raw_weights` (read only) and `reference`
    (checked against torch-ir). A check that fails raises as the stage that needs it always has
    (TorchIRError, BundleError), and is tried again by the next stage that asks."""

    directory: Path
    ir: TorchIR
    weight_notes: list[str] = field(default_factory=list)
    _ops_checked: bool = False
    _raw_weights: dict[str, RawTensor] | None = None
    _weights_checked: bool = False
    _reference: dict[str, RawTensor] | None = None

    @classmethod
    def load(cls, directory: Path) -> Conversion:
        """Read torch-ir.json of the conversion in `directory` (`torchir.load`)."""
        return cls(directory, torchir.load(directory))

    def path(self, name: str) -> Path:
        return self.directory / name

    def mark_ops_checked(self) -> None:
        """Record that the nodes need no `check_ops`: torch.export made them in this process, so their
        shapes and dtypes are its meta kernels' own (`backend.lower_write_verify(captured=True)`)."""
        self._ops_checked = True

    def check_ops(self, lowerable: Container[str]) -> None:
        """Each node whose target is in `lowerable` (the lowering registry's targets, `lower.REGISTRY`) against
        torch's schema and meta kernels (`torchir.check_ops`; TorchIRError), once."""
        if not self._ops_checked:
            torchir.check_ops(self.ir, lowerable)
            self._ops_checked = True

    @property
    def raw_weights(self) -> dict[str, RawTensor]:
        """weights.safetensors as read (`safetensors_io.read`), unchecked."""
        if self._raw_weights is None:
            self._raw_weights = safetensors_io.read(self.path(WEIGHTS))
        return self._raw_weights

    @property
    def weights(self) -> dict[str, RawTensor]:
        """weights.safetensors checked against torch-ir (`torchir.check_weights`; BundleError)."""
        if not self._weights_checked:
            self.weight_notes = torchir.check_weights(self.ir, self.raw_weights, self.path(WEIGHTS))
            self._weights_checked = True
        return self.raw_weights

    @property
    def has_reference(self) -> bool:
        return self._reference is not None or self.path(REFERENCE).is_file()

    @property
    def reference(self) -> dict[str, RawTensor]:
        """reference.safetensors checked against torch-ir (`torchir.check_reference`; BundleError)."""
        if self._reference is None:
            self._reference = torchir.check_reference(self.ir, self.path(REFERENCE))
        return self._reference

    def check_reference(self) -> None:
        """Read reference.safetensors and check it against torch-ir now (`reference`)."""
        self.reference  # noqa: B018

    def feed(self, prefix: str = "") -> dict[str, Any]:
        """The inputs of the point whose reference keys start `prefix`, as numpy arrays by input name."""
        return {s.name: self.reference[input_key(s.name, prefix)].to_numpy() for s in self.ir.inputs}
