"""Parity of RLX results against PyTorch's eager outputs: `compare` (one output's verdict, by the budgets of
the package's `budgets.py`, a leaf the crate writer also reads), `run` (the bundle at every point), `nodes`
(per-node parity), `diagnose`, `report` and its renderers. Import the module you need: this package
imports none of them."""
