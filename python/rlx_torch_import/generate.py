"""Greedy decoding with a decode-step bundle: a converted decoder that takes its KV cache as inputs
and returns this step's keys and values as outputs (`generate`, `Decoder`), and the export of a Hugging Face
causal LM as such a step (`hf_decode_step`, `hf_decode_inputs`).

The convention a decode-step bundle follows (`DecodeSpec.from_meta` checks it against meta.json):

Inputs, in order:
1. token ids, int64 (or int32) [B, T]: the new tokens of this step (T = the prompt, or 1).
2. optionally positions, the same dtype and shape as the ids: the position of each new token,
   L, L+1, ..., L+T-1, where L is the number of tokens already in the cache. A bundle with this
   input must ignore cache slots at or past `positions[b, 0]` (a mask), so its cache may carry
   padding (`bucket` below); `hf_decode_step` builds that mask.
3. one or more cache tensors (keys and values of each layer), float, each of any rank with one
   *cache axis* whose size is the bundle's cache-length symbol S (one dynamic dim, shared by all).
   An empty cache (S = 0) must be in S's range: prefill runs at S = 0.

Outputs, in order:
1. logits, float [B, T, V].
2. one per cache input, in the same order, same dtype, either
   - this step's entries alone: size T on the cache axis, every other axis as the input's (what
     `hf_decode_step` returns: the step copies T entries out, not the whole cache), or
   - the input concatenated with this step's entries along the cache axis (size S + T there).

Each step with a new S is a new binding of the dynamic bundle, which RLX compiles (hundreds of ms
for a 6-layer model; `BundleModel.compile_binding`). With a positions input the cache is therefore
padded to a multiple of `bucket` slots (default 128): one compile per `bucket` tokens, and the last
`binding_cache` compiled bindings are reused (a `Decoder` kept across calls reuses them; a server
that interleaves sequences of several lengths wants a BundleModel whose `binding_cache` holds every
bucket and prompt length in use, each binding holding its own copy of the weights). Without one,
every step runs at the cache's exact length (bucket 1): a compile per token.

With padding, a CPU bundle whose cache outputs are this step's entries keeps the caches in RLX's
arena between steps (`_core.CompiledModel.bind_resident`, RLX's resident handles): a step copies in
its ids and positions and, after the run, only its T new rows per cache (`feed_rows`), not the whole
cache; the caches are copied in whole once per binding, bucket or state. The DecodeState's arrays
stay the host copy (what a new binding is given), updated with the same rows.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .bundle.model import BundleModel
from .errors import InputError

DEFAULT_BUCKET = 128
_INT = ("int64", "int32")
_FLOAT = ("float32", "float64", "float16", "bfloat16")


class DecodeConventionError(InputError, ValueError):
    """A bundle, or arguments to `generate`, that do not follow the decode-step convention
    (module docstring); a ValueError, and an InputError (exit code 2) like every bad argument."""


@dataclass(frozen=True)
class CacheSpec:
    """One cache tensor: its input and output names, its cache axis, and the input's declared shape
    (sizes, or symbol names such as "s15")."""

    input: str
    output: str
    axis: int
    shape: tuple[int | str, ...]
    dtype: str
    grown: bool  # the output is the whole grown cache (S + T on the axis), else this step's T entries


@dataclass(frozen=True)
class DecodeSpec:
    """A decode-step bundle's inputs and outputs by role (module docstring). `seq` and `cache` are the
    (min, max) the new-token count T and the cache length S may take (max None: unbounded); `batch`
    is the ids' batch entry (a size, or a symbol name)."""

    ids: str
    ids_dtype: str
    positions: str | None
    logits: str
    caches: tuple[CacheSpec, ...]
    batch: int | str
    seq: tuple[int, int | None]
    cache: tuple[int, int | None]
    cache_symbol: str

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> DecodeSpec:
        """The roles of a bundle's meta.json inputs and outputs. Raises DecodeConventionError naming
        what does not fit: too few inputs or outputs, ids that are not an integer [B, T], a cache
        input without a matching output, an output that is not its input grown along one axis, a
        cache length that is static or differs between cache tensors, or logits not [B, T, V]."""
        ins, outs = list(meta.get("inputs", [])), list(meta.get("outputs", []))
        symbols = {s["name"]: s for s in meta.get("symbols", [])}
        if len(ins) < 2 or len(outs) < 2:
            raise DecodeConventionError(
                f"a decode-step bundle takes (ids, [positions,] cache...) and returns (logits, cache...); "
                f"this one takes {_names(ins)} and returns {_names(outs)}"
            )
        ids = ins[0]
        if ids["dtype"] not in _INT or len(ids["shape"]) != 2:
            raise DecodeConventionError(
                f"input 0 ({ids['name']}: {ids['dtype']}{list(ids['shape'])}) must be the token ids, int64 [B, T]"
            )
        batch, seq_dim = ids["shape"]
        has_pos = ins[1]["dtype"] in _INT and list(ins[1]["shape"]) == list(ids["shape"])
        cache_ins = ins[2:] if has_pos else ins[1:]
        if not cache_ins or len(outs) != len(cache_ins) + 1:
            raise DecodeConventionError(
                f"{len(cache_ins)} cache input(s) ({_names(cache_ins)}) need as many cache outputs after the "
                f"logits; the bundle returns {len(outs)} output(s) ({_names(outs)})"
            )
        logits = outs[0]
        if logits["dtype"] not in _FLOAT or len(logits["shape"]) != 3 or list(logits["shape"][:2]) != [batch, seq_dim]:
            raise DecodeConventionError(
                f"output 0 ({logits['name']}: {logits['dtype']}{list(logits['shape'])}) must be the logits, "
                f"float [B, T, V] with [B, T] = {[batch, seq_dim]} as the ids"
            )
        caches = tuple(_cache_spec(i, o, seq_dim) for i, o in zip(cache_ins, outs[1:], strict=True))
        lengths = {c.shape[c.axis] for c in caches}
        length = next(iter(lengths))
        if len(lengths) != 1 or not isinstance(length, str) or length not in symbols:
            raise DecodeConventionError(
                f"every cache tensor's cache axis must be one dynamic dim (a torch.export.Dim); found "
                f"{sorted(map(str, lengths))}",
                hint="export the decode step with dynamic_shapes giving each cache tensor's length one Dim",
            )
        return cls(
            ids=ids["name"],
            ids_dtype=ids["dtype"],
            positions=ins[1]["name"] if has_pos else None,
            logits=logits["name"],
            caches=caches,
            batch=batch,
            seq=_range(seq_dim, symbols),
            cache=_range(length, symbols),
            cache_symbol=str(symbols[length].get("label", length)),
        )


