"""`rlx-torch-import onnx MODEL.onnx -o OUT ...`: the ONNX front end's command (`api.from_onnx`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...cli_args import add_device_arg, add_emit_args, add_threads_arg, add_verify_args, emits, model_name

if TYPE_CHECKING:
    from ...verify.report import ParityReport

ONNX_EXIT_CODES = (
    "exit codes: 0 ok, 1 parity failed (against ONNX Runtime), 2 bad input (file, inputs, a symbolic dim "
    "without a size), 3 unsupported ops or dtypes (all listed), 5 internal error, 7 device missing or unable "
    "to run the bundle (--device), 8 an output file could not be written"
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlx-torch-import onnx",
        description="Convert an ONNX file into an RLX bundle (through RLX's own importer) and verify it "
        "against ONNX Runtime (CPU, graph optimizations off).",
        epilog=ONNX_EXIT_CODES,
    )
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX file (external data files beside it are read)")
    p.add_argument("-o", "--out", required=True, metavar="OUT", help="output directory (replaced when it exists)")
    p.add_argument(
        "--inputs",
        metavar="FILE",
        help="inputs to verify on, a .safetensors or .npz file keyed by input name "
        "(default: random values of each input's dtype and shape)",
    )
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="a size for a symbolic input dim, by its name or as INPUT:AXIS=SIZE (an unnamed dim, shown as ?); "
        "repeat for each; not needed for dims --inputs sizes",
    )
    p.add_argument("--name", type=model_name, help="model name (default: the file's stem)")
    p.add_argument(
        "--route",
        choices=["auto", "importer", "torch"],
        default="auto",
        help="importer: RLX's ONNX importer only; torch: the ONNX graph as a torch module through the PyTorch "
        "path only; auto: the importer, else (gaps, failed parity) the torch route (default: auto)",
    )
    add_verify_args(p, against="ONNX Runtime")
    add_emit_args(p)
    add_device_arg(p)
    add_threads_arg(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def convert(argv: Sequence[str]) -> ParityReport:
    """Parse `argv` (after `onnx`) and run `api.from_onnx`."""
    from ... import api

    args = parser().parse_args(argv)
    return api.from_onnx(
        args.model,
        args.out,
        inputs=args.inputs,
        dims=args.dim,
        verify=args.verify,
        per_node=args.per_node,
        emit=emits(args),
        emit_style=args.emit_style,
        name=args.name,
        device=args.device,
        progress=not args.quiet,
        threads=args.threads,
        route=args.route,
    )
