"""What the command line imports before a command needs it: help pays for no heavy library.

The root loads a command's module only when that command is asked for; its own help lists the
commands from the summaries in ``api.cli._COMMANDS``, checked here against the commands.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "geopandas", "pandas", "sqlalchemy", "shapely", "pyarrow", "folium", "dask", "scipy",
    "pyproj", "numpy", "pydantic",
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
commands = sorted(name for name in sys.modules if name.startswith("api.cli_"))
print(json.dumps([name for name in heavy if name in sys.modules]))
print(json.dumps(commands))
"""


def _run_probe(*argv: str) -> tuple[list[str], list[str]]:
    """The heavy libraries, and the ``api.cli_*`` modules, that ``pontual ARGV`` has imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    *_, heavy, commands = done.stdout.strip().splitlines()
    return json.loads(heavy), json.loads(commands)


def _loaded(*argv: str) -> list[str]:
    return _run_probe(*argv)[0]


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


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (("--help",), ["api.cli_ptbr"]),
        (("analyze", "--help"), ["api.cli_analyze", "api.cli_ptbr"]),
        (("db", "status", "--help"), ["api.cli_db", "api.cli_ptbr"]),
    ],
)
def test_a_command_loads_its_own_module_only(argv: tuple[str, ...], modules: list[str]) -> None:
    """``pontual analyze --help`` imports ``api.cli_analyze`` and no other command's module."""
    assert _run_probe(*argv)[1] == modules


def test_the_root_help_summaries_are_the_commands_own() -> None:
    """Each summary the root's help lists is the first paragraph of that command's help."""
    import inspect

    import api.cli

    for name, entry in api.cli._COMMANDS.items():
        command = api.cli._LazyCommands()[name]
        text = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        assert (entry.summary, command.hidden, command.deprecated) == (text, False, False), name


_EARLY_PROBE = """
import json, sys
import tracking.parquet as tp
seen = {}
start, batches = tp.EarlyRead.__init__, tp.EarlyRead.batches
def init(self, *a, **k):
    seen["loaded_at_start"] = [m for m in ("pandas", "geopandas", "shapely") if m in sys.modules]
    start(self, *a, **k)
def taken(self):
    seen["taken"] = seen.get("taken", 0) + 1
    return batches(self)
tp.EarlyRead.__init__, tp.EarlyRead.batches = init, taken
sys.argv = ["pontual", *json.loads(sys.argv[1])]
import api.cli
api.cli._exit_at_once = lambda: None
try:
    api.cli.main()
except SystemExit as exc:
    seen["code"] = exc.code
print(json.dumps(seen))
"""


def test_small_parquet_read_while_the_analysis_loads(tmp_path: Path) -> None:
    """``pontual analyze`` of a small Parquet file starts reading it before pandas, geopandas and
    shapely load, and the analysis takes that read."""
    import pandas as pd

    pings = tmp_path / "pings.parquet"
    pd.DataFrame(
        {
            "vehicle_id": ["T1", "T1"],
            "timestamp": ["2024-03-04T09:00:00-03:00", "2024-03-04T09:01:00-03:00"],
            "lat": [-30.0277, -30.0278],
            "lon": [-51.2287, -51.2287],
        }
    ).to_parquet(pings, index=False)
    stands = tmp_path / "stands.geojson"
    stands.write_text('{"type": "FeatureCollection", "features": []}', encoding="utf-8")
    argv = ["analyze", "--pings", str(pings), "--stands", str(stands), "--tiles", "none"]
    done = subprocess.run(
        [sys.executable, "-c", _EARLY_PROBE, json.dumps([*argv, "--out", str(tmp_path / "o")])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"loaded_at_start": [], "taken": 1, "code": 0}, done.stderr
    assert (tmp_path / "o" / "summary.json").exists()
