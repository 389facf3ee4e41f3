"""docs/adding-an-op.md, walked through: its steps must stay true to the code.

The page's ` ```python ` blocks run in order in one namespace that stands for a family module
(`lower/ops/unary.py`: relative imports resolve, and a lowering registered there gets the family
`unary`), with the registered `leaky_relu` and `elu` lowerings set aside (an overload registers once)
and the registry restored afterwards. A block preceded by `<!-- illustrative -->` is not run. Then the
samples the page adds (step 5) are converted with the page's lowerings (steps 2 and 3) and must pass
parity; the refusal its `check` documents and the error a missing lowering gives must read as the
page shows them; its ` ```pycon ` lines must print what the page says; and every file it names must
exist.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import rlx_torch_import as rti
from rlx_torch_import.errors import UnsupportedOpsError
from rlx_torch_import.lower import REGISTRY, families  # noqa: F401  (importing families registers every lowering)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "adding-an-op.md"
FAMILY = "rlx_torch_import.lower.ops.unary"  # the module the page's lowerings are written for
TARGETS = ("aten.leaky_relu.default", "aten.elu.default")
MARK = "<!-- illustrative -->"
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```$", re.MULTILINE | re.DOTALL)


def _blocks(lang: str) -> list[tuple[str, bool]]:
    """(code, illustrative) of every fenced block in `lang`, in page order, indentation removed."""
    text = DOC.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        if m.group(2) != lang:
            continue
        indent = len(m.group(1))
        code = "\n".join(line[indent:] for line in m.group(3).splitlines()) + "\n"
        before = text[: m.start()].rstrip().splitlines()
        found.append((code, bool(before) and before[-1].strip() == MARK))
    return found


def _plain_blocks() -> list[str]:
    """The fenced blocks without a language (messages the page quotes)."""
    text = DOC.read_text(encoding="utf-8")
    return [m.group(3) for m in FENCE.finditer(text) if not m.group(2)]


@contextlib.contextmanager
def _without_registered() -> Iterator[None]:
    """The registry without the page's two overloads; restored as it was afterwards."""
    saved = dict(REGISTRY)
    for target in TARGETS:
        REGISTRY.pop(target)
    try:
        yield
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


def _run_page() -> dict[str, Any]:
    """Run the page's runnable python blocks in order, as one family module; returns its namespace."""
    blocks = _blocks("python")
    assert blocks, "docs/adding-an-op.md has no ```python block"
    namespace: dict[str, Any] = {"__name__": FAMILY, "__package__": FAMILY.rpartition(".")[0]}
    for i, (code, illustrative) in enumerate(blocks):
        if illustrative:
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{DOC.name}[python block {i + 1}]", "exec"), namespace)
    return namespace


def _quoted_reason(target: str) -> str:
    """The page's quoted line for `target`'s gap, up to its node (source lines vary by torch version)."""
    for block in _plain_blocks():
        for line in block.splitlines():
            if line.strip().startswith(f"- {target}:"):
                return line.strip()[2:].split(" [node ")[0]
    raise AssertionError(f"docs/adding-an-op.md quotes no line for {target}")


def test_the_walk_through_converts_with_the_pages_lowerings(tmp_path: Path) -> None:
    with _without_registered():
        # Step 1: the error a missing lowering gives, as the page quotes it.
        with pytest.raises(UnsupportedOpsError) as missing:
            rti.from_torch(nn.LeakyReLU(0.2), (torch.randn(2, 8),), tmp_path / "missing", auto_decompose=False)
        assert missing.value.targets == [TARGETS[0]]
        first = str(missing.value).splitlines()[0]
        assert any(first in block for block in _plain_blocks()), first
        quoted = _quoted_reason(TARGETS[0])
        assert quoted in str(missing.value), (quoted, str(missing.value))

        namespace = _run_page()
        ir = namespace["ir"]  # step 1's captured graph
        assert TARGETS[0] in [n.target for n in ir.nodes]

        # Steps 2 and 3 registered the page's functions, in the family the page names.
        for target, fn in zip(TARGETS, ("leaky_relu", "elu"), strict=True):
            lowering = REGISTRY[target]
            assert lowering.fn is namespace[fn] and lowering.family == "unary" and lowering.kind == "elementwise"
        assert REGISTRY[TARGETS[1]].check is namespace["_check_elu"]

        # Step 5: the page's samples pass parity with the page's lowerings.
        samples = [s for s in namespace["SAMPLES"] if isinstance(s, tuple)]
        assert [name for name, _, _ in samples] == ["leaky_relu", "elu"]
        for (name, module, inputs), target in zip(samples, TARGETS, strict=True):
            report = rti.from_torch(module, inputs, tmp_path / name)
            assert report.verified and report.ok, report.summary()
            assert target in report.aten_histogram, report.aten_histogram

        # Step 3: the check's refusal reads as the page shows it.
        with pytest.raises(UnsupportedOpsError) as refused:
            rti.from_torch(nn.ELU(alpha=0.5), (torch.randn(2, 8),), tmp_path / "refused", auto_decompose=False)
        assert TARGETS[1] in refused.value.targets
        quoted = _quoted_reason(TARGETS[1])
        assert quoted in str(refused.value), (quoted, str(refused.value))
    assert REGISTRY[TARGETS[0]].fn.__module__ == FAMILY and REGISTRY[TARGETS[0]].fn is not namespace["leaky_relu"]


def test_every_python_block_runs_or_is_marked() -> None:
    """A block is run unless marked; a marked block must still be Python."""
    for code, illustrative in _blocks("python"):
        compile(code, str(DOC), "exec")
        assert not illustrative or code.strip(), "an empty illustrative block"


def test_pycon_lines_print_what_the_page_shows() -> None:
    """`>>> expr` followed by its printed value (step 1's schema)."""
    blocks = _blocks("pycon")
    assert blocks
    for code, _ in blocks:
        lines = code.strip().splitlines()
        for prompt, shown in itertools.pairwise(lines):
            if prompt.startswith(">>> ") and not shown.startswith(">>> "):
                assert str(eval(prompt[4:], {"torch": torch})) == shown


def test_every_named_file_exists() -> None:
    """Every `dir/file.py`/`.md`/`.json` path, `make <target>` and `python -m tools.<x>` the page names is there."""
    text = DOC.read_text(encoding="utf-8")
    roots = [ROOT, ROOT / "python" / "rlx_torch_import", ROOT / "python" / "rlx_torch_import" / "lower"]
    missing = []
    for path in sorted(set(re.findall(r"[\w./-]+\.(?:py|md|json)\b", text))):
        if "/" not in path or "<" in path or path.startswith("."):  # a bare name (`unary.py`) is not a path
            continue
        if not any((root / path).exists() for root in roots):
            missing.append(path)
    assert not missing, f"docs/adding-an-op.md names files that are not there: {missing}"
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
    named = set(re.findall(r"`make (\w+)", text)) | set(re.findall(r"^make (\w+)", text, re.MULTILINE))
    assert named <= targets, f"make targets the page names but the Makefile lacks: {named - targets}"
    for module in re.findall(r"python -m (tools\.\w+)", text):
        assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module
