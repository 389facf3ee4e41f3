"""The ONNX front end: an `.onnx` file (external data included) lands on the same bundle, crate and
report as `from_torch`, through RLX's own importer (`rlx-onnx-import`, the core's `onnx` feature).

`source` reads the file and names its inputs and symbolic dims; `bind` gives every dim a size and
makes the inputs; `prepass` writes the static model the importer reads; `gaps` lists everything the
importer cannot take, all at once; `reference` runs ONNX Runtime (graph optimizations off) for the
reference and the per-node values; `program` turns the importer's graph into our program;
`driver` writes the conversion folder. The reasons for this route: docs/design.md, decision (ah)."""
