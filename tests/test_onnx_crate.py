"""A Rust crate from an ONNX conversion (graph style): it builds, passes its own `cargo test` (its
parity test against ONNX Runtime's reference) and gives the bundle's outputs bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

import rlx_torch_import as rti
from onnx_models import static_mlp
from rlx_torch_import import safetensors_io
from rlx_torch_import.bundle.model import BundleModel
from test_crate import cargo, needs_cargo


@needs_cargo
def test_onnx_crate_passes_its_own_test_and_matches_the_bundle(tmp_path: Path) -> None:
    path = tmp_path / "mlp.onnx"
    onnx.save(static_mlp(), str(path))
    out = tmp_path / "o"
    report = rti.from_onnx(path, out, emit="bundle,crate", emit_style="graph", name="onnx_mlp")
    assert report.ok, report.summary()
    (crate,) = out.glob("rlx-*")
    assert (crate / "tests" / "parity.rs").is_file()
    cargo(crate, "test", "--release", "--quiet")
    saved = tmp_path / "crate.safetensors"
    cargo(crate, "run", "--release", "--quiet", "--example", "run", "--", "--save", str(saved))
    got = safetensors_io.read(saved)
    reference = safetensors_io.read(out / "reference.safetensors")
    feed = {k.removeprefix("input."): v.to_numpy() for k, v in reference.items() if k.startswith("input.")}
    expected = BundleModel(out / "bundle").run(feed)
    assert set(expected) == {"y"}
    actual = got["output.y"].to_numpy()
    assert actual.shape == expected["y"].shape
    assert actual.tobytes() == np.ascontiguousarray(expected["y"]).tobytes(), "the crate gives the bundle's bits"
