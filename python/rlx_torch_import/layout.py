"""The conversion folder: its file names and the key scheme of reference.safetensors (the folder's
contents, loaded once, are a `conversion.Conversion`).

A conversion folder (`from_torch`'s `out_dir`, what `build`, `reverify` and `diagnose` take) holds

    torch-ir.json           the captured program (`torchir`)
    weights.safetensors     its weights and buffers, by state_dict key
    reference.safetensors   eager PyTorch's inputs and outputs (keys below)
    bundle/                 the RLX bundle (its own files: `bundle/format.py`)
    report.json/.md/.html   the verification report (`report-<device>.*` from `reverify`)
    rlx-<name>/             the crate, with "crate" in `emit` (its folder is the Cargo package
                            name, `crate.rust_names.crate_names`)

reference.safetensors holds, per point verification runs at, `<prefix>input.<name>` and
`<prefix>output.<name>`: the prefix is "" for the example, `sweep.<i>.` for sweep point i of a
dynamic program (torch-ir `sweep`) and `set.<k>.` for extra input set k (torch-ir `input_sets`).
The generated crate reads the same keys (crate/templates/lib.rs, `tests/test_layout.py` holds
them equal).

This module imports nothing of the package: every stage names these files and keys, so it is a leaf of
the import graph (`tests/test_import_cycles.py`).
"""

from __future__ import annotations

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
