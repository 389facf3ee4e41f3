"""The two engines a case runs through: our front end (`run_rlx`: from_onnx, then the bundle) and
ONNX Runtime (`run_ort`, the anchor); each returns a record (`judge.py`) judged against the case's
expected outputs."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from tools.onnx_coverage.cases import Case
from tools.onnx_coverage.judge import failure, first_line, judge, normalize, wrong_cause

# ---------------------------------------------------------------- ONNX Runtime (the anchor)


def _ort_run(sess: Any, case: Case) -> dict[str, np.ndarray]:
    """ONNX Runtime's outputs by name. Its Python API has no numpy bfloat16: a case with a bfloat16
    input or output runs on OrtValues, bfloat16 in as its bits, out read from the buffer (CPU)."""
    import ctypes

    import onnxruntime as ort

    names = [o.name for o in sess.get_outputs()]
    if "bfloat16" not in case.dtypes.values():
        return {n: np.asarray(v) for n, v in zip(names, sess.run(names, case.inputs), strict=True)}
    feed = {}
    for n, a in case.inputs.items():
        if case.dtypes[n] == "bfloat16":
            bits = np.asarray((np.array(a, np.float32, order="C").view(np.uint32) >> 16).astype(np.uint16))
            feed[n] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, 16)  # TensorProto.BFLOAT16
        else:
            feed[n] = ort.OrtValue.ortvalue_from_numpy(np.array(a, order="C"))
    found = {}
    for n, v in zip(names, sess.run_with_ort_values(names, feed), strict=True):
        if v.data_type() == "tensor(bfloat16)":
            raw = ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()) if v.tensor_size_in_bytes() else b""
            bits = np.frombuffer(raw, np.uint16).reshape(v.shape())
            found[n] = (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            found[n] = np.asarray(v.numpy())
    return found


def run_ort(case: Case) -> dict[str, Any]:
    """The case on ONNX Runtime (CPU provider, graph optimizations off, one thread), judged."""
    import onnx

    from rlx_torch_import.frontend.onnx.reference import session

    try:
        out = _ort_run(session(onnx.load_from_string(case.model), threads=1), case)
    except Exception as e:
        line = first_line(e)
        short = re.sub(r"^.*\[ONNXRuntimeError\] : \d+ : \w+ : (Fatal error: )?", "", line)
        return failure("error", line, [str(e)[:600]], [f"ONNX Runtime: {normalize(short)}"])
    dtypes = {n: "bfloat16" if case.dtypes.get(n) == "bfloat16" else v.dtype.name for n, v in out.items()}
    rec = judge(case, out, dtypes, "ORT")
    rec["causes"] = wrong_cause(case, rec) if rec["status"] == "wrong" else []
    return rec


# ---------------------------------------------------------------- our front end


def _gap_cause(target: str, reason: str) -> str:
    """One UnsupportedOpsError item as a failure cause ("" for a stubbed node)."""
    m = re.fullmatch(r"<(input|output) dtype (\w+)>", target)
    if m:
        return f"graph input/output dtype {m.group(2)} refused"
    if target == "<stubbed>":
        return ""
    if target.startswith("<"):
        return f"{target.strip('<>')}: " + normalize(reason.removeprefix("RLX's ONNX importer failed: "))
    op = target.split(" (", 1)[0]
    domain = re.search(r"domain '([^']*)'", reason)
    if domain:  # each route lists it: one cause
        return f"op {op.rsplit('.', 1)[-1]} of domain {domain.group(1)} not read"
    if "torch translation" in reason:
        return f"torch route: no translation for op {op}"
    if op.startswith(("aten.", "prims.")):
        return f"torch route: {op} not lowered"
    if "no lowering" in reason or "refused" in reason:
        return f"importer: op {op} not lowered"
    return f"op {op}: {normalize(reason)}"


def _gap_causes(items: list[Any]) -> list[str]:
    """An UnsupportedOpsError's items as failure causes: each op a route does not lower or translate,
    each dtype refused at the graph boundary, a route's failure (its message normalized). A stubbed
    node counts only when nothing else is listed (the importer stubs the node of an op it refused)."""
    found = {_gap_cause(item.target, item.reason) for item in items}
    if "" in found:
        found.discard("")
        found = found or {"importer stubbed a node"}
    return sorted(found)


def _front_feed(case: Case) -> dict[str, np.ndarray]:
    """The case's inputs as from_onnx takes them (bfloat16 as its bits, uint16)."""
    found = {}
    for n, a in case.inputs.items():
        if case.dtypes[n] == "bfloat16":
            a = (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        found[n] = a
    return found


def _error(stage: str, e: BaseException, where: Path) -> dict[str, Any]:
    """An `error` record of an exception at `stage`, the case folder's paths shortened (`_scrubbed`)."""
    lines = _scrubbed(str(e), where).strip().splitlines() or [""]
    line = f"{type(e).__name__}: {lines[0][:200]}".rstrip(": ")
    return failure("error", f"{stage}: {line}", lines[:6], [f"{stage}: {normalize(line)}"])


def _convert(case: Case, model: Path, out: Path) -> tuple[Any, list[str], dict[str, Any] | None]:
    """from_onnx on the case, verifying against ONNX Runtime; again without verifying when ONNX
    Runtime cannot run it. (report or None, notes, a failure record or None)."""
    from rlx_torch_import import from_onnx
    from rlx_torch_import.errors import ModelLoadError, UnsupportedOpsError

    notes: list[str] = []
    for verify in (True, False):
        try:
            report = from_onnx(
                model, out, inputs=_front_feed(case), per_node=False, verify=verify, progress=False, threads=1
            )
            return report, notes, None
        except UnsupportedOpsError as e:
            lines = [i.line() for i in e.items]
            causes = _gap_causes(e.items)
            more = [f"... and {len(lines) - 8} more"] if len(lines) > 8 else []
            rec = failure("unsupported", lines[0][:300], lines[:8] + more, causes)
        except ModelLoadError as e:
            if verify and "ONNX Runtime" in str(e):
                notes.append(f"ONNX Runtime cannot run it ({first_line(e)}); converted again with verify=False")
                shutil.rmtree(out, ignore_errors=True)
                continue
            rec = _error("convert", e, model.parent)
            if notes and "ONNX Runtime" in str(e):  # verify=False did not help
                rec["causes"] = ["from_onnx(verify=False) still needs ONNX Runtime to run the case"]
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # RLX's panics are BaseException
            rec = _error("convert", e, model.parent)
        rec["notes"] = notes
        return None, notes, rec
    raise AssertionError("unreachable")


def _bundle_feed(meta: dict[str, Any], case: Case) -> dict[str, np.ndarray]:
    """The case's inputs at the bundle's shapes (ONNX's [] is [1] there)."""
    feed = {}
    for spec in meta["inputs"]:
        a = case.inputs[spec["name"]]
        shape = tuple(spec["shape"])
        feed[spec["name"]] = a.reshape(shape) if a.shape != shape and a.size == int(np.prod(shape)) else a
    return feed


def _route(report: Any) -> str:
    """Which route converted the case ("importer", "torch"; the report's `route:` note), or ""."""
    note = next((n for n in report.notes if n.startswith("route:")), "")
    return "torch" if "torch route" in note else "importer" if "importer" in note else ""


def _report_line(report: Any) -> str:
    bad = [o for o in report.outputs if not o.ok]
    if not bad:
        return "verification FAIL"
    return f"verification FAIL: output {bad[0].name!r}: " + "; ".join(bad[0].reasons)[:200]


def _scrubbed(text: str, where: Path) -> str:
    """`text` with the case folder's paths as `<case>/...` (the staged conversion folder as `<case>/out`)."""
    return re.sub(
        re.escape(str(where)) + r"(/\.out\.partial-[^/\s]+)?", lambda m: "<case>/out" if m.group(1) else "<case>", text
    )


def _scrub(rec: dict[str, Any], where: Path) -> dict[str, Any]:
    """The record's texts `_scrubbed`."""
    for key in ("reason", "detail", "causes", "notes"):
        rec[key] = _scrubbed(rec[key], where) if isinstance(rec[key], str) else [_scrubbed(s, where) for s in rec[key]]
    return rec


def run_rlx(case: Case, scratch: Path) -> dict[str, Any]:
    """The case through from_onnx (verify=True vs ONNX Runtime, per_node=False), then its bundle on
    the case's inputs, every output judged against the expected one. The conversion folder is removed."""
    from rlx_torch_import.bundle.model import BundleModel

    where = scratch / f"{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]', '_', case.name)}"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    try:
        model = where / "model.onnx"
        model.write_bytes(case.model)
        report, notes, rec = _convert(case, model, where / "out")
        if rec is not None:
            rec["report_ok"], rec["verify"] = None, "none"
            return _scrub(rec, where)
        try:
            bundle = BundleModel(where / "out" / "bundle", threads=1)
            out = bundle.run(_bundle_feed(bundle.meta, case))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            rec = _error("bundle run", e, where)
        else:
            rec = judge(case, out, {o["name"]: o["dtype"] for o in bundle.meta["outputs"]}, "RLX")
            rec["causes"] = wrong_cause(case, rec) if rec["status"] == "wrong" else []
        rec["notes"] = notes + rec["notes"]
        rec["route"] = _route(report)
        verified = not notes
        _scrub(rec, where)
        rec["report_ok"] = bool(report.ok) if verified else None
        rec["verify"] = "ort" if verified else "skipped: ONNX Runtime cannot run it"
        if verified and not report.ok:
            rec["notes"].append(_report_line(report))
        return rec
    finally:
        shutil.rmtree(where, ignore_errors=True)
