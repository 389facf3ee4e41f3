"""The crate writer: `rlx-<name>/`, a standalone Rust crate that builds, runs and checks the model.

The crate is printed from the same lowered program the bundle is built from.
`graph` and `flow` share one printer (`graph`), which prints each RLX op
through the Rust core; `tensor` uses the rlx-tensor DSL (`tensor`) and
refuses up front any op the DSL cannot express (`style`). Every fixed line of
Rust, TOML and Markdown (weights loading, boundary dtypes, parity budgets, the
file frames) lives in `templates/`; `sources` fills them, `write` writes them.
"""
