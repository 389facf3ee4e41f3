"""The ONNX front end: an `.onnx` file (external data included) lands on the same bundle, crate and
report as `from_torch`, verified against ONNX Runtime (docs/onnx.md; the reasons: docs/design.md (ah)).

Importer route (RLX's own `rlx-onnx-import`, the core's `onnx` feature): `source` reads the file and
names its inputs and symbolic dims; `bind` gives every dim a size and makes the inputs; `gaps` lists
everything the importer cannot take, all at once; `prepass` writes the static model the importer
reads (`operands` bakes in the inputs that fix shapes, `rewrite` rewrites forms it lacks, `expand`
inlines ONNX's own function definitions); `program` replays the importer's graph through our RLX
defect layer; `reference` runs ONNX Runtime (graph optimizations off); `driver` writes the conversion
folder; `nodes` is the intermediates oracle per-node parity reads (ONNX Runtime's values and the importer's)
and `repro` the `diagnose` repro folder; `door` plugs them into the one back half and verifier (`door.py`).
Torch route (`torch_route/`): the graph translated into a torch module for the PyTorch path, where the
importer cannot. `convert` chooses the route (`from_onnx`'s steps) and `cli` is `rlx-torch-import onnx`."""
