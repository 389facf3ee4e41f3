"""The state a decode-step bundle's `Decoder` keeps between steps (`DecodeState`: the caches, which
slots hold a token, each row's next position) and Hugging Face's padding rules for `generate`: the
prompt's attention mask, given (`check_mask`) or inferred from `pad_token_id` (`prompt_mask`);
`decode.generate` re-exports `DecodeState`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .convention import DecodeConventionError


@dataclass
class DecodeState:
    """The cache between steps: `caches` in the bundle's input order (their cache axis padded to the
    decoder's bucket), `length` the number of slots filled L (tokens and padding), `batch` B, `mask`
    which of them hold a token of their row and `next` each row's next position (both kept by
    `Decoder.step`; None: no padding). A Decoder may keep a copy of the caches in RLX's arena
    (resident); treat `caches` as read-only and copy a state with `copy()`."""

    caches: list[np.ndarray]
    length: int
    batch: int
    token: object = field(default_factory=object, compare=False, repr=False)  # identifies these caches
    mask: np.ndarray | None = field(default=None, compare=False)  # int64 [B, slots]: 1 where a slot holds a token
    next: np.ndarray | None = field(default=None, compare=False)  # int64 [B]: each row's next position

    def copy(self) -> DecodeState:
        """An independent copy (its own caches, mask and positions; a new identity for resident caches)."""
        return DecodeState(
            [a.copy() for a in self.caches],
            self.length,
            self.batch,
            mask=None if self.mask is None else self.mask.copy(),
            next=None if self.next is None else self.next.copy(),
        )

    def slot_mask(self, slots: int) -> np.ndarray:
        """int64 [B, slots]: 1 for the slots holding a token (the first L, unless `mask` says otherwise)."""
        if self.mask is not None and self.mask.shape == (self.batch, slots):
            return self.mask
        mask = np.zeros((self.batch, slots), dtype=np.int64)
        mask[:, : self.length] = 1 if self.mask is None else self.mask[:, : self.length]
        return mask

    def next_positions(self) -> np.ndarray:
        """int64 [B]: the position of each row's next token (Hugging Face's: the last one's + 1)."""
        return np.full(self.batch, self.length, dtype=np.int64) if self.next is None else self.next


def check_mask(mask: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """`mask` as int64 of `shape` (all 1 when None). Raises DecodeConventionError for another shape,
    a dtype that is not integer or bool, or values other than 0 and 1."""
    if mask is None:
        return np.ones(shape, dtype=np.int64)
    got = np.asarray(mask)
    bad = got.shape != shape or got.dtype.kind not in "iub"
    values = [] if bad else sorted(set(np.unique(got).tolist()) - {0, 1})
    if bad or values:
        raise DecodeConventionError(
            f"{what} must be 0/1 integers of shape {list(shape)} (Hugging Face's attention_mask: 1 for a "
            f"token, 0 for padding), got {got.dtype}{list(got.shape)}" + (f" holding {values[:3]}" if values else "")
        )
    return got.astype(np.int64)


def prompt_mask(ids: np.ndarray, attention_mask: Any, pad_token_id: Any, eos: np.ndarray | None) -> np.ndarray:
    """The prompt's attention mask [B, T0] int64: `attention_mask` checked, or Hugging Face's inference
    (`_prepare_attention_mask_for_generation`): `ids != pad_token_id` when the pad id occurs in the
    prompt and is not an eos id, else all 1. Raises DecodeConventionError for a mask that is not 0/1
    [B, T0] or a row with no token."""
    if attention_mask is not None:
        mask = check_mask(np.asarray(attention_mask), ids.shape, "attention_mask")
    elif pad_token_id is not None and (ids == pad_token_id).any() and (eos is None or pad_token_id not in eos):
        mask = (ids != pad_token_id).astype(np.int64)
    else:
        mask = np.ones(ids.shape, dtype=np.int64)
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise DecodeConventionError(
            f"row {int(empty[0])} of the prompt has no token (its attention_mask is all 0"
            + ("" if attention_mask is not None else f": every id is pad_token_id={pad_token_id}")
            + "): there is nothing to continue"
        )
    return mask
