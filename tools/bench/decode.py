"""Decode benchmark: the benchmark Llama (tools/bench/models.py `_llama`, random weights) run token by
token with a KV cache, as LLM users run it.

    python -m tools.bench.decode [--threads N] [--runs N]

The model is exported as a decode step (`rlx_torch_import.decode.hf_export.hf_decode_step`: ids, positions, the
token and cache masks and 12 cache tensors in, logits and this step's keys/values out; cache length a
dynamic dim 0..2048, new tokens 1..1024) and converted with `from_torch(..., dynamic_shapes=...)`.
Each runtime is served by its own process, same threads, and they take turns pass by pass (a burst of
load elsewhere falls on all):
- RLX: `generate.Decoder` (the cache padded to 128-slot buckets: a new binding compiles once per 128
  tokens, in the first pass; the passes after it reuse them; the caches resident in RLX's arena, each
  step copying in its new keys/values only), and without padding (bucket 1: the exact cache fed whole,
  a compile at every step), timed once;
- eager PyTorch: the Hugging Face model with its DynamicCache, under torch.no_grad;
- ONNX Runtime: the `torch.onnx.export(..., dynamo=True)` of the same decode step, the exact cache.

Prefill: a 128-token prompt, empty cache (median of `runs` after one warm-up). Decode: a prompt of L
tokens (L = 128, 1024), then 32 greedy steps (T = 1, cache L .. L+31): tokens/s = 32 / their time,
median of `runs` passes after a first pass, each from a copy of the same prefilled cache. Parity: the
first pass's tokens and per-step logits (and the prefill logits) against eager's, logits within the
float32 budget (`verify.compare.compare_output`). Prints markdown (`decode_section`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlx_torch_import import rlx_config
from tools import child_env

CACHE_LENGTHS = (128, 1024)
STEPS = 32
PROMPT = 128
EXACT_STEPS = 6  # bucket-1 steps timed once: each compiles a new binding
MAX_SEQ, MAX_CACHE = 1024, 2048
RUNTIMES = ("rlx", "eager", "ort")
TIMES = "\N{MULTIPLICATION SIGN}"
NOISY = 2.0  # passes ranging over more than this factor get a note (as tools/bench/measure.py's footnotes)


def _lm() -> Any:
    """The benchmark Llama's LlamaForCausalLM (same config and seed as `models._llama`)."""
    from tools.bench.models import _llama

    return _llama()[0].model


def _prompt(length: int) -> np.ndarray:
    return np.random.default_rng(length).integers(0, 32000, (1, length))


@dataclass
class Runtime:
    """One way to run the decode loop: prefill(prompt) -> (state, logits [1, T, V]), step(state, ids
    [1, 1]) -> logits (the state updated in place), copy(state) -> an independent state."""

    prefill: Callable[[np.ndarray], tuple[Any, np.ndarray]]
    step: Callable[[Any, np.ndarray], np.ndarray]
    copy: Callable[[Any], Any]
    compiles: Callable[[], int] = lambda: 0  # bindings compiled so far (RLX)


# ---------------------------------------------------------------- children


