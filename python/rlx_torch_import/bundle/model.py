"""Load a bundle and run it on an RLX device (CPU, or CUDA: `devices.py`) with numpy inputs."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import _core, complex_edge, rlx_config, safetensors_io
from ..devices import check_device
from ..dtypes import to_rlx
from ..errors import BundleError, DeviceError, InputError, RlxError, RtiError
from ..layout import BUNDLE
from ..limits import regular_file, short
from ..outdir import stranded_hint
from ..sizes import Symbol, evaluate, evaluate_shape, infer_binding
from .format import HIR, META, SYMBOLIC, WEIGHTS, check_meta, check_params, meta_text, read_meta
from .host import _thunk_profile, as_input, bind_weight, check_baked, decode_outputs, encode_feed, unpad_outputs
from .ranges import check_ranges, check_weight_ranges
from .stages import StageRunner, compile_failure, empty_note

# Compiled bindings a dynamic bundle keeps (least recently used dropped first); each holds its
# own copy of the weights (RLX's CPU backend cannot share one between compiled graphs).
DEFAULT_BINDING_CACHE = 4


def _unwritten_meta(meta: dict[str, Any], path: Path) -> dict[str, Any]:
    """A meta.json's content not yet written to `path`, as `read_meta` would read and check it."""
    import json

    found = json.loads(meta_text(meta))
    check_meta(found, path)
    return found


