"""No valid or invalid input takes the Python process down (src/graph_check.rs, src/error.rs).

Each case that crashed the process before the core's checks runs in a child Python, so a
regression shows as the child killed by a signal rather than as this test process dying: the
child must exit 0, having caught the core's exception, and the test checks its class and
message. The crashing (op, dtype) pairs come from `scripts/probe_core_safety.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rlx_torch_import import _core

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"

# Builds programs in the child: F32 graph inputs Cast into `dtype` inside the graph (so the kernel is
# probed apart from the boundary), one raw op, its result Cast back to F32.
PRELUDE = '''
import json, sys
import numpy as np
from rlx_torch_import import _core

def shape(dims, dtype):
    return {"dims": [{"Static": int(d)} for d in dims], "dtype": dtype}

def isolated(op, operands, out_dims, dtype):
    """F32 inputs of `operands` dims, cast to `dtype`, then `op`, then a Cast back to F32."""
    inputs, nodes, names = [], [], []
    for i, dims in enumerate(operands):
        inputs.append({"name": f"in{i}", "shape": shape(dims, "F32")})
        nodes.append({"id": f"c{i}", "op": {"Cast": {"to": dtype}}, "inputs": [f"in{i}"], "shape": shape(dims, dtype)})
        names.append(f"c{i}")
    nodes.append({"id": "op", "op": op, "inputs": names, "shape": shape(out_dims, dtype), "label": "aten.probe"})
    nodes.append({"id": "out", "op": {"Cast": {"to": "F32"}}, "inputs": ["op"], "shape": shape(out_dims, "F32")})
    return {"name": "t", "inputs": inputs, "params": [], "nodes": nodes, "outputs": ["out"]}

def compiled(program):
    return _core.CompiledModel(_core.program_to_hir_json(json.dumps(program)))

def feed(operands):
    return [(f"in{i}", np.ones(dims, np.float32).reshape(-1).view(np.uint8), "F32") for i, dims in enumerate(operands)]
'''

EPILOGUE = """
try:
    case()
except Exception as e:
    print(json.dumps({"class": type(e).__name__, "bases": [c.__name__ for c in type(e).__mro__], "message": str(e)}))
else:
    print(json.dumps({"class": None}))
