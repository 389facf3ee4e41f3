"""Names and text that are safe to print into Rust source, TOML and Markdown.

Every weight, input, node, module and model name comes from the user's model
(or a hand-edited torch-ir file), so none is trusted: identifiers are sanitized,
shortened and made unique, string literals are escaped, comments are flattened
to one line with invisible and direction-changing characters escaped (rustc
rejects bidi controls in comments), and templates are filled in one pass so
that a name can never contain a placeholder that is expanded afterwards.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Strict and reserved keywords (2024 edition), primitive type names, plus names the generated
# code uses itself (the `emit`/`build` parameters and locals, and the tensor style's `cat`).
_RESERVED = frozenset(
    """as async await break const continue crate dyn else enum extern false fn for gen if impl in let loop match
    mod move mut pub ref return self static struct super trait true type unsafe use where while abstract become box
    do final macro override priv typeof unsized virtual yield try union
    bool char str f16 f32 f64 f128 i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize
    g s e inputs params outputs hir shape constant cat emit build graph host weights name""".split()
)

# Longest identifier printed; a longer name keeps its start and gets a hash of the whole name.
MAX_IDENT = 64
# Longest user text printed in one comment (the rest is counted, not printed).
MAX_COMMENT = 300
# A placeholder alone on its line (group 1), or anywhere (group 2).
_PLACEHOLDER = re.compile(r"^@@([A-Z_]+)@@\n|@@([A-Z_]+)@@", re.MULTILINE)


def short_hash(text: str, n: int = 8) -> str:
    """The first `n` hex digits of the SHA-256 of `text` (UTF-8, lone surrogates kept)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def shorten(slug: str, original: str, limit: int, sep: str = "_") -> str:
    """`slug` when at most `limit` characters, else its start and a hash of `original`: two long
    names that share a start stay distinct, and the same name always gives the same result."""
    if len(slug) <= limit:
        return slug
    tail = sep + short_hash(original)
    return slug[: limit - len(tail)].rstrip(sep) + tail


@dataclass(frozen=True)
class CrateNames:
    """`rlx-<name>` (package and folder) and `rlx_<name>` (library)."""

    package: str
    library: str


# Longest slug of the model name in a crate's names: the folder `rlx-<slug>` and its staging
# folder `.rlx-<slug>.partial-XXXXXXXX` stay far below every file system's 255-byte limit.
MAX_SLUG = 64


def crate_names(model_name: str) -> CrateNames:
    """Cargo-valid names from any model name: lowercase ASCII letters and digits joined by `-`
    (package and folder) or `_` (library), so no path separator, `..`, quote or keyword survives;
    at most MAX_SLUG characters of it (a longer name keeps its start and gets a hash of the whole)."""
    slug = re.sub(r"[^a-z0-9]+", "_", model_name.lower()).strip("_") or "model"
    slug = shorten(slug, model_name, MAX_SLUG)
    return CrateNames(package="rlx-" + slug.replace("_", "-"), library="rlx_" + slug)


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
        base = shorten(base, key, MAX_IDENT)
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
    """A Rust string literal for `text` (printable ASCII kept, everything else escaped; a lone
    surrogate, which no Rust string can hold, becomes U+FFFD)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"\\u{{{ord(ch) if not 0xD800 <= ord(ch) <= 0xDFFF else 0xFFFD:x}}}")
    return '"' + "".join(out) + '"'


def _visible(ch: str) -> str:
    """`ch` if it is safe and visible in a comment, else its `\\u{...}` escape (format and
    direction controls, private use, unassigned and surrogate code points)."""
    if unicodedata.category(ch) in ("Cf", "Co", "Cn", "Cs"):
        return f"\\u{{{ord(ch):x}}}"
    return ch


def comment(text: str, limit: int = MAX_COMMENT) -> str:
    """`text` as the body of one `//` (or `#`) comment line: runs of control and line-breaking
    characters become one space, invisible and bidi characters are escaped, and text beyond
    `limit` characters is cut (saying how much)."""
    text = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", text).strip()
    cut = ""
    if len(text) > limit:
        cut = f" ... ({len(text) - limit} more characters)"
        text = text[:limit]
    return "".join(map(_visible, text)) + cut


def code_span(text: str, limit: int = MAX_COMMENT) -> str:
    """`text` (flattened by `comment`) as one Markdown code span, fenced with more backticks than
    any run inside it, so it renders literally in a README or a rustdoc comment."""
    body = comment(text, limit)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def fill(template: str, values: Mapping[str, str | Sequence[str]], where: str = "template") -> str:
    """Replace every `@@KEY@@` in `template` with `values[KEY]` in one pass: text put in is never
    searched again, so a name holding `@@LOAD@@` stays that text. A value that is a sequence of lines
    replaces a placeholder alone on its line with those lines (none: the line goes). Raises KeyError
    naming `where` and the placeholder when the template has one `values` lacks, or a ValueError
    when a sequence of lines is given for a placeholder inside a line."""

    def one(m: re.Match[str]) -> str:
        key = m.group(1) or m.group(2)
        if key not in values:
            raise KeyError(f"{where}: no value for placeholder @@{key}@@")
        value = values[key]
        if isinstance(value, str):
            return value + "\n" if m.group(1) else value
        if not m.group(1):
            raise ValueError(f"{where}: @@{key}@@ takes lines but is not alone on its line")
        return "".join(f"{line}\n" for line in value)

    return _PLACEHOLDER.sub(one, template)
