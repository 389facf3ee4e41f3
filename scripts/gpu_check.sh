#!/usr/bin/env bash
# The GPU check: verify five bundles on RLX's CUDA backend and time them against RLX on the CPU.
#
# Runs on the GPU machine (Python 3.12 with torch, no Rust) from a checkout whose .gpu/ folder was
# made here by scripts/gpu_prepare.sh: the core built with CUDA for Python 3.12, libopenblas with
# its runtime libraries, and five conversions verified on the CPU. Prints, per model, one parity
# line (`rlx-torch-import verify OUT --device cuda`: the same budgets and report as on the CPU),
# the median latency on the GPU and the CPU, and the error and latency with RLX's default CUDA
# math (TF32) for comparison. Ends in under 8 minutes; exit 0 when every model passes on CUDA.
#
#   scripts/gpu_check.sh                 # on the GPU machine
#   scripts/gpu_check.sh --device cpu    # dry run of the same steps on the CPU (any machine)
set -uo pipefail
cd "$(dirname "$0")/.."
GPU=.gpu
if [ ! -d "$GPU/models" ]; then
    echo "error: $GPU/models is missing: run scripts/gpu_prepare.sh first and carry .gpu" >&2
    exit 2
fi
PY="${GPU_CHECK_PYTHON:-python3}"
SUFFIX="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
if [ -f "$GPU/core/_core$SUFFIX.xz" ]; then  # the core built for this Python (gpu_prepare.sh)
    LIB=/tmp/rti-gpu-lib
    mkdir -p "$LIB"
    "$PY" - "$GPU" "$LIB" <<'PY' || exit 2
import lzma, pathlib, shutil, sys
gpu, lib = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for packed in sorted((gpu / "lib").glob("*.xz")):
    with lzma.open(packed) as src, open(lib / packed.stem, "wb") as dst:
        shutil.copyfileobj(src, dst)
for packed in (gpu / "core").glob("*.so.xz"):
    with lzma.open(packed) as src, open(pathlib.Path("python/rlx_torch_import") / packed.stem, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
    export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
export RLX_CUDA_PTX_CACHE="${RLX_CUDA_PTX_CACHE:-/tmp/rti-ptx-cache}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
exec "$PY" scripts/gpu_check.py "$GPU/models" "$@"
