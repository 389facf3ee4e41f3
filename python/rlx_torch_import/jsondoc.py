"""Reading our JSON documents strictly: torch-ir.json, a bundle's meta.json, a safetensors header.

Python's json keeps the last of two equal keys silently and any field may hold any type; here a
repeated key is refused, and fields are read with the JSON type they must have (a bool is not an
int). Every error is the caller's error type (TorchIRError, BundleError) naming the file or field.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import RtiError
from .limits import regular_file, short

Kind = type | tuple[type, ...]


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {short(key)} appears twice in one JSON object")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKey(key)
        found[key] = value
    return found


class _NonStandard(ValueError):
    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _refuse_constant(token: str) -> Any:
    raise _NonStandard(token)


def _finite_float(text: str) -> float:
    """A JSON number as a float; one past float64's range (`1e999`, which Python reads as inf) is
    refused like a bare Infinity token."""
    value = float(text)
    if math.isinf(value):
        raise _NonStandard(text)
    return value


# A bare NaN / Infinity / -Infinity outside a string: Python's json reads them, strict JSON has none.
_BARE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _where(text: str, token: str) -> str:
    """`line L, column C` of the first bare `token` in `text` (skipping strings)."""
    for m in _BARE.finditer(text):
        if m.group(1) == token:
            line = text.count("\n", 0, m.start(1)) + 1
            return f"line {line}, column {m.start(1) - text.rfind(chr(10), 0, m.start(1))}"
    return "somewhere"


def parse(text: str, what: str, error: type[RtiError]) -> Any:
    """JSON `text` as Python values, strictly: RFC 8259 JSON, so no bare `NaN`/`Infinity` tokens
    (our files spell non-finite floats `{"float": "nan"}`, docs/torch-ir.md). Raises `error` naming
    `what` when the text is not strict JSON, nests too deep, or repeats a key in one object."""
    try:
        return json.loads(text, object_pairs_hook=_unique, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _RepeatedKey as e:
        raise error(f"{what}: {e}") from None
    except _NonStandard as e:
        if e.token in ("NaN", "Infinity", "-Infinity"):
            found = f"a bare {e.token} token at {_where(text, e.token)}"
        else:
            found = f"the number {e.token[:40]} is past float64's range"
        hint = "strict JSON has no NaN or Infinity"
        if "torch-ir" in what:
            hint += '; torch-ir spells a non-finite float {"float": "nan"} (or "inf", "-inf"), docs/torch-ir.md'
        raise error(f"{what}: not strict JSON: {found}", hint=hint) from None
    except (ValueError, RecursionError) as e:
        raise error(f"{what}: not valid JSON ({str(e)[:200]})") from None


def read(path: Path, error: type[RtiError]) -> Any:
    """The JSON document in `path` (UTF-8). Raises `error` naming the file when it cannot be read,
    is not UTF-8, or fails `parse`."""
    regular_file(path, error)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise error(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    return parse(text, str(path), error)


def kind_name(kind: Kind) -> str:
    """`str` -> "a string", `(int, type(None))` -> "an int or null"."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "an int", list: "a list", dict: "an object", bool: "a bool", float: "a number"}
    return " or ".join("null" if k is type(None) else names.get(k, k.__name__) for k in kinds)


def typed(value: Any, kind: Kind, where: str, error: type[RtiError]) -> Any:
    """`value` if it has JSON type `kind` (a bool is not an int here), else `error` naming `where`."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise error(f"{where}: expected {kind_name(kind)}, found {type(value).__name__} {short(value)}")
    return value


def need(doc: dict[str, Any], key: str, kind: Kind, where: str, error: type[RtiError]) -> Any:
    """`doc[key]` of JSON type `kind`; `error` naming `where` and the field when it is missing or
    of another type."""
    if key not in doc:
        raise error(f"{where}: missing field {key!r}")
    return typed(doc[key], kind, f"{where}.{key}", error)
