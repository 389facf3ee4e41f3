"""The op families: one module per family, one decorated function per ATen op (`lower/families.py` lists them)."""
