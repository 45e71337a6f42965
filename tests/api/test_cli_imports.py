"""What the command line imports before a command needs it: help pays for no heavy library."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "geopandas", "pandas", "sqlalchemy", "shapely", "pyarrow", "folium", "dask", "scipy",
    "pyproj", "numpy",
)  # fmt: skip
_PROBE = """
import json, sys
heavy = json.loads(sys.argv[2])
sys.argv = ["pontual", *json.loads(sys.argv[1])]
import api.cli
api.cli._exit_at_once = lambda: None  # a successful analyze leaves at once: print first
try:
    api.cli.main()
except SystemExit:
    pass
print(json.dumps([name for name in heavy if name in sys.modules]))
"""


def _loaded(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [("--help",), ("analyze", "--help")])
def test_help_imports_no_heavy_library(argv: tuple[str, ...]) -> None:
    """``pontual --help`` and ``pontual analyze --help`` load no geopandas, pandas, SQLAlchemy..."""
    assert _loaded(*argv) == []


def test_the_probe_sees_what_a_command_imports(tmp_path: Path) -> None:
    """The probe is not blind: a command that reads a stands file has loaded geopandas."""
    stands = tmp_path / "stands.geojson"
    stands.write_text('{"type": "FeatureCollection", "features": []}', encoding="utf-8")
    args = ("analyze", "--pings", str(tmp_path / "none.csv"), "--stands", str(stands))
    assert "pandas" in _loaded(*args, "--out", str(tmp_path / "out"))
