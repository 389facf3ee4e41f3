"""The package's version, in a module of its own: modules that record it import it from here, not
from the package's `__init__` (which imports the whole API, so that would be an import cycle)."""

__version__ = "0.1.0"