class BundleModel:
    """A compiled bundle; call `run` as many times as needed.

    `threads` sizes RLX's thread pool (default: every core this process may use;
    `rlx_config`). The pool is process-wide and fixed once the first model is
    compiled, so a different `threads` after that raises `InputError`.
    `device` is "cpu" or "cuda" (`devices.check_device`: DeviceError, exit 7, when this build
    or machine lacks it, or RLX's CUDA backend cannot run the bundle as the budgets need).
    `flush_denormals` runs RLX's threads with flush-to-zero / denormals-are-zero;
    the default (None) follows the bundle's `meta.json`, where verification set it
    only if flushing left the verified outputs bit-identical (docs/design.md).
    `meta`: the content of a new bundle's meta.json before it is written (verification runs the
    bundle to decide its `flush_denormals`, then `bundle.format.write_meta` writes it once).

    A dynamic bundle (one with `model.rlxmodel`) runs at any input sizes in its symbols'
    ranges: `run` infers the binding from the input shapes, compiles the graph for a new
    binding (`compile_binding`) and keeps the last `binding_cache` compiled bindings.

    Threads: one model may be shared by any number of threads (created in one, run from a
    pool). Runs of one compiled graph are serialised inside (RLX keeps one arena per compiled
    graph; each run already uses all of RLX's pool threads), taken without the GIL so other
    Python work goes on meanwhile; a dynamic bundle's runs at different bindings, and runs of
    different models, overlap. Results are the same as single-threaded runs, bit for bit.
    `profile` is the exception: RLX's timer is process-wide, so profile while no other thread runs.
    A `decode.generate.Decoder` keeps caches resident in a compiled graph between its calls and holds
    `sequence_lock` while it binds, runs and copies rows; a plain `run` of the same binding meanwhile
    unbinds them, and the Decoder's next step then fails (BundleError) rather than read another cache.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        threads: int | None = None,
        flush_denormals: bool | None = None,
        binding_cache: int = DEFAULT_BINDING_CACHE,
        device: str = "cpu",
        meta: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InputError(f"path must be a bundle directory (str or path), got {type(path).__name__} {short(path)}")
        self.device = check_device(device).name
        if flush_denormals is not None and not isinstance(flush_denormals, bool):
            raise InputError(f"flush_denormals must be True, False or None, got {short(flush_denormals)}")
        self.path = Path(path)
        self.threads = rlx_config.set_threads(threads)
        if not self.path.is_dir():
            raise BundleError(
                f"{self.path}: {'not a directory' if self.path.exists() else 'no such directory'}",
                hint=stranded_hint(self.path),
            )
        for f in (HIR, WEIGHTS) if meta is not None else (HIR, WEIGHTS, META):
            if not (self.path / f).exists():
                inner = self.path / BUNDLE
                hint = f"this is a conversion directory; its bundle is {inner}" if (inner / HIR).exists() else None
                raise BundleError(f"{self.path}: not a complete bundle ({f} is missing)", hint=hint)
            regular_file(self.path / f, BundleError)
        self.meta = read_meta(self.path / META) if meta is None else _unwritten_meta(meta, self.path / META)
        # Every weight checked against meta.json's params before anything is bound.
        weights = safetensors_io.read(self.path / WEIGHTS)
        check_params(self.meta["params"], weights, self.path / WEIGHTS)
        check_weight_ranges(self.meta.get("weight_index_ranges", []), weights, self.path / WEIGHTS)
        if not isinstance(binding_cache, int) or isinstance(binding_cache, bool) or binding_cache < 1:
            raise InputError(f"binding_cache must be >= 1, got {binding_cache}")
        self.binding_cache = binding_cache
        self.symbols = [Symbol(**s) for s in self.meta.get("symbols", [])]
        self.flush_denormals = bool(
            self.meta.get("flush_denormals", False) if flush_denormals is None else flush_denormals
        )
        self._compiled: OrderedDict[tuple[tuple[str, int], ...], Any] = OrderedDict()
        self._compiling = threading.Lock()  # guards _compiled and compiles (threads share a model)
        # Held by a caller whose calls on one compiled graph must follow each other (decode.generate.Decoder:
        # bind the resident caches, run, copy the new rows in); plain `run` does not take it.
        self.sequence_lock = threading.RLock()
        self.compiles = 0  # bindings compiled so far (a dynamic bundle compiles each new one)
        self._stages = StageRunner.of(self.path, self.meta.get("stages"), self.symbols, self.device, self._load)
        if self.symbols and not (self.path / SYMBOLIC).is_file():
            raise BundleError(f"{self.path}: not a complete bundle ({SYMBOLIC} is missing)")
        source = self.path / (SYMBOLIC if self.symbols else HIR)
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise BundleError(f"{source}: cannot read ({e})") from None
        try:
            if self.symbols:
                self._symbolic = _core.SymbolicModel(text)
            else:
                self._model = self._load(_core.CompiledModel(text, self.device))
        except (RuntimeError, _core.CheckError) as e:
            raise _core_failure(e, f"{self.path}: RLX could not load the bundle") from None

    @property
    def is_dynamic(self) -> bool:
        return bool(self.symbols)

    def _load(self, model: Any, only: set[str] | None = None) -> Any:
        """Give a freshly compiled graph the bundle's weights (only those in `only`: a stage's) and settings."""
        rlx_config.mark_started()
        self.compiles += 1
        model.set_flush_denormals(self.flush_denormals)
        for name, t in safetensors_io.read(self.path / WEIGHTS).items():
            if only is None or name in only:
                bind_weight(model, name, t)
        return model

    def binding(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, int]:
        """The binding (symbol label -> size) that `inputs` (as `run` takes them) give; {} for a static
        bundle. Raises InputError naming the input, axis, symbol and range when a size is outside
        its range or two inputs disagree (`sizes.infer_binding`)."""
        if not self.symbols:
            return {}
        inputs = inputs if isinstance(inputs, Mapping) else dict(zip(self.input_names, inputs, strict=False))
        shapes = {spec["name"]: _shape_of(inputs, spec["name"]) for spec in self.meta["inputs"]}
        dims = [s for s in self.symbols if not s.stage]
        found = infer_binding(dims, [(i["name"], i["shape"]) for i in self.meta["inputs"]], shapes) if dims else {}
        found |= self._stages.sizes(self._arrays(inputs), found) if self._stages else {}  # sizes stages compute
        return {s.label: found[s.name] for s in self.symbols}

    def compile_binding(self, binding: Mapping[str, int]) -> Any:
        """The compiled graph for `binding` (label or torch symbol name -> size), compiling and
        loading weights on first use; the least recently used beyond `binding_cache` is dropped."""
        by = {s.label: s for s in self.symbols} | {s.name: s for s in self.symbols}
        key = tuple(sorted((by[k].name, int(v)) for k, v in binding.items()))
        with self._compiling:  # one thread compiles a new binding; the others wait for it
            model = self._compiled.get(key)
            if model is None:
                try:
                    model = self._load(self._symbolic.compile([(by[k].id, int(v)) for k, v in key], self.device))
                except (RuntimeError, _core.CheckError) as e:
                    raise _core_failure(e, compile_failure(self.path, by, key)) from None
                self._compiled[key] = model
                while len(self._compiled) > self.binding_cache:
                    self._compiled.popitem(last=False)
            self._compiled.move_to_end(key)
            return model

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in self.meta["inputs"])
        outs = ", ".join(f"{o['name']}: {o['dtype']}{o['shape']}" for o in self.meta["outputs"])
        dims = "; " + ", ".join(s.describe() for s in self.symbols) if self.symbols else ""
        where = f"device={self.device!r}, threads={self.threads}"
        return f"BundleModel({str(self.path)!r}, {where}; ({ins}) -> ({outs}){dims})"

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self.meta["inputs"]]

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """Run once; inputs by name or path (`meta.json` inputs' `name` / `path`) or in order,
        the tensor outputs by name as numpy arrays (`call` returns forward's structure).

        Input dtypes: an array (numpy, or anything `np.asarray` reads with a dtype, such as a CPU
        torch tensor) must have the input's dtype or one numpy casts to it without loss
        (`np.can_cast(found, declared, "safe")`: bool to any, int32 to int64, float16 to float32,
        ...); float64 for a float32 input, int64 for int32 or a float for an integer input is
        refused: cast it first (`x.astype(np.float32)`). Python numbers and (nested) lists of them
        are literals: converted to the input's dtype when of the same kind (floats round to it,
        integers must fit); a float for an integer or bool input, or an int for a bool input, is
        refused. A bfloat16 input takes float32 (numpy has no bfloat16), rounded to bfloat16
        (nearest even, as torch's `.to(torch.bfloat16)`). Non-contiguous (strided) arrays are
        copied into row-major order. A static bundle's inputs must have their declared shapes; a
        dynamic bundle's shapes must give each symbol one size in its range (`binding`).

        Raises InputError naming the input (and listing the inputs the bundle takes) for a missing
        or unknown name, a wrong count, a value that is not an array of numbers (None, a string,
        an object, a ragged list), a dtype outside that policy, or a wrong shape; IndexRangeError (an
        InputError and an IndexError) for an id or index outside the range torch allows for the op it
        feeds (meta.json `index_ranges`, `bundle/ranges.py`); BundleError when the core refuses a
        buffer; RlxError when RLX fails on inputs that passed every check."""
        arrays = self._arrays(inputs)
        labels = self.binding(arrays)
        model = self.compile_binding(labels) if self.symbols else self._model
        at = {s.name: labels[s.label] for s in self.symbols}
        return self._run_compiled(model, arrays, at)

    def run_resident(self, inputs: Mapping[str, Any], binding: Mapping[str, int]) -> dict[str, np.ndarray]:
        """`run` on the compiled graph for `binding` (symbol label -> size, every symbol) with the
        inputs bound resident in it (`compile_binding(binding).bind_resident`, RLX's arena) left out
        of `inputs` (by name); the others as `run` takes them, their shapes those of the binding.
        Raises InputError for an unknown input or a shape off the binding; BundleError when the core
        refuses the feed (a missing input that is not resident)."""
        labels = dict(binding)
        if set(labels) != {s.label for s in self.symbols}:
            raise InputError(f"binding {labels} must give every symbol: {[s.label for s in self.symbols]}")
        at = {s.name: labels[s.label] for s in self.symbols}
        specs = {spec["name"]: spec for spec in self.meta["inputs"]}
        arrays = {}
        for name, value in inputs.items():
            if name not in specs:
                raise InputError(f"unknown input {name!r}; the bundle takes {self._accepted()}")
            arrays[name] = as_input(name, complex_edge.to_pairs(name, value, specs[name]), specs[name]["dtype"])
            if list(arrays[name].shape) != evaluate_shape(specs[name]["shape"], at):
                raise InputError(
                    f"input {name!r} has shape {list(arrays[name].shape)}, the binding {labels} takes "
                    f"{evaluate_shape(specs[name]['shape'], at)}"
                )
        return self._run_compiled(self.compile_binding(labels), arrays, at)

    def _run_compiled(self, model: Any, arrays: dict[str, np.ndarray], at: dict[str, int]) -> dict[str, np.ndarray]:
        check_ranges(self.meta.get("index_ranges", []), arrays, at)  # IndexRangeError, as torch raises
        try:
            raw = model.run(encode_feed(self.meta["inputs"], arrays, at))
        except (RuntimeError, _core.CheckError) as e:
            raise _core_failure(e, f"{self.path}: RLX failed while running{empty_note(self.symbols, at)}") from None
        self._check_outputs(raw := unpad_outputs(self.meta["outputs"], raw, at), at)  # empty-output
        return decode_outputs(self.meta["outputs"], raw)

    def _check_outputs(self, raw: list[tuple[Any, str, list[int]]], at: dict[str, int]) -> None:
        """The graph's outputs against meta.json's: as many, each of the declared carrier dtype and
        shape (a hand-edited meta.json or model.hir.json that disagree would otherwise read bytes
        as the wrong dtype or shape). Raises BundleError naming the output, declared vs found."""
        specs = self.meta["outputs"]
        if len(raw) != len(specs):
            raise BundleError(
                f"{self.path}: model.hir.json's graph has {len(raw)} output(s), meta.json declares {len(specs)} "
                f"({', '.join(short(s['name']) for s in specs) or 'none'})"
            )
        for i, (spec, (_data, rlx_dtype, dims)) in enumerate(zip(specs, raw, strict=True)):
            carrier = spec.get("rlx_dtype", spec["dtype"])
            want = [int(d) for d in evaluate_shape(spec["shape"], at)]
            if rlx_dtype != to_rlx(carrier) or list(dims) != want:
                raise BundleError(
                    f"{self.path}: output {i} ({short(spec['name'])}) of model.hir.json's graph is "
                    f"{rlx_dtype}{list(dims)}; meta.json outputs[{i}] declares {to_rlx(carrier)}{want}"
                )

    def _accepted(self) -> str:
        """The inputs the bundle takes, for messages: `name: dtype[shape]` (and path where it differs)."""
        return ", ".join(
            f"{s['name']}: {s['dtype']}{list(s['shape'])}"
            + (f" (path {s['path']})" if s.get("path", s["name"]) != s["name"] else "")
            for s in self.meta["inputs"]
        )

    def _arrays(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """`inputs` by input name as arrays of the input's dtype policy (`run`), names, count, dtypes
        and static shapes checked (InputError naming the input)."""
        specs = self.meta["inputs"]
        named: dict[str, Any] = {}
        if isinstance(inputs, Mapping):
            by_path = {s.get("path", s["name"]): s["name"] for s in specs}
            baked = {c["path"]: c["value"] for c in self.meta.get("constant_inputs", [])}
            given: dict[str, Any] = {}
            unknown = []
            for key, value in inputs.items():
                name = key if key in self.input_names else by_path.get(key) if isinstance(key, str) else None
                if name is None and key in baked:  # baked in at conversion: may be given, not changed
                    check_baked(key, value, baked[key])
                elif name is None:
                    unknown.append(key)
                elif name in named:
                    raise InputError(f"input {name!r} is given twice (as {given[name]!r} and {key!r})")
                else:
                    named[name], given[name] = value, key
            missing = [n for n in self.input_names if n not in named]
            if missing or unknown:
                parts = [f"missing input(s) {', '.join(map(repr, missing))}"] if missing else []
                parts += [f"unknown input name(s) {', '.join(short(k) for k in unknown)}"] if unknown else []
                raise InputError(f"{'; '.join(parts)}; the bundle takes {self._accepted() or 'no inputs'}")
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) != len(specs):
                raise InputError(
                    f"expected {len(specs)} inputs ({', '.join(self.input_names)}), got {len(inputs)}; the bundle "
                    f"takes {self._accepted() or 'no inputs'}"
                )
            named = dict(zip(self.input_names, inputs, strict=True))
        else:
            raise InputError(
                f"inputs must be a mapping of input name to array, or a list or tuple in input order; got "
                f"{type(inputs).__name__}; the bundle takes {self._accepted() or 'no inputs'}"
            )
        arrays = {}
        for spec in specs:
            arr = as_input(spec["name"], complex_edge.to_pairs(spec["name"], named[spec["name"]], spec), spec["dtype"])
            if not self.symbols and tuple(arr.shape) != tuple(spec["shape"]):
                raise InputError(
                    f"input {spec['name']!r} has shape {list(arr.shape)}, the bundle expects {spec['shape']}"
                )
            arrays[spec["name"]] = arr
        return arrays

    def values(self, binding: Mapping[str, int] | None = None) -> dict[str, Any]:
        """The outputs that are Python values (`meta.json` output_tree): a constant as torch.export
        baked it in, a size computed at `binding` (label or torch symbol name -> size; symbols left
        out take their example sizes). Raises InputError naming a symbol the bundle does not have,
        or a size that is not an integer in its symbol's range."""
        by = {s.label: s for s in self.symbols} | {s.name: s for s in self.symbols}
        sizes = {s.name: s.example for s in self.symbols}
        for key, value in (binding or {}).items():
            sym = by.get(key)
            if sym is None:
                known = ", ".join(s.describe() for s in self.symbols) or "none: the bundle is static"
                raise InputError(f"binding names {short(key)}, which is no symbol of the bundle (its symbols: {known})")
            if not isinstance(value, int | np.integer) or isinstance(value, bool):
                raise InputError(f"binding {sym.label}={short(value)}: a size must be an integer")
            if not sym.holds(value):
                raise InputError(f"binding {sym.label}={value} is outside {sym.describe()}")
            sizes[sym.name] = int(value)
        found: dict[str, Any] = {}

        def walk(node: dict[str, Any]) -> None:
            if "constant" in node:
                found[node["name"]] = node["constant"]
            elif "size" in node:
                found[node["name"]] = int(evaluate(node["size"], sizes))
            for child in tree_children(node):
                walk(child)

        walk(self.meta.get("output_tree") or {})
        return found

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run as the model is called: `model(*args, **kwargs)` with numpy arrays (or anything
        `np.asarray` takes) where it took tensors, nested as it took them (Python values that
        torch.export baked in may be left out, but not changed). Returns what forward returns, as
        numpy arrays and Python values nested in tuples, lists and dicts (`meta.json` output_tree).
        An input the model writes in place is written into the array passed (if writable).

        Raises InputError naming the input path that is missing, an argument the converted call
        did not have, or a baked-in value given differently."""
        positional = self.meta.get("call_args", [])
        if len(args) > len(positional):
            raise InputError(
                f"expected at most {len(positional)} positional argument(s) ({', '.join(positional) or 'none'}); "
                f"pass the others by keyword ({', '.join(sorted(self._call_heads() - set(positional))) or 'none'})"
            )
        named = dict(zip(positional, args, strict=False))
        for key, value in kwargs.items():
            if key in named:
                raise InputError(f"argument {key!r} is given twice (positionally and by keyword)")
            named[key] = value
        unknown = sorted(k for k in set(named) - self._call_heads() if named[k] is not None)
        if unknown:
            raise InputError(
                f"argument(s) {', '.join(map(repr, unknown))} were not part of the call the bundle was converted "
                f"from (its arguments: {', '.join(sorted(self._call_heads()))})"
            )
        for const in self.meta.get("constant_inputs", []):  # baked in: may be left out, not changed
            try:
                given = _lookup(named, const["path"])
            except LookupError:
                continue
            same = given == const["value"]
            if not (isinstance(same, bool) and same):  # an array given for a baked-in value is not it either
                raise InputError(
                    f"input {const['path']} was baked into the bundle as {const['value']!r} at conversion; got "
                    f"{given!r}",
                    hint="convert again with the value you want (torch.export specializes on Python values)",
                )
        feed = {}
        for spec in self.meta["inputs"]:
            try:
                feed[spec["name"]] = _lookup(named, spec.get("path", spec["name"]))
            except LookupError:
                raise InputError(f"missing input {spec.get('path', spec['name'])!r}") from None
        outputs = self.run(feed)
        for spec in self.meta["inputs"]:  # in-place writes land in the caller's arrays, as in PyTorch
            written, target = outputs.get(f"mutated_{spec['name']}"), feed[spec["name"]]
            if written is not None and isinstance(target, np.ndarray) and target.flags.writeable:
                np.copyto(target, written.reshape(target.shape), casting="unsafe")
        tree = self.meta.get("output_tree") or {}
        if not tree:
            return outputs
        values = self.values(self.binding(feed))

        def build(node: dict[str, Any]) -> Any:
            if "output" in node:  # "python": a Python value read from a tensor, carried as a 0-d array
                value = outputs[node["output"]]
                return {"bool": bool, "int": int, "float": float}[node["python"]](value) if "python" in node else value
            if "name" in node:
                return values[node["name"]]
            if "tuple" in node:
                return tuple(build(c) for c in node["tuple"])
            if "list" in node:
                return [build(c) for c in node["list"]]
            return {k: build(c) for k, c in node["dict"].items()}

        return build(tree)

    def _call_heads(self) -> set[str]:
        """The argument names of the converted call (first parts of the input and constant paths)."""
        paths = [s.get("path", s["name"]) for s in self.meta["inputs"]]
        paths += [c["path"] for c in self.meta.get("constant_inputs", [])]
        return {p.split(".", 1)[0] for p in paths}

    def set_flush_denormals(self, on: bool) -> None:
        """Turn flush-to-zero / denormals-are-zero on or off for later runs of this model."""
        with self._compiling:
            self.flush_denormals = bool(on)
            models = [*self._compiled.values(), *([self._model] if not self.symbols else [])]
        for model in models:
            model.set_flush_denormals(self.flush_denormals)

    def profile(self, inputs: Mapping[str, Any] | Sequence[Any], runs: int = 5) -> dict[str, tuple[float, int]]:
        """Where a run's time goes: RLX kernel kind -> (milliseconds per run, calls per run).

        Uses RLX's own per-thunk timer (`RLX_PROFILE_THUNKS`), which reports compiled
        kernels (after RLX's fusion) to 0.1 ms per run; the values are means over `runs`
        runs of `inputs` (so kernels shorter than ~0.1/`runs` ms read as 0.0). The timer and the
        stderr it is read from are the process's: profile while no other thread runs RLX, or their
        kernels are counted too.
        """
        self.run(inputs)  # warm-up, unprofiled
        totals: dict[str, list[float]] = {}
        for _ in range(runs):
            for kind, (ms, calls) in _thunk_profile(lambda: self.run(inputs)).items():
                acc = totals.setdefault(kind, [0.0, 0.0])
                acc[0] += ms / runs
                acc[1] += calls / runs
        return {k: (v[0], round(v[1])) for k, v in sorted(totals.items(), key=lambda kv: -kv[1][0])}


def _core_failure(e: Exception, what: str) -> RtiError:
    """The error for a failure of the core: a file or input its checks refused (`_core.CheckError`:
    sizes, dtypes, byte lengths, names, known-crashing kernels, malformed graphs) is a BundleError
    (exit 2); what the device cannot run (`_core.DeviceError`) a DeviceError (exit 7); anything
    else failed inside RLX on checked input, an RlxError (exit 5)."""
    if isinstance(e, _core.DeviceError):
        return DeviceError(f"{what}: {e}")
    return BundleError(f"{what}: {e}") if isinstance(e, _core.CheckError) else RlxError(f"{what}: {e}")


def _shape_of(inputs: Mapping[str, Any], name: str) -> tuple[int, ...]:
    """The shape of input `name` in `inputs` (InputError when it is missing or has none)."""
    if name not in inputs:
        raise InputError(f"missing input {name!r}")
    try:
        return tuple(np.shape(inputs[name]))
    except (ValueError, TypeError) as e:
        raise InputError(f"input {name!r} has no shape ({e})") from None


def _lookup(named: Mapping[str, Any], path: str) -> Any:
    """The value at `path` (`d.a`, `xs.1`) in the call's arguments; LookupError if absent."""
    head, *rest = path.split(".")
    value = named[head]
    for key in rest:
        try:
            value = value[int(key)] if isinstance(value, (list, tuple)) else value[key]
        except (TypeError, ValueError) as e:
            raise LookupError(path) from e
    return value


def tree_children(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The children of an `output_tree` node (none for a leaf)."""
    if "tuple" in node or "list" in node:
        return list(node.get("tuple", node.get("list", [])))
    return list(node.get("dict", {}).values())


def run_bundle(
    path: Path | str,
    inputs: Mapping[str, Any] | Sequence[Any],
    *,
    threads: int | None = None,
    device: str = "cpu",
) -> dict[str, np.ndarray]:
    """Compile the bundle at `path` on RLX's `device` ("cpu" or "cuda") and run it once."""
    return BundleModel(path, threads=threads, device=device).run(inputs)
