"""Views, expanded (stride 0), transposed and zero-size tensors, in every dtype: written to
safetensors as their logical elements, and converted and verified end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import import safetensors_io
from rlx_torch_import.errors import BundleError, ExitCode

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def sample(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(*shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    low = 0 if dtype == torch.uint8 else -100
    return torch.randint(low, 100, shape, generator=g).to(dtype)


def layouts(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    base = sample(dtype, 4, 6)
    return {
        "contiguous": base,
        "transposed": base.t(),
        "strided": base[:, ::2],
        "offset": base[1:, 2:],
        "expanded": base[:1].expand(3, 6),
        "broadcast0": base[0, :1].expand(5),
        "zero": base[:0],
        "zero_cols": base[:, :0].t(),
        "scalar": base[1, 1],
        "negated": torch._neg_view(base) if dtype.is_floating_point else base,
    }


def as_float(values: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.float().numpy() if values.dtype == torch.bfloat16 else values.numpy()
    return np.asarray(values)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_safetensors_round_trip_of_every_layout(dtype: torch.dtype, tmp_path) -> None:
    tensors = layouts(dtype)
    path = tmp_path / "t.safetensors"
    safetensors_io.write(path, dict(safetensors_io.iter_torch(tensors)))
    back = safetensors_io.read(path)
    assert sorted(back) == sorted(tensors)
    for key, t in tensors.items():
        got = back[key]
        assert got.dtype == _name(dtype) and got.shape == tuple(t.shape), key
        want = as_float(t.resolve_neg().contiguous())
        np.testing.assert_array_equal(got.to_numpy(), want, err_msg=key)


def test_write_takes_strided_views_in_row_major_order_and_refuses_wrong_sizes(tmp_path) -> None:
    arr = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = memoryview(arr[:, ::2].T)  # a strided, transposed buffer
    assert not view.c_contiguous
    path = tmp_path / "v.safetensors"
    safetensors_io.write(path, {"v": ("int32", (3, 4), view)})
    np.testing.assert_array_equal(safetensors_io.read(path)["v"].to_numpy(), arr[:, ::2].T)
    with pytest.raises(BundleError, match=r"'v' has 8 bytes, but int32\[3\] takes 12"):
        safetensors_io.write(path, {"v": ("int32", (3,), b"\0" * 8)})


class Views(nn.Module):
    """Outputs that are inputs, views of inputs and of a buffer, and zero-size results."""

    def __init__(self, w: torch.Tensor | None) -> None:
        super().__init__()
        self.register_buffer("w", w)

    def forward(self, xt: torch.Tensor, xe: torch.Tensor, xz: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = (xt, xt.t(), xt[:, ::2], xt[1:, 1:], xe, xe[:, :1].expand(5, 3), xz, xz * 1, xt[:0], xt[0, 0])
        if self.w is not None:
            outs += (self.w.t(), self.w[:1].expand(3, 4), self.w[:, ::2] * 1)
        return outs


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_views_expanded_and_zero_size_convert_and_verify(dtype: torch.dtype, tmp_path) -> None:
    xt = sample(dtype, 3, 4).t()  # a non-contiguous input
    xe = sample(dtype, 1, 3).expand(5, 3)  # stride 0
    xz = sample(dtype, 0, 3)
    w = sample(dtype, 5, 4) if dtype != torch.int16 else None  # int16 weights: see the next test
    before = [(t.clone(), t.stride()) for t in (xt, xe, xz)]
    report = rti.from_torch(Views(w), (xt, xe, xz), tmp_path / "o")
    assert report.ok, report.summary()
    assert len(report.outputs) == (13 if w is not None else 10)
    ref = safetensors_io.read(tmp_path / "o" / "reference.safetensors")
    np.testing.assert_array_equal(ref["input.xt"].to_numpy(), as_float(xt.contiguous()))
    np.testing.assert_array_equal(ref["input.xe"].to_numpy(), as_float(xe.contiguous()))
    assert ref["output.output_6"].shape == (0, 3) and ref["output.output_9"].shape == ()
    for t, (values, strides) in zip((xt, xe, xz), before, strict=True):
        assert torch.equal(t, values) and t.stride() == strides, "the example inputs are left as they were"


def test_int16_weights_are_refused_clearly(tmp_path) -> None:
    """RLX's CPU backend cannot bind an I16 weight (it panicked inside set_param, exit 5 before)."""
    with pytest.raises(rti.UnsupportedOpsError) as info:
        xs = (sample(torch.int16, 4, 3), sample(torch.int16, 5, 3), sample(torch.int16, 0, 3))
        rti.from_torch(Views(sample(torch.int16, 5, 4)), xs, tmp_path / "o")
    assert info.value.exit_code == ExitCode.UNSUPPORTED
    assert info.value.targets == ["<weight>"]
    assert "buffer 'w' is int16" in info.value.message and "int32 or int64" in info.value.message
    assert "--decomposition core" not in info.value.explain()  # decomposing cannot change a weight's dtype
    assert not (tmp_path / "o").exists()
