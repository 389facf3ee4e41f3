"""Parity of RLX results against PyTorch's eager outputs: `budgets` (tolerances, a leaf the crate writer
also reads), `compare` (one output's verdict), `run` (the bundle at every point), `nodes` (per-node
parity), `diagnose`, `report` and its renderers. Import the module you need: this package imports
none of them, so reading the budgets loads nothing else."""
