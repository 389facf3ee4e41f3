"""aten -> RLX lowering: one module per op family, one decorated function per op.

`registry.py` holds the `@lowers` registry and the `lower()` driver; a lowering sees a `Call`
(`call.py`) and appends RLX nodes with a `Builder` (`builder.py`). The op families are the modules
of `ops/` (listed in `families.py`); everything RLX-specific (exact arithmetic, the defect
catalogue and its probes, CUDA, the workaround layer) is `rlx/`; the conversion-time rewrites
are `passes/`; dynamic dims are generalized by `generalize.py`.
"""

from . import families
from .registry import REGISTRY, lower, try_lower

__all__ = ["REGISTRY", "families", "lower", "try_lower"]
