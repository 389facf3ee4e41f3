"""Read and write safetensors files as raw bytes (mmap, native dtypes incl. bfloat16).

numpy has no bfloat16, so readers get `(dtype, shape, memoryview)` and decide
themselves; nothing is copied until a caller asks for it.
"""

from __future__ import annotations

import itertools
import json
import math
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import jsondoc
from .dtypes import RECORDS, numpy_dtype, torch_name
from .errors import BundleError
from .limits import check_tensor_size, is_dim, regular_file, short
from .outdir import replacing

# safetensors dtype tag <-> torch-ir dtype name
_ST_TO_IR = {r.safetensors: r.name for r in RECORDS.values()}
_IR_TO_ST = {v: k for k, v in _ST_TO_IR.items()}


@dataclass(frozen=True)
class RawTensor:
    """A tensor's bytes as stored, with its torch-ir dtype and shape."""

    dtype: str
    shape: tuple[int, ...]
    data: memoryview
    # The file mapping and this tensor's byte range in it (set by `read`), for `release`.
    mapping: mmap.mmap | None = field(default=None, repr=False, compare=False)
    offset: int = 0

    def release(self) -> None:
        """Drop this tensor's pages from the process's memory (they are read again from the file if
        touched). Called once a tensor was copied elsewhere (written, bound to RLX), so conversion
        and loading hold one copy of the weights at a time."""
        if self.mapping is None or not self.data.nbytes:
            return
        page = mmap.PAGESIZE
        start = -(-self.offset // page) * page  # only whole pages inside this tensor
        end = (self.offset + self.data.nbytes) // page * page
        if end > start:
            self.mapping.madvise(mmap.MADV_DONTNEED, start, end - start)

    def to_numpy(self) -> np.ndarray:
        """A numpy view (bfloat16 widened to float32, the one copy numpy forces)."""
        if self.dtype == "bfloat16":
            bits = np.frombuffer(self.data, dtype="<u2").astype(np.uint32) << 16
            return bits.view(np.float32).reshape(self.shape)
        return np.frombuffer(self.data, dtype=numpy_dtype(self.dtype)).reshape(self.shape)


# The safetensors format's own bound on the header (its reference reader refuses larger ones).
MAX_HEADER = 100_000_000


def read(path: Path) -> dict[str, RawTensor]:
    """Map a safetensors file; tensors are views into the mapping.

    The whole header is validated before any view is made (plain code, so every message names
    the file, the tensor, the field and the value): the file has the 8-byte header length and
    that many bytes of header (at most `MAX_HEADER`); the header is a UTF-8 JSON object without
    duplicate keys; `__metadata__`, if present, maps strings to strings; every other entry is an
    object with a known `dtype`, a `shape` of non-negative ints within `limits` (the machine's
    memory), and `data_offsets` `[start, end]` inside the data section, holding exactly
    prod(shape) x item size bytes, overlapping no other tensor's bytes.

    Raises BundleError for a file that is missing or not a regular file (a FIFO would block the
    read forever), cannot be read, or breaks any of these rules.
    """
    regular_file(path, BundleError)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise BundleError(
                    f"{path}: not a safetensors file: {size} bytes, shorter than the 8-byte header length it "
                    "starts with"
                )
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        raise BundleError(f"{path}: cannot read ({e})") from None
    (n,) = struct.unpack("<Q", mm[:8])
    if n > size - 8 or n > MAX_HEADER:
        raise BundleError(
            f"{path}: not a safetensors file: header length (first 8 bytes, little-endian) is {n}, but "
            + (f"only {size - 8} bytes follow it" if n > size - 8 else f"a header may hold at most {MAX_HEADER} bytes")
        )
    try:
        text = bytes(mm[8 : 8 + n]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise BundleError(f"{path}: header is not UTF-8 (byte {e.start} of the header: {e.reason})") from None
    header = jsondoc.parse(text, f"{path}: header", BundleError)
    if not isinstance(header, dict):
        raise BundleError(f"{path}: header is a JSON {type(header).__name__}, not an object of tensors")
    data_size = size - 8 - n
    base = 8 + n
    spans: list[tuple[int, int, str]] = []
    entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            _check_metadata(path, info)
            continue
        entries[name] = _check_entry(path, name, info, data_size)
        _, _, start, end = entries[name]
        if end > start:
            spans.append((start, end, name))
    spans.sort()
    for (_, end_a, a), (start_b, _, b) in itertools.pairwise(spans):
        if start_b < end_a:
            raise BundleError(
                f"{path}: tensors {a!r} and {b!r} overlap: {a!r} ends at byte {end_a} of the data, {b!r} starts "
                f"at {start_b}"
            )
    view = memoryview(mm)
    return {
        name: RawTensor(dtype, shape, view[base + start : base + end], mm, base + start)
        for name, (dtype, shape, start, end) in entries.items()
    }


def _check_metadata(path: Path, info: Any) -> None:
    if not isinstance(info, dict):
        raise BundleError(f"{path}: header field '__metadata__' is {short(info)}, not an object of strings")
    for key, value in info.items():
        if not isinstance(value, str):
            raise BundleError(f"{path}: header field '__metadata__'[{key!r}] is {short(value)}, not a string")


def _check_entry(path: Path, name: str, info: Any, data_size: int) -> tuple[str, tuple[int, ...], int, int]:
    """(torch-ir dtype, shape, start, end) of one header entry, every field checked."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
        raise BundleError(f"{where}: header entry is {short(info)}, not an object with dtype, shape, data_offsets")
    for key in ("dtype", "shape", "data_offsets"):
        if key not in info:
            raise BundleError(f"{where}: header entry has no field {key!r}")
    tag = info["dtype"]
    dtype = _ST_TO_IR.get(tag) if isinstance(tag, str) else None
    if dtype is None:
        raise BundleError(f"{where}: field 'dtype' is {short(tag)}, not one of {', '.join(_ST_TO_IR)}")
    shape = info["shape"]
    nbytes = check_tensor_size(shape, dtype, f"{where}: field 'shape'", BundleError)
    offsets = info["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_dim(o) for o in offsets)):
        raise BundleError(f"{where}: field 'data_offsets' is {short(offsets)}, not [start, end] (non-negative ints)")
    start, end = offsets
    if not start <= end <= data_size:
        raise BundleError(
            f"{where}: field 'data_offsets' is [{start}, {end}], outside the data section "
            f"(0 <= start <= end <= {data_size}, the bytes after the header)"
        )
    if end - start != nbytes:
        raise BundleError(
            f"{where}: field 'data_offsets' [{start}, {end}] holds {end - start} bytes, but its dtype and shape, "
            f"{tag} {shape}, take {nbytes}"
        )
    return dtype, tuple(shape), start, end


Data = bytes | memoryview
TensorEntry = tuple[str, tuple[int, ...], "Data | Callable[[], Data]"]


def write(path: Path, tensors: dict[str, TensorEntry], release: dict[str, Callable[[], None]] | None = None) -> None:
    """Write `{name: (torch-ir dtype, shape, bytes)}` in sorted name order (deterministic).

    The data may be a callable returning the bytes: it is called when that tensor is
    written, so a file of computed tensors holds one of them in memory at a time. A
    strided (non-contiguous) memoryview is written in row-major order; data whose size
    does not match its dtype and shape is refused (`BundleError`), never written.
    `release[name]()` runs after that tensor is written (e.g. `RawTensor.release`).
    """
    release = release or {}
    header: dict[str, object] = {}
    offset = 0
    names = sorted(tensors)
    for name in names:
        dtype, shape, _ = tensors[name]
        if dtype not in _IR_TO_ST:
            raise BundleError(f"{path}: tensor {name!r} has dtype {dtype}, which safetensors files here cannot hold")
        size = math.prod(shape) * numpy_dtype(dtype).itemsize
        header[name] = {"dtype": _IR_TO_ST[dtype], "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with replacing(path) as f:  # all or nothing; WriteError naming `path` when the disk refuses it
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in names:
            dtype, shape, data = tensors[name]
            if callable(data):
                data = data()
            if isinstance(data, memoryview) and not data.c_contiguous:
                data = data.tobytes()  # row-major copy of a strided view
            size = len(data) if isinstance(data, bytes) else data.nbytes
            start, end = header[name]["data_offsets"]  # type: ignore[index]  # a tensor's entry, not __metadata__
            if size != end - start:  # `replacing` removes what was written
                raise BundleError(
                    f"{path}: tensor {name!r} has {size} bytes, but {dtype}{list(shape)} takes {end - start}",
                    hint="this is a bug in rlx-torch-import; please report it",
                )
            f.write(data)
            if name in release:
                release[name]()


def iter_torch(tensors: dict[str, object]) -> Iterator[tuple[str, tuple[str, tuple[int, ...], memoryview]]]:
    """torch tensors -> raw entries for `write`, without a float copy (bf16 goes as its bits).

    Every tensor is made dense and row-major first: views (slices, transposes), expanded
    tensors (stride 0), zero-size tensors and tensors with a pending negation all come out
    as their logical elements in order. A complex tensor (complex64 / complex128, shape S) is
    written as its `torch.view_as_real` float pairs (float32 / float64, shape S + [2]) under the
    same key: safetensors has no complex128 (torch-ir records the complex dtype; docs/design.md, ar).
    """
    import torch

    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name!r} is a {type(t).__name__}, not a tensor")
        if t.is_complex():
            t = torch.view_as_real(t.detach().cpu().resolve_conj().resolve_neg())
        flat = t.detach().cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
        if flat.stride(0) != 1:  # a one-element expanded tensor counts as contiguous yet keeps stride 0
            flat = flat.clone(memory_format=torch.contiguous_format)
        raw = flat.to(torch.uint8) if flat.dtype == torch.bool else flat.view(torch.uint8)
        view = memoryview(raw.numpy())  # type: ignore[arg-type]  # numpy: Buffer on 3.12+ only
        yield name, (torch_name(t.dtype), tuple(t.shape), view.cast("B"))
