"""The command line's shared arguments (device, threads, verify, per-node, emit) and the exit codes its
epilogs list (README "Exit codes"); the commands themselves are `cli.py`'s."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

EXIT_CODES = (
    "exit codes: 0 ok, 1 parity failed, 2 bad input, 3 unsupported ops, 4 torch.export failed, "
    "5 internal error, 6 timed out (--timeout), 7 device missing or unable to run the model (--device), "
    "8 an output file could not be written (disk full, quota, read-only, I/O error), 9 random: only outputs "
    "that depend on random draws differ"
)
_DEVICE_EXIT = "7 device missing or unable to run the bundle (--device)"
_WRITES_EXIT = _DEVICE_EXIT + ", 8 an output file could not be written"
_RANDOM_EXIT = ", 9 random: only outputs that depend on random draws differ"
BUILD_EXIT_CODES = (
    "exit codes: 0 ok, 1 parity failed, 2 bad input, 3 unsupported ops, 5 internal error, "
    + _WRITES_EXIT
    + _RANDOM_EXIT
)
VERIFY_EXIT_CODES = (
    "exit codes: 0 every output passed, 1 parity failed, 2 bad input, 5 internal error, " + _WRITES_EXIT + _RANDOM_EXIT
)
RUN_EXIT_CODES = "exit codes: 0 ran, 2 bad input (bundle, inputs file, sizes), 5 internal error, " + _WRITES_EXIT
DEFECTS_EXIT_CODES = "exit codes: 0 every defect is still there, 1 one is gone (its workaround can go), " + _DEVICE_EXIT


def add_device_arg(p: argparse.ArgumentParser, what: str = "verifies the bundle on") -> None:
    from .devices import DEVICES

    p.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help=f"the RLX device it {what}: cpu, or cuda (RLX's CUDA backend, strict float32; needs the core "
        "built with CUDA and an NVIDIA GPU, else exit 7 naming which is missing) (default: cpu)",
    )


def add_quantize_args(p: argparse.ArgumentParser) -> None:
    """`--quantize {int8,int4}` and `--quantize-block N` (`api.from_torch`'s `quantize`, `quantize_block`)."""
    p.add_argument(
        "--quantize",
        metavar="SCHEME",
        help="weight-only quantization of a float model, SCHEME int8 or int4 (another exits 3 naming it): every "
        "float32 nn.Linear weight whose in_features is a multiple of 32 is stored packed in the bundle (int8: RLX "
        "GgufQ8_0, about 0.27x the float bytes; int4: GgufQ4_0, about 0.14x) and runs on RLX's DequantMatMul; "
        "nn.Embedding tables in the same blocks, gathered as packed codes. Verified against eager PyTorch on the "
        "dequantized weights; the report adds the accuracy cost against the float model",
    )
    p.add_argument(
        "--quantize-block",
        type=int,
        default=32,
        metavar="N",
        help="elements per quantization block (default and only size RLX's GGUF layouts have: 32; another "
        "exits 3 naming the scheme)",
    )


def model_name(text: str) -> str:
    """`--name`'s value: any text whose bytes are UTF-8 (under a non-UTF-8 locale Python decodes
    argv with surrogate escapes: the bytes are read as UTF-8 again; bytes that are not UTF-8 would
    be lone surrogates, which no output file can hold). Made safe where it is used: the crate
    folder and Rust names are derived from it (crate/rust_names.py). Raises
    ArgumentTypeError (exit 2 with usage) for bytes that are not UTF-8 or a blank name."""
    try:
        text = os.fsencode(text).decode("utf-8")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid UTF-8") from None
    if not text.strip():
        raise argparse.ArgumentTypeError("the model name is empty")
    return text


def seconds(text: str) -> float:
    """`--timeout`'s value: a finite number of seconds above 0, else ArgumentTypeError (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text!r}")
    return value


def version() -> str:
    from . import _core
    from .version import __version__

    return f"rlx-torch-import {__version__} (RLX {_core.rlx_version()})"


EMIT_CHOICES = ("bundle", "crate")


def emit_list(text: str) -> list[str]:
    """`--emit bundle,crate` (comma-separated; the flag may also repeat): each name checked."""
    names = [t.strip() for t in text.split(",")]
    for name in names:
        if name not in EMIT_CHOICES:
            raise argparse.ArgumentTypeError(
                f"invalid choice: {name!r} (choose from {', '.join(map(repr, EMIT_CHOICES))}; "
                "separate several with commas)"
            )
    return names


def emits(args: argparse.Namespace) -> tuple[str, ...]:
    """The --emit values, flattened and deduplicated in order (default: bundle)."""
    found = [name for group in (args.emit or [["bundle"]]) for name in group]
    return tuple(dict.fromkeys(found))


def add_verify_args(p: argparse.ArgumentParser, against: str = "PyTorch") -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--verify",
        dest="verify",
        action="store_true",
        default=True,
        help=f"check parity against {against} (the default; this is its explicit form)",
    )
    group.add_argument(
        "--no-verify", dest="verify", action="store_false", help=f"skip the parity check against {against}"
    )
    add_per_node_arg(p, against)


def add_per_node_arg(p: argparse.ArgumentParser, against: str = "PyTorch") -> None:
    """`--per-node` / `--no-per-node`; without either, per-node parity's default ("auto": when verification
    fails, or the graph's values are small; `verify.run.AUTO_ELEMENTS`)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--per-node",
        dest="per_node",
        action="store_const",
        const=True,
        default="auto",
        help=f"always run per-node parity (each node's value against {against}'s, cumulative and reference-fed; "
        "the report's per-node table and first divergence). Default: it runs when verification fails, and on a "
        "passing conversion only while the graph's values hold at most 1M elements (the report notes when it "
        "did not run)",
    )
    group.add_argument(
        "--no-per-node",
        dest="per_node",
        action="store_const",
        const=False,
        help="never run per-node parity",
    )


