"""The CLI end to end: conversion at every level, build, exit codes and messages for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlx_torch_import.errors import ExitCode

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", *args], capture_output=True, text=True, timeout=300
    )


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\n" + textwrap.dedent(body))
    return path


@pytest.mark.parametrize("level", ["aten", "high", "core"])
def test_mlp_through_cli(level: str, tmp_path) -> None:
    out = tmp_path / "out"
    r = cli(str(REPO / "examples" / "mlp.py"), "-o", str(out), "--decomposition", level)
    assert r.returncode == ExitCode.OK, r.stderr
    assert r.stdout.startswith("PASS mlp"), r.stdout
    assert "[rlx-torch-import] export" in r.stderr  # progress is shown by default
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] and report["decomposition"] == level
    assert report["outputs"][0]["cosine"] >= 0.99999 and report["outputs"][0]["max_abs_error"] <= 1e-4
    for f in (
        "torch-ir.json",
        "weights.safetensors",
        "reference.safetensors",
        "bundle/model.hir.json",
        "bundle/meta.json",
        "bundle/weights.safetensors",
        "report.md",
    ):
        assert (out / f).is_file(), f


def test_quiet_and_build(tmp_path) -> None:
    out = tmp_path / "out"
    r = cli(str(REPO / "examples" / "mlp.py"), "-o", str(out), "-q", "--name", "tiny")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads((out / "bundle" / "meta.json").read_text())["name"] == "tiny"
    r = cli("build", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("PASS tiny")


def test_factory_function(tmp_path) -> None:
    path = write(
        tmp_path,
        """
        def get_model():
            return nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (torch.randn(2, 4),)
    """,
    )
    r = cli(str(path), "-o", str(tmp_path / "out"), "-q")
    assert r.returncode == 0, r.stderr


def test_unsupported_op_exit_code(tmp_path) -> None:
    path = write(
        tmp_path,
        """
        class M(nn.Module):
            def forward(self, x):
                return torch.lgamma(x).digamma()
        model = M()
        example_inputs = (torch.randn(3, 2),)
    """,
    )
    out = tmp_path / "out"
    r = cli(str(path), "-o", str(out), "-q")
    assert r.returncode == ExitCode.UNSUPPORTED, r.stderr
    assert "aten.lgamma.default" in r.stderr and "aten.digamma.default" in r.stderr
    assert "node lgamma" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("body", "code", "needles"),
    [
        ("raise ValueError('boom')\n", ExitCode.BAD_INPUT, ["raised ValueError: boom", "line 3"]),
        ("x = 1\n", ExitCode.BAD_INPUT, ["defines no 'model' and no 'example_inputs'", "get_model()"]),
        (
            "model = nn.Linear\nexample_inputs = (torch.randn(1, 2),)\n",
            ExitCode.BAD_INPUT,
            ["not a torch.nn.Module", "instantiate"],
        ),
        (
            "model = nn.Linear(2, 2)\nexample_inputs = ([torch.randn(1, 2), object()],)\n",
            ExitCode.BAD_INPUT,
            ["input input.1 is a object"],
        ),
        (
            """
class M(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x
model = M()
example_inputs = (torch.randn(3),)
""",
            ExitCode.EXPORT_FAILED,
            ["torch.export failed", "hint:"],
        ),
    ],
    ids=["raises", "missing-model", "class-not-instance", "non-tensor-input", "data-dependent"],
)
def test_bad_model_files(body: str, code: int, needles: list[str], tmp_path) -> None:
    out = tmp_path / "out"
    r = cli(str(write(tmp_path, body)), "-o", str(out), "-q")
    assert r.returncode == code, r.stderr
    assert r.stderr.startswith("error: "), r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


def test_missing_model_file_and_bad_build_dir(tmp_path) -> None:
    r = cli(str(tmp_path / "nope.py"), "-o", str(tmp_path / "out"))
    assert r.returncode == ExitCode.BAD_INPUT and "does not exist" in r.stderr
    r = cli("build", str(tmp_path))
    assert r.returncode == ExitCode.BAD_INPUT and "torch-ir.json: not found" in r.stderr


@pytest.mark.parametrize(
    ("flags", "emit"),
    [
        ([], ("bundle",)),
        (["--emit", "crate"], ("crate",)),
        (["--emit", "bundle,crate"], ("bundle", "crate")),
        (["--emit", "bundle", "--emit", "crate"], ("bundle", "crate")),
        (["--emit", "crate,bundle", "--emit", "crate"], ("crate", "bundle")),
        (["--emit", " bundle , crate "], ("bundle", "crate")),
    ],
)
def test_emit_takes_comma_lists_and_repeats(flags: list[str], emit: tuple[str, ...]) -> None:
    from rlx_torch_import.cli import _build_parser, _convert_parser
    from rlx_torch_import.cli_args import emits as _emits

    assert _emits(_convert_parser().parse_args(["m.py", "-o", "o", *flags])) == emit
    assert _emits(_build_parser().parse_args(["d", *flags])) == emit


@pytest.mark.parametrize("parser", ["convert", "build"])
def test_verify_is_the_explicit_default_and_excludes_no_verify(parser: str, capsys) -> None:
    from rlx_torch_import.cli import _build_parser, _convert_parser

    p, base = (_convert_parser(), ["m.py", "-o", "o"]) if parser == "convert" else (_build_parser(), ["d"])
    assert p.parse_args(base).verify is True
    assert p.parse_args([*base, "--verify"]).verify is True
    assert p.parse_args([*base, "--no-verify"]).verify is False
    with pytest.raises(SystemExit) as bad:
        p.parse_args([*base, "--verify", "--no-verify"])
    assert bad.value.code == ExitCode.BAD_INPUT
    assert "not allowed with argument --verify" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        p.parse_args([*base, "--emit", "bundle,wheel"])
    assert bad.value.code == ExitCode.BAD_INPUT and "invalid choice: 'wheel'" in capsys.readouterr().err


def test_comma_emit_and_verify_end_to_end(tmp_path, capsys) -> None:
    from rlx_torch_import.cli import main

    out = tmp_path / "out"
    assert main([str(REPO / "examples" / "mlp.py"), "-o", str(out), "--emit", "bundle,crate", "--verify", "-q"]) == 0
    assert (out / "rlx-mlp" / "Cargo.toml").is_file() and (out / "bundle" / "meta.json").is_file()
    assert capsys.readouterr().out.startswith("PASS mlp")
    shutil.rmtree(out / "rlx-mlp")
    assert main(["build", str(out), "--emit", "bundle", "--emit", "crate", "--verify", "-q"]) == 0
    assert (out / "rlx-mlp" / "Cargo.toml").is_file(), "build wrote the crate again"
    assert capsys.readouterr().out.startswith("PASS mlp")
    assert main(["build", str(out), "--emit", "bundle,crate", "--no-verify", "-q"]) == 0
    assert capsys.readouterr().out.startswith("NOT VERIFIED mlp")


def test_version_and_defects_arguments(tmp_path) -> None:
    r = cli("--version")
    assert r.returncode == 0 and "rlx-torch-import" in r.stdout and "RLX 0.2.19" in r.stdout
    r = cli("defects", "now")
    assert r.returncode == ExitCode.BAD_INPUT and "unrecognized arguments: now" in r.stderr
    r = cli("defects", "--device", "tpu")
    assert r.returncode == ExitCode.BAD_INPUT and "invalid choice: 'tpu'" in r.stderr
    r = cli(str(tmp_path), "-o", str(tmp_path / "out"))
    assert r.returncode == ExitCode.BAD_INPUT and "is a directory" in r.stderr
