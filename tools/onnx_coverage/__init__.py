"""Measure the ONNX front end against the ONNX node conformance suite of the pinned onnx wheel.

    python -m tools.onnx_coverage [--jobs N] [--only OPTYPE,...] [--limit N]
        [--out docs/onnx-coverage.md] [--json bench/onnx-coverage.json] [--reuse] [--timeout S]
    python -m tools.onnx_coverage --reuse                 # render the page again from the JSON
    python -m tools.onnx_coverage --reuse --only Gather   # run Gather's cases again, merged into the JSON

A developer tool, not a test. The cases are `onnx.backend.test.case.node.collect_testcases()`
(about 1,900 one-node models, and their `_expanded` function bodies, over about 200 op types, each
with one data set of inputs and expected outputs). A case is in scope when every graph input and
output is a plain tensor of a float (float16/32/64, bfloat16), integer (int8..int64, uint8..uint64)
or bool type; the others (strings, sequences, optionals, float8/float4/int4/int2, ...) are counted
and listed with their reason (`cases.py`).

Each in-scope case runs twice, each run a unit of work in a worker process:

- `rlx` (ours): `from_onnx(model, out, inputs=case inputs, per_node=False, verify=True)`, then the
  bundle (`BundleModel(out/"bundle").run(inputs)`), every output compared with the case's expected
  output by `verify.compare.compare_output` (our budgets): `pass`, `wrong` (an output outside its
  budget, of another shape or dtype, or missing), `unsupported` (UnsupportedOpsError: its gap
  lines) or `error` (any other exception: its type and first line; a timeout; a dead worker). The
  run also records whether our own verification against ONNX Runtime said PASS (`report_ok`): a
  wrong result it called PASS is the one thing that must never happen, counted and listed loudly.
  When ONNX Runtime cannot run the case (ModelLoadError naming it), the case is converted again
  with verify=False and judged against the expected outputs only (noted).
- `ort` (the anchor): ONNX Runtime (CPU provider, graph optimizations off, as our reference runs
  it: `frontend.onnx.reference.session`) on the same inputs, judged by the same compare_output.

Outputs that differ from the expected shape only by size-1 axes (RLX has no rank-0 tensor: ONNX's
[] is [1] in a bundle) are compared at the expected shape, noted.

Workers: a `concurrent.futures.ProcessPoolExecutor` of `--jobs` spawned processes (default 2), one
thread each for RLX, ONNX Runtime and BLAS. A unit past `--timeout` seconds (default 60) has its
worker killed and is recorded `error` (timeout); a worker that dies breaks the pool, which is
replaced; the units it was running re-run alone at the end, and one that kills its process again
is recorded `error` with the process's last words (`runner.py`).

Writes `bench/onnx-coverage.json` (meta: date, versions, run time, the slowest runs, worker deaths;
one line per case: name, op type, `expanded`, and each engine's record: status, reason, detail,
causes, notes; one line per out-of-scope case) and `docs/onnx-coverage.md` from it (`render.py`):
totals (ours vs ONNX Runtime), our failures by kind, the failure causes ranked by cases (with the
op types they hit, whether ONNX Runtime fails those cases too, and examples), a per-op-type table,
every failing case, and the out-of-scope list. The full suite takes about 3-4 minutes on 2 cores
(half a minute of it collecting onnx's cases; each worker's first ~13 s is a warm-up conversion).

Modules: `cases` (collect and classify), `judge` (records, compare with expected), `engines` (ours,
ONNX Runtime), `worker` (a unit in a worker), `runner` (the pool), `render` (the page), `cli`.
"""
