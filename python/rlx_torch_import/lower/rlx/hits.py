"""Which raw RLX nodes meet a known defect: the `hits(op, input_dtypes, out_dtype)` predicates of the
defect catalogue (`defects.py`), over RLX dtypes, and the dtype and op sets they share with the
workaround layer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...dtypes import INT_DTYPES, NARROW_DTYPES, RECORDS
from ...program import op_name

NARROW = frozenset(RECORDS[d].rlx for d in NARROW_DTYPES)
INTS = frozenset(RECORDS[d].rlx for d in INT_DTYPES)
# The ops RLX 0.2.19 keeps I32 in integer form for (rlx-cpu int_storage.rs `integer_safe`); every other
# op touching I32 is legalized through f32, exact only below 2**24.
I32_SAFE = frozenset({"Input", "Param", "Constant", "Cast", "Reshape", "Narrow", "Transpose", "Concat", "Expand"})
MOVES = frozenset(
    {"Transpose", "Slice", "Narrow", "Concat", "Expand", "Gather", "GatherElements", "Reverse", "Roll", "Tile"}
    | {"Pad", "Trilu", "ScatterElements", "ScatterNd", "Where"}
)


Hits = Callable[[Any, Sequence[str], str], bool]


def _kind(op: Any) -> str:
    return op_name(op).split(".")[0]


def kind_is(*kinds: str, dtypes: frozenset[str] | None = None, at: Sequence[int] | None = None) -> Hits:
    """A raw op of one of `kinds` whose operands (positions `at`, default all) include one of `dtypes`."""

    def hits(op: Any, ins: Sequence[str], out: str) -> bool:
        if _kind(op) not in kinds:
            return False
        picked = [ins[i] for i in at if i < len(ins)] if at is not None else list(ins)
        return dtypes is None or any(d in dtypes for d in picked)

    return hits


def compare_f64(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Compare" and "F64" in ins


def reduce_hits(op: Any, ins: Sequence[str], out: str) -> bool:
    if _kind(op) != "Reduce" or not ins:
        return False
    red = op["Reduce"]["op"]
    return (ins[0] == "F64" and red != "Sum") or ins[0] in INTS


# Operand positions holding the data an op moves (the others are indices or conditions).
DATA_POSITIONS = {
    "Gather": (0,),
    "GatherElements": (0,),
    "ScatterElements": (0, 2),
    "ScatterNd": (0, 2),
    "Where": (1, 2),
}


def _data_dtypes(op: Any, ins: Sequence[str]) -> list[str]:
    return [ins[i] for i in DATA_POSITIONS.get(_kind(op), range(len(ins))) if i < len(ins)]


def i32_moves(op: Any, ins: Sequence[str], out: str) -> bool:
    kind = _kind(op)
    return kind in MOVES and kind not in I32_SAFE and "I32" in (*_data_dtypes(op, ins), out)


def narrow_moves(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) in MOVES and any(d in NARROW for d in _data_dtypes(op, ins))


def index_dtype(op: Any, ins: Sequence[str], out: str) -> bool:
    """Gather/scatter indices other than I64 (and F32, which the element kernels read exactly)."""
    kind = _kind(op)
    if kind not in ("Gather", "GatherElements", "ScatterElements", "ScatterNd") or len(ins) < 2:
        return False
    return ins[1] != "I64" and not (kind != "Gather" and ins[1] == "F32")


def gather_elements(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "GatherElements" and len(ins) == 2 and (ins[0], ins[1]) not in (("F32", "F32"), ("I64", "I64"))


def elu(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Activation" and op.get("Activation") == "Elu"


def activation_int(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Activation" and bool(ins) and ins[0] in INTS


def binary_nan(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Binary" and op.get("Binary") in ("Max", "Min") and out in ("F32", "F64")


def reduce_nan(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Reduce" and op["Reduce"]["op"] in ("Max", "Min") and out in ("F32", "F64")


def scan_axis(op: Any, ins: Sequence[str], out: str) -> bool:
    kind = _kind(op)
    return kind in ("Cumsum", "CumProd") and op[kind]["axis"] != -1


def constant_narrow(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Constant" and out in NARROW


def round(op: Any, ins: Sequence[str], out: str) -> bool:
    return op_name(op) == "Activation.Round"


def round_to_format(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "RoundToFormat"


def never(op: Any, ins: Sequence[str], out: str) -> bool:
    return False


F64_ONLY = frozenset({"F64"})
I64_ONLY = frozenset({"I64"})


def exp(op: Any, ins: Sequence[str], out: str) -> bool:
    return _kind(op) == "Activation" and op.get("Activation") == "Exp" and "F32" in ins
