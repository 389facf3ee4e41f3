"""Devices: `device="cuda"` / `--device cuda` where this machine has no GPU (the documented
DeviceError, exit 7, naming what is missing), unknown device names, `verify OUT` re-verifying a
bundle as it is, what RLX's CUDA backend is refused (checked without a GPU), the strict float32
settings, and a generated crate's `cuda` feature (builds, and says what is missing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import _core, torchir
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.devices import CUDA_BUILT, check_device
from rlx_torch_import.errors import DeviceError, ExitCode, InputError
from rlx_torch_import.lower import lower

REPO = Path(__file__).resolve().parents[1]
MLP = REPO / "examples" / "mlp.py"


def _cuda_here() -> bool:
    try:
        check_device("cuda")
    except DeviceError:
        return False
    return True


CUDA_HERE = _cuda_here()
no_gpu = pytest.mark.skipif(CUDA_HERE, reason="this machine has a usable NVIDIA GPU")
# What the message says is missing on this machine: the build (RTI_CUDA=0) or the driver.
MISSING = "not available on this machine" if CUDA_BUILT else "not in this build"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", *args], capture_output=True, text=True, timeout=300
    )


class Small(nn.Module):
    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dev") / "small"
    torch.manual_seed(0)
    report = rti.from_torch(Small().eval(), (torch.randn(3, 8),), out)
    assert report.ok and report.device == "cpu", report.summary()
    return out


def test_the_default_build_has_cuda() -> None:
    """The `cuda` cargo feature is built by default (README, GPU); RTI_CUDA=0 builds without it."""
    if os.environ.get("RTI_CUDA") == "0":
        pytest.skip("built with RTI_CUDA=0")
    assert CUDA_BUILT and _core.CUDA_BUILT


@no_gpu
def test_check_device_names_what_is_missing() -> None:
    with pytest.raises(DeviceError) as e:
        check_device("cuda")
    assert e.value.exit_code == ExitCode.DEVICE == 7
    assert MISSING in e.value.message and e.value.hint
    if CUDA_BUILT:
        assert "no NVIDIA driver was found (libcuda.so.1 could not be loaded)" in e.value.message
    assert check_device("cpu").description == "cpu" and check_device("cpu").settings == ()


@pytest.mark.parametrize("device", ["tpu", "CUDA", "", None, 0])
def test_unknown_devices_are_bad_input(device: object, converted: Path) -> None:
    with pytest.raises(InputError, match="device must be one of 'cpu', 'cuda'"):
        check_device(device)
    with pytest.raises(InputError, match="device must be one of"):
        BundleModel(converted / "bundle", device=device)  # type: ignore[arg-type]


@no_gpu
def test_api_entry_points_raise_device_error_before_any_work(converted: Path, tmp_path: Path) -> None:
    out = tmp_path / "never"
    with pytest.raises(DeviceError, match=MISSING):
        rti.from_torch(Small().eval(), (torch.randn(3, 8),), out, device="cuda")
    assert not out.exists()  # refused before export: nothing written
    with pytest.raises(DeviceError, match=MISSING):
        BundleModel(converted / "bundle", device="cuda")
    with pytest.raises(DeviceError, match=MISSING):
        rti.run_bundle(converted / "bundle", {"x": np.zeros((3, 8), np.float32)}, device="cuda")
    before = (converted / "bundle" / "model.hir.json").stat().st_mtime_ns
    with pytest.raises(DeviceError, match=MISSING):
        rti.build(converted, device="cuda")
    with pytest.raises(DeviceError, match=MISSING):
        rti.reverify(converted, device="cuda")
    assert (converted / "bundle" / "model.hir.json").stat().st_mtime_ns == before  # the bundle is untouched
    assert not (converted / "report-cuda.json").exists()


@no_gpu
@pytest.mark.parametrize(
    "argv",
    [
        [str(MLP), "-o", "{tmp}/out", "--device", "cuda"],
        ["build", "{conv}", "--device", "cuda"],
        ["verify", "{conv}", "--device", "cuda"],
        ["run", "{conv}/bundle", "--inputs", "{conv}/reference.safetensors", "--device", "cuda"],
    ],
    ids=["convert", "build", "verify", "run"],
)
def test_cli_device_cuda_exits_7_naming_what_is_missing(argv: list[str], converted: Path, tmp_path: Path) -> None:
    r = cli(*(a.format(tmp=tmp_path, conv=converted) for a in argv))
    assert r.returncode == ExitCode.DEVICE, r.stderr
    assert r.stderr.startswith(f"error: device 'cuda' is {MISSING}"), r.stderr
    assert "hint: " in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


@no_gpu
def test_cuda_defect_probes_need_a_gpu() -> None:
    """`defects --device cuda` runs the CUDA probes (docs/rlx-defects.md, "CUDA backend") only where
    there is a GPU: elsewhere exit 7 naming what is missing, before any probe."""
    from rlx_torch_import.lower.rlx.cuda_defects import CUDA_DEFECTS

    assert {d.key for d in CUDA_DEFECTS} == {"cuda-float64", "cuda-integers", "cuda-tf32", "cuda-attention-wmma"}
    r = cli("defects", "--device", "cuda")
    assert r.returncode == ExitCode.DEVICE and f"device 'cuda' is {MISSING}" in r.stderr, r.stderr
    assert "present" not in r.stdout


def test_cli_unknown_device_is_a_usage_error(converted: Path) -> None:
    r = cli("verify", str(converted), "--device", "tpu")
    assert r.returncode == ExitCode.BAD_INPUT and "invalid choice: 'tpu'" in r.stderr, r.stderr


def test_verify_reverifies_the_bundle_as_it_is(converted: Path) -> None:
    hir = (converted / "bundle" / "model.hir.json").read_bytes()
    report = rti.reverify(converted, device="cpu")
    assert report.verified and report.ok and report.device == "cpu", report.summary()
    assert [o.name for o in report.outputs] == ["output"]
    assert report.nodes  # per-node parity by default
    assert (converted / "bundle" / "model.hir.json").read_bytes() == hir  # nothing lowered or rewritten
    written = json.loads((converted / "report-cpu.json").read_text())
    assert written["ok"] and written["device"] == "cpu"
    assert (converted / "report-cpu.md").read_text().count("device cpu") == 1
    assert (converted / "report-cpu.html").is_file()


def test_verify_fails_when_the_bundle_no_longer_matches(converted: Path, tmp_path: Path) -> None:
    """verify runs the bundle that is there: different weights in the bundle fail parity (exit 1)."""
    copy = tmp_path / "copy"
    shutil.copytree(converted, copy)
    from rlx_torch_import import safetensors_io

    weights = safetensors_io.read(copy / "bundle" / "weights.safetensors")
    changed = {k: (t.dtype, t.shape, (t.to_numpy() * 1.5).tobytes()) for k, t in weights.items()}
    del weights
    safetensors_io.write(copy / "bundle" / "weights.safetensors", changed)
    r = cli("verify", str(copy), "--no-per-node", "-q")
    assert r.returncode == ExitCode.PARITY_FAILED, r.stdout + r.stderr
    assert r.stdout.startswith("FAIL small"), r.stdout


def test_verify_needs_a_conversion_directory(tmp_path: Path, converted: Path) -> None:
    r = cli("verify", str(tmp_path / "missing"))
    assert r.returncode == ExitCode.BAD_INPUT and "no such directory" in r.stderr, r.stderr
    partial = tmp_path / "partial"
    shutil.copytree(converted, partial)
    (partial / "reference.safetensors").unlink()
    r = cli("verify", str(partial))
    assert r.returncode == ExitCode.BAD_INPUT and "reference.safetensors is missing" in r.stderr, r.stderr


def _hir(model: nn.Module, inputs: tuple[torch.Tensor, ...], out: Path) -> str:
    rti.from_torch(model, inputs, out, verify=False)
    return _core.program_to_hir_json(lower(torchir.load(out)).to_core_json())


def test_cuda_refuses_float64_graphs_and_accepts_float32_ones(tmp_path: Path) -> None:
    """RLX's CUDA arena stores every value as float32: a float64 program is refused for cuda (it
    would miss the float64 budget), a float32 one is not; checked without a GPU."""
    torch.manual_seed(0)
    assert _core.cuda_refusal(_hir(Small().eval(), (torch.randn(3, 8),), tmp_path / "f32")) is None
    why = _core.cuda_refusal(
        _hir(Small(torch.float64).eval(), (torch.randn(3, 8, dtype=torch.float64),), tmp_path / "f64")
    )
    assert why is not None and "is float64" in why and "run it on 'cpu'" in why, why


def test_cuda_refuses_integer_constants_float32_cannot_hold(tmp_path: Path) -> None:
    """Integer constants are widened to float32 on upload: exact up to 2**24, refused past it (integer
    weights, inputs and parameters are checked when they are bound: src/device.rs tests)."""

    class AddBig(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 123_456_789

    why = _core.cuda_refusal(_hir(AddBig(), (torch.tensor([1, 2]),), tmp_path / "big"))
    assert why is not None and "holds 123456789" in why, why

    class AddSmall(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 16_777_216

    assert _core.cuda_refusal(_hir(AddSmall(), (torch.tensor([1, 2]),), tmp_path / "small")) is None


def test_crate_carries_the_cuda_refusal_of_its_graph(tmp_path: Path) -> None:
    """A float64 model's crate refuses Device::Cuda with the core's message (found at conversion), a
    float32 model's does not refuse it."""
    from rlx_torch_import.crate.rust_names import rust_str

    torch.manual_seed(0)
    for dtype, name in ((torch.float64, "f64"), (torch.float32, "f32")):
        out = tmp_path / name
        rti.from_torch(Small(dtype).eval(), (torch.randn(3, 8, dtype=dtype),), out, emit="crate", verify=False)
        (crate,) = out.glob("rlx-*")
        lib = " ".join((crate / "src" / "lib.rs").read_text().split())  # rustfmt may wrap the constant
        refusal = _core.cuda_refusal((out / "bundle" / "model.hir.json").read_text())
        if dtype == torch.float64:
            assert refusal and f"pub const CUDA_REFUSAL: Option<&str> = Some( {rust_str(refusal)}, );" in lib
        else:
            assert refusal is None and "pub const CUDA_REFUSAL: Option<&str> = None;" in lib


