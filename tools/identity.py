"""Byte-identity check for refactors: convert a fixed set of test models and record the SHA-256 of every
file written except the reports (which hold timings).

    python tools/identity.py --write base.json   # at the commit before the change
    python tools/identity.py --check base.json   # after it: exit 1 naming every file that differs
    python tools/identity.py --check base.json --keep DIR   # and keep the conversions under DIR/out/<case>

The cases (`cases()`): PyTorch models from tests/models.py (a bundle, and a crate in each style; dtypes,
nested inputs, a dynamic batch); an ONNX file (tests/onnx_models.py's torch-exported ConvAndMlp) through
each `from_onnx` route: "importer" (with a crate), "torch", and "auto" on a Gather graph whose example
holds negative ids, which the importer route refuses and the torch route takes (the case checks that the
fallback happened); a PT2E-quantized MLP (torchao's prepare_pt2e / convert_pt2e, XNNPACK quantizer); a
weight-only int8 MLP (`quantize="int8"`, one Linear kept float); and a tiny random-weight Llama as a
decode step with a KV cache (`decode.hf_export.hf_decode_step`, dynamic seq and cache lengths). Every model is
built here, seeded, in the run's temporary folder; no download.

Normalization, the only one: torch-ir.json is compared as JSON, not as bytes: its top-level "version" is
left out, and its top-level "decomposition" is compared as torch-ir version 4 means it: "onnx" (what
versions up to 3 wrote for an ONNX importer conversion, which holds its boundary only) as "" (version 4's
boundary only; docs/design.md (bc)); then it is hashed as `json.dumps(doc, sort_keys=True)`. Every other
file must match byte for byte, the copies included, except that provenance naming a module of the package
that moved and runs inside traced graphs (`MOVED`: the decode step's wrapper, `hf_decode.py` ->
`decode/hf_export.py`) reads the new name as the old:
bundle/meta.json holds torch-ir's decomposition and producer (its own "version" is the bundle format's),
and a crate's src/lib.rs and src/graph.rs name the decomposition in their header comment.

The ONNX files are passed by a path relative to the temporary folder (the tool runs there), since
torch-ir's and meta.json's `producer["source"]` record the path as given. The models are seeded, so two
runs of one commit give the same digests (tests/test_determinism.py holds that property)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

REPORTS = {"report.json", "report.md", "report.html"}
TORCH_IR = "torch-ir.json"
NORMALIZATION = (
    f"{TORCH_IR}: compared as JSON (sort_keys) without its top-level 'version', its 'decomposition' \"onnx\" "
    '(versions up to 3) read as "" (version 4: boundary only); every other file byte for byte (moved modules '
    "named in provenance read by their old names: MOVED); reports left out"
)
ONNX_DIR = Path("onnx")  # the ONNX files, relative to the run's folder (the tool's working directory)


# The package's own modules that moved (issue 40) and whose code runs inside traced graphs, so provenance
# (torch-ir's and meta.json's `module_type` and `source`) names them: the new name read as the old one.
MOVED = {
    b"rlx_torch_import.decode.hf_export.": b"rlx_torch_import.hf_decode.",
    b'"hf_export.py:': b'"hf_decode.py:',
}


def moved_read_as_before(data: bytes) -> bytes:
    """`data` with `MOVED`'s new module names read as the old ones (a no-op on the files from before)."""
    for new, old in MOVED.items():
        data = data.replace(new, old)
    return data


def torch_ir_digest(data: bytes) -> tuple[str, list[str]]:
    """SHA-256 of torch-ir.json normalized (module docstring) and the keys left out."""
    doc = json.loads(moved_read_as_before(data))
    dropped = []
    if "version" in doc:
        dropped.append(f"version ({doc.pop('version')!r})")
    if doc.get("decomposition") == "onnx":
        doc["decomposition"] = ""
        dropped.append("decomposition 'onnx' read as ''")
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest(), dropped


