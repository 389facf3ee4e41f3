"""Random ops (issue 39): rand/randn/randint/bernoulli/dropout/normal/multinomial lowered to RLX's generator,
the outputs that do not depend on the draws verified as usual, the others given the "random" verdict (exit 9),
the draws' distributions checked on RLX, and the seed policy (the same draws on every run of one bundle)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rlx_torch_import as rti
from _samples import of_inputs
from rlx_torch_import.bundle.model import BundleModel
from rlx_torch_import.cli import main, verdict_code
from rlx_torch_import.errors import ExitCode
from rlx_torch_import.frontend.torch.export import export_program
from rlx_torch_import.frontend.torch.randomness import random_targets
from rlx_torch_import.verify.diagnose import diagnose
from rlx_torch_import.verify.randomness import DRIFT, NODE_NOTE, OUTPUT_NOTE

N = 4096
PROBS = [0.1, 0.2, 0.7, 0.0]


class DrawFree(nn.Module):
    """Random ops whose draws cannot change the outputs: Informer-style sampled indices whose max is taken
    together with the max over all, a Bernoulli mask multiplied by zero, training dropout masked away."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, x.shape[1], (3 * x.shape[1],))
        sampled = torch.maximum(x.index_select(1, idx).amax(1), x.amax(1))
        masked = x + torch.bernoulli(torch.full_like(x, 0.5)) * 0.0
        dropped = torch.where(x > 1e9, F.dropout(x, 0.5, training=True), x * 3)
        return sampled, masked, dropped


class Draws(nn.Module):
    """Outputs that are draws (named), plus one that is not."""

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        probs = torch.tensor(PROBS)
        return {
            "u": torch.rand(N),
            "u2": torch.rand(N),
            "n": torch.randn(N) * 2 + 1,
            "b": torch.bernoulli(torch.full_like(x, 0.3)),
            "i": torch.randint(3, 11, (N,)),
            "d": F.dropout(torch.ones_like(x), 0.25, training=True),
            "h": torch.rand(N, dtype=torch.float16),
            "w": torch.rand(N, dtype=torch.float64),
            "m": torch.multinomial(probs, N, replacement=True),
            "m3": torch.multinomial(probs, 3),
            "same": x * 2,
        }


def test_outputs_that_do_not_depend_on_the_draws_verify(tmp_path: Path) -> None:
    report = rti.from_torch(DrawFree(), (torch.randn(3, 8),), tmp_path / "o", per_node=True)
    assert report.ok and report.verdict == "PASS", report.summary()
    assert report.random_outputs == []
    histogram = json.loads((tmp_path / "o" / "bundle" / "meta.json").read_text())["op_histogram"]
    assert histogram.get("RngUniform", 0) >= 3, histogram  # the draws are in the graph, not folded away
    assert report.first_divergence is None and not report.drift


@pytest.fixture(scope="module")
def draws(tmp_path_factory: pytest.TempPathFactory) -> tuple[rti.ParityReport, Path]:
    out = tmp_path_factory.mktemp("random") / "o"
    report = rti.from_torch(Draws(), (torch.randn(N),), out, per_node=True)
    return report, out


