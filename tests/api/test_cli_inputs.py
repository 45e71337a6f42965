"""Every input file of every command: missing, a folder, 0 bytes or header-only.

Each bad file ends the command with one ``erro:`` line naming the option and exit status 1,
never a traceback; a header-only file that means "nothing" (pings, stands, fleet, findings…)
gives empty but valid outputs. The commands run in this process (``api.cli.main``), with the
database out of reach: no bad file may get that far. The header-only imports, which do reach
the database, run as the console script on the API tests' database.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import shapely

import api.cli as cli
from tracking.detectors.findings import make_findings, write_findings_geojson

ROOT = Path(__file__).resolve().parents[2]
PINGS_HEADER = "vehicle_id,timestamp,lat,lon,meter\n"
EMPTY_FC = '{"type": "FeatureCollection", "features": []}'
VISITS_HEADER = (
    "vehicle_id,stand_id,arrived_at,departed_at,dwell_s,queue_position,boarded,licensed\n"
)
TRIPS_HEADER = (
    "vehicle_id,trip_id,started_at,ended_at,pickup_lat,pickup_lon,dropoff_lat,dropoff_lon,"
    "distance_m,pickup_stand_id\n"
)
FLEET_HEADER = "vehicle_id,plate,accessible,stands,status\n"
PORTO = ROOT / "data" / "porto" / "derived" / "trips_combined.csv"


def _good(root: Path) -> dict[str, Path]:
    """One valid file of each kind."""
    root.mkdir(parents=True, exist_ok=True)
    files = {name: root / name for name in _HEADERS}
    rows = [("T1", f"2024-03-04T09:{m:02d}:00-03:00", -30.0277, -51.2287, "free") for m in range(5)]
    rows += [("T1", "2024-03-04T09:06:00-03:00", -30.0200, -51.2200, "occupied")]
    pd.DataFrame(rows, columns=["vehicle_id", "timestamp", "lat", "lon", "meter"]).to_csv(
        files["pings.csv"], index=False
    )
    point = {"type": "Point", "coordinates": [-51.2287, -30.0277]}
    files["stands.geojson"].write_text(
        json.dumps(
            {
                "type": "FeatureCollection",
                "features": [
                    {
                        "type": "Feature",
                        "geometry": point,
                        "properties": {"stand_id": "P1", "radius_m": 40, "capacity": 2},
                    }
                ],
            }
        )
    )
    files["fleet.csv"].write_text(FLEET_HEADER + "T1,ABC1D23,false,P1,active\n")
    line = {"type": "LineString", "coordinates": [[-51.23, -30.03], [-51.21, -30.01]]}
    files["roads.geojson"].write_text(
        json.dumps(
            {
                "type": "FeatureCollection",
                "features": [{"type": "Feature", "geometry": line, "properties": {}}],
            }
        )
    )
    ring = [[-51.3, -30.1], [-51.1, -30.1], [-51.1, -29.9], [-51.3, -29.9], [-51.3, -30.1]]
    files["boundary.geojson"].write_text(
        json.dumps(
            {
                "type": "FeatureCollection",
                "features": [
                    {
                        "type": "Feature",
                        "geometry": {"type": "Polygon", "coordinates": [ring]},
                        "properties": {},
                    }
                ],
            }
        )
    )
    files["thresholds.toml"].write_text("[tracking_gap]\nmax_gap_s = 600\n")
    files["confirmed.json"].write_text("[]\n")
    files["rules.toml"].write_text("[planning]\ninhabitants_per_taxi = 600\n")
    files["stand_visits.csv"].write_text(
        VISITS_HEADER + "T1,P1,2024-03-04T12:00:00Z,2024-03-04T12:05:00Z,300,1,True,True\n"
    )
    files["trips.csv"].write_text(
        TRIPS_HEADER
        + "T1,T1-1,2024-03-04T12:05:00Z,2024-03-04T12:20:00Z,-30.0277,-51.2287,-30.01,-51.21,"
        "2500,P1\n"
    )
    found = make_findings(
        pd.DataFrame(
            {
                "kind": ["tracking_gap"],
                "vehicle_id": ["T1"],
                "stand_id": [None],
                "started_at": ["2024-03-04T12:00:00Z"],
                "ended_at": ["2024-03-04T13:00:00Z"],
                "confidence": [0.9],
                "details": [{"gap_s": 3600}],
            }
        ),
        [shapely.Point(-51.2287, -30.0277)],
    )
    write_findings_geojson(found, files["findings.geojson"])
    with PORTO.open(encoding="utf-8") as src:
        files["porto.csv"].write_text("".join(next(src) for _ in range(3)), encoding="utf-8")
    return files


def _porto_header() -> str:
    with PORTO.open(encoding="utf-8") as src:
        return next(src)


_HEADERS: dict[str, str | Callable[[], str]] = {
    "pings.csv": PINGS_HEADER,
    "stands.geojson": EMPTY_FC,
    "fleet.csv": FLEET_HEADER,
    "roads.geojson": EMPTY_FC,
    "boundary.geojson": EMPTY_FC,
    "thresholds.toml": "# sem tabelas: os limiares padrão\n",
    "confirmed.json": "[]\n",
    "rules.toml": "# sem a tabela [planning]\n",
    "stand_visits.csv": VISITS_HEADER,
    "trips.csv": TRIPS_HEADER,
    "findings.geojson": EMPTY_FC,
    "porto.csv": _porto_header,
}


def _variant(root: Path, name: str, variant: str) -> Path:
    """The bad version of a file: missing, a folder, 0 bytes or header-only."""
    stem, suffix = name.rsplit(".", 1)
    path = root / "bad" / f"{stem}-{variant}.{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if variant == "dir":
        path.mkdir(exist_ok=True)
    elif variant == "empty":
        path.write_bytes(b"")
    elif variant == "header":
        header = _HEADERS[name]
        path.write_text(header() if callable(header) else header, encoding="utf-8")
    return path


# command: (fixed arguments, {flag: file} required, {flag: file} optional)
COMMANDS: dict[str, tuple[list[str], dict[str, str], dict[str, str]]] = {
    "analyze": (
        ["analyze", "--tiles", "none", "--municipality", "4314548"],
        {"--pings": "pings.csv", "--stands": "stands.geojson"},
        {
            "--fleet": "fleet.csv",
            "--allowed-places": "stands.geojson",
            "--roads": "roads.geojson",
            "--boundary": "boundary.geojson",
            "--thresholds": "thresholds.toml",
            "--confirmed": "confirmed.json",
        },
    ),
    "maps stand": (
        ["maps", "stand", "--tiles", "none"],
        {"--stands": "stands.geojson", "--visits": "stand_visits.csv"},
        {"--fleet": "fleet.csv", "--trips": "trips.csv"},
    ),
    "maps enforcement": (
        ["maps", "enforcement", "--tiles", "none"],
        {"--stands": "stands.geojson", "--findings": "findings.geojson"},
        {"--pings": "pings.csv"},
    ),
    "maps citizen": (
        ["maps", "citizen", "--tiles", "none"],
        {"--stands": "stands.geojson", "--pings": "pings.csv", "--fleet": "fleet.csv"},
        {},
    ),
    "maps planner": (
        ["maps", "planner", "--tiles", "none"],
        {"--stands": "stands.geojson", "--trips": "trips.csv"},
        {"--findings": "findings.geojson", "--boundary": "boundary.geojson"},
    ),
    "plan": (
        ["plan", "--municipality", "4314548", "--as-of", "2025-03-04"],
        {},
        {
            "--rules": "rules.toml",
            "--fleet": "fleet.csv",
            "--trips": "trips.csv",
            "--stands": "stands.geojson",
            "--findings": "findings.geojson",
        },
    ),
    "import pings": (["import", "pings"], {"FILE": "pings.csv"}, {}),
    "import stands": (["import", "stands"], {"FILE": "stands.geojson"}, {}),
    "import fleet": (["import", "fleet"], {"FILE": "fleet.csv"}, {}),
    "import porto": (["import", "porto"], {"FILE": "porto.csv"}, {}),
    "proposals generate": (
        ["proposals", "generate", "--municipality", "4314548"],
        {},
        {"--findings": "findings.geojson", "--thresholds": "thresholds.toml"},
    ),
}
HEADER_ONLY_IS_AN_ERROR = {
    ("analyze", "--roads"),  # no road line
    ("analyze", "--boundary"),  # no polygon
    ("plan", "--rules"),  # no [planning] table
}
"""A header-only file is an error here; everywhere else it means "nothing" (empty outputs)."""
EMPTY_IS_VALID = {"--thresholds"}
"""An empty TOML of thresholds is valid: the defaults (in ``test_header_only_file``)."""
NEEDS_DATABASE = {"import pings", "import stands", "import fleet", "import porto"}
NEEDS_DATABASE_ALWAYS = {"proposals generate"}

CASES = [
    (command, flag, name)
    for command, (_, required, optional) in COMMANDS.items()
    for flag, name in {**required, **optional}.items()
]


def _args(command: str, flag: str, bad: Path, good: dict[str, Path], out: Path) -> list[str]:
    fixed, required, optional = COMMANDS[command]
    args = list(fixed)
    for f, name in required.items():
        value = str(bad if f == flag else good[name])
        args += [value] if f == "FILE" else [f, value]
    if flag in optional:
        args += [flag, str(bad)]
    if command == "analyze":
        args += ["--out", str(out)]
    elif command.startswith("maps"):
        args += ["--out", str(out / "map.html")]
    elif command == "plan":
        args += ["--out", str(out / "plan.txt")]
    return args


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _good(tmp_path_factory.mktemp("inputs") / "good")


@pytest.fixture
def run_in_process(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], tuple[int, str]]:
    """Run ``pontual ARGS`` in this process; the database must not be reached."""
    import api.cli_db

    def no_database(*_: object, **__: object) -> str:
        raise AssertionError("o banco de dados não devia ser usado com um arquivo inválido")

    monkeypatch.setattr(api.cli_db, "database_url", no_database)
    monkeypatch.setattr(cli, "_exit_at_once", lambda: None)

    def run(args: list[str]) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "argv", ["pontual", *args])
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        return code, out.getvalue() + err.getvalue()

    return run


@pytest.mark.parametrize(
    ("command", "flag", "name", "variant"),
    [
        (*case, variant)
        for case in CASES
        for variant in ("missing", "dir", "empty")
        if not (variant == "empty" and case[1] in EMPTY_IS_VALID)
    ],
    ids=lambda v: str(v),
)
def test_bad_file_is_one_error_line(
    command: str,
    flag: str,
    name: str,
    variant: str,
    good: dict[str, Path],
    tmp_path: Path,
    run_in_process: Callable[[list[str]], tuple[int, str]],
) -> None:
    """A missing file, a folder or a 0-byte file: exit 1, one `erro:` line naming the option."""
    bad = _variant(tmp_path, name, variant)
    code, output = run_in_process(_args(command, flag, bad, good, tmp_path / "out"))
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("erro:")]
    assert code == 1, output
    assert len(errors) == 1 and errors[0].startswith(f"erro: {flag}:"), output


@pytest.mark.parametrize(
    ("command", "flag", "name", "variant"),
    [
        *[(*c, "header") for c in CASES if c[0] not in NEEDS_DATABASE | NEEDS_DATABASE_ALWAYS],
        ("analyze", "--thresholds", "thresholds.toml", "empty"),  # 0 bytes: the defaults
    ],
    ids=lambda v: str(v),
)
def test_header_only_file(
    command: str,
    flag: str,
    name: str,
    variant: str,
    good: dict[str, Path],
    tmp_path: Path,
    run_in_process: Callable[[list[str]], tuple[int, str]],
) -> None:
    """A header-only file means "nothing" (exit 0, outputs written), or is one clear error."""
    bad = _variant(tmp_path, name, variant)
    out = tmp_path / "out"
    code, output = run_in_process(_args(command, flag, bad, good, out))
    assert "Traceback" not in output
    if (command, flag) in HEADER_ONLY_IS_AN_ERROR:
        assert code == 1 and output.count("erro:") == 1, output
        assert f"erro: {flag}:" in output
        return
    assert code == 0, output
    assert "erro:" not in output
    assert out.exists() and any(out.iterdir())


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize(
    "header", [PINGS_HEADER, PINGS_HEADER.rstrip("\n")], ids=["line-end", "no-line-end"]
)
def test_header_only_pings_make_empty_contract_files(
    header: str,
    jobs: str,
    good: dict[str, Path],
    tmp_path: Path,
    run_in_process: Callable[[list[str]], tuple[int, str]],
) -> None:
    """`analyze` on a header-only pings file (with or without a line end after the header)
    writes every contract file, empty but valid."""
    bad = tmp_path / "pings.csv"
    bad.write_text(header, encoding="utf-8")
    out = tmp_path / "out"
    code, output = run_in_process([*_args("analyze", "--pings", bad, good, out), "--jobs", jobs])
    assert code == 0, output
    assert json.loads((out / "findings.geojson").read_text())["features"] == []
    assert json.loads((out / "proposals.json").read_text()) == []
    for name in ("stand_visits.csv", "trips.csv", "rejected.csv"):
        assert pd.read_csv(out / name).empty
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pings_valid"] == 0 and summary["findings"] == 0
    assert summary["findings_for_review"] == {"count": 0, "by_kind": {}, "findings": []}


def test_zero_byte_pings_to_analyze_is_the_reported_case(
    good: dict[str, Path],
    tmp_path: Path,
    run_in_process: Callable[[list[str]], tuple[int, str]],
) -> None:
    """Issue 18's case: a 0-byte pings file used to end in pandas' EmptyDataError."""
    bad = _variant(tmp_path, "pings.csv", "empty")
    code, output = run_in_process(_args("analyze", "--pings", bad, good, tmp_path / "o"))
    assert code == 1 and "EmptyDataError" not in output
    assert output.strip() == f"erro: --pings: arquivo vazio (0 bytes): {bad}"


@pytest.mark.parametrize(
    ("command", "flag", "name"),
    [c for c in CASES if c[0] in NEEDS_DATABASE | NEEDS_DATABASE_ALWAYS],
    ids=lambda v: str(v),
)
def test_header_only_file_with_the_database(
    command: str,
    flag: str,
    name: str,
    good: dict[str, Path],
    tmp_path: Path,
    run_pontual: Callable[..., object],
    api_database_url: str,
) -> None:
    """Header-only imports (and findings) store nothing and say so: exit 0, no traceback."""
    bad = _variant(tmp_path, name, "header")
    done = run_pontual(
        *_args(command, flag, bad, good, tmp_path / "out"), DATABASE_URL=api_database_url
    )
    output = done.stdout + done.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in output
    assert done.returncode == 0, output  # type: ignore[attr-defined]
    assert "erro:" not in output


def test_corrupt_parquet_pings_same_error_read_early_or_not(
    good: dict[str, Path],
    tmp_path: Path,
    run_in_process: Callable[[list[str]], tuple[int, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Parquet file whose metadata reads but whose pages do not: one clear error line, the
    same whether it was read in a thread while the analysis loaded or not."""
    import engines.early
    from tracking.parquet import EarlyRead

    path = tmp_path / "pings.parquet"
    pd.DataFrame(
        {"vehicle_id": ["T1"] * 500, "timestamp": ["2024-03-04T09:00:00-03:00"] * 500}
        | {"lat": [-30.03 + i * 1e-6 for i in range(500)], "lon": [-51.22] * 500}
    ).to_parquet(path, index=False)
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    data[8 : len(data) - footer] = b"\xff" * (len(data) - footer - 8)
    path.write_bytes(bytes(data))
    taken = [0]
    batches = EarlyRead.batches

    def counted(self: EarlyRead) -> Any:
        taken[0] += 1
        return batches(self)

    monkeypatch.setattr(EarlyRead, "batches", counted)
    outputs = []
    for held_rows in (engines.early.HELD_ROWS, -1):  # read early, then not
        monkeypatch.setattr(engines.early, "HELD_ROWS", held_rows)
        code, output = run_in_process(_args("analyze", "--pings", path, good, tmp_path / "o"))
        assert code == 1 and "Traceback" not in output, output
        outputs.append(output)
    assert outputs[0] == outputs[1] and taken == [1]
    assert outputs[0].startswith("erro: ") and "Parquet inválido" in outputs[0], outputs[0]
