"""Makes `python -m pytest` work from the repository root and from code/ alike.

The lab's modules live in code/; the milestone runner lives in code/harness/plugin.py.
"""

import sys
from pathlib import Path

CODE_DIR = Path(__file__).resolve().parent / "code"
sys.path.insert(0, str(CODE_DIR))

pytest_plugins = ["harness.plugin"]
