"""`python -m tools.onnx_coverage`: see tools/onnx_coverage/__init__.py."""

import sys

from tools.onnx_coverage.cli import main

if __name__ == "__main__":  # not when a spawned worker imports this module
    sys.exit(main())