def test_api_takes_torch_devices_and_gpu_0(converted: Path) -> None:
    from rlx_torch_import.devices import device_name

    assert device_name(torch.device("cpu")) == "cpu" and device_name("cuda:0") == "cuda"
    assert device_name(torch.device("cuda", 0)) == "cuda"
    with pytest.raises(InputError, match="GPU 0 only"):
        device_name("cuda:1")
    assert BundleModel(converted / "bundle", device=torch.device("cpu")).device == "cpu"


@no_gpu
def test_without_verify_the_device_is_not_needed(tmp_path: Path) -> None:
    """--no-verify runs nothing on the device: only its name is checked, and the report names none."""
    report = rti.from_torch(Small().eval(), (torch.randn(3, 8),), tmp_path / "o", device="cuda", verify=False)
    assert not report.verified and report.device == "" and "device" not in report.markdown().split("\n")[2]
    with pytest.raises(InputError, match="device must be one of"):
        rti.from_torch(Small().eval(), (torch.randn(3, 8),), tmp_path / "p", device="tpu", verify=False)


def test_build_drops_reports_of_the_bundle_it_replaces(converted: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(converted, copy)
    rti.reverify(copy, per_node=False)
    assert (copy / "report-cpu.md").is_file()
    rti.build(copy, per_node=False)
    assert not list(copy.glob("report-*")) and (copy / "report.md").is_file()


def test_reverify_refuses_another_conversions_bundle(converted: Path, tmp_path: Path) -> None:
    from rlx_torch_import.errors import BundleError

    other = tmp_path / "other"
    rti.from_torch(nn.Linear(5, 2).eval(), (torch.randn(2, 5),), other, verify=False)
    mixed = tmp_path / "mixed"
    shutil.copytree(converted, mixed)
    shutil.rmtree(mixed / "bundle")
    shutil.copytree(other / "bundle", mixed / "bundle")
    with pytest.raises(BundleError, match="not this conversion's bundle"):
        rti.reverify(mixed)


def test_parity_report_names_the_device(converted: Path) -> None:
    report = rti.ParityReport(
        name="m",
        ok=True,
        verified=True,
        out_dir="o",
        device="cuda: NVIDIA H200",
        device_settings=["RLX_CUDA_PARITY=1", "RLX_CUDA_ATTENTION=scalar"],
    )
    assert report.summary().startswith("PASS m (high) on cuda: NVIDIA H200 -> o")
    assert "device cuda: NVIDIA H200 with RLX_CUDA_PARITY=1, RLX_CUDA_ATTENTION=scalar" in report.markdown()
    cpu = json.loads((converted / "report.json").read_text())
    assert cpu["device"] == "cpu" and cpu["device_settings"] == []


CARGO = shutil.which("cargo")
TARGET = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/rlx-torch-import/target")


@pytest.mark.skipif(CARGO is None, reason="cargo is not installed")
@no_gpu
def test_crate_cuda_feature_compiles_and_says_what_is_missing(tmp_path: Path) -> None:
    """The generated crate builds clippy-clean with `--features cuda`, runs on the CPU as before, and
    `--device cuda` names what is missing: the feature, or (with it) the GPU."""
    out = tmp_path / "o"
    torch.manual_seed(0)
    report = rti.from_torch(Small().eval(), (torch.randn(3, 8),), out, emit=("bundle", "crate"), name="small")
    assert report.ok, report.summary()
    (crate,) = out.glob("rlx-*")
    assert 'cuda = ["rlx-runtime/cuda", "dep:rlx-cuda"]' in (crate / "Cargo.toml").read_text()
    env = {**os.environ, "CARGO_TARGET_DIR": TARGET}

    def cargo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["cargo", *args], cwd=crate, env=env, capture_output=True, text=True, check=False)

    lint = cargo("clippy", "--release", "--quiet", "--all-targets", "--features", "cuda", "--", "-D", "warnings")
    assert lint.returncode == 0, lint.stderr
    ran = cargo("run", "--release", "--quiet", "--features", "cuda", "--example", "run")
    assert ran.returncode == 0 and "output: ok" in ran.stdout, ran.stdout + ran.stderr
    assert ran.stdout.startswith("device: Cpu\n"), ran.stdout
    gpu = cargo("run", "--release", "--quiet", "--features", "cuda", "--example", "run", "--", "--device", "cuda")
    assert gpu.returncode == 7 and "device cuda is not available on this machine" in gpu.stderr, gpu.stderr
    plain = cargo("run", "--release", "--quiet", "--example", "run", "--", "--device", "cuda")
    assert plain.returncode == 7 and "device cuda is not in this build" in plain.stderr, plain.stderr
    bad = cargo("run", "--release", "--quiet", "--example", "run", "--", "--device")
    assert bad.returncode == 2 and "the devices are cpu and cuda" in bad.stderr, bad.stderr
