"""A unit's record, and the judging of a run's outputs against a case's expected outputs.

A record is a JSON-ready dict: `status` (pass / wrong / unsupported / error), `reason` (one line),
`detail` (each failing output's reasons, the gap lines, an exception's first lines), `causes`
(normalized failure causes, for the ranking of failure causes), `notes`; `work` adds `seconds` (the
command line keeps only the slowest runs' times, in the JSON's meta).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tools.onnx_coverage.cases import Case


def first_line(e: BaseException) -> str:
    """`Type: first line of the message` (200 characters at most)."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__


def normalize(text: str) -> str:
    """A message with its specifics (quoted names, numbers, shapes) blanked, to group like failures."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    for _ in range(2):  # [Static(1), Static(8)], [[1, 2], [3]]: innermost first
        text = re.sub(r"\[[^\[\]]*\]", "[…]", text)
    text = re.sub(r"\w*_expanded_function_", "", text)  # a function body's node and value names
    text = re.sub(r"\b(initializer|env:|node) [A-Za-z_][\w./-]*", r"\1 …", text)  # unquoted names
    text = re.sub(r"(?<=_)\d+\b", "N", text)  # node_26
    text = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e[-+]?\d+)?(?![\w.])", "N", text)  # not float32's 32
    return text[:200]


def failure(
    status: str, reason: str, detail: list[str] | None = None, causes: list[str] | None = None
) -> dict[str, Any]:
    return {"status": status, "reason": reason, "detail": detail or [], "causes": causes or [], "notes": []}


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def bf16_values(arr: np.ndarray) -> np.ndarray:
    """bfloat16 values as float32, from bfloat16 bits (uint16), ml_dtypes.bfloat16, or float32 values."""
    if arr.dtype == np.uint16:
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return np.asarray(arr, dtype=np.float32)


def _compare(name: str, got: np.ndarray, dtype: str, want: np.ndarray, want_dtype: str, who: str) -> tuple[str, str]:
    """(what is wrong, "" when within budget; a note) for one output through compare_output. An output
    that differs from the expected shape only by size-1 axes is compared at the expected shape
    (RLX has no rank-0 tensor: ONNX's [] is [1]), noted."""
    from rlx_torch_import.verify.compare import compare_output

    got, note = np.asarray(got), ""
    if dtype == "bfloat16":
        got = bf16_values(got)
    if got.shape != want.shape and got.size == want.size and _squeezed(got.shape) == _squeezed(want.shape):
        note = f"output {name!r}: {who}'s shape {list(got.shape)} compared as {list(want.shape)}"
        got = got.reshape(want.shape)
    row = compare_output(name, got, want, dtype, want_dtype)
    if row.ok:
        return "", note
    text = "; ".join(row.reasons) + f" ({row.mismatch_text()})"  # compare_output's words are RLX vs PyTorch
    return text.replace("PyTorch's own", "the expected").replace("PyTorch", "expected").replace("RLX", who), note


def judge(case: Case, actual: dict[str, np.ndarray], dtypes: dict[str, str], who: str) -> dict[str, Any]:
    """Each of the case's outputs against `actual` (by name; `dtypes`: their torch-ir dtype names)
    through compare_output: a pass record, or a wrong one naming each output outside its budget.
    Outputs named otherwise than the graph's are wrong; when their count matches, they are compared
    by position too, and the reason says whether their values are right."""
    bad: list[str] = []
    notes: list[str] = []
    given = list(actual.items())
    by_position = len(given) == len(case.expected)
    for i, (name, want) in enumerate(case.expected.items()):
        if name in actual:
            got_name, got = name, actual[name]
        elif by_position:
            got_name, got = given[i]
        else:
            bad.append(f"output {name!r}: {who} gave no such output (gave {sorted(actual)})")
            continue
        wrong, note = _compare(name, got, dtypes[got_name], want, case.dtypes[name], who)
        notes += [note] if note else []
        if name != got_name:
            right = "its values are right" if not wrong else f"its values are wrong too: {wrong}"
            bad.append(f"output {name!r}: {who} names it {got_name!r} (by position; {right})")
        elif wrong:
            bad.append(f"output {name!r}: {wrong}")
    if bad:
        rec = failure("wrong", bad[0][:300], bad, [])
    else:
        rec = failure("pass", "")
    rec["notes"] = notes
    return rec


def wrong_cause(case: Case, rec: dict[str, Any]) -> list[str]:
    """One cause for a wrong result: the op and the kind of difference."""
    text = rec["reason"]
    if "gave no such output" in text:
        kind = "an output missing"
    elif "(by position; its values are right)" in text:
        kind = "outputs named otherwise than the graph's (values right)"
    elif "(by position;" in text:
        kind = "outputs named otherwise than the graph's (values wrong too)"
    elif ": dtype " in text:
        kind = "wrong dtype " + text.split(": dtype ", 1)[1].split(";")[0].split(" (")[0]
    elif ": shape " in text:
        kind = "wrong shape"
    elif "NaN/inf positions differ" in text or "entirely NaN" in text:
        kind = "NaN/inf where the expected output has none (or the reverse)"
    elif "must match exactly" in text:
        kind = "integer/bool elements differ"
    else:
        kind = "values outside budget"
    return [f"wrong results in {case.op_type}: {kind}"]