"""


def in_child(body: str) -> dict:
    """Run `def case(): <body>` in a child Python; what it raised (class, its bases, message)."""
    code = PRELUDE + "\ndef case():\n" + textwrap.indent(textwrap.dedent(body), "    ") + EPILOGUE
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        pytest.fail(f"the child was killed by {name}: {proc.stderr[-2000:]}")
    assert proc.returncode == 0, f"the child exited {proc.returncode}: {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def refused_by_rlx_table(found: dict, op: str, dtype: str) -> None:
    # refused by the core's checks (bad input: only a hand-edited or foreign graph has one), not an RLX failure
    assert found["class"] == "CheckError" and "ValueError" in found["bases"], found
    message = found["message"]
    assert f"RLX 0.2.19's {op} kernel corrupts memory" in message, message
    assert f"({dtype} here)" in message and "refused before running" in message, message


@pytest.mark.parametrize("dtype", ["I8", "U8", "I16", "Bool"])
def test_narrow_matmul_is_refused_not_a_heap_corruption(dtype: str) -> None:
    found = in_child(f"""
        operands = [[64, 64], [64, 64]]
        model = compiled(isolated("MatMul", operands, [64, 64], {dtype!r}))
        model.run(feed(operands))
    """)
    refused_by_rlx_table(found, "MatMul", dtype)
    assert found["message"].startswith('node %4 "aten.probe" (MatMul): refused before running'), found


def test_narrow_matmul_at_the_boundary_is_refused() -> None:
    found = in_child("""
        dims = shape([256, 256], "I8")
        program = {"name": "t", "inputs": [{"name": "a", "shape": dims}, {"name": "b", "shape": dims}], "params": [],
                   "nodes": [{"id": "mm", "op": "MatMul", "inputs": ["a", "b"], "shape": dims}], "outputs": ["mm"]}
        a = np.ones((256, 256), np.int8).view(np.uint8).reshape(-1)
        compiled(program).run([("a", a, "I8"), ("b", a, "I8")])
    """)
    refused_by_rlx_table(found, "MatMul", "I8")


# Every other (op, dtype) the probe found to crash, at 64 elements per axis: (op, operand dims, out dims).
CRASHES = [
    ({"Binary": "Add"}, [[64, 64], [64, 64]], [64, 64], "Bool"),
    ({"Activation": "Relu"}, [[64, 64]], [64, 64], "I8"),
    ({"Reduce": {"op": "Sum", "axes": [1], "keep_dim": False}}, [[64, 64]], [64], "U8"),
    ({"Softmax": {"axis": 1}}, [[64, 64]], [64, 64], "I16"),
    ({"Transpose": {"perm": [1, 0]}}, [[64, 128]], [128, 64], "I16"),
    ({"Expand": {"target_shape": [64, 64]}}, [[1, 64]], [64, 64], "I16"),
    ({"Gather": {"axis": 0}}, [[64, 64], [64]], [64, 64], "U8"),
    ({"Slice": {"axis": 1, "start": 0, "len": 32, "step": 2}}, [[64, 64]], [64, 32], "Bool"),
    ({"Sort": {"axis": 1, "descending": False}}, [[64, 64]], [64, 64], "I8"),
    ({"Cumsum": {"axis": -1, "exclusive": False}}, [[64, 64]], [64, 64], "U8"),
]


CRASH_IDS = [f"{next(iter(op))}-{dtype}" for op, _, _, dtype in CRASHES]


@pytest.mark.parametrize(("op", "operands", "out", "dtype"), CRASHES, ids=CRASH_IDS)
def test_other_crashing_kernels_are_refused(op: dict, operands: list, out: list, dtype: str) -> None:
    found = in_child(f"""
        operands = {operands!r}
        model = compiled(isolated({op!r}, operands, {out!r}, {dtype!r}))
        model.run(feed(operands))
    """)
    refused_by_rlx_table(found, next(iter(op)), dtype)


# What `python scripts/probe_core_safety.py` found to crash RLX 0.2.19 (group, case, first size that
# crashed, dtypes); the child builds each with the probe's own `program`.
PROBED_CRASHES = [
    ("boundary", "moved-output", 256, "U8"),
    ("boundary", "moved-passthrough", 64, "Bool I8 U8"),
    ("boundary", "output", 256, "Bool I16 U8"),
    ("boundary", "param-output", 64, "Bool I8 U8"),
    ("boundary", "passthrough", 64, "Bool I8 U8"),
    ("index", "GatherElements", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Abs", 256, "Bool I16 I8 U8"),
    ("op", "Activation:Erf", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Exp", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Floor", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Gelu", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Neg", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Recip", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Relu", 64, "U8"),
    ("op", "Activation:Relu", 256, "Bool I16 I8"),
    ("op", "Activation:Round", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Sigmoid", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Sign", 64, "Bool I16 I8 U8"),
    ("op", "Activation:Sqrt", 64, "Bool I16 I8 U8"),
    ("op", "ArgMax", 64, "Bool I16 I8 U8"),
    ("op", "ArgMin", 64, "Bool I16 I8 U8"),
    ("op", "Attention:Bias", 4, "Bool I16 I8 U8"),
    ("op", "Attention:Causal", 4, "Bool I16 I8 U8"),
    ("op", "Attention:None", 4, "Bool I16 I8 U8"),
    ("op", "BatchNormInference", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Add", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Add@broadcast", 64, "Bool I16 I8 U8"),
    ("op", "Binary:BitAnd", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Div", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Max", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Min", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Mod", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Mul", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Pow", 64, "Bool I16 I8 U8"),
    ("op", "Binary:Sub", 64, "Bool I16 I8 U8"),
    ("op", "Clamp", 64, "Bool I16 I8"),
    ("op", "Conv", 64, "Bool I16 I8 U8"),
    ("op", "Conv3d", 4, "Bool I16 I8 U8"),
    ("op", "ConvTranspose2d", 4, "Bool I8 U8"),
    ("op", "ConvTranspose2d", 64, "I16"),
    ("op", "ConvTranspose3d", 4, "Bool I16 I8 U8"),
    ("op", "CumProd", 64, "Bool I16 I8 U8"),
    ("op", "Cumsum", 64, "Bool I16 I8 U8"),
    ("op", "Expand", 64, "I16"),
    ("op", "Gather", 64, "Bool I8 U8"),
    ("op", "GroupNorm", 64, "Bool I16 I8 U8"),
    ("op", "LayerNorm", 64, "Bool I16 I8 U8"),
    ("op", "MatMul", 64, "Bool I16 I8 U8"),
    ("op", "MatMul@batched", 64, "Bool I8 U8"),
    ("op", "Pool:Max", 64, "Bool I16 I8 U8"),
    ("op", "Pool:Mean", 64, "Bool I16 I8 U8"),
    ("op", "Reduce:Max", 64, "Bool I16 I8 U8"),
    ("op", "Reduce:Mean", 64, "Bool I16 I8 U8"),
    ("op", "Reduce:Min", 64, "Bool I16 I8 U8"),
    ("op", "Reduce:Prod", 64, "Bool I16 I8 U8"),
    ("op", "Reduce:Sum", 64, "Bool I16 I8 U8"),
    ("op", "RmsNorm", 64, "Bool I16 I8 U8"),
    ("op", "Rope", 4, "Bool I8 U8"),
    ("op", "RoundToFormat", 64, "Bool I16 I8 U8"),
    ("op", "ScatterElements:Add", 64, "Bool I16 I8 U8"),
    ("op", "ScatterElements:None", 64, "Bool I16 I8 U8"),
    ("op", "ScatterNd:Add", 64, "Bool I16 I8 U8"),
    ("op", "ScatterNd:None", 64, "Bool I16 I8 U8"),
    ("op", "Slice", 64, "Bool I8 U8"),
    ("op", "Slice", 256, "I16"),
    ("op", "Softmax", 64, "Bool I16 I8 U8"),
    ("op", "Sort", 64, "Bool I16 I8 U8"),
    ("op", "Transpose", 4, "I16"),
    ("op", "Trilu", 64, "Bool I16 I8 U8"),
    ("op", "Where", 64, "Bool I16 I8 U8"),
]


def test_every_crash_the_probe_found_is_refused() -> None:
    """One child builds every probed crash with the probe's own graphs; a case the core failed to
    refuse would run its kernel there and kill the child (its last case is on stderr)."""
    cases = [(g, op, d, n) for g, op, n, dtypes in PROBED_CRASHES for d in dtypes.split()]
    found = in_child(f"""
        sys.path.insert(0, {str(SCRIPTS)!r})
        import probe_core_safety as probe
        results = []
        for group, op, dtype, n in {cases!r}:
            print(group, op, dtype, n, file=sys.stderr, flush=True)
            doc, feed, bind = probe.program(probe.Case(group, op, dtype, n))
            try:
                model = compiled(doc)
                for name, data, dt in bind:
                    model.set_param(name, np.frombuffer(data, np.uint8), dt)
                model.run([(name, np.frombuffer(data, np.uint8), dt) for name, data, dt in feed])
                results.append([group, op, dtype, n, "ran", ""])
            except Exception as e:
                results.append([group, op, dtype, n, type(e).__name__, str(e)])
        raise RuntimeError(json.dumps(results))
    """)
    results = json.loads(found["message"])
    assert len(results) == len(cases) > 250
    wrong = [r for r in results if r[4] != "CheckError" or "refused before running" not in r[5]]
    assert not wrong, wrong[:5]


def test_a_narrow_graph_output_is_refused() -> None:
    found = in_child("""
        dims = [1024, 1024]
        program = {"name": "t", "inputs": [{"name": "x", "shape": shape(dims, "F32")}], "params": [],
                   "nodes": [{"id": "c", "op": {"Cast": {"to": "U8"}}, "inputs": ["x"], "shape": shape(dims, "U8")}],
                   "outputs": ["c"]}
        compiled(program).run([("x", np.ones(dims, np.float32).view(np.uint8).reshape(-1), "F32")])
    """)
    assert found["class"] == "CheckError", found
    assert found["message"].startswith("graph output 0 (node %1 (Cast)) is U8: refused before running"), found


def test_a_shape_whose_size_overflows_is_refused() -> None:
    found = in_child("""
        n = 2 ** 31
        program = {"name": "t", "inputs": [{"name": "x", "shape": shape([n, n], "F32")}], "params": [],
                   "nodes": [{"id": "r", "op": {"Activation": "Relu"}, "inputs": ["x"], "shape": shape([n, n], "F32")}],
                   "outputs": ["r"]}
        compiled(program)
    """)
    assert found["class"] == "CheckError" and "ValueError" in found["bases"], found
    assert found["message"].startswith("node h0 (Input): F32 [2147483648, 2147483648] has more elements or bytes"), (
        found
    )


def test_a_tensor_larger_than_memory_is_refused() -> None:
    found = in_child("""
        n = 2 ** 20
        program = {"name": "t", "inputs": [{"name": "x", "shape": shape([4], "F32")}], "params": [],
                   "nodes": [{"id": "e", "op": {"Expand": {"target_shape": [n, n]}}, "inputs": ["x"],
                              "shape": shape([n, n], "F32"), "label": "aten.expand"}],
                   "outputs": ["e"]}
        compiled(program)
    """)
    assert found["class"] == "CheckError", found
    message = found["message"]
    assert message.startswith('node h1 "aten.expand" (Expand): F32 [1048576, 1048576] (1099511627776 elements)'), (
        message
    )
    assert "(4398046511104 bytes), more than this machine's memory" in message, message
    assert "MemTotal" in message or "cgroup" in message, message


def test_an_arena_larger_than_memory_is_refused() -> None:
    """Three tensors of 40% of the machine's memory each, live together: each fits, the arena does not."""
    found = in_child("""
        total = int(next(l for l in open("/proc/meminfo") if l.startswith("MemTotal")).split()[1]) * 1024
        try:  # the core's limit: MemTotal, or a cgroup limit below it
            total = min(total, int(open("/sys/fs/cgroup/memory.max").read()))
        except (OSError, ValueError):
            pass
        n = int(total * 0.4) // 4
        program = {"name": "t", "inputs": [{"name": "a", "shape": shape([n], "F32")},
                                           {"name": "b", "shape": shape([n], "F32")}], "params": [],
                   "nodes": [{"id": "s", "op": {"Binary": "Add"}, "inputs": ["a", "b"], "shape": shape([n], "F32")}],
                   "outputs": ["s"]}
        compiled(program)
    """)
    assert found["class"] == "CheckError", found
    assert "arena (RLX's memory plan for its 3 nodes), more than this machine's memory" in found["message"], found


