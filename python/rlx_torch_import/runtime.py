"""Load a bundle and run it on the RLX CPU runtime with numpy inputs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import _core, safetensors_io
from .dtypes import HALF_DTYPES, numpy_dtype, to_host, to_rlx
from .emit.bundle import BUNDLE_FORMAT, BUNDLE_VERSION, HIR, META, WEIGHTS
from .errors import BundleError, InputError


class BundleModel:
    """A compiled bundle; call `run` as many times as needed."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        for f in (HIR, WEIGHTS, META):
            if not (self.path / f).is_file():
                raise BundleError(f"{self.path}: not a complete bundle ({f} is missing)")
        self.meta = json.loads((self.path / META).read_text())
        if self.meta.get("format") != BUNDLE_FORMAT or self.meta.get("version") != BUNDLE_VERSION:
            raise BundleError(
                f"{self.path / META}: format {self.meta.get('format')!r} version {self.meta.get('version')!r} "
                f"is not {BUNDLE_FORMAT!r} version {BUNDLE_VERSION}"
            )
        boundary = [s.get("rlx_dtype", s["dtype"]) for s in (*self.meta["inputs"], *self.meta["outputs"])]
        if HALF_DTYPES & set(boundary):  # half values always cross as float32 (docs/design.md, l)
            raise BundleError(f"{self.path / META}: a half-precision rlx_dtype at the boundary is not supported")
        try:
            self._model = _core.CompiledModel((self.path / HIR).read_text())
            for name, t in safetensors_io.read(self.path / WEIGHTS).items():
                self._model.set_param(name, t.data, to_rlx(t.dtype))
        except RuntimeError as e:
            raise BundleError(f"{self.path}: RLX could not load the bundle: {e}") from None

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self.meta["inputs"]]

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """Run once; inputs by name (or in order), outputs by name as numpy arrays."""
        specs = self.meta["inputs"]
        if not isinstance(inputs, Mapping):
            inputs = dict(zip(self.input_names, inputs, strict=False)) if len(inputs) == len(specs) else {}
            if not inputs and specs:
                raise InputError(f"expected {len(specs)} inputs ({', '.join(self.input_names)})")
        feed = []
        for spec in specs:
            if spec["name"] not in inputs:
                raise InputError(f"missing input {spec['name']!r}; the bundle takes {', '.join(self.input_names)}")
            arr = np.asarray(inputs[spec["name"]])
            if tuple(arr.shape) != tuple(spec["shape"]):
                raise InputError(
                    f"input {spec['name']!r} has shape {list(arr.shape)}, the bundle expects {spec['shape']}"
                )
            carrier = spec.get("rlx_dtype", spec["dtype"])
            if carrier != spec["dtype"]:  # bool/narrow ints and half floats cross as float32
                arr = to_host(arr, spec["dtype"])
            arr = np.ascontiguousarray(arr.astype(numpy_dtype(carrier), copy=False))
            feed.append((spec["name"], arr.reshape(-1).view(np.uint8), to_rlx(carrier)))
        try:
            raw = self._model.run(feed)
        except RuntimeError as e:
            raise BundleError(f"{self.path}: RLX failed while running: {e}") from None
        outputs = {}
        for spec, (data, _rlx_dtype, dims) in zip(self.meta["outputs"], raw, strict=True):
            value = _from_bytes(data, spec.get("rlx_dtype", spec["dtype"]), dims)
            if spec.get("rlx_dtype", spec["dtype"]) != spec["dtype"]:  # carried as float32: round to the dtype
                value = to_host(value, spec["dtype"])
            outputs[spec["name"]] = value
        return outputs


def _from_bytes(data: bytes, dtype: str, dims: list[int]) -> np.ndarray:
    return np.frombuffer(data, dtype=numpy_dtype(dtype)).reshape(dims).copy()


def run_bundle(path: Path | str, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
    """Compile the bundle at `path` on RLX (CPU) and run it once."""
    return BundleModel(path).run(inputs)
