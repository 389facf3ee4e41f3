"""Decoding with a decode-step bundle: `convention` (which inputs and outputs are the ids, positions,
masks, logits and caches, checked against meta.json), `state` (the caches between steps, Hugging
Face's padding rules), `generate` (the numpy runtime loop: `Decoder`, `prefill`, `generate`) and
`hf_export` (a Hugging Face causal LM exported as a decode step; torch). Import the module you need:
this package imports none of them, so running a bundle never loads torch."""