def _names(specs: Sequence[Mapping[str, Any]]) -> str:
    return "(" + ", ".join(f"{s['name']}: {s['dtype']}{list(s['shape'])}" for s in specs) + ")"


def _range(dim: int | str, symbols: Mapping[str, Mapping[str, Any]]) -> tuple[int, int | None]:
    """The sizes a dim may take: (size, size) for a static one, its symbol's (min, max) else."""
    if isinstance(dim, int):
        return dim, dim
    if dim not in symbols:
        raise DecodeConventionError(f"dim {dim!r} is an expression, not one dynamic dim of the bundle")
    return int(symbols[dim]["min"]), symbols[dim]["max"]


def _cache_spec(inp: Mapping[str, Any], out: Mapping[str, Any], seq_dim: int | str) -> CacheSpec:
    """A cache input and its output: same dtype and rank, different on exactly one axis (the output
    T = `seq_dim` there, or the grown S + T)."""
    shape_in, shape_out = list(inp["shape"]), list(out["shape"])
    differ = [a for a, (x, y) in enumerate(zip(shape_in, shape_out, strict=False)) if x != y]
    if (
        inp["dtype"] not in _FLOAT
        or out["dtype"] != inp["dtype"]
        or len(shape_in) != len(shape_out)
        or len(differ) != 1
    ):
        raise DecodeConventionError(
            f"cache input {inp['name']}: {inp['dtype']}{shape_in} and its output {out['name']}: "
            f"{out['dtype']}{shape_out} must be float of the same dtype and rank, the output the input grown "
            "along one axis (the cache axis) or this step's entries alone (T there)"
        )
    axis = differ[0]
    return CacheSpec(inp["name"], out["name"], axis, tuple(shape_in), inp["dtype"], shape_out[axis] != seq_dim)


