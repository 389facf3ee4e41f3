"""run_bundle / BundleModel: numpy in, numpy out, clear errors for wrong input and broken bundles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import rlx_torch_import as rti


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> tuple:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2)).eval()
    out = tmp_path_factory.mktemp("b") / "o"
    rti.from_torch(model, (torch.randn(3, 6),), out)
    return model, out / "bundle"


def test_runs_new_inputs_by_name_and_position(bundle) -> None:
    model, path = bundle
    x = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    m = rti.BundleModel(path)
    for feed in ({m.input_names[0]: x}, [x], (x,)):
        got = m.run(feed)["output"]
        assert got.shape == (3, 2) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(rti.InputError, match="has dtype float64; the bundle expects float32"):
        m.run((x.astype(np.float64),))  # a lossy cast is the caller's to make (run's dtype policy)
    np.testing.assert_allclose(rti.run_bundle(path, [x])["output"], want, atol=1e-5, rtol=1e-5)


def test_wrong_inputs_are_named(bundle) -> None:
    _, path = bundle
    m = rti.BundleModel(path)
    with pytest.raises(rti.InputError, match=r"has shape \[2, 6\], the bundle expects \[3, 6\]"):
        m.run([np.zeros((2, 6), np.float32)])
    with pytest.raises(rti.InputError, match="missing input"):
        m.run({"nope": np.zeros((3, 6), np.float32)})
    with pytest.raises(rti.InputError, match="expected 1 inputs"):
        m.run([])


def test_incomplete_bundle_is_rejected(bundle, tmp_path) -> None:
    _, path = bundle
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "meta.json").write_text((path / "meta.json").read_text())
    with pytest.raises(rti.BundleError, match=r"model\.hir\.json is missing"):
        rti.BundleModel(broken)


def test_corrupt_hir_is_a_bundle_error(bundle, tmp_path) -> None:
    _, path = bundle
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in ("meta.json", "weights.safetensors"):
        (copy / f).write_bytes((path / f).read_bytes())
    (copy / "model.hir.json").write_text('{"name": 1}')
    with pytest.raises(rti.BundleError, match="not valid RLX HIR"):
        rti.BundleModel(copy)


def test_thread_settings_are_checked(monkeypatch) -> None:
    """`threads=` and RLX_WORKERS must be positive integers; the pool size is fixed once RLX started."""
    from rlx_torch_import import rlx_config
    from rlx_torch_import.errors import InputError

    for bad in (0, -1, "2", True, 2.0):
        with pytest.raises(InputError, match="threads must be a positive integer"):
            rlx_config.set_threads(bad)  # type: ignore[arg-type]
    for bad in ("abc", "0", "-3"):
        monkeypatch.setenv("RLX_WORKERS", bad)
        with pytest.raises(InputError, match="RLX_WORKERS"):
            rlx_config._env_threads()
    monkeypatch.setattr(rlx_config, "_applied_threads", 2)
    assert rlx_config.set_threads(None) == 2 and rlx_config.set_threads(2) == 2
    with pytest.raises(InputError, match="already runs 2 thread"):
        rlx_config.set_threads(3)


def test_openblas_core_type_comes_from_the_cpu_flags() -> None:
    from rlx_torch_import import rlx_config

    avx512 = frozenset({"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx2", "fma", "avx"})
    assert rlx_config.openblas_coretype_for(avx512) == "SkylakeX"
    assert rlx_config.openblas_coretype_for(frozenset({"avx2", "fma", "avx"})) == "Haswell"
    assert rlx_config.openblas_coretype_for(frozenset({"avx"})) == "Sandybridge"
    assert rlx_config.openblas_coretype_for(frozenset({"sse2"})) is None  # OpenBLAS's own choice stands
