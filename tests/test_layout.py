"""The conversion folder (`layout.py`): a conversion lowers its program once and reads each file of the
folder once; the reference key scheme is spelled in one place, and the generated crate reads the same
keys."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.export import Dim

import rlx_torch_import as rti
from rlx_torch_import import layout, safetensors_io, torchir
from rlx_torch_import.lower import generalize, registry

PACKAGE = Path(rti.__file__).parent
CRATE_FILES = PACKAGE / "crate" / "templates"


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _count(monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Record every lowering (its keyword arguments) and every read of a conversion folder's file."""
    lowerings: list[dict[str, Any]] = []
    reads: Counter[str] = Counter()
    real_lower, real_read, real_load = registry.lower, safetensors_io.read, torchir.load

    def counted_lower(ir: Any, **kw: Any) -> Any:
        lowerings.append(kw)
        return real_lower(ir, **kw)

    def counted_read(path: Any, *args: Any, **kw: Any) -> Any:
        folder = Path(path).parent  # a conversion folder (or its stage) holds torch-ir.json; a bundle does not
        if Path(path).name in (layout.WEIGHTS, layout.REFERENCE) and (folder / layout.TORCH_IR).is_file():
            reads[Path(path).name] += 1
        return real_read(path, *args, **kw)

    def counted_load(directory: Any) -> Any:
        reads[layout.TORCH_IR] += 1
        return real_load(directory)

    monkeypatch.setattr(registry, "lower", counted_lower)
    monkeypatch.setattr(generalize, "lower", counted_lower)  # the probe lowerings of a dynamic program
    monkeypatch.setattr(safetensors_io, "read", counted_read)
    monkeypatch.setattr(torchir, "load", counted_load)
    return lowerings, reads


def _program_lowerings(lowerings: list[dict[str, Any]]) -> int:
    """Lowerings of the whole program as the bundle has it (not the per-node debug builds, not the
    probe lowerings of a dynamic program)."""
    return sum(1 for kw in lowerings if not kw.get("probe_values") and kw.get("share_scalars", True))


def test_from_torch_and_build_lower_once_and_read_each_file_once(tmp_path, monkeypatch) -> None:
    torch.manual_seed(0)
    lowerings, reads = _count(monkeypatch)
    out = tmp_path / "o"
    report = rti.from_torch(Small(), (torch.randn(2, 8),), out)
    assert report.ok and report.nodes
    assert _program_lowerings(lowerings) == 1
    # per-node parity's debug builds: the whole program, and each node alone (verify/nodes.py)
    assert sum(1 for kw in lowerings if kw.get("probe_values")) == 2
    assert reads == {layout.TORCH_IR: 1, layout.WEIGHTS: 1, layout.REFERENCE: 1}

    lowerings.clear()
    reads.clear()
    again = rti.build(out)
    assert again.ok and again.nodes
    assert _program_lowerings(lowerings) == 1
    assert sum(1 for kw in lowerings if kw.get("probe_values")) == 2
    assert reads == {layout.TORCH_IR: 1, layout.WEIGHTS: 1, layout.REFERENCE: 1}


def test_a_dynamic_program_is_lowered_once_at_its_example_sizes(tmp_path, monkeypatch) -> None:
    """The capability pass's lowering is the example-size program `lower_symbolic` generalizes; the
    probe lowerings (one per probe binding and sweep point) are the only others."""
    torch.manual_seed(0)
    lowerings, reads = _count(monkeypatch)
    dims = ({0: Dim("batch", min=1, max=16)},)
    report = rti.from_torch(Small(), (torch.randn(3, 8),), tmp_path / "o", dynamic_shapes=dims, per_node=False)
    assert report.ok and report.sweep
    assert _program_lowerings(lowerings) == 1
    assert all(kw == {"optimize": True, "share_scalars": False} for kw in lowerings[1:])
    assert reads == {layout.TORCH_IR: 1, layout.WEIGHTS: 1, layout.REFERENCE: 1}


def test_the_crate_reads_the_reference_keys_layout_names() -> None:
    """lib.rs reads `<prefix>input.<name>` / `<prefix>output.<name>`, run_example.rs writes
    `output.<name>`: the key scheme of `layout.input_key` / `output_key`."""
    lib = (CRATE_FILES / "lib.rs").read_text(encoding="utf-8")
    assert f'format!("{{prefix}}{layout.INPUT}{{}}", s.name)' in lib
    assert f'format!("{{prefix}}{layout.OUTPUT}{{}}", spec.name)' in lib
    assert f'format!("{layout.OUTPUT}{{}}", spec.name)' in (CRATE_FILES / "run_example.rs").read_text(encoding="utf-8")
    assert layout.input_key("x", layout.sweep_prefix(2)) == "sweep.2.input.x"
    assert layout.output_key("y", layout.set_prefix(0)) == "set.0.output.y"


def test_the_key_scheme_and_file_names_are_spelled_only_in_layout() -> None:
    """No other module of the package writes a reference key or a conversion file name as a literal."""
    spelled = re.compile(
        r"""["'](input|output)\.\{|f["'](sweep|set)\.\{|["'](torch-ir\.json|reference\.safetensors)["']"""
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "layout.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if spelled.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, found


def test_the_onnx_torch_route_lowers_once_and_writes_each_file_once(tmp_path, monkeypatch) -> None:
    """The ONNX torch route settles the ONNX names, producer and ONNX Runtime's outputs on the capture
    (`FrontEnd.settle`) before it is lowered: one lowering, and torch-ir and the reference written once,
    holding the ONNX graph's boundary."""
    from onnx_models import export_conv_and_mlp
    from rlx_torch_import.torchir import TorchIR

    lowerings, reads = _count(monkeypatch)
    writes: Counter[str] = Counter()
    real_save, real_write = TorchIR.save, safetensors_io.write

    def counted_save(self: TorchIR, directory: Any) -> Any:
        writes[layout.TORCH_IR] += 1
        return real_save(self, directory)

    def counted_write(path: Any, *args: Any, **kw: Any) -> Any:
        folder = Path(path).parent  # the conversion folder (torch-ir.json is written first), not the bundle
        if Path(path).name in (layout.WEIGHTS, layout.REFERENCE) and (folder / layout.TORCH_IR).is_file():
            writes[Path(path).name] += 1
        return real_write(path, *args, **kw)

    monkeypatch.setattr(TorchIR, "save", counted_save)
    monkeypatch.setattr(safetensors_io, "write", counted_write)
    model = export_conv_and_mlp(tmp_path / "pair.onnx")
    out = tmp_path / "o"
    report = rti.from_onnx(model, out, route="torch", per_node=False)
    assert report.ok, report.summary()
    assert _program_lowerings(lowerings) == 1
    assert writes == {layout.TORCH_IR: 1, layout.WEIGHTS: 1, layout.REFERENCE: 1}
    assert reads == {layout.TORCH_IR: 1, layout.WEIGHTS: 1, layout.REFERENCE: 1}
    ir = torchir.load(out)
    assert [s.name for s in ir.inputs] == ["img", "x"] and [o.name for o in ir.outputs] == ["feat", "logits"]
    assert ir.producer["frontend"] == "onnx" and ir.producer["route"] == "torch"
    assert set(safetensors_io.read(out / layout.REFERENCE)) == {"input.img", "input.x", "output.feat", "output.logits"}