@dataclass
class DecodeState:
    """The cache between steps: `caches` in the bundle's input order (their cache axis padded to the
    decoder's bucket), `length` the number of valid positions L, `batch` B. A Decoder may keep a
    copy of the caches in RLX's arena (resident); treat `caches` as read-only and copy a state by
    making a new one (`DecodeState([a.copy() for a in s.caches], s.length, s.batch)`)."""

    caches: list[np.ndarray]
    length: int
    batch: int
    token: object = field(default_factory=object, compare=False, repr=False)  # identifies these caches


class Decoder:
    """A decode-step bundle run step by step (module docstring). `bundle`: a BundleModel, or a bundle
    directory opened with `threads` (RLX's pool size; `BundleModel`). `bucket`: cache slots are
    padded to a multiple of it (needs a positions input; default 128 with one, 1 without).

    Raises DecodeConventionError for a bundle that does not follow the convention, `threads` given
    with a BundleModel, a bucket below 1 or a bucket > 1 for a bundle without positions; a bundle
    directory that cannot be opened raises BundleModel's errors."""

    def __init__(
        self, bundle: BundleModel | str | os.PathLike[str], *, threads: int | None = None, bucket: int | None = None
    ) -> None:
        if isinstance(bundle, BundleModel):
            if threads is not None:
                raise DecodeConventionError(
                    f"threads is for a bundle directory; this BundleModel runs with threads={bundle.threads}"
                )
            self.model = bundle
        else:
            self.model = BundleModel(Path(bundle), threads=threads)
        self.spec = DecodeSpec.from_meta(self.model.meta)
        if bucket is None:
            bucket = DEFAULT_BUCKET if self.spec.positions else 1
        if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 1:
            raise DecodeConventionError(f"bucket must be an int >= 1, got {bucket!r}")
        if bucket > 1 and not self.spec.positions:
            raise DecodeConventionError(
                f"bucket={bucket} pads the cache, which needs a positions input (the bundle's mask of padded "
                "slots); this bundle takes none: use bucket=1"
            )
        self.bucket = bucket
        # Bindings whose arena holds a state's caches: key -> (compiled graph, (state token, length,
        # the graph's run count then: another run in between may have overwritten them))
        self._resident: OrderedDict[tuple[int, ...], tuple[Any, tuple[object, int, int]]] = OrderedDict()
        lo = self.spec.cache[0]
        if lo > 0:
            raise DecodeConventionError(
                f"the cache length ({self.spec.cache_symbol}) must allow 0 for the prefill; its range starts at {lo}",
                hint="export with torch.export.Dim(..., min=0) for the cache length",
            )

    def padded(self, length: int) -> int:
        """The cache slots fed for `length` valid positions: rounded up to the bucket, within the
        cache dim's max (never below `length`)."""
        slots = -(-length // self.bucket) * self.bucket
        hi = self.spec.cache[1]
        return max(length, min(slots, hi)) if hi is not None else slots

    def start(self, batch: int) -> DecodeState:
        """An empty cache (L = 0) for `batch` sequences."""
        b = self.spec.batch
        if isinstance(b, int) and b != batch:
            raise DecodeConventionError(f"the bundle runs batch {b}, got {batch} sequences")
        caches = []
        for c in self.spec.caches:
            dims = []
            for axis, d in enumerate(c.shape):
                if axis == c.axis:
                    dims.append(0)
                elif isinstance(d, int) or d == b:
                    dims.append(d if isinstance(d, int) else batch)
                else:
                    raise DecodeConventionError(
                        f"cache input {c.input} axis {axis} is dynamic ({d}) and not the batch: its empty size "
                        "cannot be chosen"
                    )
            caches.append(np.zeros(dims, dtype=_numpy_dtype(c.dtype)))
        return DecodeState(caches, 0, batch)

    def step(self, state: DecodeState, ids: Any) -> np.ndarray:
        """Run `ids` [B, T] after the `state.length` positions of the cache; returns the logits
        [B, T, V] and updates `state` in place. Raises DecodeConventionError for ids of another
        batch or a T outside the bundle's range, a cache past its max, and outputs not of the
        convention's shapes; BundleModel.run's errors for anything RLX refuses."""
        ids = np.asarray(ids)
        if ids.ndim != 2 or ids.dtype.kind not in "iu" or ids.shape[0] != state.batch:
            raise DecodeConventionError(f"ids must be integers [B={state.batch}, T], got {ids.dtype}{list(ids.shape)}")
        t, length = ids.shape[1], state.length
        _check_in(t, self.spec.seq, "new tokens T")
        _check_in(length, self.spec.cache, f"cache length ({self.spec.cache_symbol})")
        feed: dict[str, np.ndarray] = {self.spec.ids: ids.astype(_numpy_dtype(self.spec.ids_dtype))}
        if self.spec.positions:
            pos = np.arange(length, length + t, dtype=_numpy_dtype(self.spec.ids_dtype))
            feed[self.spec.positions] = np.broadcast_to(pos, ids.shape)
        resident = self._resident_binding(state, feed)
        if resident is None:
            feed.update({c.input: a for c, a in zip(self.spec.caches, state.caches, strict=True)})
            out = self.model.run(feed)
        else:
            out = self.model.run_resident(feed, resident[0])
        logits = out[self.spec.logits]
        if logits.shape[:2] != ids.shape:
            raise DecodeConventionError(
                f"logits have shape {list(logits.shape)}, not [B, T, V] with [B, T] = {list(ids.shape)}"
            )
        slots = state.caches[0].shape[self.spec.caches[0].axis]
        self._grow(state, [out[c.output] for c in self.spec.caches], t)
        if resident is not None:
            self._feed_resident(resident[1], state, slots, t)
        return logits

    def _resident_binding(
        self, state: DecodeState, feed: dict[str, np.ndarray]
    ) -> tuple[dict[str, int], tuple[int, ...]] | None:
        """(binding, its key) when this step runs with the caches resident in RLX's arena: a CPU
        bundle whose cache outputs are this step's entries, caches of one shape and a non-empty,
        padded cache (bucket > 1). The caches are bound (copied in) when that binding's graph does
        not hold this state at this length: once per binding, bucket or state; else only the rows
        each step adds are copied (`_feed_resident`). None: feed the caches whole."""
        caches = self.spec.caches
        shape = state.caches[0].shape
        if self.bucket == 1 or self.model.device != "cpu" or any(c.grown for c in caches):
            return None
        if shape[caches[0].axis] == 0 or any(a.shape != shape for a in state.caches):
            return None
        stand_ins = {c.input: np.broadcast_to(np.float32(0), shape) for c in caches}
        binding = self.model.binding({**feed, **stand_ins})
        key = tuple(binding[s] for s in sorted(binding))
        compiled = self.model.compile_binding(binding)
        held = self._resident.pop(key, None)
        if held is None or held[0] is not compiled or held[1] != (state.token, state.length, compiled.run_count()):
            outputs = [o["name"] for o in self.model.meta["outputs"]]
            for c, a in zip(caches, state.caches, strict=True):
                data = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
                compiled.bind_resident(c.input, data, outputs.index(c.output))
        self._resident[key] = (compiled, (state.token, state.length, compiled.run_count()))
        while len(self._resident) > self.model.binding_cache:
            self._resident.popitem(last=False)
        return binding, key

    def _feed_resident(self, key: tuple[int, ...], state: DecodeState, slots: int, t: int) -> None:
        """Copy this step's T entries of each cache output into the resident caches (rows: the
        elements after the cache axis), so the next step at this binding copies nothing in."""
        compiled, _ = self._resident.pop(key)
        c, shape = self.spec.caches[0], state.caches[0].shape
        if shape[c.axis] != slots:  # a new bucket: the next step runs another binding
            return
        outer, row = math.prod(shape[: c.axis]), math.prod(shape[c.axis + 1 :])
        first = state.length - t
        compiled.feed_rows([(o * t + i, o * slots + first + i) for o in range(outer) for i in range(t)], row)
        self._resident[key] = (compiled, (state.token, state.length, compiled.run_count()))

    def _grow(self, state: DecodeState, outs: list[np.ndarray], t: int) -> None:
        """Take this step's T entries of each output into the state's cache (padded to the bucket)."""
        length = state.length
        new = length + t
        for k, (c, old, got) in enumerate(zip(self.spec.caches, state.caches, outs, strict=True)):
            slots = old.shape[c.axis]
            first = slots if c.grown else 0  # where this step's entries start in the output
            if got.shape[c.axis] != first + t or _without(got.shape, c.axis) != _without(old.shape, c.axis):
                raise DecodeConventionError(
                    f"output {c.output} has shape {list(got.shape)}; the convention needs "
                    + (f"input {c.input}'s {list(old.shape)} grown by T={t}" if c.grown else f"T={t} entries")
                    + f" along axis {c.axis}"
                )
            if self.bucket == 1 and c.grown:
                state.caches[k] = got  # exactly the cache: nothing padded
                continue
            size = self.padded(new)
            if size != slots:
                grown = np.zeros(_with(old.shape, c.axis, size), dtype=old.dtype)
                grown[_at(c.axis, 0, length)] = old[_at(c.axis, 0, length)]
                old = grown
            old[_at(c.axis, length, new)] = got[_at(c.axis, first, first + t)]
            state.caches[k] = old
        state.length = new


def _numpy_dtype(name: str) -> np.dtype[Any]:
    return np.dtype(np.float32) if name == "bfloat16" else np.dtype(name)


def _check_in(size: int, bounds: tuple[int, int | None], what: str) -> None:
    lo, hi = bounds
    if size < lo or (hi is not None and size > hi):
        raise DecodeConventionError(
            f"{what} = {size} is outside the bundle's range {lo}..{'inf' if hi is None else hi}"
        )


def _without(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + shape[axis + 1 :]


def _with(shape: tuple[int, ...], axis: int, size: int) -> tuple[int, ...]:
    return (*shape[:axis], size, *shape[axis + 1 :])


def _at(axis: int, start: int, stop: int) -> tuple[slice, ...]:
    return (slice(None),) * axis + (slice(start, stop),)


def generate(
    bundle: Decoder | BundleModel | str | os.PathLike[str],
    input_ids: Any,
    max_new_tokens: int,
    *,
    threads: int | None = None,
    bucket: int | None = None,
    step_logits: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Greedy decoding: the prompt `input_ids` (integers [B, T0], T0 >= 1; numpy or a CPU torch tensor)
    then `max_new_tokens` tokens, each the argmax of the last position's logits. Returns int64
    [B, T0 + max_new_tokens]: the prompt followed by the new tokens (as Hugging Face's `generate`).

    `bundle`: a decode-step bundle (module docstring) as a directory, a BundleModel or a Decoder (a
    Decoder keeps its compiled bindings from call to call). The prompt runs with an empty cache
    (S = 0) in chunks of at most the bundle's largest T (prefill), then one token per step, the
    returned cache fed back. `threads` (a directory only) and `bucket` make the Decoder (`Decoder`);
    a Decoder given brings its own. `step_logits`, when given, gets each new token's logits [B, V]
    (float32 copies), in order.

    Raises DecodeConventionError (a ValueError) for a bundle off the convention, ids that are not
    integers [B, T0], a negative max_new_tokens, or a prompt plus max_new_tokens whose cache would
    pass the bundle's max cache length; BundleModel's errors for a directory it cannot open."""
    if isinstance(bundle, Decoder):
        if threads is not None or bucket is not None:
            raise DecodeConventionError("threads and bucket are a Decoder's own: give them when making it")
        decoder = bundle
    else:
        decoder = Decoder(bundle, threads=threads, bucket=bucket)
    ids = np.asarray(input_ids)
    if ids.ndim != 2 or ids.dtype.kind not in "iu" or ids.shape[1] < 1:
        raise DecodeConventionError(
            f"input_ids must be integers [B, T0] with T0 >= 1, got {ids.dtype}{list(ids.shape)}"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise DecodeConventionError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    ids = ids.astype(np.int64)
    if max_new_tokens == 0:
        return ids.copy()
    hi = decoder.spec.cache[1]
    largest = ids.shape[1] + max_new_tokens - 2  # the cache the last step is fed
    if hi is not None and largest > hi:
        raise DecodeConventionError(
            f"a prompt of {ids.shape[1]} tokens and {max_new_tokens} new ones feed a cache of {largest} positions; "
            f"the bundle's cache length ({decoder.spec.cache_symbol}) goes up to {hi}",
            hint="re-export with a larger max on the cache length's Dim, or ask for fewer tokens",
        )
    state = decoder.start(ids.shape[0])
    logits = prefill(decoder, state, ids)
    new: list[np.ndarray] = []
    for i in range(max_new_tokens):
        last = logits[:, -1, :]
        if step_logits is not None:
            step_logits.append(np.array(last, dtype=np.float32))
        new.append(np.argmax(last, axis=-1).astype(np.int64))
        if i + 1 < max_new_tokens:
            logits = decoder.step(state, new[-1][:, None])
    return np.concatenate([ids, np.stack(new, axis=1)], axis=1)


def prefill(decoder: Decoder, state: DecodeState, ids: np.ndarray) -> np.ndarray:
    """Run the prompt `ids` [B, T0] in chunks of at most the bundle's largest T; returns the last
    chunk's logits [B, T, V] (the prompt's last position is `[:, -1]`)."""
    hi = decoder.spec.seq[1]
    chunk = ids.shape[1] if hi is None else hi
    logits = np.empty((0,))
    for start in range(0, ids.shape[1], chunk):
        logits = decoder.step(state, ids[:, start : start + chunk])
    return logits


def hf_decode_step(model: Any) -> Any:
    """A Hugging Face causal LM (LlamaForCausalLM, or another with full causal attention, a
    `DynamicCache` and 4-D attention masks) as a decode step of the convention (module docstring):
    `forward(input_ids [B, T] int64, positions [B, T] int64, k_0, v_0, ..., k_{L-1}, v_{L-1})`, each
    cache tensor float [B, n_kv_heads, S, head_dim], returns `(logits [B, T, vocab], k_0', v_0', ...)`
    with this step's keys/values alone, [B, n_kv_heads, T, head_dim] (`Decoder` writes them into its
    cache: the step copies T entries out, not the whole cache).

    The mask lets each new token see the cache slots below `positions[b, 0]` and the new tokens up to
    itself, so slots at or past it (padding) are ignored; RoPE uses `positions`. A sliding-window
    model would need its window in the mask: not built here. Returns a torch.nn.Module (eval mode)."""
    import torch
    from transformers import DynamicCache

    class HfDecodeStep(torch.nn.Module):
        def __init__(self, lm: Any) -> None:
            super().__init__()
            self.lm = lm
            self.layers = int(lm.config.num_hidden_layers)

        def forward(self, input_ids: Any, positions: Any, *past: Any) -> tuple[Any, ...]:
            if len(past) != 2 * self.layers:
                raise InputError(f"the decode step takes {2 * self.layers} cache tensors, got {len(past)}")
            b, t = input_ids.shape
            s = past[0].shape[2]
            pairs = [(past[2 * i], past[2 * i + 1]) for i in range(self.layers)]
            cache = DynamicCache(ddp_cache_data=pairs, config=self.lm.config)
            slots = torch.arange(s, dtype=positions.dtype)
            seen = slots.unsqueeze(0) < positions[:, :1]  # [B, S]: the valid cache slots
            q = torch.arange(t)
            causal = q.unsqueeze(0) <= q.unsqueeze(1)  # [T, T]: key k <= query q
            mask = torch.cat([seen[:, None, None, :].expand(b, 1, t, s), causal[None, None].expand(b, 1, t, t)], -1)
            out = self.lm(input_ids=input_ids, cache=cache, position_ids=positions, attention_mask=mask, use_cache=True)
            new = [x[:, :, s:] for layer in out.cache.layers for x in (layer.keys, layer.values)]
            return (out.logits, *new)

    return HfDecodeStep(model).eval()


def hf_decode_inputs(
    config: Any, *, batch: int = 1, seq: int = 3, cache: int = 5, max_seq: int = 512, max_cache: int = 4096
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Example inputs and `dynamic_shapes` to export `hf_decode_step(model)` of a model with this
    config: ids and positions [batch, seq] (seq a Dim "seq" in 1..max_seq), and 2 * layers random
    caches [batch, n_kv_heads, cache, head_dim] (the length a Dim "cache" in 0..max_cache). The
    example sizes seq and cache must be >= 2 (torch.export specializes 0 and 1); the bundle still
    runs at every size in the ranges. Returns (args, dynamic_shapes) for `from_torch`."""
    import torch
    from torch.export import Dim

    if seq < 2 or cache < 2:
        raise InputError(
            f"the example seq and cache must be >= 2 (torch.export specializes 0 and 1), got {seq}, {cache}"
        )
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, int(config.vocab_size), (batch, seq), generator=gen)
    positions = (torch.arange(seq) + cache).unsqueeze(0).expand(batch, seq).contiguous()
    layers = int(config.num_hidden_layers)
    past = tuple(torch.randn(batch, kv_heads, cache, head_dim, generator=gen) for _ in range(2 * layers))
    s, length = Dim("seq", min=1, max=max_seq), Dim("cache", min=0, max=max_cache)
    return (ids, positions, *past), ({1: s}, {1: s}, tuple({2: length} for _ in past))