def add_threads_arg(p: argparse.ArgumentParser, what: str = "verification") -> None:
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help=f"threads RLX runs {what} on (default: every core available to the process; RLX_WORKERS sets the same)",
    )


def add_emit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--emit",
        action="append",
        type=emit_list,
        metavar="{bundle,crate}[,...]",
        help="what to write: bundle (always written) and/or crate, a Rust crate rlx-<name>/; comma-separated "
        "(--emit bundle,crate) or repeated (--emit bundle --emit crate) (default: bundle)",
    )
    p.add_argument(
        "--emit-style",
        choices=["graph", "tensor", "flow"],
        default="graph",
        help="how the crate builds the graph: graph (HIR builder, every op), tensor (rlx_tensor DSL, "
        "refuses ops it lacks), flow (rlx_flow ModelFlow) (default: graph)",
    )


def read_inputs_file(given: str | None) -> dict[str, Any]:
    """The tensors of `run --inputs FILE` (.safetensors or .npz) by key, as numpy arrays; {} without
    the option (a bundle that takes no inputs). Raises InputError / BundleError naming the file."""
    import numpy as np

    from . import safetensors_io
    from .errors import BundleError, InputError, describe

    if given is None:
        return {}
    path = Path(given)
    if not path.is_file():
        raise InputError(f"--inputs {path}: {'not a regular file' if path.exists() else 'no such file'}")
    if path.suffix == ".npz":
        import zipfile

        if not zipfile.is_zipfile(path):
            raise BundleError(f"--inputs {path}: not a .npz file (an .npz is a zip archive of .npy arrays)")
        try:
            with np.load(path, allow_pickle=False) as found:
                tensors = {k: found[k] for k in found.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            raise BundleError(f"--inputs {path}: not a readable .npz file ({describe(e)})") from None
    elif path.suffix == ".safetensors":
        tensors = {k: t.to_numpy() for k, t in safetensors_io.read(path).items()}
    else:
        raise InputError(f"--inputs {path}: expected a .safetensors or .npz file")
    return tensors
