import sys
from pathlib import Path

# tests/ for models.py and the other shared modules; tests/ops/ for the op samples' helpers (_samples.py)
sys.path.insert(0, str(Path(__file__).parent / "ops"))
sys.path.insert(0, str(Path(__file__).parent))
