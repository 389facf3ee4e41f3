"""Malformed ONNX files and inputs end in exit 2 naming what is wrong (node, value, initializer, input)
before anything is allocated or imported (`frontend/onnx/wellformed.py`), never a traceback: a value
nothing provides, a cycle, an initializer whose data does not fill its dims, sizes beyond the machine's
memory (in the file, or given by --dim), a corrupt .npz of inputs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnx_models import make_model, tensor
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode

HUGE = 1 << 20  # [HUGE, HUGE] float32 is 4 TiB


def _add(initializer: Any) -> Any:
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2, 3])], [tensor("y", [2, 3])], {})
    model.graph.initializer.append(initializer)
    return model


def _short_raw_data() -> Any:
    t = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    t.raw_data = t.raw_data[:8]
    return _add(t)


def _short_typed_data() -> Any:
    return _add(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0, 2.0]))


def _huge_initializer() -> Any:
    return _add(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[HUGE, HUGE], raw_data=b"\0" * 8))


def _chain(*nodes: tuple[str, list[str], str], shape: list[Any] | None = None, out: str = "y") -> Any:
    """Nodes (op, inputs, output), named by their output, over x float32[shape] (default [2, 3])."""
    made = [helper.make_node(op, ins, [o], name=o) for op, ins, o in nodes]
    shape = shape or [2, 3]
    return make_model(made, [tensor("x", shape)], [tensor(out, shape)], {})


MEMORY = "more than this machine's"
CASES: dict[str, tuple[Callable[[], Any], list[str], list[str]]] = {
    "a value nothing provides": (
        lambda: _chain(("Add", ["x", "ghost"], "y")),
        [],
        ["node 'y' (Add) reads 'ghost', which no node, input or initializer provides"],
    ),
    "a cycle": (
        lambda: _chain(("Add", ["x", "b"], "a"), ("Relu", ["a"], "b"), out="a"),
        [],
        ["node 'a' (Add) reads 'b', which node 'b' computes from it (a cycle)"],
    ),
    "nodes out of order": (
        lambda: _chain(("Relu", ["a"], "y"), ("Neg", ["x"], "a")),
        [],
        ["node 'y' (Relu) reads 'a', which node 'a' computes after it (nodes out of order)"],
    ),
    "raw data short of its dims": (
        _short_raw_data,
        [],
        ["initializer 'w': raw_data holds 8 bytes, its dims [2, 3] of type float32 take 24"],
    ),
    "typed data short of its dims": (
        _short_typed_data,
        [],
        ["initializer 'w': float_data holds 2 values, its dims [2, 3] take 6"],
    ),
    "an initializer beyond memory": (_huge_initializer, [], ["initializer 'w': float32[1048576, 1048576]", MEMORY]),
    "an input beyond memory": (
        lambda: _chain(("Relu", ["x"], "y"), shape=[HUGE, HUGE]),
        [],
        ["input 'x': float32[1048576, 1048576]", MEMORY],
    ),
    "a --dim beyond memory": (
        lambda: _chain(("Relu", ["x"], "y"), shape=["b", 4]),
        ["--dim", f"b={1 << 40}"],
        ["input x: float[b, 4] at the sizes given: float32[1099511627776, 4]", MEMORY],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_file_is_exit_2_naming_what_is_wrong(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make, args, words = CASES[case]
    path = tmp_path / "m.onnx"
    onnx.save(make(), str(path))
    out = tmp_path / "o"
    code = cli_main(["onnx", str(path), "-o", str(out), "-q", *args])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT and err.startswith("error: ") and "Traceback" not in err, err
    assert all(w in err for w in words), err
    assert not out.exists()


def test_a_corrupt_npz_of_inputs_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(
        make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2, 4])], [tensor("y", [2, 4])], {}),
        str(path),
    )
    bad = tmp_path / "in.npz"
    bad.write_bytes(b"PK\x03\x04 not a zip archive")
    code = cli_main(["onnx", str(path), "-o", str(tmp_path / "o"), "-q", "--inputs", str(bad)])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT and f"{bad}: not a readable .npz file (BadZipFile" in err, err
