"""Names and text that are safe to print into Rust source.

Every weight, input and node name comes from the user's model, so none is
trusted: identifiers are sanitized and made unique, string literals are
escaped, and comments are flattened to one line.
"""

from __future__ import annotations

import re

# Strict and reserved keywords (2024 edition), plus names the generated code uses itself.
_RESERVED = frozenset(
    """as async await break const continue crate dyn else enum extern false fn for gen if impl in let loop match
    mod move mut pub ref return self static struct super trait true type unsafe use where while abstract become box
    do final macro override priv typeof unsized virtual yield try union
    g s e inputs params outputs hir shape constant""".split()
)


class RustNames:
    """Map arbitrary names to unique snake_case Rust identifiers, stably."""

    def __init__(self) -> None:
        self._by_name: dict[str, str] = {}
        self._taken: set[str] = set()

    def __call__(self, name: str, prefix: str = "") -> str:
        key = prefix + "\0" + name
        if key in self._by_name:
            return self._by_name[key]
        base = prefix + re.sub(r"[^0-9a-zA-Z_]+", "_", name).strip("_").lower()
        base = re.sub(r"_+", "_", base) or "v"
        if base[0].isdigit():
            base = f"v_{base}"
        if base in _RESERVED:
            base = f"{base}_"
        ident, n = base, 1
        while ident in self._taken:
            n += 1
            ident = f"{base}_{n}"
        self._taken.add(ident)
        self._by_name[key] = ident
        return ident


def rust_str(text: str) -> str:
    """A Rust string literal for `text` (printable ASCII kept, everything else escaped)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch):x}}}")
    return '"' + "".join(out) + '"'


def comment(text: str) -> str:
    """`text` as the body of one `//` comment line: control characters become spaces."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\u0085]+", " ", text).strip()
