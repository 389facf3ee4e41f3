"""Weight-only quantization at conversion (`from_torch(..., quantize="int8" | "int4")`): the schemes, their
block layouts (packing and dequantizing in numpy, bit for bit what RLX's `DequantMatMul` reads) and the
torch-ir record of which weights a conversion quantized.

A quantized `Linear` weight W [n, k] (float32, row-major, as torch stores it) is cut into blocks of
32 consecutive elements along k (`in_features`); each block is stored as an f16 scale then its codes:

- "int8" -> RLX `GgufQ8_0` (34 bytes a block): d = f16(amax / 127), q = clip(rint(w / d), -127, 127)
  as int8; dequantized f32(d) * q.
- "int4" -> RLX `GgufQ4_0` (18 bytes a block): d = f16(m / -8) with m the element of largest |w|
  (signed), q = clip(floor(w / d + 8.5), 0, 15); byte i (0..15) holds element i in its low nibble and
  element i + 16 in its high nibble; dequantized (q - 8) * f32(d).

A weight with a block whose f16 scale would overflow float16 or fall below its smallest normal number, 2**-14
(a subnormal scale keeps fewer bits, 0 dequantizes the block to 0), is not packed: it stays float with the
reason (`scale_fault`, which states the rule and why).

The conversion runs eager PyTorch on the dequantized weights (the exact reference of the quantized
model) and stores them in weights.safetensors; the bundle stores the packed bytes only. Packing the
dequantized weights again gives the same bytes (`pack(dequantize(pack(w))) == pack(w)`), so `build`
re-derives the bundle's bytes from weights.safetensors exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TorchIRError, Unsupported, UnsupportedOpsError

BLOCK = 32  # fixed by both GGUF layouts


@dataclass(frozen=True)
class Scheme:
    """One weight-only scheme: its option name, RLX's `QuantScheme` variant and its block layout."""

    name: str
    rlx: str
    bits: int
    block_bytes: int


