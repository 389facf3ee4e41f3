"""Everything RLX-specific: exact arithmetic, the defect catalogue and its probes, CUDA, the workaround layer."""