def test_outputs_that_depend_on_the_draws_get_the_random_verdict(draws: tuple[rti.ParityReport, Path]) -> None:
    report, out = draws
    assert report.verdict == "RANDOM" and not report.ok, report.summary()
    assert sorted(report.random_outputs) == sorted(["u", "u2", "n", "b", "i", "d", "h", "w", "m", "m3"])
    rows = {o.name: o for o in report.outputs}
    assert rows["same"].ok and OUTPUT_NOTE not in rows["same"].notes
    assert all(OUTPUT_NOTE in rows[n].notes for n in report.random_outputs)
    stats = next(n for n in rows["u"].notes if n.startswith(f"statistics over its {N} elements: RLX mean "))
    found = re.findall(r"(RLX|PyTorch) mean ([-\d.e]+) std ([-\d.e]+)", stats)  # the draws' statistics side by side
    assert [side for side, _, _ in found] == ["RLX", "PyTorch"], stats
    assert all(abs(float(mean) - 0.5) < 0.02 and abs(float(std) - 0.2887) < 0.01 for _, mean, std in found), stats
    assert any("eval()" in n and "statistics" in n for n in report.notes)  # how to verify them
    assert verdict_code(report) == ExitCode.RANDOM == 9
    assert "RANDOM" in report.summary().splitlines()[0]
    assert json.loads((out / "report.json").read_text())["verdict"] == "RANDOM"
    assert "**RANDOM**" in (out / "report.md").read_text()
    assert json.loads((out / "torch-ir.json").read_text())["random_outputs"] == report.random_outputs
    # per-node parity blames no random node: their draws are not compared
    random_rows = [r for r in report.nodes if r.note == NODE_NOTE]
    assert {r.aten for r in random_rows} >= {"aten.rand.default", "aten.randint.low", "aten.multinomial.default"}
    assert all(r.local is None and r.cumulative is None for r in random_rows)
    assert report.first_divergence is None and report.drift in ("", DRIFT)
    # a failing output that does not depend on the draws makes it FAIL, not RANDOM
    report.random_outputs = [n for n in report.random_outputs if n != "u"]
    try:
        assert report.verdict == "FAIL" and verdict_code(report) == ExitCode.PARITY_FAILED
    finally:
        report.random_outputs.append("u")