def test_a_declared_shape_smaller_than_the_kernel_writes_is_refused() -> None:
    found = in_child("""
        program = {"name": "t", "inputs": [{"name": "x", "shape": shape([64, 64], "F32")}], "params": [],
                   "nodes": [{"id": "k", "op": {"TopK": {"k": 2}}, "inputs": ["x"], "shape": shape([1], "F32")}],
                   "outputs": ["k"]}
        compiled(program).run([("x", np.ones((64, 64), np.float32).view(np.uint8).reshape(-1), "F32")])
    """)
    assert found["class"] == "CheckError", found
    assert found["message"] == (
        "node %1 (TopK) declares F32 [1] but its operands give F32 [64, 2]; the arena would be sized from the "
        "declaration while the kernel writes what the operands give"
    )


MODEL = {
    "name": "t",
    "inputs": [{"name": "x", "shape": {"dims": [{"Static": 2}, {"Static": 3}], "dtype": "F32"}}],
    "params": [{"name": "w", "shape": {"dims": [{"Static": 3}, {"Static": 2}], "dtype": "F32"}}],
    "nodes": [
        {
            "id": "mm",
            "op": "MatMul",
            "inputs": ["x", "w"],
            "shape": {"dims": [{"Static": 2}, {"Static": 2}], "dtype": "F32"},
        },
    ],
    "outputs": ["mm"],
}


