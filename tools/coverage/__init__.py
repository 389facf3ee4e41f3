"""Measure Core ATen coverage in every dtype: OpInfo samples, one op per module, converted and verified.

    python -m tools.coverage [--out docs] [--dtypes float32,int64,...] [--samples-per-op 3]
        [--samples-per-dtype 1] [--ops add,mul] [--extra-samples FILE.py] [--jobs N] [--sample-timeout S]
    python -m tools.coverage --render-only [--out docs]   # coverage.md again from coverage.json
    pytest -m opinfo tests/test_opinfo.py [-k NAME]       # the same samples as tests, against coverage.json

For each PyTorch OpInfo entry (needs the `expecttest` package) and each dtype it supports on CPU among
float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8 and bool (`--dtypes` narrows
them), the first samples (`--samples-per-op` in float32, `--samples-per-dtype` in every other dtype;
generated with a fixed seed, index-typed arguments such as gather's index as OpInfo makes them) are
wrapped in a one-op module, exported, converted with the default automatic decomposition fallback,
and verified against eager PyTorch. Samples whose generation or eager run raises, or whose eager
result is entirely NaN (a verdict would prove nothing), are skipped and counted (PyTorch's limits,
not ours). Project samples (`--extra-samples`) run once, in their own
dtypes (a sample's dtype is its first input's).

Each sample is converted at the `core` level, and also at the `aten` level when its aten-level graph
holds Core ATen ops its core-level graph does not: torch's own Core ATen decomposition table
decomposes some ops tagged core (reflection/replication pads, avg_pool1d, fill.Scalar, squeeze.dim,
var.dim, ...), so no `core` export can contain them. Each Core ATen op (ops tagged `torch.Tag.core`)
gets, per dtype and over all dtypes, the best status of the runs that exercised it, and the level
that verdict came from. An op that a sample's graph holds beside an unsupported op is `blocked` by
that sample (not reached), not unsupported itself. Ops that can never verify natively here carry
their reason (`NOT_NATIVE`).

The work runs on a `concurrent.futures.ProcessPoolExecutor` of `--jobs` spawned worker processes
(default: one per CPU, one thread each); a unit of work is one sample, or one (OpInfo, dtype)'s
sample generation. A sample that kills its worker (RLX can abort the process on memory corruption)
does not stop the run: the broken pool is replaced, the samples that were in flight re-run at the
end, each alone in a fresh process, where one that kills it too is recorded as `crashed` with the
process's last words. Each death is listed with the samples that worker ran just before (heap
corruption can surface later than the sample that caused it). A sample running longer than
`--sample-timeout` seconds has its worker killed and is recorded as `timeout`. `--jobs 0` runs
everything in this process instead (no isolation; for debugging and tests).

Writes `coverage.md` (headline, per-dtype summary, Core ATen op x dtype table, every parity
failure, unsupported op x dtype and crash with its reason, every failing sample, worker deaths) and
`coverage.json` (meta; per Core ATen op its best status and per dtype its best status plus the
failing runs of graphs holding that op alone; per sample opinfo, index, dtype, status, reason, ops,
level).

Modules: `samples` (statuses, one sample's conversion), `worker` (units, what a worker does),
`runner` (the pool), `render` (summary and coverage.md), `cli` (the command line).
"""
