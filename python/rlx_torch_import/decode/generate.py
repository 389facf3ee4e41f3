"""Greedy decoding with a decode-step bundle: a converted decoder that takes its KV cache as inputs
and returns this step's keys and values as outputs (`generate`, `Decoder`). The bundle follows the
decode-step convention (`decode/convention.py`); `decode/hf_export.py` exports a Hugging Face causal LM
as such a step (`hf_decode_step`, `hf_decode_inputs`).

Each step with a new S is a new binding of the dynamic bundle, which RLX compiles (hundreds of ms
for a 6-layer model; `BundleModel.compile_binding`). With a positions input the cache is therefore
padded to a multiple of `bucket` slots (default 128): one compile per `bucket` tokens, and the last
`binding_cache` compiled bindings are reused (a `Decoder` kept across calls reuses them; a server
that interleaves sequences of several lengths wants a BundleModel whose `binding_cache` holds every
bucket and prompt length in use, each binding holding its own copy of the weights). Without one,
every step runs at the cache's exact length (bucket 1): a compile per token.

With padding, a CPU bundle whose cache outputs are this step's entries keeps the caches in RLX's
arena between steps (`_core.CompiledModel.bind_resident`, RLX's resident handles): a step copies in
its ids, positions and masks and, after the run, only its T new rows per cache (`feed_rows`), not the whole
cache; the caches are copied in whole once per binding, bucket or state. The DecodeState's arrays
stay the host copy (what a new binding is given), updated with the same rows.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..bundle.model import BundleModel
from ..bundle.ranges import check_prompt_ranges
from .convention import DecodeConventionError, DecodeSpec
from .state import DecodeState, check_mask, prompt_mask

__all__ = [
    "DecodeConventionError",
    "DecodeSpec",
    "DecodeState",
    "Decoder",
    "generate",
    "prefill",
]

DEFAULT_BUCKET = 128


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
        self._bindings: dict[tuple[tuple[int, ...], tuple[int, ...]], dict[str, int]] = {}
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
            raise DecodeConventionError(
                f"the bundle runs batch {b}, got {batch} sequences",
                hint="export with hf_decode_inputs(config, batch=...) for that batch, or give every input's "
                "axis 0 one torch.export.Dim for a batch that varies",
            )
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

    def step(self, state: DecodeState, ids: Any, mask: Any = None, positions: Any = None) -> np.ndarray:
        """Run `ids` [B, T] after the `state.length` slots of the cache; returns the logits
        [B, T, V] and updates `state` in place. `mask` [B, T] of 0/1 (default all 1): 0 marks a
        padding token, which no later token sees. `positions` [B, T] (default: each row's next
        positions, Hugging Face's continuation: the last token's + 1, 2, ...): each token's position
        in its row. Raises DecodeConventionError for ids of another batch or a T outside the bundle's
        range, a mask or positions not [B, T] integers (the mask 0/1), padding or per-row positions
        for a bundle without masks, a cache past its max, and outputs not of the convention's
        shapes; BundleModel.run's errors for anything RLX refuses."""
        ids = np.asarray(ids)
        if ids.ndim != 2 or ids.dtype.kind not in "iu" or ids.shape[0] != state.batch:
            raise DecodeConventionError(f"ids must be integers [B={state.batch}, T], got {ids.dtype}{list(ids.shape)}")
        t, length = ids.shape[1], state.length
        _check_in(t, self.spec.seq, "new tokens T")
        _check_in(length, self.spec.cache, f"cache length ({self.spec.cache_symbol})")
        token_mask = check_mask(mask, ids.shape, "mask")
        if positions is None:
            pos = state.next_positions()[:, None] + np.arange(t, dtype=np.int64)
        else:
            pos = np.asarray(positions)
            if pos.shape != ids.shape or pos.dtype.kind not in "iu":
                raise DecodeConventionError(
                    f"positions must be integers of the ids' shape {list(ids.shape)}, got {pos.dtype}{list(pos.shape)}"
                )
            pos = pos.astype(np.int64)
        slots = state.caches[0].shape[self.spec.caches[0].axis]
        cache_mask = state.slot_mask(slots)
        if not self.spec.token_mask:
            self._check_unpadded(token_mask, cache_mask[:, :length], pos, length)
        feed: dict[str, np.ndarray] = {self.spec.ids: ids}
        if self.spec.positions:
            feed[self.spec.positions] = pos
        if self.spec.token_mask and self.spec.cache_mask:
            feed[self.spec.token_mask] = token_mask
            feed[self.spec.cache_mask] = cache_mask
        declared = {i["name"]: i["dtype"] for i in self.model.meta["inputs"]}
        feed = {name: a.astype(_numpy_dtype(declared[name]), copy=False) for name, a in feed.items()}
        with self.model.sequence_lock:  # bind, run and copy rows with no other Decoder's call between
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
            self._grow(state, [out[c.output] for c in self.spec.caches], t, token_mask)
            state.next = pos[:, -1] + 1
            if resident is not None:
                self._feed_resident(resident[1], state, slots, t)
        return logits

    def _check_unpadded(self, token_mask: np.ndarray, filled: np.ndarray, pos: np.ndarray, length: int) -> None:
        """A bundle without masks sees every filled slot and every new token, at positions L, L+1, ...:
        refuse padding or per-row positions it would get wrong (DecodeConventionError)."""
        names = [i["name"] for i in self.model.meta["inputs"][: 2 if self.spec.positions else 1]]
        if not (token_mask.all() and filled.all()):
            raise DecodeConventionError(
                f"this batch has padding (attention_mask zeros), and the bundle takes no masks (inputs {names}, "
                "then its caches): it cannot hide padded slots from the other tokens",
                hint="re-export the decode step with this version's hf_decode_step (it adds token_mask and "
                "cache_mask inputs), or decode the rows one by one without padding",
            )
        want = length + np.arange(pos.shape[1])
        if (pos != want).any():
            raise DecodeConventionError(
                f"positions other than {length}..{length + pos.shape[1] - 1} in every row need a bundle with "
                f"masks; this one takes {names}, then its caches",
                hint="re-export the decode step with this version's hf_decode_step",
            )

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
        sizes = (feed[self.spec.ids].shape, shape)
        binding = self._bindings.get(sizes)
        if binding is None:  # inferred once per shape (sizes.infer_binding: ~0.5 ms a step otherwise)
            stand_ins = {c.input: np.broadcast_to(np.float32(0), shape) for c in caches}
            binding = self.model.binding({**feed, **stand_ins})
            if len(self._bindings) >= 256:
                self._bindings.clear()
            self._bindings[sizes] = binding
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

    def _grow(self, state: DecodeState, outs: list[np.ndarray], t: int, token_mask: np.ndarray | None = None) -> None:
        """Take this step's T entries of each output into the state's cache (padded to the bucket),
        and `token_mask` [B, T] (default all 1) into its slot mask."""
        length = state.length
        new = length + t
        grown_mask = np.zeros((state.batch, self.padded(new)), dtype=np.int64)
        grown_mask[:, :length] = state.slot_mask(length)
        grown_mask[:, length:new] = 1 if token_mask is None else token_mask
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
        state.mask = grown_mask


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
    eos_token_id: int | Sequence[int] | None = None,
    pad_token_id: int | None = None,
    attention_mask: Any = None,
) -> np.ndarray:
    """Greedy decoding: the prompt `input_ids` (integers [B, T0], T0 >= 1; numpy or a CPU torch tensor)
    then up to `max_new_tokens` tokens, each the argmax of the last position's logits. Returns int64
    [B, T0 + n]: the prompt followed by the n new tokens, as Hugging Face's greedy `generate` with the
    same `eos_token_id` and `pad_token_id`: with `eos_token_id` (one id or several), a sequence that
    has emitted one is finished, its later tokens are `pad_token_id` (default: the first eos id), and
    decoding stops once every sequence is finished (n < max_new_tokens then); without it, n is
    always max_new_tokens (pass `model.generation_config.eos_token_id` to stop where HF stops).

    Padded batches, as Hugging Face's `generate` (transformers' generation/utils.py):
    `attention_mask` [B, T0] of 0/1 (numpy or a CPU torch tensor) marks each row's tokens (1) and
    padding (0). Without one, it is inferred as HF infers it: `input_ids != pad_token_id` when
    `pad_token_id` is given, occurs in the prompt and is not an eos id; else all 1. Padded slots are
    never seen by other tokens; each row's positions are HF's: the prompt's `cumsum(mask) - 1` (0 at
    padding), then each new token the last one's + 1; each new token adds a 1 to the mask (finished
    rows' pad tokens too). Left padding is what HF recommends; right padding decodes as HF does it
    (the first new token comes from the last prompt slot, a pad at position 0 seeing its row's
    tokens; HF warns about it), token for token. A row with no token (all 0) is refused: what HF
    gives there is no answer. Padding needs a bundle with masks (`hf_decode_step` makes one).

    `bundle`: a decode-step bundle (`decode/convention.py`) as a directory, a BundleModel or a Decoder (a
    Decoder keeps its compiled bindings from call to call). The prompt runs with an empty cache
    (S = 0) in chunks of at most the bundle's largest T (prefill), then one token per step, the
    returned cache fed back. `threads` (a directory only) and `bucket` make the Decoder (`Decoder`);
    a Decoder given brings its own. `step_logits`, when given, gets each new token's logits [B, V]
    (float32 copies), in order.

    Raises DecodeConventionError (a ValueError) for a bundle off the convention, ids that are not
    integers [B, T0], a negative max_new_tokens, eos/pad ids that are not integers, an attention_mask
    that is not 0/1 [B, T0] or has a row of 0s, padding given to a bundle without masks, or a prompt
    plus max_new_tokens whose cache would pass the bundle's max cache length; IndexRangeError (an
    InputError and an IndexError, as torch raises) for an id outside the range the bundle's embedding
    takes; BundleModel's errors for a directory it cannot open."""
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
    # Ids outside the embedding raise IndexRangeError before any step, at their place in the prompt.
    check_prompt_ranges(decoder.model.meta.get("index_ranges", []), decoder.spec.ids, ids)
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
    eos, pad = _stop_ids(eos_token_id, pad_token_id)
    mask = prompt_mask(ids, attention_mask, pad_token_id, eos)
    state = decoder.start(ids.shape[0])
    logits = prefill(decoder, state, ids, mask)
    new: list[np.ndarray] = []
    unfinished = np.ones(ids.shape[0], dtype=bool)
    for i in range(max_new_tokens):
        last = logits[:, -1, :]
        if step_logits is not None:
            step_logits.append(np.array(last, dtype=np.float32))
        token = np.argmax(last, axis=-1).astype(np.int64)
        if eos is not None:  # HF: a finished sequence gets pad tokens; all finished, decoding stops
            token = np.where(unfinished, token, pad)
            unfinished &= ~np.isin(token, eos)
        new.append(token)
        if eos is not None and not unfinished.any():
            break
        if i + 1 < max_new_tokens:
            logits = decoder.step(state, token[:, None])
    return np.concatenate([ids, np.stack(new, axis=1)], axis=1)


