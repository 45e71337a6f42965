"""Each ORM module, imported alone, names only tables its metadata knows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


MODULES = [
    "db.accounts.models",
    "db.enforcement.models",
    "db.stands.models",
    "db.tracking.models",
    "db.fleet.models",
]


@pytest.mark.parametrize("module", MODULES)
def test_foreign_keys_resolve_when_imported_alone(module: str) -> None:
    """A command that imports one models module (``pontual proposals confirm`` imports the
    legal layer's) can flush: every foreign key's table is registered."""
    code = (
        f"import {module}\n"
        "from db.base import Base\n"
        "print(len(Base.metadata.sorted_tables))\n"  # raises on a table no module registered
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