def test_reverify_keeps_the_verdict_and_the_cli_exits_9(
    draws: tuple[rti.ParityReport, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = draws
    assert main(["verify", str(out), "--no-per-node", "-q"]) == ExitCode.RANDOM
    printed = capsys.readouterr().out
    assert printed.startswith("RANDOM ") and "RND u " in printed and "ok  same " in printed, printed


def test_diagnose_blames_no_random_node(draws: tuple[rti.ParityReport, Path]) -> None:
    _, out = draws
    found = diagnose(out)
    assert found.node is None and not found.report.drift, found.report.drift


def test_draws_have_the_documented_distributions_on_rlx(draws: tuple[rti.ParityReport, Path]) -> None:
    _, out = draws
    got = BundleModel(out / "bundle").run({"x": np.zeros(N, np.float32)})
    u = got["u"]
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.std() - (1 / 12) ** 0.5) < 0.01
    n = got["n"]
    assert abs(n.mean() - 1) < 0.1 and abs(n.std() - 2) < 0.1
    assert set(np.unique(got["b"])) <= {0.0, 1.0} and abs(got["b"].mean() - 0.3) < 0.03
    i = got["i"]
    assert i.dtype == np.int64 and set(np.unique(i)) == set(range(3, 11))
    d = got["d"]
    assert set(np.unique(d)) <= {0.0, np.float32(1 / 0.75)} and abs((d == 0).mean() - 0.25) < 0.03
    assert got["h"].dtype == np.float16 and got["h"].min() >= 0 and got["h"].max() < 1
    assert got["w"].dtype == np.float64 and got["w"].min() >= 0 and got["w"].max() < 1
    m = got["m"]
    assert m.dtype == np.int64 and m.min() >= 0 and m.max() <= 2  # never the zero-weight category
    assert np.allclose(np.bincount(m, minlength=4) / N, PROBS, atol=0.03)
    assert sorted(got["m3"].tolist()) == [0, 1, 2]  # without replacement: distinct, zero weight never drawn
    # statistics match torch's own draws of the same shapes
    torch.manual_seed(0)
    assert abs(u.mean() - torch.rand(N).mean().item()) < 0.03
    assert abs(n.std() - (torch.randn(N) * 2 + 1).std().item()) < 0.15


def test_one_bundle_draws_the_same_values_on_every_run(draws: tuple[rti.ParityReport, Path]) -> None:
    """The seed policy: a fixed seed per bundle (docs/usage.md "Random ops"); two random nodes draw independently."""
    _, out = draws
    feed = {"x": np.zeros(N, np.float32)}
    first = BundleModel(out / "bundle").run(feed)
    again = BundleModel(out / "bundle").run(feed)
    for name, value in first.items():
        np.testing.assert_array_equal(value, again[name], err_msg=name)
    assert not np.array_equal(first["u"], first["u2"])


def test_draws_rlx_cannot_make_are_refused_naming_the_limit(tmp_path: Path) -> None:
    """A randint range wider than one draw's 24 random bits, a multinomial CDF grid over 2**26 pairs: exit 3."""

    class Wide(nn.Module):
        def forward(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.randint(0, 2**25, (3,)), torch.multinomial(w, 1 << 14, replacement=True)

    with pytest.raises(rti.UnsupportedOpsError) as info:
        rti.from_torch(Wide(), (torch.rand(1 << 13),), tmp_path / "o", auto_decompose=False)
    assert info.value.targets == ["aten.multinomial.default", "aten.randint.low"]
    assert "wider than 2**24" in info.value.explain() and "more than 2**26" in info.value.explain()
    assert info.value.exit_code == ExitCode.UNSUPPORTED


def test_only_graphs_that_draw_are_run_again() -> None:
    """Eval-mode dropout, which the `aten` level keeps, draws nothing: no extra eager runs for it."""
    x = (torch.randn(2, 3),)
    quiet = export_program(nn.Sequential(nn.Dropout(0.5), nn.Linear(3, 3)).eval(), x, decomposition="aten")
    assert random_targets(quiet.graph_module) == []
    drawing = export_program(of_inputs(lambda v: F.dropout(v, 0.5, training=True)), x, decomposition="aten")
    assert random_targets(drawing.graph_module) == ["aten.dropout.default"]


class SelfSeeded(nn.Module):
    """Reformer-style LSH hashing with `hash_seed`: the model seeds torch's generator in forward, so its
    random rotations are the same on every call, and the buckets (an argmax over them) pick the output."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(3)
        rotations = torch.randn(x.shape[-1], 4)
        buckets = torch.argmax(torch.cat([x @ rotations, -(x @ rotations)], -1), -1)
        return x * buckets.unsqueeze(-1).to(x.dtype)


def test_draws_of_a_model_that_seeds_itself_are_kept_as_constants(tmp_path: Path) -> None:
    """The outputs depend on the draws, but every eager run draws the same values: those values are part of
    the model (a constant in the bundle) and the outputs verify against PyTorch's, on other inputs too."""
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    others = [(torch.randn(6, 8, generator=torch.Generator().manual_seed(s)),) for s in (1, 2)]
    report = rti.from_torch(SelfSeeded(), (x,), tmp_path / "o", verify_inputs=others)
    assert report.ok and report.verdict == "PASS" and report.random_outputs == [], report.summary()
    assert all(row.ok for row in report.input_sets), report.summary()
    assert any("seeds torch's generator itself" in n and "aten.randn.default" in n for n in report.notes), report.notes
    histogram = json.loads((tmp_path / "o" / "bundle" / "meta.json").read_text())["op_histogram"]
    assert not any(op.startswith("Rng") for op in histogram), histogram


class SeededSelection(nn.Module):
    """Seeded in forward, but the draw is sized by tensor values: its values cannot be kept as a constant."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(1)
        s = x[x > 0]
        return s + torch.rand_like(s), x * 2


def test_a_seeded_draw_that_cannot_be_kept_gives_the_outputs_it_reaches_the_random_verdict(tmp_path: Path) -> None:
    report = rti.from_torch(SeededSelection(), (torch.tensor([1.0, -2, 3, 4, -1]),), tmp_path / "o", verify_inputs=[])
    assert report.verdict == "RANDOM" and report.random_outputs == ["output_0"], report.summary()
    assert [o.ok for o in report.outputs] == [False, True], report.summary()
