"""The BLAS provider chosen at run time (src/blas.rs via rlx_config): each provider loads, computes
a bundle's outputs within the float32 budgets, says what it is; a bad `RTI_BLAS` is a clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import rlx_config
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.verify.compare import compare_output

RUN = """
import json, sys
import numpy as np
from rlx_torch_import import rlx_config
from rlx_torch_import.bundle.model import BundleModel
x = np.load(sys.argv[2])
model = BundleModel(sys.argv[1])
out = model.run({model.input_names[0]: x})
np.save(sys.argv[3], np.asarray(next(iter(out.values()))))
print(json.dumps(rlx_config.blas()))
"""


def _installed(provider: str) -> bool:
    if provider == "system":
        return Path("/usr/lib/x86_64-linux-gnu/libopenblas.so.0").exists() or bool(
            subprocess.run(["sh", "-c", "ldconfig -p | grep -q libopenblas.so.0"]).returncode == 0
        )
    return bool(os.environ.get(f"RTI_BLAS_{provider.upper()}"))


@pytest.fixture(scope="module")
def matmul_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    """A conv + linear model (im2col sgemm and sgemm), its bundle, an input and torch's output."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 64)).eval()
    x = torch.randn(2, 3, 16, 16)
    out = tmp_path_factory.mktemp("blas") / "m"
    assert rti.from_torch(model, (x,), out, per_node=False).ok
    with torch.no_grad():
        want = model(x).numpy()
    return out / "bundle", x.numpy(), want


@pytest.mark.parametrize("provider", ["mkl", "openblas", "system"])
def test_each_provider_loads_and_computes_within_budget(
    provider: str, matmul_bundle: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    if not _installed(provider):
        pytest.skip(f"{provider} is not installed here")
    bundle, x, want = matmul_bundle
    np.save(tmp_path / "x.npy", x)
    env = {**os.environ, "RTI_BLAS": provider}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(bundle), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["provider"] == provider and info["chosen_by"] == f"RTI_BLAS={provider}"
    assert ("Math Kernel Library" in info["detail"]) == (provider == "mkl"), info
    got = np.load(tmp_path / "y.npy")
    result = compare_output("out", got, want, "float32", "float32")
    assert result.ok, result


def test_auto_follows_the_cpu_vendor() -> None:
    info = rlx_config.blas()
    vendor = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "vendor_id" in line
        ),
        "",
    )
    if os.environ.get("RTI_BLAS", "auto") != "auto":
        pytest.skip("RTI_BLAS is set in this environment")
    assert info["chosen_by"] == f"auto ({vendor})"
    if vendor == "GenuineIntel" and os.environ.get("RTI_BLAS_MKL"):
        assert info["provider"] == "mkl"
    elif os.environ.get("RTI_BLAS_OPENBLAS") and vendor != "GenuineIntel":
        assert info["provider"] == "openblas"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("bogus", 'RTI_BLAS="bogus": expected one of'),
        ("/nonexistent/libblas.so", "cannot load /nonexistent/libblas.so"),
    ],
)
def test_a_provider_that_cannot_load_is_a_clear_input_error(
    value: str, says: str, matmul_bundle: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    bundle, x, _ = matmul_bundle
    np.savez(tmp_path / "x.npz", input=x)
    proc = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", "run", str(bundle), "--inputs", str(tmp_path / "x.npz")],
        capture_output=True,
        text=True,
        env={**os.environ, "RTI_BLAS": value},
        check=False,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert says in proc.stderr and "no BLAS provider for RLX" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_describe_names_the_provider() -> None:
    d = rlx_config.describe()
    assert d["blas"] in ("mkl", "openblas", "system", "custom") and d["blas_detail"], d
    assert BundleModel is not None  # the bundle runner loads the provider through mark_started
