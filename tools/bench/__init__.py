"""Benchmark: RLX against PyTorch eager, ONNX Runtime and OpenVINO, conversion cost, and peak memory.

Usage::

    make bench                                  (= python -m tools.bench)
    python -m tools.bench --models resnet18,llama --runs 50
    python -m tools.bench --list     (the model names)

Options: `--models a,b` (default: all), `--runs N` timed runs (default 20) after
`--warmup N` untimed ones (default 3), `--threads N` (default: every core this
process may use), `--out PATH` (default bench/results.md), `--no-onnx` (skip
ONNX Runtime), `--no-openvino` (skip OpenVINO), `--no-kernels` (skip the
RLX-kernels-alone table), `--no-dynamic` (skip the dynamic-bundle table,
`dynamic_bench.py`), `--no-per-node` (skip the per-node parity cost table,
`verify_bench.py`), `--no-threads` (skip the 4-threads-vs-1 table,
`thread_bench.py`), `--no-blas` (skip the BLAS provider table, `blas_bench.py`),
`--no-decode` (skip the LLM decode table, `bench/decode.py`), `--no-cli-wall`
(skip the fresh-process CLI wall time table, `bench/cli_wall.py`), `--no-quantized` (skip the
int8/int4 table, `bench/quantized.py`), `--timeout S`
per model, `--list` (the model names).

Every model runs in a fresh child process (`--one NAME --json PATH`), so memory
peaks and thread pools never leak from one model into the next; this process
only collects the children's JSON, prints the table, and writes `--out` (the
same table plus the configuration, each model's conversion phases and RLX
kernel profile, and the footnotes). In a child, RLX, PyTorch, ONNX Runtime and
OpenVINO get the same inputs and the same thread count, and are timed the same
way; the peer runtimes (tools/bench/peers.py) are built and timed one after the
other, each released before the next.

Columns (latencies in milliseconds, medians of `--runs` runs after warm-up;
ratios are plain factors: 2.00 = twice the time, below 1 = faster):

- **weights MiB**: bytes of the model's state_dict tensors (parameters and buffers).
- **parity**: `ok` when the RLX bundle verified against PyTorch (`report.ok`), `FAIL`
  otherwise, `error` when conversion raised (footnote).
- **BLAS**: the BLAS provider RLX's sgemm calls went to in that child (`rlx_config.blas()`:
  `mkl`, `openblas`, `system`; docs/design.md decision (ai)); the "BLAS provider" section
  below times every provider side by side.
- **RLX ms**: `BundleModel(bundle, threads=T).run(inputs)`, inputs as numpy arrays.
- **eager ms**: the PyTorch module under `torch.no_grad()` with `torch.set_num_threads(T)`.
- **ORT ms**: ONNX Runtime (CPUExecutionProvider, `intra_op_num_threads=T`,
  `inter_op_num_threads=1`) on `torch.onnx.export(..., dynamo=True)`; `n/a` with a
  footnote when the export or the session fails; a footnote after the number when its
  output differs from eager's (max abs error above 1e-3 of eager's largest |value|).
- **OV ms**: OpenVINO on its own PyTorch front-end, `ov.convert_model(model,
  example_input=inputs)` (a TorchScript trace; where that conversion fails, as on an
  operation it has no rule for, `ov.convert_model` of `torch.export.export(model, inputs)`,
  with a footnote saying so and why), compiled for "CPU" with
  `INFERENCE_PRECISION_HINT` f32, `INFERENCE_NUM_THREADS=T` and `PERFORMANCE_HINT`
  LATENCY (one stream), run through one infer request; the configuration lines show
  what the compiled model reports back. `n/a` with a footnote when the conversion or
  compilation fails, or when its output differs from eager's (same test as ORT: such
  a run is not timed).
- **RLX/eager**, **ORT/eager**, **OV/eager**, **RLX/ORT**, **RLX/OV**: latency ratios
  (below 1 = faster). OpenVINO has no target; it shows where a tuned CPU runtime is.
- Each model's section after the table gives ORT's and OpenVINO's max abs error
  against eager and their export-and-compile time.
- **export s**: `torch.export` time inside `rti.from_torch` (seconds).
- **ours s** / **ours/export**: our own conversion stages (every phase of
  `report.timings_s` except "export", "reference" and "verify": capture, write
  torch-ir, read and check, lower, bundle, per-node parity when it runs by default,
  write reports, auto-decompose rounds) in seconds, and as a percentage of the
  export time.
- **verify s**: running the bundle once and comparing it with PyTorch.
- **peak RSS/weights**: (peak resident memory during conversion - resident memory
  just before it) / weight bytes.
- **RLX nodes**, **ATen nodes**: nodes we emitted (bundle meta.json `op_histogram`)
  and source ATen calls lowered (`aten_histogram`).
- **ATen on fused**: distinct source ATen nodes that produced at least one RLX node
  of a fused kind (`FUSED_OP_KINDS`).
- **top RLX kernels**: the three kernel kinds that take the most time in RLX's
  own per-thunk profiler (`BundleModel.profile`), as a share of the profiled time;
  for models too fast for its 0.1 ms resolution, their call counts (`xN`).
- **peak RSS/weights** includes `torch.export`'s own ~190 MiB, so models of a few
  MiB of weights cannot meet the 1.5x target whatever the converter does.

After the table: the RLX kernels alone against PyTorch (`kernel_bench.py`), the
gaps that remain RLX's own.

A cell that misses its target (`TARGETS`) is marked ✗.

Latencies need a quiet machine. A child measures how many cores other processes
kept busy while each runtime was timed (machine-wide busy time from /proc/stat
minus its own), and a row gets a footnote when that exceeds `BUSY_OTHERS`, or
when a median is more than `NOISY` times the fastest run. PyTorch's OpenMP
kernels suffer most when another process takes a core (10x and more on two cores).
"""
