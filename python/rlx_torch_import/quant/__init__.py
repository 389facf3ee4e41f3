"""Weight-only quantization at conversion (`--quantize int8 | int4`): `schemes` (the schemes, their block
layouts, packing and dequantizing, torch-ir's `quantize` record) and `report` (the report's quantization
section). The front end's capture step (`frontend/torch/quantize.py`), the lowering pass that packs weights
(`lower/passes/quantize_weights.py`) and PT2E's quantized ops (`lower/ops/quantized.py`) stay with their
stages and import from here. This package imports neither module: reading the schemes loads no report."""
