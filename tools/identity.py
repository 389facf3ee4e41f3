"""Byte-identity check for refactors: convert a fixed set of test models (bundle, and a crate in each
style) and record the SHA-256 of every file written except the reports (which hold timings).

    python tools/identity.py --write base.json   # at the commit before the change
    python tools/identity.py --check base.json   # after it: exit 1 naming every file that differs

The models come from tests/models.py (seeded), so two runs of one commit give the same digests
(tests/test_determinism.py holds that property)."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

REPORTS = {"report.json", "report.md", "report.html"}


def digests(root: Path) -> dict[str, str]:
    """SHA-256 of every file under `root` by relative path, the reports left out."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in REPORTS
    }


def cases() -> list[tuple[str, Any]]:
    """(case name, conversion keyword arguments) for each conversion compared."""
    import torch
    from torch.export import Dim

    from models import make

    found: list[tuple[str, Any]] = []
    for model_name, style in (("mlp", "graph"), ("cnn", "tensor"), ("transformer_block", "flow")):
        model, inputs = make(model_name)
        found.append(
            (f"{model_name}-{style}", dict(model=model, example_inputs=inputs, emit="crate", emit_style=style))
        )
    for model_name in ("dtype_zoo", "nested_io"):
        model, inputs = make(model_name)
        found.append((model_name, dict(model=model, example_inputs=inputs)))
    model, _ = make("mlp")
    found.append(
        (
            "mlp-dynamic",
            dict(
                model=model,
                example_inputs=(torch.randn(6, 32),),
                dynamic_shapes=({0: Dim("batch", min=1, max=64)},),
                emit="crate",
            ),
        )
    )
    return found


def collect() -> dict[str, dict[str, str]]:
    import rlx_torch_import as rti

    out: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in cases():
            target = Path(tmp) / name
            rti.from_torch(out_dir=target, per_node=False, **kwargs)
            out[name] = digests(target)
            print(f"{name}: {len(out[name])} files", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="record the digests in this JSON file")
    mode.add_argument("--check", type=Path, help="compare with the digests recorded in this JSON file")
    args = parser.parse_args()
    found = collect()
    if args.write:
        args.write.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"wrote {sum(map(len, found.values()))} digests to {args.write}")
        return 0
    base = json.loads(args.check.read_text())
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
    print(f"{total - len(bad)} of {total} files byte-identical" + ("" if bad else ": all"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