def _model() -> _core.CompiledModel:
    return _core.CompiledModel(_core.program_to_hir_json(json.dumps(MODEL)))


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def test_parameters_are_checked_before_rlx_binds_them() -> None:
    """Wrong lengths were bound anyway (RLX computed with a wrong-size buffer); now CheckError."""
    model = _model()
    w = np.arange(6, dtype=np.float32)
    declared = "F32 [3, 2] (6 elements, 24 bytes)"
    with pytest.raises(_core.CheckError, match=r'^unknown parameter "v"; the graph\'s parameters are "w"$'):
        model.set_param("v", _bytes(w), "F32")
    with pytest.raises(_core.CheckError) as info:
        model.set_param("w", _bytes(w[:5]), "F32")
    assert str(info.value) == f'parameter "w" is declared {declared}; got 20 bytes of F32 data, expected 24'
    with pytest.raises(_core.CheckError) as info:
        model.set_param("w", _bytes(w.astype(np.int64)), "I64")
    assert str(info.value) == (
        f'parameter "w" is declared {declared}; got I64 data, expected F32 (or F16/BF16, which RLX widens)'
    )
    with pytest.raises(_core.CheckError, match=r"bytes 16\.\.28 are past its end"):
        model.set_param_range("w", 16, _bytes(w[:3]))
    with pytest.raises(ValueError, match='unknown RLX dtype "F8"'):  # CheckError is a ValueError
        model.set_param("w", _bytes(w), "F8")
    model.set_param("w", _bytes(w.astype(np.float16)), "F16")  # widened by RLX
    ((out, dtype, dims),) = model.run([("x", _bytes(np.ones((2, 3), np.float32)), "F32")])
    assert (dtype, dims) == ("F32", [2, 2])
    assert np.frombuffer(out, np.float32).tolist() == [6.0, 9.0, 6.0, 9.0]


