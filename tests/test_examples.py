"""Every example in examples/ runs as a user runs it (`python examples/<name>.py --out DIR`, its
own process, PYTHONPATH inherited), exits 0 and prints what its docstring tells the user to look
at. The selected examples start together on a pool of two processes (each is mostly one
interpreter start, one torch.export and one conversion), and each test waits for its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"

# Example -> strings its output must hold (besides "example: OK"). Slowest first: they start first.
EXPECTED: dict[str, list[str]] = {
    "llama_decode": [
        "PASS hf_decode_step",
        "sweep over seq, cache: 11/11 points pass",
        "same tokens as model.generate (greedy): True; bindings compiled: 2",
    ],
    "hf_llm": [
        "PASS llama_for_causal_lm",
        "bundle inputs: input_ids int64[2, 8], attention_mask int64[2, 8]",
        "call() returned ['logits']",
    ],
    "diagnose": [
        "FAIL net",
        "report.first_divergence: relu (aten.relu.default)",
        "first divergence: relu",
        "repro.py  -> exit 1",
    ],
    "cli": ["PASS mlp_cli", "exit code 0", "outputs written to", "exit code 2"],
    "crate_styles": [
        "PASS mlp (high)",
        "crate (graph)",
        "crate (tensor)",
        "src/flow.rs",
        "// aten.linear.default `linear` in fc1",
        "CrateStyleError (exit 3)",
    ],
    "rnn": ["PASS lstm", "PASS gru", "output_1.1 float32[4, 2, 8]"],
    "options": [
        "PASS tiny_mlp",
        "name in meta.json: True",
        "per_node=False: 0",
        "export done in",
        "build(OUT): PASS",
        "reverify(OUT): PASS",
        "TimeLimitError (exit 6)",
    ],
    "decomposition": ["PASS mlp (aten)", "PASS mlp (high)", "PASS mlp (core)", "aten.addmm.default x2"],
    "control_flow": [
        "PASS gate",
        "both branches inlined",
        "true branch): matches PyTorch: True",
        "false branch): matches PyTorch: True",
        "ExportError, exit code 4",
    ],
    "dynamic_shapes": [
        "PASS token_mixer",
        "10/10 points pass",
        "run at {'batch': 8, 'seq': 64}",
        "shape (5, 17, 16), matches PyTorch: True",
    ],
    "transformer_decoder": ["PASS decoder_lm", "last token changes: True"],
    "transformer_encoder": ["PASS encoder", "src_key_padding_mask bool[2, 10]", "another padding mask"],
    "verify_inputs": ["PASS masked_softmax", "input sets: 8/8 pass", "auto:masked-row", "inputs:2"],
    "vit": ["PASS vision_transformer", "Conv x1", "Attention x2"],
    "cnn": ["PASS small_cnn", "features.0.weight.bn_folded"],
    "mlp": ["PASS mlp (high)", "BundleModel on new inputs"],
}

_pool = ThreadPoolExecutor(max_workers=2)
_runs: dict[str, Future[subprocess.CompletedProcess[str]]] = {}


def _run(name: str, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(EXAMPLES_DIR / f"{name}.py"), "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=dict(os.environ))


@pytest.fixture(scope="module")
def started(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future]:
    """Start every selected example (in EXPECTED's order) on the pool, once per module."""
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if item.fspath == request.fspath and hasattr(item, "callspec") and "name" in item.callspec.params
    }
    root = tmp_path_factory.mktemp("examples")
    for name in EXPECTED:
        if name in selected and name not in _runs:
            _runs[name] = _pool.submit(_run, name, root / name)
    return _runs


def test_every_example_is_checked() -> None:
    """A new example file needs its line in EXPECTED (and so a test); run_all.py lists the same."""
    sys.path.insert(0, str(EXAMPLES_DIR))
    try:
        import run_all
    finally:
        sys.path.remove(str(EXAMPLES_DIR))
    assert sorted(EXPECTED) == run_all.examples()


def test_run_all_refuses_an_unknown_name() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / "run_all.py"), "no_such_example"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no example no_such_example" in done.stderr, done.stderr


@pytest.mark.parametrize("name", list(EXPECTED))
def test_example_runs(name: str, started: dict[str, Future]) -> None:
    done = started[name].result()
    printed = done.stdout + done.stderr
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{printed}"
    assert "example: OK" in done.stdout, printed
    missing = [s for s in EXPECTED[name] if s not in printed]
    assert not missing, f"{name}: output lacks {missing}:\n{printed}"
