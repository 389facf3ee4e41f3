"""The developer tools live in the repository's tools/ folder, not in the installed package."""

from __future__ import annotations

import importlib.util

import pytest

from rlx_torch_import.cli import main

MOVED = ("bench", "coverage", "kernel_bench", "dynamic_bench", "thread_bench", "verify_bench", "opsdoc", "errors_doc")


@pytest.mark.parametrize("name", MOVED)
def test_the_package_does_not_ship_the_tool(name: str) -> None:
    assert importlib.util.find_spec(f"rlx_torch_import.{name}") is None
    assert importlib.util.find_spec(f"tools.{name}") is not None


def test_the_coverage_subcommand_points_to_the_tool(capsys) -> None:
    assert main(["coverage", "--ops", "add"]) == 2
    assert "python -m tools.coverage" in capsys.readouterr().err