def digests(root: Path) -> tuple[dict[str, str], list[str]]:
    """SHA-256 of every file under `root` by relative path, the reports left out (torch-ir.json
    normalized), and what the normalization left out of each torch-ir.json."""
    found: dict[str, str] = {}
    dropped: list[str] = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name in REPORTS:
            continue
        rel = p.relative_to(root).as_posix()
        if p.name == TORCH_IR:
            found[rel], keys = torch_ir_digest(p.read_bytes())
            dropped.append(f"{rel} without {', '.join(keys)}")
        else:
            found[rel] = hashlib.sha256(moved_read_as_before(p.read_bytes())).hexdigest()
    return found, dropped


# A case: (name, convert) where convert(out_dir) writes the conversion into out_dir.
Case = tuple[str, Callable[[Path], Any]]


def _from_torch(make: Callable[[], tuple[Any, tuple[Any, ...]]], **kwargs: Any) -> Callable[[Path], Any]:
    """A case converting the model and example inputs `make()` builds (seeded) with `kwargs`."""

    def convert(out: Path) -> Any:
        import rlx_torch_import as rti

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers' and torchao's deprecation warnings
            model, inputs = make()
            return rti.from_torch(model, inputs, out, per_node=False, **kwargs)

    return convert


def _torch_cases() -> list[Case]:
    """The PyTorch models of tests/models.py: a crate in each style, dtypes, nested inputs, a dynamic batch."""
    import torch
    from torch.export import Dim

    make = import_module("models").make  # tests/models.py

    found: list[Case] = []
    for model_name, style in (("mlp", "graph"), ("cnn", "tensor"), ("transformer_block", "flow")):
        found.append((f"{model_name}-{style}", _from_torch(partial(make, model_name), emit="crate", emit_style=style)))
    for model_name in ("dtype_zoo", "nested_io"):
        found.append((model_name, _from_torch(partial(make, model_name))))

    def mlp_batch() -> tuple[Any, tuple[Any, ...]]:
        model, _ = make("mlp")
        return model, (torch.randn(6, 32),)

    dims = ({0: Dim("batch", min=1, max=64)},)
    found.append(("mlp-dynamic", _from_torch(mlp_batch, dynamic_shapes=dims, emit="crate")))
    return found


def _onnx_pair() -> Path:
    """tests/onnx_models.py's ConvAndMlp (seeded, TorchScript exporter), written once."""
    path = ONNX_DIR / "pair.onnx"
    if not path.is_file():
        ONNX_DIR.mkdir(exist_ok=True)
        import_module("onnx_models").export_conv_and_mlp(path)  # tests/onnx_models.py
    return path


def _negative_gather() -> tuple[Path, dict[str, Any]]:
    """Gather rows of a [10, 4] table by ids int64[3] (tests/test_index_ranges.py) and an example holding
    negative ids: the importer's bundle cannot serve them (IndexRangeError), the torch route wraps them as
    ONNX Runtime does, so the "auto" route falls back."""
    import numpy as np

    ONNX_DIR.mkdir(exist_ok=True)
    path = import_module("onnx_models").save_gather(ONNX_DIR / "gather.onnx")  # tests/onnx_models.py
    return path, {"ids": np.array([1, -1, -10], np.int64)}


def _onnx_cases() -> list[Case]:
    import rlx_torch_import as rti

    def importer(out: Path) -> Any:
        return rti.from_onnx(_onnx_pair(), out, route="importer", emit="crate", per_node=False)

    def torch_route(out: Path) -> Any:
        return rti.from_onnx(_onnx_pair(), out, route="torch", per_node=False)

    def fallback(out: Path) -> Any:
        path, inputs = _negative_gather()
        report = rti.from_onnx(path, out, inputs=inputs, route="auto", per_node=False)
        if not any("torch route" in n for n in report.notes):
            raise SystemExit(f"onnx-auto-fallback: the auto route no longer falls back: {report.notes}")
        return report

    return [("onnx-importer", importer), ("onnx-torch", torch_route), ("onnx-auto-fallback", fallback)]


