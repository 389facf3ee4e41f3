"""`python -m tools.onnx_models`: see tools/onnx_models/__init__.py."""

import sys

from tools.onnx_models.cli import main

if __name__ == "__main__":
    sys.exit(main())