def test_inputs_are_checked_before_rlx_reads_them() -> None:
    model = _model()
    model.set_param("w", _bytes(np.ones((3, 2), np.float32)), "F32")
    x = _bytes(np.ones((2, 3), np.float32))
    declared = 'input "x" is declared F32 [2, 3] (6 elements, 24 bytes)'
    cases = [
        ([], 'missing input(s) "x"; the graph takes "x"'),
        ([("x", x, "F32"), ("y", x, "F32")], 'unknown input "y"; the graph\'s inputs are "x"'),
        ([("x", x, "F32"), ("x", x, "F32")], 'input "x" is given twice'),
        ([("x", x[:20], "F32")], f"{declared}; got 20 bytes"),
        ([("x", _bytes(np.ones((2, 3), np.float64)), "F64")], f"{declared}; got F64 data"),
    ]
    for feed, message in cases:
        with pytest.raises(_core.CheckError) as info:
            model.run(feed)
        assert str(info.value) == message
    ((out, _, _),) = model.run([("x", x, "F32")])
    assert np.frombuffer(out, np.float32).tolist() == [3.0, 3.0, 3.0, 3.0]


def test_every_entry_point_raises_the_core_classes() -> None:
    with pytest.raises(_core.CheckError, match="lowered program is not valid JSON"):
        _core.program_to_hir_json("{")
    with pytest.raises(_core.CheckError, match=r"model\.hir\.json is not valid RLX HIR"):
        _core.CompiledModel("[]")
    with pytest.raises(_core.CheckError, match=r"not a valid \.rlxmodel graph"):
        _core.SymbolicModel("not a model")
    with pytest.raises(_core.CheckError, match=r"is not an RLX_\* setting"):
        _core.set_rlx_env("PATH", "x")
    with pytest.raises(_core.CheckError):
        _core.op_to_rust('{"NoSuchOp": 1}', "data")
    with pytest.raises(_core.CheckError, match="must be a contiguous byte buffer"):
        _model().run([("x", np.ones((3, 4), np.uint8)[:, ::2], "F32")])
    assert issubclass(_core.CheckError, ValueError) and issubclass(_core.RlxFailure, RuntimeError)


def test_a_panic_in_rlx_is_an_rlx_failure_and_the_model_is_then_refused() -> None:
    """RLX 0.2.19 panics on an I16 graph input; the panic is a RuntimeError subclass (not PyO3's
    PanicException, a BaseException) without the default panic report on stderr, and the model,
    possibly half-written, refuses later calls."""
    found = in_child("""
        import io, os
        program = {"name": "t", "inputs": [{"name": "x", "shape": shape([4], "I16")}], "params": [],
                   "nodes": [{"id": "f", "op": {"Cast": {"to": "F32"}}, "inputs": ["x"], "shape": shape([4], "F32")}],
                   "outputs": ["f"]}
        model = compiled(program)
        x = np.arange(4, dtype=np.int16).view(np.uint8)
        try:
            model.run([("x", x, "I16")])
        except _core.RlxFailure as e:
            first = str(e)
        else:
            raise AssertionError("RLX 0.2.19 panics on an I16 input")
        assert first.startswith("RLX panicked while running the graph: "), first
        model.run([("x", x, "I16")])
    """)
    assert found["class"] == "RlxFailure", found
    assert found["message"].startswith("this compiled model is unusable: an earlier call panicked inside RLX"), found


def test_the_panic_report_stays_off_stderr() -> None:
    code = PRELUDE + textwrap.dedent("""
        program = {"name": "t", "inputs": [{"name": "x", "shape": shape([4], "I16")}], "params": [],
                   "nodes": [{"id": "f", "op": {"Cast": {"to": "F32"}}, "inputs": ["x"], "shape": shape([4], "F32")}],
                   "outputs": ["f"]}
        try:
            compiled(program).run([("x", np.arange(4, dtype=np.int16).view(np.uint8), "I16")])
        except _core.RlxFailure as e:
            print(e)
    """)
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("RLX panicked while running the graph: ") and " (at rlx-" in proc.stdout, proc.stdout
    assert "panicked at" not in proc.stderr, proc.stderr
