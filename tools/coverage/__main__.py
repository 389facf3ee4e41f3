"""`python -m tools.coverage`: see tools/coverage/__init__.py."""

import sys

from tools.coverage.cli import main

if __name__ == "__main__":  # not when a spawned worker imports this module
    sys.exit(main())
