"""Models whose forward takes no tensor (issue 38): nothing at all (a constant-producing module), or
Python values only, which torch.export bakes in. Each converts to a bundle with no inputs that
`BundleModel.run({})`, `call()`, the CLI (`run` without `--inputs`), `verify` and the generated
crate run (docs/design.md decision au)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode


class Constant(nn.Module):
    """An output computed from a buffer and a parameter alone, and the buffer itself."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.arange(6.0).reshape(2, 3))
        self.weight = nn.Parameter(torch.randn(3, 4))

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.table @ self.weight + 1, self.table


class PythonValues(nn.Module):
    """Python values only: an int passed, a float left at its default."""

    def forward(self, n: int, scale: float = 2.0) -> tuple[torch.Tensor, int]:
        return torch.arange(n, dtype=torch.float32) * scale, n + 1


def test_a_module_without_inputs_converts_and_runs(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Constant().eval()
    report = rti.from_torch(model, (), tmp_path / "o")
    assert report.ok and [o.name for o in report.outputs] == ["output_0", "output_1"], report.summary()
    meta = json.loads((tmp_path / "o/bundle/meta.json").read_text())
    assert meta["inputs"] == []
    bundle = BundleModel(tmp_path / "o/bundle")
    want = [t.detach().numpy() for t in model()]
    for got in (bundle.run({}), bundle.run([])):
        np.testing.assert_allclose(got["output_0"], want[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(got["output_1"], want[1])
    table = bundle.call()[1]
    np.testing.assert_array_equal(table, want[1])
    with pytest.raises(rti.InputError, match=r"unknown input name\(s\) 'x'.*the bundle takes no inputs"):
        bundle.run({"x": np.zeros(2, np.float32)})
    with pytest.raises(rti.InputError, match=r"expected 0 inputs"):
        bundle.run([np.zeros(2, np.float32)])


def test_python_values_only_are_baked_in(tmp_path: Path) -> None:
    report = rti.from_torch(PythonValues(), (5,), tmp_path / "o")
    assert report.ok, report.summary()
    assert any("input n = 5 baked in" in n for n in report.notes)
    bundle = BundleModel(tmp_path / "o/bundle")
    assert bundle.input_names == []
    for values, count in ((bundle.call(), 6), (bundle.call(5), 6), (bundle.call(n=5, scale=2.0), 6)):
        np.testing.assert_array_equal(values[0], np.arange(5, dtype=np.float32) * 2)
        assert values[1] == count
    with pytest.raises(rti.InputError, match="input n was baked into the bundle as 5 at conversion; got 6"):
        bundle.call(6)


def test_a_python_value_returned_as_it_is(tmp_path: Path) -> None:
    """`nn.Identity()(1.0)`: no tensor in or out; the output is checked equal to eager PyTorch's."""
    report = rti.from_torch(nn.Identity(), [1.0], tmp_path / "o")
    assert report.ok and any("forward returns no tensor" in n for n in report.notes), report.summary()
    assert BundleModel(tmp_path / "o/bundle").call() == 1.0


def test_cli_converts_runs_and_verifies_a_model_without_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "const.py"
    src.write_text(
        textwrap.dedent(
            """
            import torch
            class Const(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("table", torch.arange(6.0).reshape(2, 3))
                def forward(self):
                    return self.table * 2 + 1
            model = Const()
            example_inputs = ()
            """
        )
    )
    out = tmp_path / "o"
    assert cli_main([str(src), "-o", str(out), "-q"]) == ExitCode.OK
    capsys.readouterr()
    saved = tmp_path / "out.safetensors"
    assert cli_main(["run", str(out / "bundle"), "--save", str(saved)]) == ExitCode.OK
    assert "output: float32[2, 3]" in capsys.readouterr().out
    from rlx_torch_import import safetensors_io

    got = safetensors_io.read(saved)["output.output"].to_numpy()
    np.testing.assert_array_equal(got, np.arange(6.0, dtype=np.float32).reshape(2, 3) * 2 + 1)
    assert cli_main(["verify", str(out), "-q"]) == ExitCode.OK
    # a bundle that takes inputs still needs --inputs, and says which
    other = tmp_path / "p"
    assert rti.from_torch(nn.ReLU(), (torch.randn(2),), other).ok
    capsys.readouterr()
    assert cli_main(["run", str(other / "bundle")]) == ExitCode.BAD_INPUT
    assert "the bundle takes input(s) input: give them with --inputs FILE" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_a_crate_without_inputs_builds_and_passes_its_test(tmp_path: Path) -> None:
    from test_crate import cargo

    torch.manual_seed(0)
    report = rti.from_torch(Constant().eval(), (), tmp_path / "o", emit=("bundle", "crate"), name="constant")
    assert report.ok, report.summary()
    (crate,) = (tmp_path / "o").glob("rlx-*")
    cargo(crate, "clippy", "--release", "--quiet", "--all-targets", "--", "-D", "warnings")
    cargo(crate, "test", "--release", "--quiet")
    saved = tmp_path / "crate.safetensors"
    cargo(crate, "run", "--release", "--quiet", "--example", "run", "--", "--save", str(saved))
    from rlx_torch_import import safetensors_io

    got = safetensors_io.read(saved)
    for name, want in BundleModel(tmp_path / "o/bundle").run({}).items():
        assert got[f"output.{name}"].to_numpy().tobytes() == np.ascontiguousarray(want).tobytes(), name
