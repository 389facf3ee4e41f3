"""The RLX devices a bundle compiles and runs on, and whether this build and machine have them.

- `cpu`: RLX's CPU backend, always there.
- `cuda`: RLX's CUDA backend (`rlx-cuda`: cudarc, cuBLAS, NVRTC) on GPU 0. The Rust core has it
  when built with its `cuda` cargo feature (the default; `RTI_CUDA=0 make setup` builds without
  it; README "GPU"); it needs the NVIDIA driver's `libcuda` where it runs, and no CUDA toolkit.
  Float32 math there is strict
  (`RLX_CUDA_PARITY=1`: no TF32 in GEMM or convolution; `RLX_CUDA_ATTENTION=scalar`: no
  half-precision tensor-core attention) unless the environment sets those variables, so the
  float32 budget is the same as on the CPU (docs/design.md, decision ad).

RLX's CUDA backend stores every value as float32, so a program with float64 values, or integers
float32 does not hold exactly, is refused there (DeviceError) rather than verified against a
budget it cannot meet (`src/device.rs`; docs/rlx-defects.md, "CUDA backend").
"""

from __future__ import annotations

from dataclasses import dataclass

from . import _core
from .errors import DeviceError, InputError
from .limits import short

DEVICES = ("cpu", "cuda")
CUDA_BUILT: bool = bool(_core.CUDA_BUILT)


@dataclass(frozen=True)
class DeviceInfo:
    """A device this process can compile for: its name (`"cuda"`), what it is (`"cuda: NVIDIA
    H200"`), and the RLX settings in effect for it (`"RLX_CUDA_PARITY=1"`, ...; none for cpu)."""

    name: str
    description: str
    settings: tuple[str, ...] = ()


_found: dict[str, DeviceInfo] = {}


def device_name(device: object) -> str:
    """`device` as one of DEVICES: "cpu", "cuda", "cuda:0", or a `torch.device` of those. Raises
    InputError (exit 2) for anything else, naming what is accepted (RLX's CUDA backend opens GPU 0;
    pick another GPU with CUDA_VISIBLE_DEVICES)."""
    text = str(device) if type(device).__name__ == "device" and hasattr(device, "type") else device
    if text == "cuda:0":
        text = "cuda"
    if isinstance(text, str) and text.startswith("cuda:"):
        raise InputError(
            f"device {text!r}: RLX's CUDA backend runs on GPU 0 only",
            hint="choose the GPU with CUDA_VISIBLE_DEVICES and pass device='cuda'",
        )
    if not isinstance(text, str) or text not in DEVICES:
        raise InputError(f"device must be one of {', '.join(map(repr, DEVICES))}, got {short(device)}")
    return text


def check_device(device: object) -> DeviceInfo:
    """`device` (`device_name`'s forms) checked against this build and machine; the driver is
    loaded once per process, on the first check of "cuda".

    Raises InputError (exit 2) for anything but a device name, DeviceError (exit 7) saying
    whether the core was built without CUDA or the machine has no NVIDIA driver or GPU."""
    device = device_name(device)
    if device not in _found:
        try:
            description, settings = _core.device_info(device)
        except _core.DeviceError as e:
            raise DeviceError(str(e), hint=_hint(device)) from None
        _found[device] = DeviceInfo(device, description, tuple(settings))
    return _found[device]


def _hint(device: str) -> str | None:
    if device != "cuda":
        return None
    if not CUDA_BUILT:
        return "build the core with CUDA (README, GPU) or use --device cpu"
    return "run on a machine with an NVIDIA GPU and its driver, or use --device cpu"
