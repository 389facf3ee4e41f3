"""The RLX bundle: its format (file names, version, meta.json), its writer, and `BundleModel`, which runs it."""
