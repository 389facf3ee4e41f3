"""The ONNX front end on real exported models: a developer measurement, not a test.

Usage::

    python -m tools.onnx_models [--only NAME,...] [--exporter dynamo|legacy|both]
                                [--out bench/onnx-models.md] [--skip-big] [--timeout S]
                                [--cache DIR] [--work DIR] [--refresh] [--list]
    python -m tools.onnx_models --render ~/.cache/rlx-torch-import/onnx-models/last-run.json

Each model (`models.py`: an MLP, a small CNN, nn.TransformerEncoderLayer, torchvision resnet18,
mobilenet_v3_small, efficientnet_b0, squeezenet1_0 and vit_b_16 (left out by `--skip-big`), and
Hugging Face BertModel, LlamaForCausalLM and GPT2Model from small configs, each with eager and
with SDPA attention; random weights, nothing downloaded) is exported with
`torch.onnx.export(dynamo=True)` and with the legacy TorchScript exporter (`dynamo=False`,
opset 17) into a cache (`export.py`, reused while the versions that made it are unchanged), then
converted with `rlx_torch_import.from_onnx` on the export's example inputs (verified against ONNX
Runtime, per-node parity on), and the bundle's outputs are compared with eager PyTorch's
(`measure.py`). Where `from_onnx`'s bundle did not come from RLX's ONNX importer (its fallback,
the torch route, made it, or nothing did), the importer route is run alone too
(`route="importer"`): its gap or failure is what the table's reason column says.

Every pair runs in its own child process (`--timeout` seconds at most), so a crash or a hang is
one row. The table (model, exporter, ONNX nodes, verdict, route, max abs error vs ORT, vs eager,
time, gap or failure reason) is printed and written, with a header (date, versions, load) and
per-pair details, to `--out` (`table.py`); the rows are saved in the cache folder
(`last-run.json`), and `--render` writes `--out` from them again without measuring.
"""
