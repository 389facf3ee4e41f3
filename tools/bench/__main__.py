"""`python -m tools.bench`: see tools/bench/__init__.py."""

import sys

from tools.bench.cli import main

sys.exit(main())
