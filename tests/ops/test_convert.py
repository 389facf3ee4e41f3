"""Parity samples of dtype conversions (lower/ops/convert.py): `.to` with a device, dtype or layout,
`type_as`, integer images to float, casts to the half types (bfloat16 keeps float32's subnormals, rounded to
multiples of 2**-133 with ties to even, and overflows to inf), and the refusal of a complex output.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from _samples import FLOATS, LEVELS, Fn, Sample, check_op_sample, of_inputs, r, sample_ids


def _cast_values(dtype: torch.dtype) -> torch.Tensor:
    """Values whose float -> integer conversion torch defines (inside int64, C++'s truncation toward zero;
    the narrower integers and uint8 wrap from there on this CPU: uint8 through int64 by c10's rule): ties,
    signed zeros, negatives for uint8, the largest float32 below 2**31 and -2**31, float64 just below 2**63
    and -2**63. Outside int32 (int64 for uint8) torch's value is an undefined C++ conversion: not sampled."""
    values = [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 3.7, -3.7, -1.0, 255.0, 255.9, -255.5, 300.5, -300.5, 65535.9]
    values += [2147483520.0, -2147483648.0, 1e9, -1e9]
    if dtype == torch.float64:
        values += [9.223372036854774e18, -9.223372036854775808e18, 2.0**53 + 2, -(2.0**62)]
    column = torch.tensor(values, dtype=torch.float64)
    return column[column.abs() <= torch.finfo(dtype).max].to(dtype)


def _truncating_casts(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    small = torch.where(x.abs() < 2.0**31, x, torch.zeros_like(x))  # int32's range: torch's conversion is defined
    return (
        x.to(torch.int64),
        small.to(torch.int32),
        small.to(torch.int16),
        small.to(torch.int8),
        small.to(torch.uint8),
        x.long() // 3,
    )


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
    *[(f"truncating_casts_{str(dt)[6:]}", of_inputs(_truncating_casts), (_cast_values(dt),)) for dt in FLOATS],
]

# Samples whose every output must equal eager PyTorch bit for bit.
BIT_EXACT = {"half_subnormal_casts", *(f"truncating_casts_{str(dt)[6:]}" for dt in FLOATS)}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "module", "inputs"), SAMPLES, ids=sample_ids(SAMPLES))
def test_op_sample(name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], level: str, tmp_path) -> None:
    check_op_sample(name, module, inputs, level, tmp_path, bit_exact=BIT_EXACT)


def test_complex_output_converts_and_comes_back_complex(tmp_path) -> None:
    """A complex graph output crosses as float pairs (docs/design.md (az)) and `run` gives it back as a
    complex array equal to torch's within float32 budgets."""
    model = of_inputs(lambda a: torch.fft.rfft(a))
    x = torch.randn(8)
    report = rti.from_torch(model, (x,), tmp_path / "o", decomposition="core")
    assert report.ok, report.summary()
    (got,) = rti.BundleModel(tmp_path / "o" / "bundle").run([x.numpy()]).values()
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, torch.fft.rfft(x).numpy(), rtol=1e-5, atol=1e-5)
