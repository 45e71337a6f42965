"""Make ``tests/factories.py`` importable as ``factories`` under pytest's importlib mode.

``--import-mode=importlib`` leaves ``sys.path`` alone, so the shared factories module next to the
root ``conftest.py`` is not importable by name; a ``pythonpath = ["tests"]`` entry in the pytest
configuration would make this file unnecessary.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