def _stop_ids(eos_token_id: Any, pad_token_id: Any) -> tuple[np.ndarray | None, int]:
    """`generate`'s eos ids as an int64 array (None: no stopping) and its pad id (default: the first eos
    id, as Hugging Face's `generate`). Raises DecodeConventionError for ids that are not integers."""
    if pad_token_id is not None and (isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int)):
        raise DecodeConventionError(f"pad_token_id must be an int or None, got {pad_token_id!r}")
    if eos_token_id is None:
        return None, 0
    eos = np.atleast_1d(np.asarray(eos_token_id))
    ints = eos.ndim == 1 and eos.size > 0 and eos.dtype.kind in "iu"
    if not ints or not (pad_token_id is None or (isinstance(pad_token_id, int) and not isinstance(pad_token_id, bool))):
        raise DecodeConventionError(
            f"eos_token_id must be an int or a non-empty list of ints and pad_token_id an int or None; got "
            f"{eos_token_id!r} and {pad_token_id!r}"
        )
    return eos.astype(np.int64), int(eos[0]) if pad_token_id is None else pad_token_id


def prefill(decoder: Decoder, state: DecodeState, ids: np.ndarray, mask: Any = None) -> np.ndarray:
    """Run the prompt `ids` [B, T0] in chunks of at most the bundle's largest T; returns the last
    chunk's logits [B, T, V] (the prompt's last position is `[:, -1]`). `mask` [B, T0] of 0/1
    (default all 1) marks padding (0); the prompt's positions are Hugging Face's: `cumsum(mask) - 1`
    after the tokens the state holds, 0 at padding. Raises `Decoder.step`'s errors."""
    mask = check_mask(mask, ids.shape, "mask")
    held = state.slot_mask(state.length).sum(axis=1, keepdims=True)
    positions = np.where(mask == 1, held + np.cumsum(mask, axis=1) - 1, 0)
    hi = decoder.spec.seq[1]
    chunk = ids.shape[1] if hi is None else hi
    logits = np.empty((0,))
    for start in range(0, ids.shape[1], chunk):
        part = slice(start, start + chunk)
        logits = decoder.step(state, ids[:, part], mask[:, part], positions[:, part])
    return logits
