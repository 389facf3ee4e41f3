import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "ops"))  # the op samples' helpers (_samples.py)
sys.path.insert(0, str(Path(__file__).parent))  # the tests' own modules: `from models import make`
sys.path.insert(2, str(Path(__file__).parent.parent))  # the repository root: `from tools import opsdoc`
