"""docs/errors.md: every error type and exit code, each with a message produced by actually running it.

Each error class of `errors.py` has a scenario here: a small model file or a damaged conversion, the
command a user would type, and the message and exit code that command really gives (the CLI run
in-process, in a scratch directory, so paths in messages are relative). The page is generated from
those runs, never written by hand, so it cannot drift from the code:

python -m tools.errors_doc --write   # run every scenario, rewrite docs/errors.md
python -m tools.errors_doc --check   # exit 1 when docs/errors.md differs (tests/test_errors_doc.py)
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rlx_torch_import import errors
from rlx_torch_import.layout import TORCH_IR

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"

# What each documented exit code means (the CLI's epilog and README say the same).
EXIT_MEANINGS = {
    errors.ExitCode.OK: "converted (and verified, unless `--no-verify`); `diagnose`: no divergence",
    errors.ExitCode.PARITY_FAILED: "converted, but parity against PyTorch failed (OUT/report.md says where); "
    "`diagnose`: a divergence or accumulated drift",
    errors.ExitCode.BAD_INPUT: "bad input: the model file, an option, torch-ir, a bundle, a safetensors file or "
    "the inputs given are wrong; nothing was converted",
    errors.ExitCode.UNSUPPORTED: "the model needs ops, dtypes or dynamic sizes the lowering does not support "
    "(all listed at once)",
    errors.ExitCode.EXPORT_FAILED: "`torch.export` could not capture the model",
    errors.ExitCode.INTERNAL: "a bug in rlx-torch-import or a defect in RLX (please report it)",
    errors.ExitCode.TIMED_OUT: "the model file, torch.export or an eager PyTorch run of the model took longer "
    "than `--timeout` seconds",
    errors.ExitCode.DEVICE: "`--device cuda`: the Rust core was built without CUDA, the machine has no NVIDIA "
    "driver or GPU, or RLX's CUDA backend cannot run the model within its budgets (float64, or integers float32 "
    "does not hold); the message says which",
    errors.ExitCode.WRITE_FAILED: "a file of the output could not be written (no space left, quota, read-only "
    "file system, I/O error); the message names the file and the cause, and nothing half-written is left",
    errors.ExitCode.RANDOM: "converted; every output that does not depend on random draws passed, but some outputs "
    "do (they changed with torch's seed): the report names them and says how to verify them (docs/usage.md "
    '"Random ops")',
}

MLP = (Path(__file__).resolve().parents[1] / "examples" / "mlp.py").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Scenario:
    """One way to meet an error: what the user did, the command, and how to set it up."""

    error: str  # the class name in errors.py ("internal" for an unexpected exception)
    did: str  # what the user did, one sentence
    argv: tuple[str, ...]  # the rlx-torch-import arguments
    setup: Callable[[Path], None]  # prepares the scratch directory (model files, damaged outputs)
    # Held around the command: a planted bug, for errors that only a bug raises.
    patch: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


@dataclass(frozen=True)
class Outcome:
    scenario: Scenario
    exit_code: int
    message: str  # what the CLI printed to stderr (progress lines dropped)


def _nothing(work: Path) -> None:
    """No set-up: the scenario's command runs in an empty directory."""


def _file(name: str, body: str) -> Callable[[Path], None]:
    def setup(work: Path) -> None:
        (work / name).write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")

    return setup


