"""`pontual maps …` writes each map from the contract files; the pages open offline."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import shapely
from map_factories import T0, make_findings, make_pings, make_stands, make_visits
from typer.testing import CliRunner

from api.cli import app
from api.cli_maps import busiest_instant, read_visits_csv
from tracking.detectors.findings import write_findings_geojson


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Contract files of a tiny run: stands, visits, findings, pings, fleet, trips."""
    stands = make_stands()
    paths = {name: tmp_path / name for name in ("stands.geojson", "stand_visits.csv")}
    stands.to_file(paths["stands.geojson"], driver="GeoJSON")
    visits = make_visits([("A", "1", 0, 40, True), ("X", "1", 10, 35, False)])
    visits["queue_position"] = [1, 2]
    visits["boarded"] = [True, False]
    for col in ("arrived_at", "departed_at"):
        visits[col] = visits[col].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    visits.to_csv(paths["stand_visits.csv"], index=False)
    paths["findings.geojson"] = tmp_path / "findings.geojson"
    write_findings_geojson(
        make_findings(
            [
                {"kind": "unlicensed_stand_use", "geometry": shapely.Point(-51.2287, -30.0277)},
                {
                    "kind": "illegal_stand_formation",
                    "vehicle_id": None,
                    "details": {"place_id": "p1", "n_days": 4, "n_vehicles": 3},
                    "geometry": shapely.Point(-51.2150, -30.0250).buffer(0.001),
                },
            ]
        ),
        paths["findings.geojson"],
    )
    paths["pings.csv"] = tmp_path / "pings.csv"
    pings = make_pings([("A", 0, -30.0277, -51.2287, "free"), ("A", 1, -30.0278, -51.2287, "free")])
    pings["timestamp"] = pings["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    pings.to_csv(paths["pings.csv"], index=False)
    paths["fleet.csv"] = tmp_path / "fleet.csv"
    pd.DataFrame(
        {
            "vehicle_id": ["A", "X"],
            "plate": ["IXA1A11", "IXB2B22"],
            "accessible": ["true", "false"],
            "stands": ["1", ""],
        }
    ).to_csv(paths["fleet.csv"], index=False)
    paths["trips.csv"] = tmp_path / "trips.csv"
    pd.DataFrame(
        {
            "vehicle_id": ["A", "A"],
            "trip_id": ["A-1", "A-2"],
            "started_at": ["2024-03-04T12:40:00Z", "2024-03-04T13:10:00Z"],
            "ended_at": ["2024-03-04T12:55:00Z", "2024-03-04T13:30:00Z"],
            "pickup_lat": [-30.0277, -30.0300],
            "pickup_lon": [-51.2287, -51.2200],
            "dropoff_lat": [-30.0350, -30.0277],
            "dropoff_lon": [-51.2100, -51.2287],
            "distance_m": [2000.0, 1500.0],
            "pickup_stand_id": ["1", ""],
        }
    ).to_csv(paths["trips.csv"], index=False)
    return paths


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, ["maps", *args, "--tiles", "none"])
    assert result.exit_code == 0, result.output
    return result.output


class TestReadVisitsCsv:
    def test_types(self, files):
        """Instants are UTC-aware, licensed/boarded nullable booleans, queue positions Int64."""
        visits = read_visits_csv(files["stand_visits.csv"])
        assert str(visits["arrived_at"].dtype) == "datetime64[ns, UTC]"
        assert visits["licensed"].tolist() == [True, False]
        assert str(visits["queue_position"].dtype) == "Int64"

    def test_naive_refused(self, tmp_path):
        """An instant without offset is refused, naming the column."""
        path = tmp_path / "v.csv"
        path.write_text(
            "vehicle_id,stand_id,arrived_at,departed_at\nA,1,2024-03-04T12:00,2024-03-04T12:10\n",
            encoding="utf-8",
        )
        with pytest.raises(ValueError, match="arrived_at"):
            read_visits_csv(path)


class TestBusiestInstant:
    def test_peak(self):
        """The arrival at which most visits overlap."""
        visits = make_visits(
            [("A", "1", 0, 40, True), ("X", "1", 10, 35, False), ("B", "2", 50, 60, True)]
        )
        assert busiest_instant(visits) == T0 + pd.Timedelta(minutes=10)


class TestMapsCommands:
    def test_four_maps(self, files, tmp_path):
        """Each subcommand writes a self-contained map (no CDN, no external script or style);
        the pages themselves are rendered in Chromium by tests/maps."""
        out = tmp_path / "maps"
        _run(
            "stand",
            "--out",
            str(out / "stand.html"),
            "--stands",
            str(files["stands.geojson"]),
            "--visits",
            str(files["stand_visits.csv"]),
            "--fleet",
            str(files["fleet.csv"]),
            "--trips",
            str(files["trips.csv"]),
            "--busiest",
        )
        _run(
            "enforcement",
            "--out",
            str(out / "enforcement.html"),
            "--stands",
            str(files["stands.geojson"]),
            "--findings",
            str(files["findings.geojson"]),
            "--pings",
            str(files["pings.csv"]),
        )
        _run(
            "citizen",
            "--out",
            str(out / "citizen.html"),
            "--stands",
            str(files["stands.geojson"]),
            "--pings",
            str(files["pings.csv"]),
            "--fleet",
            str(files["fleet.csv"]),
        )
        _run(
            "planner",
            "--out",
            str(out / "planner.html"),
            "--stands",
            str(files["stands.geojson"]),
            "--trips",
            str(files["trips.csv"]),
            "--findings",
            str(files["findings.geojson"]),
            "--min-days",
            "1",
        )
        for name in ("stand", "enforcement", "citizen", "planner"):
            page = (out / f"{name}.html").read_text(encoding="utf-8")
            assert "cdn" not in page and "<script src=" not in page, name
            assert 'rel="stylesheet" href="http' not in page, name
            assert "L.map(" in page, name
        text = (out / "citizen.html").read_text(encoding="utf-8")
        assert "IXA1A11" not in text and '"A"' not in text
        stand = (out / "stand.html").read_text(encoding="utf-8")
        spec = json.loads(
            stand.split('type="application/json"')[1].split(">", 1)[1].split("</script>")[0]
        )
        props = spec["layers"][0]["props"]
        assert props["n_present"][0] == 2 and props["intruders"][0] == 1
        assert props["licensees"][0] == [["A", "P"]]

    def test_bad_instant(self, files, tmp_path):
        """A naive --at is a usage error (exit 2) with a pt-BR message."""
        result = CliRunner().invoke(
            app,
            [
                "maps",
                "stand",
                "--out",
                str(tmp_path / "m.html"),
                "--stands",
                str(files["stands.geojson"]),
                "--visits",
                str(files["stand_visits.csv"]),
                "--at",
                "2024-03-04T12:00",
            ],
        )
        assert result.exit_code == 2
        assert "com fuso" in result.output
