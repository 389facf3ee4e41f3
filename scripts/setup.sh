#!/usr/bin/env bash
# One-time (idempotent) set-up: Debian libopenblas-dev (the system OpenBLAS: the BLAS provider of
# last resort and the way back, RTI_BLAS=system), a venv with pinned torch & tools (MKL and
# OpenBLAS 0.3.34 wheels among them: the providers src/blas.rs loads per CPU), and the Rust core
# built into it with maturin.
#
#   RTI_VENV          venv location   (default ~/.cache/rlx-torch-import/venv)
#   CARGO_TARGET_DIR  shared cargo cache (default ~/.cache/rlx-torch-import/target)
#   RTI_CUDA=0        build the Rust core without RLX's CUDA backend (default: with it; it
#                     needs no CUDA toolkit to build, only the NVIDIA driver where it runs)
#
# Prints the venv path on its last line; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/rlx-torch-import"
VENV="${RTI_VENV:-$CACHE/venv}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
say() { echo "[setup] $*" >&2; }

have_openblas_dev() {  # the linker needs libopenblas.so (the -dev symlink), not just the runtime .so.0
    dpkg -s libopenblas-dev >/dev/null 2>&1 || ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so '
}
if ! have_openblas_dev; then
    say "installing Debian libopenblas-dev (the system OpenBLAS, RLX's fallback BLAS provider)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libopenblas-dev >&2
fi

if ! command -v cargo >/dev/null; then
    say "error: cargo (Rust >= 1.89) is required to build the RLX core; install rustup first"
    exit 2
fi

PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    say "creating venv $VENV"
    "$PY" -m venv "$VENV" >&2
fi
STAMP="$VENV/.rti-requirements.sha256"
WANT="$(sha256sum requirements-dev.txt | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    say "installing pinned Python packages (torch is a large download, done once)"
    "$VENV/bin/pip" install --disable-pip-version-check -q -r requirements-dev.txt >&2
    echo "$WANT" > "$STAMP"
fi

FEATURES=()
if [ "${RTI_CUDA:-1}" = "0" ]; then
    FEATURES=(--no-default-features --features onnx)
    say "building the Rust core without CUDA (RTI_CUDA=0)"
else
    say "building the Rust core (first build of RLX takes a few minutes on 2 cores)"
fi
(
    export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH"
    maturin develop --release --quiet "${FEATURES[@]}" 2>&1 | { grep -v "Requirement already satisfied" || true; } >&2
)
echo "$VENV"
