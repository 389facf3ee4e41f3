"""The markdown tables: one run's rows, or a before/after of two runs' JSON files side by side."""

from __future__ import annotations

from typing import Any

from .worker import CRASHED, Row


def cell(text: str) -> str:
    """Text for one markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def short(text: str, limit: int = 240) -> str:
    """`text` cut to `limit` characters (the JSON keeps the whole first line)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result(row: Row) -> str:
    """The outcome column: the verdict, or the error class and its exit code; and whether the
    conversion left the user's model changed (`worker.check_unchanged`)."""
    text = row.outcome
    if row.error_class:
        code = f", exit {row.exit_code}" if row.exit_code is not None else ", not an RtiError"
        text = f"{row.outcome}: {row.error_class}{code}"
    elif row.outcome == CRASHED:
        text = f"{row.outcome} (exit {row.exit_code})"
    return text + ("; model left changed" if row.model_unchanged is False else "")


def table(rows: list[Row]) -> list[str]:
    """One run: a line per model."""
    lines = ["| model | source | kind | outcome | s | detail |", "|---|---|---|---|---:|---|"]
    for r in rows:
        cells = [r.name, r.source.removesuffix("_models"), r.kind, result(r), f"{r.seconds:.1f}", short(r.detail)]
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return lines


def rows_of(saved: dict[str, Any]) -> list[Row]:
    """The rows of a JSON file `--json` wrote."""
    return [Row(**r) for r in saved["rows"]]


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Before/after: a line per model of either run (before's order first), each run's outcome,
    seconds and detail; a model one run lacks shows "not run"."""
    old = {r.name: r for r in rows_of(before)}
    new = {r.name: r for r in rows_of(after)}
    names = list(old) + [n for n in new if n not in old]
    lines = [
        f"before: {before.get('rti', '?')} ({before.get('date', '?')}); after: {after.get('rti', '?')} "
        f"({after.get('date', '?')})",
        "",
        "| model | kind | before | s | after | s | after: detail | before: detail |",
        "|---|---|---|---:|---|---:|---|---|",
    ]
    for name in names:
        b, a = old.get(name), new.get(name)
        either = a or b
        cells = [name, either.kind if either else ""]
        for r in (b, a):
            cells += [result(r), f"{r.seconds:.1f}"] if r else ["not run", ""]
        cells += [short(a.detail) if a else "", short(b.detail) if b else ""]
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return lines
