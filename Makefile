# Common tasks. `make demo` and `make test` set everything up on a fresh machine.
SHELL := /bin/bash
CACHE := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rlx-torch-import
export CARGO_TARGET_DIR ?= $(CACHE)/target
VENV := $(or $(RTI_VENV),$(CACHE)/venv)
PY := $(VENV)/bin/python

.PHONY: setup demo examples test lint fmt docs bench golden

setup:
	@scripts/setup.sh >/dev/null

## convert + verify the bundled example model
demo: setup
	$(VENV)/bin/rlx-torch-import examples/mlp.py -o out/mlp

## run every example in examples/ (one line each; not part of `make test`: tests/test_examples.py runs them)
examples: setup
	$(PY) examples/run_all.py

## the whole test suite (lint, Rust core tests, pytest)
test: setup lint
	cargo test --release --quiet
	$(PY) -m pytest -q

lint:
	$(VENV)/bin/ruff check python tests examples scripts tools
	$(VENV)/bin/ruff format --check python tests examples scripts tools
	$(PY) -m mypy
	$(PY) -m mypy.stubtest rlx_torch_import._core --allowlist stubtest-allowlist.txt  # _core.pyi against the built core
	cargo fmt --check
	cargo clippy --release --quiet --features python -- -D warnings
	cargo clippy --release --quiet --no-default-features --features python -- -D warnings  # RTI_CUDA=0's build
	$(PY) -m tools.opsdoc --check
	$(PY) -m tools.errors_doc --check

fmt:
	$(VENV)/bin/ruff format python tests examples scripts tools
	$(VENV)/bin/ruff check --fix python tests examples scripts tools
	cargo fmt

## regenerate docs/supported-ops.md (and README.md's op count), docs/rlx-defects.md and docs/errors.md
docs: setup
	$(PY) -m tools.opsdoc --write
	$(PY) -m tools.errors_doc --write

## accept the generated Rust as it is now: rewrite the golden crates (tests/golden/<style>/) and the
## inline snapshots of printed ops (tests/test_golden_ops.py); review the diff before committing
golden: setup
	RTI_UPDATE_GOLDEN=1 EXPECTTEST_ACCEPT=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_golden_crates.py tests/test_golden_ops.py
	rm -f tests/test_golden_ops.py.bak  # expecttest's copy of the file before its edit
	$(VENV)/bin/ruff format tests/test_golden_ops.py

## RLX vs PyTorch eager vs ONNX Runtime vs OpenVINO, BLAS providers, conversion cost and CLI wall time,
## LLM decode, peak memory -> bench/results.md
bench: setup
	$(PY) -m tools.bench
