"""Golden crates: one small generated crate per style (`graph`, `tensor`, `flow`), compared file by file,
byte for byte, with its copy under tests/golden/<style>/. A change to the generated Rust shows up here as a
diff to review; `make golden` (RTI_UPDATE_GOLDEN=1) rewrites the copies. See tests/golden/README.md.

The models are built from torch layers only (the provenance comments name torch's source lines, not this
file's) and hold dyadic weights and inputs, so PyTorch's outputs in `testdata/reference.safetensors` are exact
on any CPU (every partial sum is representable in float32).
"""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

import rlx_torch_import as rti

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("RTI_UPDATE_GOLDEN") == "1"


def _dyadic(*shape: int, seed: int) -> torch.Tensor:
    """Multiples of 1/4 in [-2, 2]: products and their sums stay exact in float32."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, shape, generator=gen).float() / 4


def _exact(model: nn.Module) -> nn.Module:
    """`model` in eval mode with every parameter replaced by dyadic values."""
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(_dyadic(*p.shape, seed=i))
    return model.eval()


def mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _exact(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))), (_dyadic(2, 4, seed=100),)


def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    layers = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3))
    return _exact(layers), (_dyadic(1, 1, 4, 4, seed=100),)


def block() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _exact(nn.Sequential(nn.Linear(4, 6), nn.Hardtanh(), nn.Linear(6, 2))), (_dyadic(3, 4, seed=100),)


# style -> the model its golden crate is converted from
MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "graph": mlp,
    "tensor": cnn,
    "flow": block,
}


def crate_files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def describe(rel: str, want: bytes | None, got: bytes | None) -> str:
    """What differs in one file: a unified diff for text, sizes and the first differing byte otherwise."""
    if want is None:
        return f"{rel}: new file, not in the golden crate"
    if got is None:
        return f"{rel}: in the golden crate, not written now"
    try:
        a, b = want.decode(), got.decode()
    except UnicodeDecodeError:
        at = next((i for i, (x, y) in enumerate(zip(want, got, strict=False)) if x != y), min(len(want), len(got)))
        return f"{rel}: binary, {len(want)} bytes golden, {len(got)} now, first difference at byte {at}"
    diff = difflib.unified_diff(
        a.splitlines(keepends=True), b.splitlines(keepends=True), f"golden/{rel}", f"now/{rel}", n=2
    )
    return "".join(diff)


@pytest.mark.skipif(shutil.which("rustfmt") is None, reason="the golden crates are rustfmt-formatted")
@pytest.mark.parametrize("style", list(MODELS))
def test_generated_crate_matches_golden(style: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # .cargo/config.toml records where this environment has the BLAS libraries: fixed paths here
    for var, path in (
        ("RTI_BLAS_MKL", "/opt/blas/libmkl_rt.so.3"),
        ("RTI_BLAS_OPENBLAS", "/opt/blas/libscipy_openblas.so"),
    ):
        monkeypatch.setenv(var, path)
    model, inputs = MODELS[style]()
    out = tmp_path / "out"
    report = rti.from_torch(model, inputs, out, emit="crate", emit_style=style, name="golden", per_node=False)
    assert report.ok, report.summary()
    got = crate_files(out / "rlx-golden")
    golden = GOLDEN / style
    if UPDATE:
        shutil.rmtree(golden, ignore_errors=True)
        for rel, data in got.items():
            (golden / rel).parent.mkdir(parents=True, exist_ok=True)
            (golden / rel).write_bytes(data)
    want = crate_files(golden)
    rels = sorted(want.keys() | got.keys())
    differs = [describe(rel, want.get(rel), got.get(rel)) for rel in rels if want.get(rel) != got.get(rel)]
    assert not differs, (
        f"the {style} crate differs from tests/golden/{style}/ (`make golden` accepts it):\n" + "\n".join(differs)
    )
