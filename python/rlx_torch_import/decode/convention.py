"""The decode-step convention, and its check (`DecodeSpec.from_meta`): which of a bundle's inputs and
outputs are the ids, positions, masks, logits and caches. `decode/generate.py` runs such a bundle;
`decode/hf_export.py` exports a Hugging Face causal LM as one.

Inputs, in order:
1. token ids, int64 (or int32) [B, T]: the new tokens of this step (T = the prompt, or 1).
2. optionally positions, the same dtype and shape as the ids: the position of each new token in
   its own row. Unpadded, that is L, L+1, ..., L+T-1, where L is the number of tokens already in
   the cache; with padding, Hugging Face's (`decode/generate.py`'s `generate`).
3. optionally (with positions) the masks, int64, Hugging Face's 2-D `attention_mask` split at the
   cache: `token_mask` [B, T] (1: new token i is a token of its row, 0: padding) then `cache_mask`
   [B, S] (1: cache slot j holds a token of its row; 0: a padded prompt slot or a slot of the
   Decoder's bucket padding). New token i (slot S + i) must see exactly the slots j <= S + i whose
   mask is 1. `hf_decode_step` builds such a step. A bundle with positions and no masks (the
   convention before the masks) must ignore cache slots at or past `positions[b, 0]`; it decodes
   unpadded batches, and a padded one given to it is refused (it cannot mask padded slots).
4. one or more cache tensors (keys and values of each layer), float, each of any rank with one
   *cache axis* whose size is the bundle's cache-length symbol S (one dynamic dim, shared by all).
   An empty cache (S = 0) must be in S's range: prefill runs at S = 0.

Outputs, in order:
1. logits, float [B, T, V].
2. one per cache input, in the same order, same dtype, either
   - this step's entries alone: size T on the cache axis, every other axis as the input's (what
     `hf_decode_step` returns: the step copies T entries out, not the whole cache), or
   - the input concatenated with this step's entries along the cache axis (size S + T there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError

_INT = ("int64", "int32")
_FLOAT = ("float32", "float64", "float16", "bfloat16")


class DecodeConventionError(InputError, ValueError):
    """A bundle, or arguments to `generate`, that do not follow the decode-step convention
    (this module's docstring); a ValueError, and an InputError (exit code 2) like every bad argument."""


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
    """A decode-step bundle's inputs and outputs by role (this module's docstring). `seq` and `cache` are the
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
    token_mask: str | None = None  # the new tokens' mask [B, T] (with cache_mask: a bundle that masks padding)
    cache_mask: str | None = None  # the cache slots' mask [B, S]

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> DecodeSpec:
        """The roles of a bundle's meta.json inputs and outputs. Raises DecodeConventionError naming
        what does not fit: too few inputs or outputs, ids that are not an integer [B, T], a cache
        input without a matching output, an output that is not its input grown along one axis, a
        cache length that is static or differs between cache tensors, logits not [B, T, V], or a
        token mask without a cache mask [B, S] after it."""
        ins, outs = list(meta.get("inputs", [])), list(meta.get("outputs", []))
        symbols = {s["name"]: s for s in meta.get("symbols", [])}
        if len(ins) < 2 or len(outs) < 2:
            raise DecodeConventionError(
                f"a decode-step bundle takes (ids, [positions, [token_mask, cache_mask,]] cache...) and returns "
                f"(logits, cache...); "
                f"this one takes {_names(ins)} and returns {_names(outs)}"
            )
        ids = ins[0]
        if ids["dtype"] not in _INT or len(ids["shape"]) != 2:
            raise DecodeConventionError(
                f"input 0 ({ids['name']}: {ids['dtype']}{list(ids['shape'])}) must be the token ids, int64 [B, T]"
            )
        batch, seq_dim = ids["shape"]
        has_pos = ins[1]["dtype"] in _INT and list(ins[1]["shape"]) == list(ids["shape"])
        has_mask = has_pos and len(ins) > 2 and ins[2]["dtype"] in _INT and list(ins[2]["shape"]) == list(ids["shape"])
        if has_mask and (len(ins) < 4 or ins[3]["dtype"] not in _INT or len(ins[3]["shape"]) != 2):
            raise DecodeConventionError(
                f"input 2 ({ins[2]['name']}) is a token mask [B, T]; input 3 must then be the cache slots' mask, "
                f"int64 [B, S]; the bundle takes {_names(ins[3:4])}"
            )
        cache_ins = ins[4:] if has_mask else ins[2:] if has_pos else ins[1:]
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
        if has_mask and list(ins[3]["shape"]) != [batch, length]:
            raise DecodeConventionError(
                f"input 3 ({ins[3]['name']}: {ins[3]['dtype']}{list(ins[3]['shape'])}) must be the cache slots' "
                f"mask [B, S] with [B, S] = {[batch, length]} as the ids' batch and the caches' length"
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
            token_mask=ins[2]["name"] if has_mask else None,
            cache_mask=ins[3]["name"] if has_mask else None,
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
