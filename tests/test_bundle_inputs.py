"""BundleModel.run / run_bundle / `rlx-torch-import run` inputs: names, count, shapes, the dtype policy
(exact or lossless numpy casts; Python numbers as literals; bfloat16 from float32), strided arrays, and
values that are not arrays. Every refusal is an InputError (exit 2) naming the input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import.bundle import host as bundle_host
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode, InputError

ACCEPTED = re.escape("x: float32[3, 4], n: int32[3], m: bool[3], h: bfloat16[2]")


class Mixed(nn.Module):
    """One input of each kind of dtype: float32, int32, bool (carried as float32), bfloat16 (as float32)."""

    def forward(self, x: torch.Tensor, n: torch.Tensor, m: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return x * m.unsqueeze(1).to(x.dtype) + n.unsqueeze(1).to(x.dtype) + h.float().sum()


def _feed() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "x": rng.standard_normal((3, 4)).astype(np.float32),
        "n": np.array([4, -7, 1], np.int32),
        "m": np.array([True, False, True]),
        "h": np.array([0.5, -1.25], np.float32),  # bfloat16 values, held as float32
    }


def _eager(feed: dict[str, Any]) -> np.ndarray:
    """PyTorch's output on these values (each converted to its input's dtype as the bundle does)."""
    x, n, m = (torch.from_numpy(np.asarray(feed[k])) for k in ("x", "n", "m"))
    h = torch.from_numpy(np.asarray(feed["h"], np.float32)).to(torch.bfloat16)
    with torch.no_grad():
        return Mixed()(x.float(), n.to(torch.int32), m.bool(), h).numpy()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inputs") / "o"
    feed = _feed()
    example = (*(torch.from_numpy(feed[k]) for k in ("x", "n", "m")), torch.from_numpy(feed["h"]).bfloat16())
    report = rti.from_torch(Mixed(), example, out, per_node=False)
    assert report.ok, report.summary()
    return out / "bundle"


@pytest.fixture(scope="module")
def model(mixed: Path) -> BundleModel:
    return BundleModel(mixed)


def test_exact_and_lossless_dtypes_match_pytorch(model: BundleModel) -> None:
    feed = _feed()
    np.testing.assert_allclose(model.run(feed)["output"], _eager(feed), atol=1e-5, rtol=1e-5)
    widened = {
        "x": feed["x"].astype(np.float16),  # float16 -> float32: exact
        "n": feed["n"].astype(np.int8),  # int8 -> int32
        "m": feed["m"],
        "h": feed["h"].astype(np.float16),  # float16 -> float32, then bfloat16
    }
    got = model.run(widened)["output"]
    np.testing.assert_allclose(got, _eager({**widened, "x": widened["x"].astype(np.float32)}), atol=1e-5, rtol=1e-5)
    torch_feed = [torch.from_numpy(feed[k]) for k in ("x", "n", "m", "h")]  # CPU tensors read as arrays
    np.testing.assert_array_equal(model.run(torch_feed)["output"], model.run(feed)["output"])


def test_python_numbers_are_literals(model: BundleModel) -> None:
    feed = _feed()
    literal = {k: v.tolist() for k, v in feed.items()}  # floats are float64 in Python: rounded to float32
    np.testing.assert_array_equal(model.run(literal)["output"], model.run(feed)["output"])
    h = np.array([1 / 3, 2 / 3], np.float32)  # not bfloat16 values: rounded to nearest even, as torch does
    np.testing.assert_allclose(model.run({**feed, "h": h})["output"], _eager({**feed, "h": h}), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "x",
            np.zeros((3, 4), np.float64),
            r"input 'x' has dtype float64; the bundle expects float32 \(only casts "
            r"numpy makes without loss are applied: cast it first, e\.g\. x\.astype\(np\.float32\)\)",
        ),
        ("n", np.zeros(3, np.int64), r"input 'n' has dtype int64; the bundle expects int32 \(only casts"),
        ("n", np.zeros(3, np.float32), r"input 'n' has dtype float32; the bundle expects int32"),
        ("n", np.zeros(3, np.uint32), r"input 'n' has dtype uint32; the bundle expects int32"),
        ("m", np.zeros(3, np.uint8), r"input 'm' has dtype uint8; the bundle expects bool"),
        (
            "h",
            np.zeros(2, np.float64),
            r"input 'h' has dtype float64; the bundle expects bfloat16 \(bfloat16 inputs "
            r"take float32 values\)",
        ),
        (
            "n",
            [1.5, 2.0, 3.0],
            r"input 'n' has dtype float64; the bundle expects int32 \(Python numbers convert to "
            r"it when of the same kind and in range\)",
        ),
        ("n", [2**40, 0, 0], r"input 'n' has dtype int64; the bundle expects int32 \(Python numbers convert"),
        ("m", [1, 0, 1], r"input 'm' has dtype int64; the bundle expects bool \(Python numbers"),
        ("x", np.zeros((3, 4), np.complex64), r"input 'x' holds complex64 values, not numbers"),
    ],
)
def test_lossy_or_other_kind_dtypes_are_refused(model: BundleModel, name: str, value: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        model.run({**_feed(), name: value})


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, r"input 'x' is NoneType None, not an array of float32"),
        ("abc", r"input 'x' is str 'abc', not an array of float32"),
        (b"\x00" * 48, r"input 'x' is bytes b'\\x00.*, not an array of float32"),
        (Opaque(), r"input 'x' is Opaque <Opaque>, not an array of float32"),
        ({"a": 1}, r"input 'x' is dict \{'a': 1\}, not an array of float32"),
        (
            [[1.0, 2.0], [3.0]],
            r"input 'x' cannot be read as an array \(ValueError: setting an array element with a "
            r"sequence",
        ),
        ([["a", "b"]], r"input 'x' holds <U1 values, not numbers; the bundle expects float32"),
        ([None, 1.0], r"input 'x' holds object values, not numbers"),
        (
            torch.zeros(3, 4, requires_grad=True),
            r"input 'x' cannot be read as an array \(RuntimeError: Can't call "
            r"numpy\(\) on Tensor that requires grad",
        ),
        (
            torch.zeros(3, 4, dtype=torch.bfloat16),
            r"input 'x' cannot be read as an array \(TypeError: Got unsupported "
            r"ScalarType BFloat16",
        ),
    ],
)
def test_values_that_are_not_arrays_are_refused(model: BundleModel, value: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        model.run({**_feed(), "x": value})


def test_names_count_and_container_are_checked(model: BundleModel) -> None:
    feed = _feed()
    with pytest.raises(InputError, match=rf"^missing input\(s\) 'h'; the bundle takes {ACCEPTED}$"):
        model.run({k: v for k, v in feed.items() if k != "h"})
    with pytest.raises(InputError, match=rf"^unknown input name\(s\) 'extra', 3; the bundle takes {ACCEPTED}$"):
        model.run({**feed, "extra": feed["x"], 3: feed["x"]})
    with pytest.raises(InputError, match=r"^missing input\(s\) 'x'; unknown input name\(s\) 'X'; the bundle takes"):
        model.run({"X": feed["x"], **{k: v for k, v in feed.items() if k != "x"}})
    with pytest.raises(InputError, match=rf"^expected 4 inputs \(x, n, m, h\), got 3; the bundle takes {ACCEPTED}$"):
        model.run([feed["x"], feed["n"], feed["m"]])
    for wrong in (feed["x"], "xnmh", 7):
        with pytest.raises(
            InputError,
            match=rf"inputs must be a mapping of input name to array, or a list or tuple in "
            rf"input order; got {type(wrong).__name__}",
        ):
            model.run(wrong)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"missing input\(s\) 'h'"):
        rti.run_bundle(model.path, {k: v for k, v in feed.items() if k != "h"})


def test_an_input_given_by_name_and_path_is_refused(mixed: Path, tmp_path: Path) -> None:
    bundle = Path(shutil.copytree(mixed, tmp_path / "b"))
    meta = json.loads((bundle / "meta.json").read_text())
    meta["inputs"][0]["path"] = "args.x"
    (bundle / "meta.json").write_text(json.dumps(meta))
    m = BundleModel(bundle)
    feed = _feed()
    by_path = {"args.x" if k == "x" else k: v for k, v in feed.items()}
    np.testing.assert_array_equal(m.run(by_path)["output"], m.run(feed)["output"])
    with pytest.raises(InputError, match=r"input 'x' is given twice \(as 'x' and 'args\.x'\)"):
        m.run({**feed, "args.x": feed["x"]})


def test_static_shapes_are_checked(model: BundleModel) -> None:
    with pytest.raises(InputError, match=r"input 'x' has shape \[4, 3\], the bundle expects \[3, 4\]"):
        model.run({**_feed(), "x": np.zeros((4, 3), np.float32)})
    with pytest.raises(InputError, match=r"input 'h' has shape \[\], the bundle expects \[2\]"):
        model.run({**_feed(), "h": 1.0})


def test_strided_arrays_are_read_in_logical_order(model: BundleModel) -> None:
    feed = _feed()
    want = model.run(feed)["output"]
    wide = np.zeros((3, 8), np.float32)
    wide[:, ::2] = feed["x"]
    flipped = np.ascontiguousarray(feed["x"][::-1, ::-1])[::-1, ::-1]
    for x in (wide[:, ::2], np.asfortranarray(feed["x"]), flipped, feed["x"].T.copy().T):
        assert not x.flags.c_contiguous
        np.testing.assert_array_equal(model.run({**feed, "x": x})["output"], want)
    row = np.arange(4, dtype=np.float32)
    broadcast = np.broadcast_to(row, (3, 4))  # stride 0, read-only
    np.testing.assert_array_equal(
        model.run({**feed, "x": broadcast})["output"], model.run({**feed, "x": np.tile(row, (3, 1))})["output"]
    )
    n = np.array([0, 4, 0, -7, 0, 1], np.int32)[1::2]
    np.testing.assert_array_equal(model.run({**feed, "n": n})["output"], want)


def test_rlx_never_gets_a_buffer_of_another_length(model: BundleModel, monkeypatch: pytest.MonkeyPatch) -> None:
    real = bundle_host.to_carrier
    monkeypatch.setattr(bundle_host, "to_carrier", lambda arr, dtype, carrier: real(arr, dtype, carrier)[:-4])
    with pytest.raises(InputError, match=r"input 'x' would reach RLX as 44 bytes, but float32\[3, 4\] takes 48"):
        model.run(_feed())


def test_call_checks_inputs_too(model: BundleModel) -> None:
    feed = _feed()
    with pytest.raises(InputError, match=r"input 'x' has dtype float64"):
        model.call(feed["x"].astype(np.float64), feed["n"], feed["m"], feed["h"])
    np.testing.assert_array_equal(model.call(*feed.values()), model.run(feed)["output"])


def test_cli_run_refuses_bad_inputs(mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    feed = _feed()
    np.savez(tmp_path / "ok.npz", **feed)
    assert cli_main(["run", str(mixed), "--inputs", str(tmp_path / "ok.npz")]) == ExitCode.OK
    assert "output: float32[3, 4]" in capsys.readouterr().out
    np.savez(tmp_path / "f64.npz", **{**feed, "x": feed["x"].astype(np.float64)})
    assert cli_main(["run", str(mixed), "--inputs", str(tmp_path / "f64.npz")]) == ExitCode.BAD_INPUT
    assert "error: input 'x' has dtype float64; the bundle expects float32" in capsys.readouterr().err
    np.savez(tmp_path / "shape.npz", **{**feed, "n": np.zeros(4, np.int32)})
    assert cli_main(["run", str(mixed), "--inputs", str(tmp_path / "shape.npz")]) == ExitCode.BAD_INPUT
    assert "error: input 'n' has shape [4], the bundle expects [3]" in capsys.readouterr().err


# ---- a dynamic bundle: shapes through its symbols, the rest as above ----


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, BundleModel]:
    torch.manual_seed(0)
    linear = nn.Linear(6, 2).eval()
    out = tmp_path_factory.mktemp("dyn") / "o"
    ds = {"input": {0: Dim("batch", min=1, max=8)}}
    rti.from_torch(linear, (torch.randn(3, 6),), out, dynamic_shapes=ds, verify=False, per_node=False)
    return linear, BundleModel(out / "bundle")


def test_dynamic_inputs(dynamic: tuple[nn.Module, BundleModel]) -> None:
    linear, model = dynamic
    rng = np.random.default_rng(0)
    for batch in (1, 5, 8):
        x = rng.standard_normal((batch, 12)).astype(np.float32)[:, ::2]  # strided too
        with torch.no_grad():
            want = linear(torch.from_numpy(np.ascontiguousarray(x))).numpy()
        np.testing.assert_allclose(model.run([x])["output"], want, atol=1e-5, rtol=1e-5)
    with pytest.raises(InputError, match=r"input 'input' has rank 1 \(shape \[6\]\); the bundle expects \['s\d+', 6\]"):
        model.run([np.zeros(6, np.float32)])
    with pytest.raises(InputError, match=r"input 'input' has dtype float64; the bundle expects float32"):
        model.run([np.zeros((2, 6))])
    with pytest.raises(InputError, match=r"input 'input' cannot be read as an array"):
        model.run([[[0.0] * 6, [0.0] * 5]])
    with pytest.raises(
        InputError,
        match=r"input 'input' axis 0 has size 9 for symbol batch .* outside its declared "
        r"range 1\.\.8",
    ):
        model.run([np.zeros((9, 6), np.float32)])
    with pytest.raises(InputError, match=r"input 'input' has no shape"):
        model.binding({"input": [[0.0] * 6, [0.0] * 5]})