def convert(directory: Path, threads: int) -> None:
    """Export and convert the decode step into `directory`/rlx, its ONNX export into `directory`/decode.onnx;
    writes `directory`/convert.json (verdict, summary, seconds, the ONNX export's error if any)."""
    import torch

    from rlx_torch_import.api import from_torch
    from rlx_torch_import.decode.hf_export import hf_decode_inputs, hf_decode_step

    torch.set_num_threads(threads)
    lm = _lm()
    step = hf_decode_step(lm)
    args, dynamic = hf_decode_inputs(lm.config, max_seq=MAX_SEQ, max_cache=MAX_CACHE)
    found: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        report = from_torch(step, args, directory / "rlx", dynamic_shapes=dynamic, per_node=False, threads=threads)
        found.update(ok=report.ok, summary=report.summary(), convert_s=time.perf_counter() - start)
        try:
            torch.onnx.export(step, args, str(directory / "decode.onnx"), dynamo=True, dynamic_shapes=dynamic)
        except Exception as e:  # any failure of the exporter is the reason ORT is n/a
            found["onnx_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    (directory / "convert.json").write_text(json.dumps(found))


def _rlx(model: Any, bucket: int | None = None) -> Runtime:
    """The bundle (a BundleModel) run by `generate.Decoder` with `bucket` (default: 128-slot buckets)."""
    from rlx_torch_import.decode.generate import Decoder, DecodeState, prefill

    decoder = Decoder(model, bucket=bucket)

    def start(prompt: np.ndarray) -> tuple[Any, np.ndarray]:
        state = decoder.start(prompt.shape[0])
        return state, prefill(decoder, state, prompt)

    def copy(s: DecodeState) -> DecodeState:
        return s.copy()

    return Runtime(start, decoder.step, copy, lambda: decoder.model.compiles)


def _eager(threads: int) -> Runtime:
    import torch
    import transformers

    torch.set_num_threads(threads)
    lm = _lm()

    def run(cache: Any, ids: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return lm(input_ids=torch.from_numpy(ids), cache=cache, use_cache=True).logits.numpy()

    def start(prompt: np.ndarray) -> tuple[Any, np.ndarray]:
        cache = transformers.DynamicCache(config=lm.config)
        return cache, run(cache, prompt)

    def copy(cache: Any) -> Any:
        pairs = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        return transformers.DynamicCache(ddp_cache_data=pairs, config=lm.config)

    return Runtime(start, run, copy)


def _ort(directory: Path, threads: int) -> Runtime:
    import importlib

    ort = importlib.import_module("onnxruntime")

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(directory / "decode.onnx"), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    empty = [[d if isinstance(d, int) else 0 for d in i.shape] for i in session.get_inputs()[4:]]  # S = 0

    def run(state: list[Any], ids: np.ndarray) -> np.ndarray:
        caches, length = state[0], state[1]
        positions = np.arange(length, length + ids.shape[1], dtype=np.int64)[None, :]
        masks = [np.ones(ids.shape, np.int64), np.ones((ids.shape[0], length), np.int64)]  # no padding
        feed = [ids.astype(np.int64), positions, *masks, *caches]
        out = session.run(None, dict(zip(names, feed, strict=True)))
        # the step returns this step's keys/values: the exact cache grows by them (axis 2)
        state[0] = [np.concatenate([c, new], axis=2) for c, new in zip(caches, out[1:], strict=True)]
        state[1] = length + ids.shape[1]
        return out[0]

    def start(prompt: np.ndarray) -> tuple[Any, np.ndarray]:
        state: list[Any] = [[np.zeros(shape, np.float32) for shape in empty], 0]
        return state, run(state, prompt)

    return Runtime(start, run, lambda s: [list(s[0]), s[1]])


class Session:
    """One runtime in its worker process: the prompt and the prefilled caches, and one timed prefill or
    decode pass per request; the first decode pass at each length keeps its tokens and logits."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.prompt = _prompt(PROMPT)
        self.arrays: dict[str, np.ndarray] = {"prefill_logits": rt.prefill(self.prompt)[1]}
        self.states = {}
        for length in CACHE_LENGTHS:
            state, logits = rt.prefill(_prompt(length))
            self.states[length] = (state, np.argmax(logits[:, -1], axis=-1))

    def prefill_ms(self) -> float:
        start = time.perf_counter()
        self.rt.prefill(self.prompt)
        return (time.perf_counter() - start) * 1e3

    def decode(self, length: int) -> dict[str, float]:
        """STEPS greedy steps from the cache of `length` tokens: tokens/s and the bindings compiled."""
        state, token = self.states[length]
        state, tokens, rows = self.rt.copy(state), [token], []
        compiled = self.rt.compiles()
        start = time.perf_counter()
        for _ in range(STEPS):
            last = self.rt.step(state, token[:, None])[:, -1]
            token = np.argmax(last, axis=-1)
            tokens.append(token)
            rows.append(last)
        rate = STEPS / (time.perf_counter() - start)
        if f"tokens_{length}" not in self.arrays:
            self.arrays[f"tokens_{length}"] = np.concatenate(tokens)
            self.arrays[f"logits_{length}"] = np.stack([np.asarray(r, np.float32)[0] for r in rows])
        return {"tok_s": rate, "compiles": self.rt.compiles() - compiled}


def _exact(model: Any) -> dict[str, float]:
    """RLX without padding (bucket 1): tokens/s over EXACT_STEPS steps, each a new binding, at each length."""
    rt = _rlx(model, bucket=1)
    found = {}
    for length in CACHE_LENGTHS:
        state, logits = rt.prefill(_prompt(length))
        token = np.argmax(logits[:, -1], axis=-1)
        start = time.perf_counter()
        for _ in range(EXACT_STEPS):
            token = np.argmax(rt.step(state, token[:, None])[:, -1], axis=-1)
        found[str(length)] = EXACT_STEPS / (time.perf_counter() - start)
    return found


_MARK = "@@decode "  # a worker's replies on stdout start with it (libraries may print there too)


def _reply(found: dict[str, Any]) -> None:
    print(_MARK + json.dumps(found), flush=True)


def worker(which: str, directory: Path, threads: int) -> None:
    """Serve one runtime: set up (replying `{}` when ready), then answer one JSON request per stdin line:
    prefill, decode (length), exact (RLX only), save (path: the parity arrays as .npz), exit."""
    model = None
    if which == "rlx":
        from rlx_torch_import.bundle.model import BundleModel

        # 5 bindings take turns (the 128-token prefill, two buckets per cache length): all kept compiled
        model = BundleModel(directory / "rlx" / "bundle", threads=threads, binding_cache=8)
        rt = _rlx(model)
    else:
        rt = _eager(threads) if which == "eager" else _ort(directory, threads)
    session = Session(rt)
    _reply({})
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "prefill":
            _reply({"ms": session.prefill_ms()})
        elif req["op"] == "decode":
            _reply(session.decode(int(req["length"])))
        elif req["op"] == "exact":
            _reply(_exact(model))
        elif req["op"] == "save":
            save: Any = np.savez  # numpy's stub takes no **arrays of a dict
            save(req["path"], **session.arrays)
            _reply({})
        else:
            break


# ---------------------------------------------------------------- parent


def _env(threads: int) -> dict[str, str]:
    """A child's environment: the repository on PYTHONPATH, RLX's pool at `threads`, and no OpenBLAS core
    type this process chose itself (the child chooses again)."""
    env = child_env()
    if rlx_config.describe().get("openblas_coretype_chosen_by") == "rlx-torch-import":
        env.pop("OPENBLAS_CORETYPE", None)
    env["RLX_WORKERS"] = str(threads)
    return env


def _child(args: list[str], threads: int, timeout: float = 1800) -> str | None:
    """Run `python -m tools.bench.decode ARGS`; None when it succeeded, else the last line it printed."""
    cmd = [sys.executable, "-m", "tools.bench.decode", *args, "--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(threads), check=False, timeout=timeout)
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit {done.returncode}"


class _Worker:
    """A `python -m tools.bench.decode --worker RUNTIME DIR` process, asked one request at a time."""

    def __init__(self, which: str, directory: Path, threads: int) -> None:
        self.path = directory / f"{which}.log"
        self.log = self.path.open("w")
        cmd = [sys.executable, "-m", "tools.bench.decode", "--worker", which, str(directory), "--threads", str(threads)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=_env(threads)
        )
        if self.proc.stdin is None or self.proc.stdout is None:  # never: both are pipes
            raise RuntimeError("the worker has no pipes")
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.read()  # ready

    def read(self) -> dict[str, Any]:
        for line in self.stdout:
            if line.startswith(_MARK):
                found: dict[str, Any] = json.loads(line[len(_MARK) :])
                return found
        lines = [line for line in self.path.read_text().splitlines() if line.strip()]
        raise RuntimeError(lines[-1][:300] if lines else f"the worker exited with {self.proc.wait()}")

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        self.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.stdin.write(json.dumps({"op": "exit"}) + "\n")
            self.stdin.close()
        self.proc.wait(timeout=60)
        self.log.close()


def _interleaved(workers: dict[str, _Worker], runs: int) -> dict[str, dict[str, Any]]:
    """A first (warm-up) pass of each runtime, then `runs` rounds, each runtime in turn within a round (a
    burst of load from elsewhere falls on all of them): prefill ms and decode tokens/s per cache length."""
    found: dict[str, dict[str, Any]] = {w: {"prefill": [], "decode": {}, "warm_compiles": 0} for w in workers}
    for which, w in workers.items():
        for length in CACHE_LENGTHS:
            found[which]["decode"][str(length)] = {"first": w.ask("decode", length=length)["tok_s"], "rates": []}
        w.ask("prefill")  # warm-up
    for _ in range(runs):
        for which, w in workers.items():
            time.sleep(0.2)  # the last runtime's spinning threads settle
            found[which]["prefill"].append(w.ask("prefill")["ms"])
            for length in CACHE_LENGTHS:
                got = w.ask("decode", length=length)
                found[which]["decode"][str(length)]["rates"].append(got["tok_s"])
                found[which]["warm_compiles"] += got["compiles"]
    for f in found.values():
        f["prefill_ms"] = statistics.median(f["prefill"])
        for d in f["decode"].values():
            d["median"] = statistics.median(d["rates"])
    return found


def decode_section(threads: int, runs: int) -> list[str]:
    """The decode tables as markdown lines: converted once, each runtime served by its own process."""
    with tempfile.TemporaryDirectory(prefix="rti-decode-") as tmp:
        directory = Path(tmp)
        loads = [os.getloadavg()[0]]
        failed = _child(["--convert", tmp], threads)
        if failed:
            return [f"The decode step could not be converted: {failed}"]
        conv = json.loads((directory / "convert.json").read_text())
        why: dict[str, str] = {}
        if "onnx_error" in conv:
            why["ort"] = f"torch.onnx.export(dynamo=True) failed: {conv['onnx_error']}"
        workers: dict[str, _Worker] = {}
        try:
            for which in (w for w in RUNTIMES if w not in why):
                try:
                    workers[which] = _Worker(which, directory, threads)
                except RuntimeError as e:
                    why[which] = str(e)
            results = _interleaved(workers, runs)
            if "rlx" in workers:
                results["rlx"]["exact"] = workers["rlx"].ask("exact")
            arrays = {}
            for which, w in workers.items():
                w.ask("save", path=str(directory / f"{which}.npz"))
                with np.load(directory / f"{which}.npz") as npz:
                    arrays[which] = {k: npz[k] for k in npz.files}
        finally:
            for w in workers.values():
                w.close()
        loads.append(os.getloadavg()[0])
        return _render(conv, results, arrays, why, threads, runs, loads)


def _parity(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> str:
    """Tokens equal and logits within the float32 budget, against eager, per cache length and for the prefill."""
    from rlx_torch_import.verify.compare import compare_output

    pre = compare_output("prefill", got["prefill_logits"], want["prefill_logits"], "float32", "float32")
    parts = [f"prefill logits {'ok' if pre.ok else 'FAIL'} (max abs {pre.max_abs_error:.2g})"]
    for length in CACHE_LENGTHS:
        tokens = got[f"tokens_{length}"] == want[f"tokens_{length}"]
        same = int(np.argmin(tokens)) if not tokens.all() else len(tokens)
        rows = [  # logits compared while the tokens fed were the same
            compare_output("step", g, w, "float32", "float32")
            for g, w in zip(got[f"logits_{length}"][:same], want[f"logits_{length}"][:same], strict=True)
        ]
        worst = max((r.max_abs_error for r in rows), default=0.0)
        parts.append(
            f"L={length}: tokens {int(tokens.sum())}/{len(tokens)} equal, logits {sum(r.ok for r in rows)}/{len(rows)} "
            f"within budget (max abs {worst:.2g})"
        )
    return "; ".join(parts)


def _cell(results: dict[str, dict[str, Any]], which: str, length: int) -> str:
    """Median tokens/s with the passes' range: `10.2 (9.8-10.5)`."""
    if which not in results:
        return "n/a"
    found = results[which]["decode"][str(length)]
    return f"{found['median']:.1f} ({min(found['rates']):.1f}-{max(found['rates']):.1f})"


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}{TIMES}"


def _decode_rows(results: dict[str, dict[str, Any]]) -> tuple[list[str], bool]:
    """The decode table, and whether RLX's tokens/s reached eager's at every cache length."""
    lines = [
        "| cache len | RLX tok/s | eager tok/s | ORT tok/s | RLX/eager | ORT/eager | RLX first pass tok/s "
        "| RLX bucket 1 tok/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    met = "rlx" in results and "eager" in results
    for length in CACHE_LENGTHS:
        rlx, eager, ort = (results[w]["decode"][str(length)]["median"] if w in results else None for w in RUNTIMES)
        hit = rlx is not None and eager is not None and rlx >= eager
        met = met and hit
        mark = "" if rlx is None or eager is None else " ✓" if hit else " ✗"
        found = results.get("rlx")
        first = f"{found['decode'][str(length)]['first']:.1f}" if found else "n/a"
        exact = f"{found['exact'][str(length)]:.2f}" if found else "n/a"
        cells = " | ".join(_cell(results, w, length) for w in RUNTIMES)
        lines.append(f"| {length} | {cells} | {_ratio(rlx, eager)}{mark} | {_ratio(ort, eager)} | {first} | {exact} |")
    return lines, met


def _noisy(results: dict[str, dict[str, Any]]) -> list[str]:
    """A note per runtime and cache length whose passes ranged over more than NOISY times (other processes
    took the cores during some of them: the medians and the ratios built on them are not reliable)."""
    return [
        f"- noisy: {which} at cache length {length} ranged {min(d['rates']):.1f}-{max(d['rates']):.1f} tok/s over "
        "its passes (other processes took the cores during some); its median and ratios are not reliable"
        for which, found in results.items()
        for length, d in found["decode"].items()
        if max(d["rates"]) > NOISY * min(d["rates"])
    ]


def _render(
    conv: dict[str, Any],
    results: dict[str, dict[str, Any]],
    arrays: dict[str, dict[str, np.ndarray]],
    why: dict[str, str],
    threads: int,
    runs: int,
    loads: list[float],
) -> list[str]:
    """The decode and prefill tables, the target line, parity and notes."""
    decode, met = _decode_rows(results)
    pre = {w: results[w]["prefill_ms"] if w in results else None for w in RUNTIMES}
    shown = {w: "n/a" if v is None else f"{v:.1f}" for w, v in pre.items()}
    lines = [
        f"Benchmark Llama as a decode step (6 layers, d=512, 8/4 heads, vocab 32000), batch 1, {threads} threads "
        f"everywhere; conversion {'ok' if conv['ok'] else 'FAILED'} in {conv['convert_s']:.0f} s (sweep verified).",
        "",
        *decode,
        "",
        "| prefill | RLX ms | eager ms | ORT ms | RLX/eager |",
        "|---|---|---|---|---|",
        f"| {PROMPT} tokens, empty cache | {shown['rlx']} | {shown['eager']} | {shown['ort']} "
        f"| {_ratio(pre['rlx'], pre['eager'])} |",
        "",
        f"target: decode tokens/s ≥ eager at both cache lengths {'✓' if met else '✗'}",
        "",
    ]
    for which in ("rlx", "ort"):
        if which in arrays and "eager" in arrays:
            label = "ONNX Runtime" if which == "ort" else "RLX"
            lines.append(f"- parity {label} vs eager: {_parity(arrays[which], arrays['eager'])}")
    lines += [f"- {which}: n/a ({reason})" for which, reason in why.items()]
    lines += _noisy(results)
    lines.append(
        f"- tokens/s: median (range) of {runs} passes of {STEPS} steps after a first pass, the runtimes taking "
        f"turns pass by pass, each in its own process (RLX's first pass "
        f"compiles the bindings its 128-slot buckets need; bindings compiled during the passes after it: "
        f"{results['rlx']['warm_compiles'] if 'rlx' in results else 'n/a'}); RLX bucket 1: the exact "
        f"cache, {EXACT_STEPS} steps, each a new binding compiled; prefill: median of {runs} after one warm-up; "
        f"1-minute load average {loads[0]:.2f} before, {loads[1]:.2f} after"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.decode", description=__doc__.splitlines()[0])
    parser.add_argument("--convert", metavar="DIR", help=argparse.SUPPRESS)  # child modes
    parser.add_argument("--worker", nargs=2, metavar=("RUNTIME", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=None, help="threads for every runtime (default: every core)")
    parser.add_argument("--runs", type=int, default=5, help="timed passes after the first (median; default 5)")
    args = parser.parse_args(argv)
    threads = rlx_config.set_threads(args.threads)
    if args.convert:
        convert(Path(args.convert), threads)
    elif args.worker:
        worker(args.worker[0], Path(args.worker[1]), threads)
    else:
        print("\n".join(decode_section(threads, args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