def _pt2e_mlp() -> tuple[Any, tuple[Any, ...]]:
    """An MLP through the PT2E flow as tests/test_quantized_pt2e.py runs it: export, prepare with the
    XNNPACK quantizer (static, per-channel), calibrate on four seeded batches, convert."""
    import torch
    from torch import nn

    pt2e = import_module("torchao.quantization.pt2e.quantize_pt2e")
    xnnpack = import_module("torchao.testing.pt2e._xnnpack_quantizer")  # tests/test_quantized_pt2e.py's

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10)).eval()
    x = torch.randn(4, 16)
    torch.manual_seed(1)
    exported = torch.export.export(model, (x,)).module()
    quantizer = xnnpack.XNNPACKQuantizer().set_global(xnnpack.get_symmetric_quantization_config(is_per_channel=True))
    prepared = pt2e.prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for _ in range(4):
            prepared(x + 0.1 * torch.randn_like(x))
    return pt2e.convert_pt2e(prepared), (x,)


def _int8_mlp() -> tuple[Any, tuple[Any, ...]]:
    """Three Linears (tests/test_quantize_weights.py): two packed, the last kept float (in_features 10)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 10), nn.ReLU(), nn.Linear(10, 3)).eval()
    return model, (torch.randn(2, 5, 64),)


def _decode_step(out: Path) -> Any:
    """A tiny random-weight Llama (tests/test_generate.py's) as a decode step (`hf_decode_step`), exported
    with `hf_decode_inputs`'s seeded example and dynamic seq (1..16) and cache (0..64) lengths."""
    import rlx_torch_import as rti
    from rlx_torch_import.decode.hf_export import hf_decode_inputs, hf_decode_step

    llama = import_module("test_generate").tiny_llama()  # tests/test_generate.py's, seeded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args, dims = hf_decode_inputs(llama.config, max_seq=16, max_cache=64)
        return rti.from_torch(hf_decode_step(llama), args, out, dynamic_shapes=dims, per_node=False)


def cases() -> list[Case]:
    """(case name, convert(out_dir)) for each conversion compared."""
    return [
        *_torch_cases(),
        *_onnx_cases(),
        ("pt2e-int8", _from_torch(_pt2e_mlp)),
        ("weight-int8", _from_torch(_int8_mlp, quantize="int8", emit="crate")),
        ("decode-step", _decode_step),
    ]


def collect(keep: Path | None = None) -> dict[str, dict[str, str]]:
    """Each case's digests; the conversions are written under `keep` (kept) or a temporary folder."""
    print(f"normalization: {NORMALIZATION}", file=sys.stderr)
    out: dict[str, dict[str, str]] = {}
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) if keep is None else keep.resolve()
        root.mkdir(parents=True, exist_ok=True)
        os.chdir(root)  # the ONNX files' paths, relative to it, are recorded as given (module docstring)
        try:
            for name, convert in cases():
                start = time.perf_counter()
                target = root / "out" / name
                report = convert(target)
                out[name], dropped = digests(target)
                took = time.perf_counter() - start
                left_out = f"; {', '.join(dropped)}" if dropped else ""
                failed = "" if report.ok else " (its verification FAILED: see its report)"
                print(f"{name}: {len(out[name])} files, {took:.1f} s{left_out}{failed}", file=sys.stderr)
        finally:
            os.chdir(here)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="record the digests in this JSON file")
    mode.add_argument("--check", type=Path, help="compare with the digests recorded in this JSON file")
    parser.add_argument("--keep", type=Path, help="write the conversions under this folder (kept) to inspect them")
    args = parser.parse_args()
    path = (args.write or args.check).resolve()  # before collect() changes the working directory
    found = collect(args.keep)
    if args.write:
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"wrote {sum(map(len, found.values()))} digests to {path}")
        return 0
    base = json.loads(path.read_text())
    bad = []
    for case in sorted(base.keys() | found.keys()):
        a, b = base.get(case, {}), found.get(case, {})
        bad += [
            f"{case}/{rel}: {'missing now' if rel not in b else 'new' if rel not in a else 'differs'}"
            for rel in sorted(a.keys() | b.keys())
            if a.get(rel) != b.get(rel)
        ]
    for line in bad:
        print(line)
    total = sum(map(len, base.values()))
    print(f"{total - len(bad)} of {total} files identical ({NORMALIZATION})" + ("" if bad else ": all"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