SCHEMES = {
    "int8": Scheme("int8", "GgufQ8_0", 8, 2 + BLOCK),
    "int4": Scheme("int4", "GgufQ4_0", 4, 2 + BLOCK // 2),
}
BY_RLX = {s.rlx: s for s in SCHEMES.values()}


def check_scheme(name: str, block: int = BLOCK) -> Scheme:
    """The scheme `name` (any case) in blocks of `block` elements, or UnsupportedOpsError (exit 3) naming the
    scheme and why RLX cannot run it (an unknown name, a block size the GGUF layouts do not have); InputError
    (exit 2) for a block size that is no size (below 1) or not an integer."""
    from ..errors import InputError

    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise InputError(f"quantize_block must be a positive number of elements, got {block!r}")
    scheme = SCHEMES.get(name.lower() if isinstance(name, str) else name)
    if scheme is None:
        reason = (
            f"weight-only scheme {name!r} is not one RLX's DequantMatMul runs from a float model here "
            f"(int8 -> GgufQ8_0, int4 -> GgufQ4_0)"
        )
    elif block != BLOCK:
        reason = (
            f"weight-only {name} ({scheme.rlx}) in blocks of {block}: RLX's {scheme.rlx} layout fixes blocks of "
            f"{BLOCK} elements"
        )
    else:
        return scheme
    item = Unsupported(f"<quantize {name}>", "<weights>", "", reason)
    raise UnsupportedOpsError(items=[item], decomposition="core")


def packed_size(n: int, k: int, scheme: Scheme) -> int:
    """Bytes of a [n, k] weight packed in `scheme` (k a multiple of 32)."""
    return n * (k // BLOCK) * scheme.block_bytes


def _blocks(w: np.ndarray) -> np.ndarray:
    """[n, k] float32 -> [n, k / 32, 32] float32; ValueError unless 2-D with k a multiple of 32."""
    if w.ndim != 2 or w.shape[1] % BLOCK:
        raise ValueError(f"a quantized weight is [n, k] with k a multiple of {BLOCK}, got {list(w.shape)}")
    return np.asarray(w, dtype=np.float32).reshape(w.shape[0], w.shape[1] // BLOCK, BLOCK)


def _inverse(d: np.ndarray) -> np.ndarray:
    """1 / d in float32, 0 where d is 0 (an all-zero block)."""
    safe = np.where(d != 0, d, np.float32(1))
    return np.where(d != 0, np.float32(1) / safe, np.float32(0)).astype(np.float32)


def _scales(b: np.ndarray, scheme: Scheme) -> np.ndarray:
    """The f16 scales [n, k/32, 1] of blocks `b` [n, k/32, 32] float32 (inf where one overflows float16)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if scheme.bits == 8:
            return (np.abs(b).max(-1, keepdims=True) / np.float32(127)).astype(np.float16)
        peak = np.take_along_axis(b, np.argmax(np.abs(b), -1)[..., None], -1)
        return (peak / np.float32(-8)).astype(np.float16) + np.float16(0)  # an all-zero block's scale +0, not -0


def _codes(w: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """The blocks' f16 scales [n, k/32, 1] and codes [n, k/32, 32] (int8 for Q8_0, 0..15 uint8 for Q4_0)."""
    b = _blocks(w)
    d = _scales(b, scheme)
    if scheme.bits == 8:
        q = np.clip(np.rint(b * _inverse(d.astype(np.float32))), -127, 127).astype(np.int8)
        return d, q
    q4 = np.clip(np.floor(b * _inverse(d.astype(np.float32)) + np.float32(8.5)), 0, 15).astype(np.uint8)
    return d, q4


F16_MAX = 65504.0  # the largest finite float16: a block scale past it overflows
F16_MIN_NORMAL = 2.0**-14  # the smallest normal float16: a block scale below it has fewer than 11 significant bits


def _divisor(scheme: Scheme) -> int:
    """A block's scale is its largest |w| over this (int8: 127; int4: 8)."""
    return 127 if scheme.bits == 8 else 8


def scale_fault(w: np.ndarray, scheme: Scheme) -> str:
    """Why W [n, k] (float32, k a multiple of 32) cannot be packed in `scheme` without losing its values, or ""
    when it can. Both causes are its blocks' float16 scales (the block's largest |w| / 127 for int8, / 8 for
    int4):

    - overflow: a largest |w| past float16's 65504 times 127 (int8) or 8 (int4), or a non-finite weight; the
      block would dequantize to inf/NaN;
    - tiny blocks: a block that is not all zero whose float16 scale is below float16's smallest normal
      number, 2**-14 (a largest |w| below about 7.75e-3 for int8, 4.88e-4 for int4). Such a scale is
      subnormal: it keeps fewer than float16's 11 significant bits (one bit at 2**-24), and 0 below 2**-25,
      which dequantizes the whole block to 0. A normal scale is within 2**-11 of the block's largest |w| /
      127 (/ 8), which bounds every dequantized element to half a quantization step (int8; a step for
      int4's clipped side) of the weight up to 2**-10 of it, and keeps the largest element's code at ±127
      (-8), so packing the dequantized weight again gives the same bytes (`build`); a subnormal one does
      neither. All-zero blocks (scale 0, codes 0) are exact and allowed.

    The decision is per weight (RLX's layouts have no float block): one such block keeps the whole weight
    float. The reason names how many blocks and the first with the smallest scale (row, elements)."""
    top = float(np.abs(w).max()) if w.size else 0.0
    limit = F16_MAX * _divisor(scheme)
    if not top <= limit:  # NaN too
        return (
            f"largest |weight| {top:.3g} does not fit {scheme.rlx}'s float16 block scale (|weight| up to "
            f"{limit:.3g}): its blocks would dequantize to inf/NaN"
        )
    b = _blocks(w)
    amax = np.abs(b).max(-1)
    scale = np.abs(_scales(b, scheme)[..., 0].astype(np.float32))
    tiny = (amax > 0) & (scale < np.float32(F16_MIN_NORMAL))
    count = int(tiny.sum())
    if not count:
        return ""
    row, block = np.unravel_index(int(np.argmin(np.where(tiny, amax, np.inf))), amax.shape)
    zeros = int((tiny & (scale == 0)).sum())
    lost = f"{zeros} of them 0, which dequantizes the block to 0" if zeros else "subnormal, fewer significant bits"
    return (
        f"{count} of {amax.size} blocks have a float16 block scale below float16's smallest normal 2**-14 "
        f"({lost}); the smallest: row {row}, elements {block * BLOCK}..{block * BLOCK + BLOCK - 1}, largest "
        f"|weight| {float(amax[row, block]):.3g} (a block needs about {F16_MIN_NORMAL * _divisor(scheme):.3g} "
        f"for {scheme.rlx}): packed, their values would lose precision"
    )


def pack(w: np.ndarray, scheme: Scheme) -> np.ndarray:
    """W [n, k] float32 -> its blocks as RLX reads them, uint8 [packed_size(n, k)] (row-major over n, then k)."""
    d, q = _codes(w, scheme)
    n, blocks = d.shape[:2]
    scale = d.view(np.uint8).reshape(n, blocks, 2)
    body = q.view(np.uint8) if scheme.bits == 8 else (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8)
    return np.concatenate([scale, body], -1).reshape(-1)


def dequantize(w: np.ndarray, scheme: Scheme) -> np.ndarray:
    """W [n, k] float32 -> the float32 values RLX's `DequantMatMul` multiplies by after packing it."""
    d, q = _codes(w, scheme)
    scale = d.astype(np.float32)
    values = q.astype(np.float32) if scheme.bits == 8 else q.astype(np.float32) - np.float32(8)
    return (values * scale).reshape(w.shape).astype(np.float32)


def unpack(packed: np.ndarray, n: int, k: int, scheme: Scheme) -> np.ndarray:
    """The packed bytes of a [n, k] weight -> its dequantized float32 values (what RLX computes from them)."""
    blocks = packed.reshape(n, k // BLOCK, scheme.block_bytes)
    scale = blocks[..., :2].copy().view(np.float16).astype(np.float32)
    body = blocks[..., 2:]
    if scheme.bits == 8:
        values = body.view(np.int8).astype(np.float32)
    else:
        values = np.concatenate([body & 0x0F, body >> 4], -1).astype(np.float32) - np.float32(8)
    return (values * scale).reshape(n, k).astype(np.float32)


# Code bytes per int64 word of a quantized embedding table (a word whose last byte is 128 or more is negative).
WORD_BYTES = 8


def table_words(dim: int, scheme: Scheme) -> int:
    """int64 words a quantized table row of `dim` elements takes (`table_parts`)."""
    return math.ceil((dim if scheme.bits == 8 else dim // 2) / WORD_BYTES)


def table_parts(w: np.ndarray, scheme: Scheme) -> tuple[np.ndarray, np.ndarray]:
    """An embedding table W [V, D] (float32, D a multiple of 32) quantized as a Linear weight is (the same
    blocks along D, `dequantize` gives its values), stored for a gather: (words int64 [V, table_words(D)],
    scales float16 [V, D / 32], the blocks' f16 scales as they are). A row's code bytes (int8: q + 128;
    int4: the Q4_0 bytes, element i of a block in the low nibble of byte i and i + 16 in the high one) fill
    the words 8 at a time, little end first (two's complement: a last byte of 128 or more makes the word
    negative), zero-padded."""
    d, q = _codes(w, scheme)
    rows, blocks = d.shape[:2]
    scales = d.reshape(rows, blocks)
    if scheme.bits == 8:
        body = (q.astype(np.int16) + 128).astype(np.uint8).reshape(rows, -1)
    else:
        body = (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8).reshape(rows, -1)
    words = table_words(w.shape[1], scheme)
    padded = np.zeros((rows, words * WORD_BYTES), np.uint8)
    padded[:, : body.shape[1]] = body
    return padded.view("<i8").reshape(rows, words), scales


def parse_record(doc: Any, source: str) -> dict[str, Any]:
    """torch-ir's optional `quantize` field checked: {} (none) or {"scheme": "int8" | "int4", "rlx",
    "block": 32, "weights": [state_dict keys], "kept_float": [{"weight", "reason"}]}. TorchIRError names
    the field otherwise."""
    if doc is None or doc == {}:
        return {}
    where = f"{source}: quantize"
    if not isinstance(doc, dict):
        raise TorchIRError(f"{where}: expected an object, got {type(doc).__name__}")
    scheme = SCHEMES.get(doc.get("scheme", ""))
    if scheme is None or doc.get("rlx") != scheme.rlx or doc.get("block") != BLOCK:
        raise TorchIRError(
            f"{where}: scheme/rlx/block {doc.get('scheme')!r}/{doc.get('rlx')!r}/{doc.get('block')!r} is not "
            f"int8/GgufQ8_0/32 or int4/GgufQ4_0/32"
        )
    weights = doc.get("weights")
    if not isinstance(weights, list) or not all(isinstance(w, str) for w in weights):
        raise TorchIRError(f"{where}.weights: expected a list of weight keys")
    kept = doc.get("kept_float", [])
    if not isinstance(kept, list) or not all(isinstance(e, dict) and {"weight", "reason"} <= e.keys() for e in kept):
        raise TorchIRError(f"{where}.kept_float: expected a list of {{weight, reason}} records")
    return {"scheme": scheme.name, "rlx": scheme.rlx, "block": BLOCK, "weights": list(weights), "kept_float": kept}
