"""Size stages in a bundle (docs/design.md, decision ax): written beside the main graph, run before it.

A bundle whose program has sizes that depend on tensor values keeps, for each size stage, a static
graph `stage<k>.hir.json` computing those sizes as int64 scalars, and meta.json `stages`:
[{"file", "symbols" (torch names, in output order), "params" (the stored weights it reads), "inputs",
"outputs"}]. `BundleModel.run` runs
each stage on the inputs (compiled once, weights from the bundle's file), checks each size against
its symbol's range and binds it; the main graph (`model.rlxmodel`) then runs at that binding. With
dynamic input dims, or in a chain (stage k > 1 reads values sized by earlier stages' sizes), a stage
is a symbolic graph `stage<k>.rlxmodel` compiled per binding of the input dims and earlier sizes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import _core
from ..errors import BundleError, InputError, LoweringError, RlxError
from ..outdir import write_text
from ..program import Program
from ..sizes import Symbol
from ..torchir import TorchIR
from .format import _inputs_meta, _outputs_meta
from .host import decode_outputs, encode_feed


def stage_file(k: int) -> str:
    return f"stage{k}.hir.json"


def write_stage(
    program: Program,
    stage_ir: TorchIR,
    symbols: list[Symbol],
    main: Program,
    directory: Path,
    k: int = 1,
    rlxmodel: str | None = None,
) -> dict[str, Any]:
    """Write size stage `k`'s graph into `directory` (with dynamic input dims also its symbolic graph
    `rlxmodel`, compiled per binding of those dims); returns its meta.json `stages` entry. Raises
    LoweringError when the stage reads a weight the main graph does not store (its weights come from the
    bundle's file)."""
    stored = {p.name for p in main.params}
    missing = sorted({p.name for p in program.params} - stored)
    if missing:
        raise LoweringError(
            f"size stage {k} reads weights the main graph does not store ({', '.join(missing)}); not supported yet"
        )
    write_text(directory / stage_file(k), _core.program_to_hir_json(program.to_core_json()))
    entry: dict[str, Any] = {
        "file": stage_file(k),
        "symbols": [s.name for s in symbols],
        "params": sorted(p.name for p in program.params),
        "inputs": _inputs_meta(program, stage_ir, rlxmodel is not None),
        "outputs": _outputs_meta(program, stage_ir),
    }
    if rlxmodel is not None:
        entry["symbolic"] = f"stage{k}.rlxmodel"
        write_text(directory / f"stage{k}.rlxmodel", rlxmodel)
    return entry


class StageRunner:
    """The compiled size stages of a bundle; `sizes(arrays)` computes and checks the staged symbols."""

    def __init__(self, path: Path, stages: list[dict[str, Any]], symbols: list[Symbol], device: str, load: Any) -> None:
        self.path = path
        self.stages = stages
        self.symbols = {s.name: s for s in symbols}
        self.models: list[Any] = []
        self.device, self.load = device, load
        self.compiled: dict[tuple[int, tuple[tuple[str, int], ...]], Any] = {}  # (stage, input binding)
        for stage in stages:
            source = path / str(stage.get("symbolic") or stage["file"])
            try:
                text = source.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise BundleError(f"{source}: cannot read ({e})") from None
            for name in stage["symbols"]:
                if name not in self.symbols:
                    raise BundleError(f"{path}: meta.json stages names symbol {name!r}, which symbols lacks")
            try:
                if stage.get("symbolic"):  # compiled per binding of the input dims (`model`)
                    self.models.append(_core.SymbolicModel(text))
                else:
                    self.models.append(load(_core.CompiledModel(text, device), set(stage.get("params", []))))
            except (RuntimeError, _core.CheckError) as e:
                raise BundleError(f"{source}: RLX could not load the size stage: {e}") from None

    @classmethod
    def of(cls, path: Path, stages: Any, symbols: list[Symbol], device: str, load: Any) -> StageRunner | None:
        """The runner of meta.json's `stages` (None for a bundle without any)."""
        return cls(path, stages, symbols, device, load) if stages else None

    def model(self, k: int, at: dict[str, int]) -> Any:
        """Stage `k` (from 0) compiled, for a symbolic one at `at` (torch name -> size: the input dims and
        the sizes earlier stages computed)."""
        stage = self.stages[k]
        if not stage.get("symbolic"):
            return self.models[k]
        key = (k, tuple(sorted(at.items())))
        if key not in self.compiled:
            # the input dims and the sizes earlier stages computed (a chain of stages)
            ids = {s.name: s.id for s in self.symbols.values() if s.stage <= k}
            try:
                graph = self.models[k].compile([(ids[n], v) for n, v in key[1] if n in ids], self.device)
            except (RuntimeError, _core.CheckError) as e:
                raise RlxError(
                    f"{self.path}: RLX could not compile size stage {k + 1} at {dict(key[1])}: {e}"
                ) from None
            self.compiled[key] = self.load(graph, set(stage.get("params", [])))
            while len(self.compiled) > 4:  # as BundleModel's binding cache
                self.compiled.pop(next(iter(self.compiled)))
        return self.compiled[key]

    def sizes(self, arrays: dict[str, np.ndarray], at: dict[str, int] | None = None) -> dict[str, int]:
        """Torch symbol name -> size for every staged symbol, computed from the input values (`at`: the
        input dims' sizes, torch name -> size).

        Raises InputError naming the symbol, the op it is the size of and the value when a size is
        outside its range (torch.export's range, e.g. at most the number of elements); RlxError when
        RLX fails."""
        found: dict[str, int] = {}
        for k, stage in enumerate(self.stages):
            bound = {**(at or {}), **found}  # a later stage runs at the sizes earlier ones computed
            model = self.model(k, bound)
            feed = {s["name"]: arrays[s["name"]] for s in stage["inputs"]}
            try:
                raw = model.run(encode_feed(stage["inputs"], feed, bound))
            except (RuntimeError, _core.CheckError) as e:
                raise RlxError(f"{self.path}: RLX failed while running size stage {stage['file']}: {e}") from None
            values = decode_outputs(stage["outputs"], raw)
            for name, spec in zip(stage["symbols"], stage["outputs"], strict=True):
                size = int(np.asarray(values[spec["name"]]).reshape(()))
                sym = self.symbols[name]
                if not sym.holds(size):
                    raise InputError(
                        f"size {name} ({sym.label}, the size of node {sym.defined_by}) is {size} on these inputs, "
                        f"outside the range {sym.min}..{'inf' if sym.max is None else sym.max} the bundle was "
                        "converted for",
                        hint="torch.export fixed that range (torch._check bounds in the model widen or narrow it)",
                    )
                found[name] = size
        return found


def compile_failure(path: Path, by: dict[str, Symbol], key: tuple[tuple[str, int], ...]) -> str:
    """What failed when the bundle at `path` did not compile at binding `key`; where a size a stage
    computed is 0, why it may not (RLX's CPU matmul, softmax, ... divide by an empty dim's length)."""
    what = f"{path}: RLX could not compile the bundle at {dict(key)}"
    empty = [f"{k} (the size of node {by[k].defined_by})" for k, v in key if by[k].stage and v == 0]
    if not empty:
        return what
    why = "RLX's CPU kernels cannot compile every op over an empty dim"
    return f"{what} ({', '.join(empty)} is 0 on these inputs; {why})"


def empty_note(symbols: list[Symbol], at: dict[str, int]) -> str:
    """For a run that failed at sizes `at` (symbol name -> size): which sizes a stage computed are 0 there,
    and why that may be the cause (RLX's CPU `Where` panics on an empty tensor); "" when none is 0."""
    empty = [f"{s.label} (the size of node {s.defined_by})" for s in symbols if s.stage and at.get(s.name) == 0]
    if not empty:
        return ""
    return (
        f" ({', '.join(empty)} is 0 on these inputs; RLX's CPU kernels cannot run every op over an empty dim: "
        'docs/usage.md, "Sizes that depend on tensor values")'
    )
