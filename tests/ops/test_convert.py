"""Parity samples of dtype conversions (lower/ops/convert.py): `.to` with a device, dtype or layout,
`type_as`, integer images to float, casts to the half types (bfloat16 keeps float32's subnormals, rounded to
multiples of 2**-133 with ties to even, and overflows to inf), and the refusal of a complex output.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from _samples import LEVELS, Fn, Sample, check_op_sample, of_inputs, r, sample_ids

torch.manual_seed(0)
SAMPLES: list[Sample] = [
    (
        "to_device_layout_detach_",
        Fn(lambda m, a: a.to(a.device, torch.float64) + (a * 2).detach_().to(a.device)),
        (r(3),),
    ),
    ("uint8_image_scale", Fn(lambda m, a: a.float() / 255), (torch.randint(0, 255, (2, 3), dtype=torch.uint8),)),
    (
        "half_cast_and_trunc_division",
        of_inputs(
            lambda x, y: ((x * 3).half().float() * 7, torch.div(x.bfloat16(), y.bfloat16(), rounding_mode="trunc"))
        ),
        (torch.tensor([0.1, 1.0, 2.0 / 3, 70000.0, -1e-8]), torch.tensor([0.1, 0.1, 0.2, 3.0, 1.0])),
    ),
    (
        "half_subnormal_casts",
        of_inputs(lambda x: (x.to(torch.bfloat16), x.to(torch.float16), (x * 2).to(torch.bfloat16))),
        (
            torch.tensor(
                [1e-39, -3e-40, 2.0**-133, 3 * 2.0**-134, 2.0**-134, 1e-45, 1.17e-38, 1.2e-38, 1.0, 3.4e38, 70000.0]
            ),
        ),
    ),
]

# Samples whose every output must equal eager PyTorch bit for bit.
BIT_EXACT = {"half_subnormal_casts"}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=BIT_EXACT)


def test_complex_output_is_reported_not_crashed(tmp_path) -> None:
    """A complex result is an unsupported dtype, reported before reference.safetensors is written."""
    model = of_inputs(lambda a: torch.fft.rfft(a))
    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(model, (torch.randn(8),), tmp_path / "o", decomposition="core")
    assert "aten._fft_r2c.default" in info.value.targets
    assert not (tmp_path / "o").exists()