def _converted(then: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """The bundled MLP converted into `out/`, then damaged by `then`."""

    def setup(work: Path) -> None:
        from rlx_torch_import.cli import main

        (work / "mlp.py").write_text(MLP, encoding="utf-8")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            code = main(["mlp.py", "-o", "out", "-q", "--no-per-node"])
        if code != 0:
            raise RuntimeError(f"converting the example for a scenario exited {code}")
        if then is not None:
            then(work)

    return setup


def _out_of_range_ids(work: Path) -> None:
    """An `Embedding(10, 4)` converted into `out/`, and ids past its table in `ids.npz`."""
    import numpy as np

    from rlx_torch_import.cli import main

    model = "import torch\nfrom torch import nn\n\nmodel = nn.Embedding(10, 4)\n"
    model += "example_inputs = (torch.tensor([[1, 2, 3]]),)\n"
    (work / "embed.py").write_text(model, encoding="utf-8")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        code = main(["embed.py", "-o", "out", "-q", "--no-per-node"])
    if code != 0:
        raise RuntimeError(f"converting the embedding for a scenario exited {code}")
    np.savez(work / "ids.npz", input=np.array([[10, 11, 10**6]]))


def _duplicate_node(work: Path) -> None:
    path = work / "out" / TORCH_IR
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["nodes"][1]["name"] = doc["nodes"][0]["name"]
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")


def _garbage_header(work: Path) -> None:
    path = work / "out" / "bundle" / "weights.safetensors"
    data = bytearray(path.read_bytes())
    data[:8] = (1 << 62).to_bytes(8, "little")
    path.write_bytes(bytes(data))


def _wrong_shape_inputs(work: Path) -> None:
    import numpy as np

    np.savez(work / "x.npz", x=np.zeros((4, 65), np.float32))


def _int16_input(work: Path) -> None:
    """The bundle's graph edited to take an int16 input (RLX 0.2.19 panics reading one; our lowering
    passes narrow integers as float32, docs/rlx-defects.md `boundary-narrow`)."""
    import numpy as np

    from rlx_torch_import import _core, safetensors_io

    def shape(dtype: str) -> dict[str, object]:
        return {"dims": [{"Static": 4}], "dtype": dtype}

    program = {
        "name": "edited",
        "inputs": [{"name": "x", "shape": shape("I16")}],
        "params": [],
        "nodes": [{"id": "y", "op": {"Cast": {"to": "F32"}}, "inputs": ["x"], "shape": shape("F32")}],
        "outputs": ["y"],
    }
    bundle = work / "out" / "bundle"
    (bundle / "model.hir.json").write_text(_core.program_to_hir_json(json.dumps(program)), encoding="utf-8")
    meta = json.loads((bundle / "meta.json").read_text(encoding="utf-8"))
    meta["inputs"] = [{"name": "x", "shape": [4], "dtype": "int16", "rlx_dtype": "int16", "path": "x"}]
    meta["outputs"] = [{"name": "output", "value": "y", "shape": [4], "dtype": "float32", "rlx_dtype": "float32"}]
    meta["params"] = []
    (bundle / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    safetensors_io.write(bundle / "weights.safetensors", {})
    np.savez(work / "x.npz", x=np.arange(4, dtype=np.int16))


@contextlib.contextmanager
def _broken_lowering() -> Iterator[None]:
    """A planted bug: layer_norm's lowering fails on a call its check accepted."""
    from rlx_torch_import.lower import REGISTRY
    from rlx_torch_import.lower.registry import Lowering

    target = "aten.layer_norm.default"
    real = REGISTRY[target]

    def broken(b: object, call: object) -> object:
        raise KeyError("normalized_shape")

    REGISTRY[target] = Lowering(target, broken, real.check, real.family)
    try:
        yield
    finally:
        REGISTRY[target] = real


@contextlib.contextmanager
def _full_disk() -> Iterator[None]:
    """A file system that fills up while weights.safetensors is written (every write of it fails with
    ENOSPC, as a full disk's does; `outdir.replacing` writes every output file)."""
    import errno

    from rlx_torch_import import outdir

    real = open

    class Full(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data: object) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def full_open(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "w" in mode and ".weights.safetensors." in str(path):
            real(path, mode, *args, **kwargs).close()  # type: ignore[call-overload]
            return Full()
        return real(path, mode, *args, **kwargs)  # type: ignore[call-overload]

    outdir.open = full_open  # type: ignore[attr-defined]
    try:
        yield
    finally:
        del outdir.open  # type: ignore[attr-defined]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("ModelLoadError", "converted a model file that does not exist", ("nope.py", "-o", "out"), _nothing),
    Scenario(
        "ModelLoadError",
        "converted a model file that calls `sys.exit(3)` while it is loaded",
        ("exits.py", "-o", "out"),
        _file("exits.py", "import sys\nsys.exit(3)\n"),
    ),
    Scenario(
        "InputError",
        "passed a dynamic-dim spec naming an input the model does not take",
        ("mlp.py", "-o", "out", "--dynamic", "y:0=batch"),
        _file("mlp.py", MLP),
    ),
    Scenario(
        "DeviceError",
        "converted with `--device cuda` on a machine without an NVIDIA GPU",
        ("mlp.py", "-o", "out", "--device", "cuda"),
        _file("mlp.py", MLP),
    ),
    Scenario(
        "ExportError",
        "converted a model whose Python `if` reads a tensor's value",
        ("branchy.py", "-o", "out"),
        _file(
            "branchy.py",
            """
            import torch
            from torch import nn

            class Branchy(nn.Module):
                def forward(self, x):
                    return x * 2 if x.sum() > 0 else x

            model = Branchy()
            example_inputs = (torch.randn(3),)
            """,
        ),
    ),
    Scenario(
        "UnsupportedOpsError",
        "converted a model using `torch.lgamma` with decomposition turned off",
        ("gamma.py", "-o", "out", "--decomposition", "aten", "--no-auto-decompose"),
        _file(
            "gamma.py",
            """
            import torch
            from torch import nn

            class Gamma(nn.Module):
                def forward(self, x):
                    return torch.lgamma(x) + torch.digamma(x)

            model = Gamma()
            example_inputs = (torch.rand(3) + 1,)
            """,
        ),
    ),
    Scenario(
        "DynamicShapeError",
        "made both dims dynamic in a model that multiplies the two sizes",
        ("sizes.py", "-o", "out", "--dynamic", "x:0=batch:2:8", "--dynamic", "x:1=seq:2:16"),
        _file(
            "sizes.py",
            """
            import torch
            from torch import nn

            class SizeProduct(nn.Module):
                def forward(self, x):
                    return x + x.shape[0] * x.shape[1]

            model = SizeProduct()
            example_inputs = (torch.randn(3, 5),)
            """,
        ),
    ),
    Scenario(
        "TorchIRError",
        "rebuilt a conversion whose torch-ir.json was edited so two nodes share a name",
        ("build", "out"),
        _converted(_duplicate_node),
    ),
    Scenario(
        "BundleError",
        "ran a bundle whose weights.safetensors has a garbage header length",
        ("run", "out/bundle", "--inputs", "x.npz"),
        _converted(lambda work: (_garbage_header(work), _wrong_shape_inputs(work))),
    ),
    Scenario(
        "InputError",
        "ran a bundle on an input of the wrong shape",
        ("run", "out/bundle", "--inputs", "x.npz"),
        _converted(_wrong_shape_inputs),
    ),
    Scenario(
        "IndexRangeError",
        "ran an `nn.Embedding(10, 4)` bundle on ids 10, 11 and 10**6",
        ("run", "out/bundle", "--inputs", "ids.npz"),
        _out_of_range_ids,
    ),
    Scenario(
        "RlxError",
        "ran a bundle whose model.hir.json was edited to take an int16 input, which RLX 0.2.19 panics on",
        ("run", "out/bundle", "--inputs", "x.npz"),
        _converted(_int16_input),
    ),
    Scenario(
        "LoweringError",
        "converted the example MLP with a bug planted in layer_norm's lowering (it raises KeyError)",
        ("mlp.py", "-o", "out"),
        _file("mlp.py", MLP),
        _broken_lowering,
    ),
    Scenario(
        "WriteError",
        "converted the example MLP into a folder whose file system filled up while the weights were written",
        ("mlp.py", "-o", "out"),
        _file("mlp.py", MLP),
        _full_disk,
    ),
    Scenario(
        "TimeLimitError",
        "converted a model file that never finishes loading, with `--timeout 1`",
        ("forever.py", "-o", "out", "--timeout", "1"),
        _file("forever.py", "while True:\n    pass\n"),
    ),
)


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    """A scratch directory that is also the working directory (so messages show relative paths)."""
    old = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="rti-errors-") as tmp:
        work = Path(tmp).resolve()
        os.chdir(work)
        try:
            yield work
        finally:
            os.chdir(old)


def run(scenario: Scenario) -> Outcome:
    """Run one scenario's command in a fresh scratch directory; the exit code and stderr it gave."""
    from rlx_torch_import.cli import main

    with _scratch() as work:
        scenario.setup(work)
        err = io.StringIO()
        with scenario.patch(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main([*scenario.argv, *([] if scenario.argv[0] in ("run",) else ["-q"])])
        text = err.getvalue().replace(str(work) + os.sep, "").replace(str(work), ".")
    lines = [line for line in text.splitlines() if not line.startswith("[rlx-torch-import]")]
    return Outcome(scenario, code, "\n".join(lines).strip())


def error_classes() -> list[type[errors.RtiError]]:
    """Every error class of errors.py, base first, in definition order."""
    found = [errors.RtiError]
    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.RtiError) and cls is not errors.RtiError:
            found.append(cls)
    return sorted(found, key=lambda c: (c is not errors.RtiError, inspect.getsourcelines(c)[1]))


def render(outcomes: list[Outcome]) -> str:
    """The markdown page from the scenarios' real outcomes."""
    names = {v: k for k, v in vars(errors.ExitCode).items() if not k.startswith("_")}
    lines = [
        "# Errors and exit codes",
        "",
        "Generated by `python -m tools.errors_doc --write` from real runs (`tests/test_errors_doc.py`",
        "fails when this page and the code disagree). Every error rlx-torch-import raises on purpose is an",
        "`RtiError`; the CLI prints `error: <message>` (and `hint: ...`) on stderr and exits with the error's code.",
        "Anything else is a bug: the CLI prints the traceback and `internal error: ...` and exits 5.",
        "",
        "## Exit codes",
        "",
        "| code | name | meaning |",
        "|---|---|---|",
    ]
    for code, meaning in EXIT_MEANINGS.items():
        lines.append(f"| {code} | `{names[code]}` | {meaning} |")
    lines += ["", "## Error types", ""]
    by_error: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_error.setdefault(outcome.scenario.error, []).append(outcome)
    for cls in error_classes():
        base = cls.__mro__[1].__name__
        doc = " ".join((cls.__doc__ or "").split())
        lines += [
            f"### `{cls.__name__}`",
            "",
            f"Exit {cls.exit_code} (`{names[cls.exit_code]}`); subclass of `{base}`. {doc}",
            "",
        ]
        for outcome in by_error.get(cls.__name__, []):
            argv = " ".join(_quote(a) for a in outcome.scenario.argv)
            lines += [
                f"You {outcome.scenario.did}:",
                "",
                "```console",
                f"$ rlx-torch-import {argv}",
                outcome.message,
                "$ echo $?",
                f"{outcome.exit_code}",
                "```",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def _quote(arg: str) -> str:
    return arg if arg and all(c.isalnum() or c in "-_./:=," for c in arg) else repr(arg)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.errors_doc", description=__doc__)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="run every scenario and rewrite docs/errors.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when docs/errors.md is stale")
    args = p.parse_args(argv)
    text = render([run(s) for s in SCENARIOS])
    if args.write:
        DOC.write_text(text, encoding="utf-8")
        return 0
    if DOC.is_file() and DOC.read_text(encoding="utf-8") == text:
        return 0
    print(f"{DOC} is stale: run python -m tools.errors_doc --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
