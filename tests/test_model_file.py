"""Model files that end the process or never return (issue 13, "model files"): `sys.exit()` at
import, in get_model()/build() or in forward() is an error naming the file, line and code (exit
2); `--timeout` / `from_torch(timeout=)` stop a model that hangs while loading, exporting or
running eagerly (exit 6), restore the caller's SIGALRM state, work off the main thread, and the
CLI's watchdog ends code that never comes back to Python."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

import rlx_torch_import as rti
from rlx_torch_import import timeout as tl
from rlx_torch_import.cli import main as cli_main
from rlx_torch_import.errors import ExitCode, InputError, ModelLoadError, TimeLimitError
from rlx_torch_import.frontend.torch.model_file import load_model_file


def write(tmp_path: Path, body: str, name: str = "model.py") -> Path:
    path = tmp_path / name
    path.write_text("import sys\nimport torch\nfrom torch import nn\n" + textwrap.dedent(body))
    return path


class Exits(torch.nn.Module):
    """forward() calls sys.exit(code): while exporting, or only when run eagerly."""

    def __init__(self, code: object, eager_only: bool = False) -> None:
        super().__init__()
        self.code, self.eager_only = code, eager_only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.eager_only and torch.compiler.is_exporting()):
            sys.exit(self.code)
        return x + 1


class Loops(torch.nn.Module):
    """forward() never returns: while exporting, or only when run eagerly."""

    def __init__(self, eager_only: bool = False) -> None:
        super().__init__()
        self.eager_only = eager_only

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.eager_only and torch.compiler.is_exporting()):
            while True:
                x = x + 1
        return x + 1


# --- sys.exit ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        ("x = 1\nsys.exit(3)\n", ["called sys.exit(3)", "line 5", "model.py"]),
        ("sys.exit()\n", ["called sys.exit(None)", "line 4"]),
        ("def get_model():\n    sys.exit('bye')\n", ["get_model() called sys.exit('bye')", "line 5"]),
        ("def build():\n    raise SystemExit(0)\n", ["build() called sys.exit(0)", "line 5"]),
    ],
    ids=["import", "no-code", "get_model", "build-zero"],
)
def test_sys_exit_while_loading_is_a_model_load_error(body: str, needles: list[str], tmp_path: Path, capsys) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ModelLoadError) as err:
        load_model_file(path)
    for needle in needles:
        assert needle in err.value.message, err.value.message
    assert str(path) in err.value.message
    assert cli_main([str(path), "-o", str(tmp_path / "out"), "-q"]) == ExitCode.BAD_INPUT
    printed = capsys.readouterr().err
    assert printed.startswith("error: ") and needles[0] in printed, printed
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("eager_only", "phase"), [(False, "torch.export"), (True, "the eager PyTorch run (reference outputs)")]
)
def test_sys_exit_in_forward_is_a_model_load_error(eager_only: bool, phase: str, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as err:
        rti.from_torch(Exits(7, eager_only), (torch.randn(2),), tmp_path / "out")
    message = err.value.message
    assert message.startswith(f"{phase}: the model called sys.exit(7)"), message
    assert "test_model_file.py:" in message and "sys.exit(self.code)" in message, message
    assert err.value.exit_code == ExitCode.BAD_INPUT
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))


def test_cli_sys_exit_in_forward_exits_2_not_the_models_code(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        class M(nn.Module):
            def forward(self, x):
                sys.exit(3)
        model = M()
        example_inputs = (torch.randn(2),)
        """,
    )
    r = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", str(path), "-o", str(tmp_path / "o"), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == ExitCode.BAD_INPUT, (r.returncode, r.stderr)
    assert "torch.export: the model called sys.exit(3) at model.py:7 (sys.exit(3))" in r.stderr, r.stderr


def test_keyboard_interrupt_stays_ctrl_c(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "raise KeyboardInterrupt\n")
    assert cli_main([str(path), "-o", str(tmp_path / "out"), "-q", "--timeout", "30"]) == 130
    assert "interrupted" in capsys.readouterr().err


# --- time limits, in process ------------------------------------------------------------------


@pytest.fixture(scope="module")
def warm_export() -> None:
    """torch.export's first call in a process spends seconds on its own setup, which a short limit
    would count; one export first, so the limits below measure the model's own loop."""
    from rlx_torch_import.frontend.torch.export import export_program

    export_program(torch.nn.Linear(2, 2), (torch.randn(1, 2),))


def test_a_model_file_that_never_returns_times_out(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "n = 0\nwhile True:\n    n += 1\n")
    start = time.monotonic()
    with pytest.raises(TimeLimitError) as err:
        load_model_file(path, timeout=0.5)
    assert time.monotonic() - start < 5
    message = err.value.message
    assert message.startswith(f"running {path} did not finish within the time limit of 0.5 s"), message
    assert "(stopped at model.py:" in message, message
    assert err.value.exit_code == ExitCode.TIMED_OUT == 6
    assert "--timeout" in (err.value.hint or "")
    assert cli_main([str(path), "-o", str(tmp_path / "out"), "-q", "--timeout", "0.5"]) == ExitCode.TIMED_OUT
    assert "did not finish within the time limit of 0.5 s" in capsys.readouterr().err


