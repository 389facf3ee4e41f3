"""What a new user's adversarial trial found: each case ends in our own clear error with its documented
exit code (or runs as it should), never a traceback, a hang, a second conversion or wrong numbers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import rlx_torch_import as rti
from rlx_torch_import.cli import main
from rlx_torch_import.errors import BundleError, ExitCode, InputError

LINEAR = "import torch\nmodel = torch.nn.Linear(8, 4).eval()\nexample_inputs = (torch.randn(2, 8),)\n"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "out"
    torch.manual_seed(0)
    assert rti.from_torch(torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),), out, per_node=False).ok
    return out


def copy(converted: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(converted, out)
    return out


def cli(*args: str, timeout: float = 120, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlx_torch_import.cli", *args], capture_output=True, text=True, timeout=timeout, **kw
    )  # type: ignore[call-overload]


def edit_meta(out: Path, change: object) -> None:
    path = out / "bundle" / "meta.json"
    meta = json.loads(path.read_text())
    change(meta)  # type: ignore[operator]
    path.write_text(json.dumps(meta))


X = {"input": np.ones((2, 8), np.float32)}


def test_meta_and_graph_that_disagree_are_refused(converted: Path, tmp_path: Path) -> None:
    out = copy(converted, tmp_path)
    # an output dtype that would read float results as int64 (wrong numbers with exit 0 before)
    edit_meta(out, lambda m: m["outputs"][0].update(dtype="int64"))
    with pytest.raises(BundleError, match=r"outputs\[0\]: dtype 'int64' cannot be carried as rlx_dtype 'float32'"):
        rti.BundleModel(out / "bundle")
    edit_meta(out, lambda m: m["outputs"][0].update(dtype="float32", shape=[9, 9]))
    with pytest.raises(
        BundleError,
        match=r"output 0 \('output'\) of model.hir.json's graph is F32\[2, 4\]; "
        r"meta.json outputs\[0\] declares F32\[9, 9\]",
    ):
        rti.BundleModel(out / "bundle").run(X)
    edit_meta(out, lambda m: m.update(outputs=[*m["outputs"], {**m["outputs"][0], "name": "extra"}]))
    edit_meta(out, lambda m: m["outputs"][0].update(shape=[2, 4]))
    with pytest.raises(BundleError, match=r"graph has 1 output\(s\), meta.json declares 2"):
        rti.BundleModel(out / "bundle").run(X)


def test_a_weight_stored_in_another_dtype_is_refused(converted: Path, tmp_path: Path) -> None:
    from rlx_torch_import import safetensors_io

    out = copy(converted, tmp_path)
    path = out / "bundle" / "weights.safetensors"
    tensors = {k: t.to_numpy().copy() for k, t in safetensors_io.read(path).items()}  # not views of the file
    tensors["bias"] = tensors["bias"].astype(np.float16)
    found = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    safetensors_io.write(path, dict(safetensors_io.iter_torch(found)))
    with pytest.raises(BundleError, match=r"tensor 'bias' is float16\[4\]; meta.json params declares float32\[4\]"):
        rti.BundleModel(out / "bundle")


def test_run_command_arguments(converted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = str(converted / "bundle")
    np.savez(tmp_path / "x.npz", input=X["input"])
    assert main(["run", bundle, "--inputs", str(tmp_path / "x.npz"), "--save", str(tmp_path)]) == ExitCode.BAD_INPUT
    assert "is a directory" in capsys.readouterr().err
    no_dir = str(tmp_path / "no" / "o.safetensors")
    assert main(["run", bundle, "--inputs", str(tmp_path / "x.npz"), "--save", no_dir]) == ExitCode.BAD_INPUT
    assert "which is no directory" in capsys.readouterr().err
    np.savez(tmp_path / "both.npz", **{"input": X["input"], "input.input": X["input"]})
    assert main(["run", bundle, "--inputs", str(tmp_path / "both.npz")]) == ExitCode.BAD_INPUT
    assert "holds both 'input' and 'input.input'" in capsys.readouterr().err
    (tmp_path / "text.npz").write_text("not an archive")
    assert main(["run", bundle, "--inputs", str(tmp_path / "text.npz")]) == ExitCode.BAD_INPUT
    assert "not a .npz file" in capsys.readouterr().err


def test_paths_that_are_not_what_they_should_be(converted: Path, tmp_path: Path) -> None:
    afile = tmp_path / "m.py"
    afile.write_text(LINEAR)
    with pytest.raises(InputError, match=r"m.py: not a directory"):
        rti.build(afile)
    with pytest.raises(BundleError, match=r"nope: no such directory"):
        rti.BundleModel(tmp_path / "nope")
    with pytest.raises(InputError, match=r"path must be a bundle directory"):
        rti.BundleModel(None)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"flush_denormals must be True, False or None"):
        rti.BundleModel(converted / "bundle", flush_denormals="yes")  # type: ignore[arg-type]
    out = copy(converted, tmp_path)
    (out / "bundle" / "weights.safetensors").unlink()
    os.mkfifo(out / "bundle" / "weights.safetensors")  # a read would block forever
    with pytest.raises(BundleError, match=r"weights.safetensors: not a regular file"):
        rti.BundleModel(out / "bundle")


def test_model_files_that_fork_thread_or_fail_to_format(tmp_path: Path) -> None:
    forever = "import threading, time\nthreading.Thread(target=time.sleep, args=(10**6,)).start()\n"
    (tmp_path / "thread.py").write_text(forever + LINEAR)
    done = cli(str(tmp_path / "thread.py"), "-o", str(tmp_path / "o1"), "-q", timeout=180)
    assert done.returncode == 0 and "PASS" in done.stdout, done.stderr  # ends although the thread never does
    (tmp_path / "fork.py").write_text("import os\nos.fork()\n" + LINEAR)
    done = cli(str(tmp_path / "fork.py"), "-o", str(tmp_path / "o2"), "-q", timeout=180)
    assert done.returncode == 0 and done.stdout.count("PASS") == 1, done.stdout  # converted once, not twice
    (tmp_path / "exc.py").write_text(
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E\n"
    )
    done = cli(str(tmp_path / "exc.py"), "-o", str(tmp_path / "o3"), "-q")
    assert done.returncode == ExitCode.BAD_INPUT and "raised E: (its message could not be formatted)" in done.stderr


def test_sigterm_leaves_no_staging_folder(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(
        LINEAR + "import torch\nclass Slow(torch.nn.Module):\n    def forward(self, x):\n"
        "        import time; time.sleep(60); return x\nmodel = Slow()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlx_torch_import.cli", str(tmp_path / "slow.py"), "-o", str(tmp_path / "out"), "-q"],
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(12)  # inside the eager run, with the staging folder made
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "terminated (SIGTERM)" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow.py"]


def test_a_dynamic_max_torch_would_drop_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m.py").write_text(LINEAR)
    code = main([str(tmp_path / "m.py"), "-o", str(tmp_path / "o"), "--dynamic", "input:0=b:2:99999999999999999999"])
    assert code == ExitCode.BAD_INPUT and "leave MAX out for an unbounded dim" in capsys.readouterr().err
