"""The conversion folder: its file names, the key scheme of reference.safetensors, and one loaded
`Conversion` that the stages pass along.

A conversion folder (`from_torch`'s `out_dir`, what `build`, `reverify` and `diagnose` take) holds

    torch-ir.json           the captured program (`torchir`)
    weights.safetensors     its weights and buffers, by state_dict key
    reference.safetensors   eager PyTorch's inputs and outputs (keys below)
    bundle/                 the RLX bundle (its own files: `emit/bundle.py`)
    report.json/.md/.html   the verification report (`report-<device>.*` from `reverify`)
    rlx-<name>/             the crate, with "crate" in `emit` (its folder is the Cargo package
                            name, `emit.crate.crate_names`)

reference.safetensors holds, per point verification runs at, `<prefix>input.<name>` and
`<prefix>output.<name>`: the prefix is "" for the example, `sweep.<i>.` for sweep point i of a
dynamic program (torch-ir `sweep`) and `set.<k>.` for extra input set k (torch-ir `input_sets`).
The generated crate reads the same keys (emit/crate_files/lib.rs, `tests/test_layout.py` holds
them equal).

This module imports nothing of the package at module level (every stage names these files and keys);
`Conversion` imports the readers and checks when it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .safetensors_io import RawTensor
    from .torchir import TorchIR

TORCH_IR = "torch-ir.json"
WEIGHTS = "weights.safetensors"
REFERENCE = "reference.safetensors"
BUNDLE = "bundle"
REPORT = "report"  # report.json, report.md, report.html
REPORT_SUFFIXES = (".json", ".md", ".html")

# reference.safetensors keys
INPUT = "input."
OUTPUT = "output."
SWEEP = "sweep."
SET = "set."
# Prefixes of the keys a reference file holds beside the example's inputs.
NOT_INPUTS = (OUTPUT, SWEEP, SET)


def report_stem(device: str | None = None) -> str:
    """`report` (a conversion's), or `report-<device>` (`reverify`'s on `device`)."""
    return REPORT if device is None else f"{REPORT}-{device}"


def sweep_prefix(i: int) -> str:
    """The key prefix of sweep point `i` (torch-ir `sweep[i]`)."""
    return f"{SWEEP}{i}."


def set_prefix(k: int) -> str:
    """The key prefix of extra input set `k` (torch-ir `input_sets[k]`)."""
    return f"{SET}{k}."


def input_key(name: str, prefix: str = "") -> str:
    """The reference key of input `name` at the point whose keys start `prefix`."""
    return f"{prefix}{INPUT}{name}"


def output_key(name: str, prefix: str = "") -> str:
    """The reference key of output `name` at the point whose keys start `prefix`."""
    return f"{prefix}{OUTPUT}{name}"


@dataclass
class Conversion:
    """One conversion folder's torch-ir, weights and reference, each file read and checked once, when
    first needed: `ir` on construction (`Conversion.load`), then `check_ops()`, `weights` (checked
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
        from . import torchir

        return cls(directory, torchir.load(directory))

    def path(self, name: str) -> Path:
        return self.directory / name

    def check_ops(self) -> None:
        """Each node against torch's schema and meta kernels (`verify.ir_check.check_ops`; TorchIRError)."""
        if not self._ops_checked:
            from .verify.ir_check import check_ops

            check_ops(self.ir)
            self._ops_checked = True

    @property
    def raw_weights(self) -> dict[str, RawTensor]:
        """weights.safetensors as read (`safetensors_io.read`), unchecked."""
        if self._raw_weights is None:
            from . import safetensors_io

            self._raw_weights = safetensors_io.read(self.path(WEIGHTS))
        return self._raw_weights

    @property
    def weights(self) -> dict[str, RawTensor]:
        """weights.safetensors checked against torch-ir (`torchir.check_weights`; BundleError)."""
        if not self._weights_checked:
            from . import torchir

            self.weight_notes = torchir.check_weights(self.ir, self.raw_weights, self.path(WEIGHTS))
            self._weights_checked = True
        return self.raw_weights

    @property
    def has_reference(self) -> bool:
        return self._reference is not None or self.path(REFERENCE).is_file()

    @property
    def reference(self) -> dict[str, RawTensor]:
        """reference.safetensors checked against torch-ir (`verify.parity.check_reference`; BundleError)."""
        if self._reference is None:
            from .verify.parity import check_reference

            self._reference = check_reference(self.ir, self.path(REFERENCE))
        return self._reference

    def check_reference(self) -> None:
        """Read reference.safetensors and check it against torch-ir now (`reference`)."""
        self.reference  # noqa: B018

    def feed(self, prefix: str = "") -> dict[str, Any]:
        """The inputs of the point whose reference keys start `prefix`, as numpy arrays by input name."""
        return {s.name: self.reference[input_key(s.name, prefix)].to_numpy() for s in self.ir.inputs}