def test_a_factory_that_never_returns_times_out(tmp_path: Path) -> None:
    path = write(tmp_path, "def get_model():\n    while True:\n        pass\n")
    with pytest.raises(TimeLimitError, match=r"get_model\(\) did not finish .* \(stopped at model.py:[56]"):
        load_model_file(path, timeout=0.3)


@pytest.mark.parametrize(
    ("eager_only", "phase"), [(False, "torch.export"), (True, "the eager PyTorch run (reference outputs)")]
)
def test_a_forward_that_never_returns_times_out(eager_only: bool, phase: str, tmp_path: Path, warm_export) -> None:
    start = time.monotonic()
    with pytest.raises(TimeLimitError) as err:
        rti.from_torch(Loops(eager_only), (torch.randn(2),), tmp_path / "out", timeout=2)
    assert time.monotonic() - start < 30
    assert err.value.message.startswith(f"{phase} did not finish within the time limit of 2 s"), err.value.message
    assert re.search(r"\(stopped at test_model_file.py:\d+ \((while True:|x = x \+ 1)\)\)", err.value.message)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0), "no alarm left behind"


def test_code_that_swallows_the_interrupt_is_interrupted_again() -> None:
    """The interrupt is not an Exception, so `except Exception` lets it through; a bare `except`
    that swallows it gets another one a second later, and the phase still fails."""
    swallowed = 0
    with pytest.raises(TimeLimitError, match=r"loop did not finish within the time limit of 0\.2 s"):
        with tl.user_code("loop", 0.2):
            try:
                while True:
                    pass
            except Exception:
                pytest.fail("the interrupt must not be an Exception")
            except BaseException:
                swallowed += 1
            while True:
                pass
    assert swallowed == 1


def test_a_limit_that_passed_fails_the_phase_even_if_the_code_finished() -> None:
    with pytest.raises(TimeLimitError, match="slow did not finish"):
        with tl.user_code("slow", 0.1):
            try:
                time.sleep(5)
            except BaseException:
                pass


def test_the_callers_sigalrm_handler_and_alarm_are_restored() -> None:
    rang: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda s, f: rang.append(s))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with tl.user_code("quick", 10):
            assert signal.getitimer(signal.ITIMER_REAL)[0] > 9
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 25 < left <= 30, f"the caller's alarm is pending again ({left} s left)"
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        time.sleep(0.3)
        assert rang == [signal.SIGALRM], "the caller's handler is back"
        with pytest.raises(TimeLimitError):
            with tl.user_code("hang", 0.1):
                while True:
                    pass
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_no_limit_sets_no_alarm_and_other_errors_pass_through() -> None:
    with tl.user_code("free", None):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with pytest.raises(ValueError, match="own"):
        with tl.user_code("raises", 5):
            raise ValueError("own")
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_off_the_main_thread_the_limit_still_stops_python_code(tmp_path: Path, warm_export) -> None:
    """from_torch in a worker thread: no SIGALRM there, so the thread gets an asynchronous
    exception instead; the conversion fails with TimeLimitError in that thread."""
    caught: list[BaseException] = []

    def convert() -> None:
        try:
            rti.from_torch(Loops(), (torch.randn(2),), tmp_path / "out", timeout=2)
        except BaseException as e:
            caught.append(e)

    worker = threading.Thread(target=convert)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the worker thread was stopped"
    assert len(caught) == 1 and isinstance(caught[0], TimeLimitError), caught
    assert caught[0].message.startswith("torch.export did not finish within the time limit of 2 s")
    assert re.search(r"\(stopped at test_model_file.py:\d+ \((while True:|x = x \+ 1)\)\)", caught[0].message)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0), "no SIGALRM was used off the main thread"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True])
def test_timeout_values_are_checked(bad: object, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="timeout must be"):
        rti.from_torch(torch.nn.Linear(2, 2), (torch.randn(1, 2),), tmp_path / "o", timeout=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("bad", ["0", "-3", "nan", "inf", "abc"])
def test_cli_timeout_values_are_checked(bad: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as err:
        cli_main([str(tmp_path / "m.py"), "-o", str(tmp_path / "o"), "--timeout", bad])
    assert err.value.code == 2
    assert "--timeout" in capsys.readouterr().err


# --- the watchdog (a subprocess: it ends its process) ------------------------------------------


def test_watchdog_ends_code_that_never_returns_to_python(tmp_path: Path) -> None:
    """A model file that ignores SIGALRM and then waits in C for ever (as code stuck in a C call
    never runs the Python handler) is ended by the CLI's watchdog GRACE_S after the limit: our
    message and exit 6."""
    path = write(tmp_path, "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(10_000)\n")
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", str(path), "-o", str(tmp_path / "o"), "-q", "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - start
    assert r.returncode == ExitCode.TIMED_OUT, (r.returncode, r.stderr)
    assert f"error: running {path} did not finish within the time limit of 1 s" in r.stderr, r.stderr
    assert f"did not stop within {tl.GRACE_S:g} s more" in r.stderr and "hint:" in r.stderr, r.stderr
    assert took >= 1 + tl.GRACE_S, took
    assert not (tmp_path / "o").exists()
