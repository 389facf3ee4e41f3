#!/usr/bin/env bash
# Prepare the GPU check (scripts/gpu_check.sh) here, on a machine without a GPU: everything it
# needs goes into .gpu/ (git-ignored), which travels to the GPU machine.
#
#   .gpu/core/_core.cpython-312-x86_64-linux-gnu.so.xz  the Rust core with CUDA, for Python 3.12
#   .gpu/lib/*.xz         libopenblas and its runtime libraries (the core links them)
#   .gpu/models/<name>/   five conversions verified on the CPU here: torch-ir, weights,
#                         reference and bundle (mlp, transformer_block, cnn,
#                         mobilenet_v3_small, llama)
#
#   scripts/gpu_prepare.sh              # then, on the GPU machine: scripts/gpu_check.sh
#   GPU_PYTHON=/path/to/python3.12      # the interpreter to build the core for (default:
#                                       # pyenv's 3.12, else python3.12 on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "[gpu_prepare] $*" >&2; }
# The project's set-up (idempotent; prints the venv it made on its last line), with the shared cargo cache.
VENV="$(scripts/setup.sh | tail -n 1)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rlx-torch-import/target}"

PY312="${GPU_PYTHON:-}"
if [ -z "$PY312" ]; then
    for c in "$HOME"/.pyenv/versions/3.12*/bin/python3.12 "$(command -v python3.12 || true)"; do
        if [ -x "$c" ]; then PY312="$c"; break; fi
    done
fi
if [ -z "$PY312" ]; then
    say "error: no Python 3.12 to build the core for (the GPU machine runs 3.12); set GPU_PYTHON"
    exit 2
fi

rm -rf .gpu
mkdir -p .gpu/core .gpu/lib .gpu/models
say "building the Rust core with CUDA for $("$PY312" -V 2>&1)"
WHEELS="$(mktemp -d)"
"$VENV/bin/maturin" build --release --quiet --auditwheel skip --features extension-module,cuda -i "$PY312" -o "$WHEELS" >&2
python3 - "$WHEELS" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if "/_core." in n and n.endswith(".so"))
    pathlib.Path(".gpu/core", pathlib.Path(name).name).write_bytes(z.read(name))
PY
rm -rf "$WHEELS"

say "packing the libraries the core links (ldd)"
CORE="$(ls .gpu/core/_core.*.so)"
ldd "$CORE" | awk '/=> \// {print $3}' | grep -E 'libopenblas|libgfortran|libquadmath' | while read -r lib; do
    cp -L "$lib" ".gpu/lib/$(basename "$lib")"
done
xz -T0 -6 "$CORE" .gpu/lib/*

say "converting and verifying the five models on the CPU"
"$VENV/bin/python" scripts/gpu_models.py .gpu/models >&2
du -sh .gpu >&2
say "ready: on the GPU machine run scripts/gpu_check.sh (carry .gpu)"
