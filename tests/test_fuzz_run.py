"""Fuzzing (hypothesis): random inputs to `BundleModel.run`, static and dynamic bundles.

Inputs of every dtype numpy has, any shape (empty, scalar, strided, non-contiguous, wrong rank),
missing, extra and misspelled names, and things that are not arrays at all. Each run either gives
outputs of the declared shapes (and, for inputs of the declared shape and dtype, PyTorch's values),
or raises our own `InputError`/`BundleError`: never another exception, a wrong-size buffer handed to
RLX, or a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rlx_torch_import as rti
from rlx_torch_import.errors import BundleError, InputError

RUNS = 150


class Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.table = torch.nn.Embedding(7, 3)

    def forward(self, x: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(mask[..., None], self.fc(x) + self.table(ids), 0.0)


def _model() -> Mixed:
    torch.manual_seed(0)
    return Mixed().eval()


def _example(batch: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(batch)
    return (
        torch.randn(batch, 4, generator=g),
        torch.randint(0, 7, (batch,), generator=g),
        torch.rand(batch, generator=g) > 0.5,
    )


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, rti.BundleModel]:
    root = tmp_path_factory.mktemp("run")
    assert rti.from_torch(_model(), _example(3), root / "static", per_node=False).ok
    batch = torch.export.Dim("batch", min=1, max=16)
    dyn = {"x": {0: batch}, "ids": {0: batch}, "mask": {0: batch}}
    assert rti.from_torch(_model(), _example(3), root / "dynamic", dynamic_shapes=dyn, per_node=False).ok
    return {k: rti.BundleModel(Path(root / k / "bundle")) for k in ("static", "dynamic")}


NAMES = ["x", "ids", "mask"]
ANY_DTYPE = st.sampled_from(
    [
        "float32",
        "float64",
        "float16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
        "uint64",
        "datetime64[s]",
        "U3",
        "O",
    ]
)
ANY_SHAPE = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=20)


@st.composite
def arrays(draw: st.DrawFn) -> Any:
    """Any numpy array (sometimes a strided view), or a value that is no array at all."""
    kind = draw(st.sampled_from(["array", "array", "array", "view", "other"]))
    if kind == "other":
        return draw(
            st.none()
            | st.text(max_size=5)
            | st.integers()
            | st.lists(st.integers(), max_size=3)
            | st.just([[1.0, 2.0], [3.0]])
            | st.just(object())
        )
    dtype = np.dtype(draw(ANY_DTYPE))
    if dtype.kind in "OUM":
        return np.empty(draw(ANY_SHAPE), dtype)
    arr = draw(hnp.arrays(dtype, draw(ANY_SHAPE)))
    if kind == "view" and arr.ndim and arr.shape[-1] > 1:
        arr = arr[..., ::2]  # not contiguous
    return arr


@st.composite
def valid(draw: st.DrawFn, batch: int) -> dict[str, Any]:
    """Inputs of the declared dtypes at batch `batch` (any values, NaN and inf included), some strided."""
    # finite values small enough that no sum overflows (where it would, the order of the sum decides)
    elements = st.floats(-(2.0**100), 2.0**100, width=32) | st.sampled_from([np.inf, -np.inf, np.nan])
    x = draw(hnp.arrays(np.float32, (batch, 4 * 2), elements=elements))[:, ::2]
    ids = draw(hnp.arrays(np.int64, (batch,), elements=st.integers(0, 6)))
    mask = draw(hnp.arrays(np.bool_, (batch,)))
    return {"x": x, "ids": ids, "mask": mask}


@st.composite
def feeds(draw: st.DrawFn) -> dict[str, Any] | list[Any]:
    """A run's inputs: right names with any values, names missing or extra, or a positional list."""
    names = draw(st.lists(st.sampled_from([*NAMES, "y", "input.x", "", "x "]), max_size=5, unique=True))
    feed = {n: draw(arrays()) for n in names}
    return list(feed.values()) if draw(st.booleans()) and len(feed) == 3 else feed


def _torch(inputs: dict[str, Any], model: torch.nn.Module) -> np.ndarray:
    args = [torch.from_numpy(np.ascontiguousarray(inputs[n])) for n in NAMES]
    with torch.no_grad():
        return model(*args).numpy()


FUZZ = settings(max_examples=RUNS, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("kind", ["static", "dynamic"])
@FUZZ
@given(feed=feeds())
def test_any_inputs_run_or_raise_our_error(bundles: dict[str, rti.BundleModel], kind: str, feed: Any) -> None:
    model = bundles[kind]
    try:
        out = model.run(feed)
    except (InputError, BundleError) as e:
        event(type(e).__name__)
        return
    except BaseException as e:
        raise AssertionError(f"{type(e).__name__} escaped instead of our own error: {e}") from e
    event("ran")
    assert list(out) == ["output"] and out["output"].dtype == np.float32


@pytest.mark.parametrize("kind", ["static", "dynamic"])
@FUZZ
@given(data=st.data())
def test_valid_inputs_match_pytorch(bundles: dict[str, rti.BundleModel], kind: str, data: st.DataObject) -> None:
    batch = 3 if kind == "static" else data.draw(st.integers(1, 16))
    feed = data.draw(valid(batch))
    got = bundles[kind].run(feed)["output"]
    want = _torch(feed, _model())
    assert got.shape == want.shape
    # same positions non-finite; finite values within float32 rounding of a 4-term dot product
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    scale = np.abs(_torch_abs(feed)).max(initial=1.0)
    assert np.abs(got[finite] - want[finite]).max(initial=0.0) <= 16 * np.finfo(np.float32).eps * scale


def _torch_abs(feed: dict[str, Any]) -> np.ndarray:
    """|fc|(|x|) + |table|: the magnitude the output's rounding error scales with."""
    m = _model()
    x = torch.from_numpy(np.ascontiguousarray(feed["x"])).abs().nan_to_num(posinf=0.0)
    with torch.no_grad():
        return (x @ m.fc.weight.abs().T + m.fc.bias.abs() + m.table.weight.abs().max()).numpy()
