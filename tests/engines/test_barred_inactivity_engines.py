"""operating_while_barred and inactivity: the in-memory and the partitioned engines agree on
registry gaps and trackers without meter data (audit 4, F5–F7)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from factories import make_pings, offset_m
from partition_scenario import STANDS
from sqlalchemy import text
from sqlalchemy.orm import Session

from engines.buckets import analyze_file
from engines.live import process_fixes
from engines.pipeline import AnalysisParams, analyze_pings, cut_at_as_of
from fleet.loaders import read_fleet
from tracking.detectors.inactivity import detect_inactivity
from tracking.detectors.operating_while_barred import detect_operating_while_barred
from tracking.ingest import read_pings
from tracking.trips import detect_trips

KINDS = ("operating_while_barred", "inactivity")
FLEET = (
    "vehicle_id,status,status_since,status_until,alvara_first_issued_on\n"
    "busy,active,,,\nmoving,active,,,\nghost,active,,,\nnew,active,,,2024-04-03\n"
    "W1,suspended,,,\n"
)


def _rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(vehicle: str, stamp: pd.Timestamp, north: float, meter: str) -> None:
        lat, lon = offset_m(north, 2000.0)
        rows.append(
            {"vehicle_id": vehicle, "timestamp": stamp.isoformat(), "lat": lat, "lon": lon}
            | {"meter": meter}
        )

    for day in pd.date_range("2024-01-01T15:00:00Z", "2024-04-09T15:00:00Z", freq="D"):
        for k in range(4):  # 300 m a minute, never stopping, no meter: no stop, no trip
            add("moving", day + pd.Timedelta(minutes=k), 300.0 * k, "")
    for day in pd.date_range("2024-01-01", "2024-04-09", freq="D"):  # a ride a day: the
        t0 = pd.Timestamp(f"{day.date()}T14:00:00Z")  # feed shows operations every day
        for k in range(12):
            add("busy", t0 + pd.Timedelta(seconds=60 * k), 200.0 * k, "occupied")
    for day in ("2024-03-05", "2024-04-09"):  # the suspension's start is unknown
        t0 = pd.Timestamp(f"{day}T16:00:00Z")
        for k in range(12):
            add("W1", t0 + pd.Timedelta(seconds=60 * k), 200.0 * k, "occupied")
    return rows


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    folder = tmp_path_factory.mktemp("barred_inactivity")
    pings = folder / "pings.csv"
    pd.DataFrame(_rows()).to_csv(pings, index=False)
    (folder / "frota.csv").write_text(FLEET, encoding="utf-8")
    return pings, read_fleet(folder / "frota.csv")


def _found(result: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (f["kind"], f["vehicle_id"], f["details"].get("local_date", ""))
        for _, f in result.findings.iterrows()
    )


@pytest.mark.parametrize(
    ("as_of", "expected"),
    [
        (None, [("inactivity", "ghost", "")]),
        (
            dt.date(2024, 4, 9),
            [("inactivity", "ghost", ""), ("operating_while_barred", "W1", "2024-04-09")],
        ),
    ],
)
def test_engines_agree(
    files: tuple[Path, pd.DataFrame], as_of: dt.date | None, expected: list[tuple[str, ...]]
) -> None:
    """A vehicle seen on the streets daily without meter data and a prefixo first issued 6
    days before are not inactive; a suspension without status_since bars only the --as-of day
    (none without it): in memory and by partitions of a few vehicles alike."""
    path, fleet = files
    params = AnalysisParams()
    kw: dict[str, Any] = {"fleet": fleet, "as_of": as_of, "kinds": KINDS, "params": params}
    fixes, rejected = read_pings(path, max_speed_kmh=params.max_speed_kmh)
    if as_of is not None:
        fixes = cut_at_as_of(fixes, as_of=as_of, timezone=params.timezone)
    memory = analyze_pings(fixes, rejected, STANDS, **kw)
    parts, _ = analyze_file(path, STANDS, bucket_fixes=200, **kw)
    assert _found(memory) == expected
    assert _found(parts) == expected


class TestLive:
    def test_a_new_prefixo_is_not_inactive_live_as_in_batch(self, db_session: Session) -> None:
        """Live reads the first alvará from the registry: a prefixo issued on 1 March is never
        inactive; one without the date is, with the batch's finding (INB1 reports every day:
        the feed is live)."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo, alvara_first_issued_on) VALUES "
                "('INB1', 'INB1', NULL), ('INB2', 'INB2', NULL), ('INB3', 'INB3', '2024-03-01')"
            )
        )
        lat, lon = offset_m(0.0, 0.0)
        days = pd.date_range("2024-01-01", "2024-03-05", freq="D").strftime("%Y-%m-%d")
        pings = make_pings(
            [
                {"vehicle_id": "INB1", "timestamp": f"{d}T15:00:00Z", "lat": lat, "lon": lon}
                | {"meter": "occupied"}
                for d in days
            ]
        )
        found = []
        for k in range(len(pings)):
            found += process_fixes(db_session, pings.iloc[k : k + 1], kinds=("inactivity",))
        fleet = pd.DataFrame(
            {
                "vehicle_id": ["INB1", "INB2", "INB3"],
                "status": [None, None, None],
                "alvara_first_issued_on": [None, None, dt.date(2024, 3, 1)],
            }
        )
        closed = pings.iloc[: list(days).index("2024-03-02")]  # 1 Jan–1 Mar: 61 days
        batch = detect_inactivity(closed, fleet, as_of=dt.date(2024, 3, 1))
        assert batch["vehicle_id"].tolist() == ["INB2"]
        assert [f["finding_id"] for f in found] == batch["finding_id"].tolist()

    def test_a_suspension_without_start_bars_nothing_live(self, db_session: Session) -> None:
        """A status period whose start the registry lacks bars no day live (no snapshot day),
        as in a batch run without --as-of."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('SUS1', 'SUS1'); "
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('SUS1', 'suspended', NULL, NULL)"
            )
        )
        t0 = pd.Timestamp("2024-03-05T15:00:00Z")
        rows = []
        for k in range(14):
            lat, lon = offset_m(300.0 * k, 0.0)
            meter = "occupied" if 1 <= k <= 11 else "free"
            rows.append(
                {"vehicle_id": "SUS1", "timestamp": t0 + pd.Timedelta(minutes=k), "lat": lat}
                | {"lon": lon, "meter": meter}
            )
        rows.append({**rows[-1], "timestamp": t0 + pd.Timedelta(days=1)})
        pings = make_pings(rows)
        assert process_fixes(db_session, pings, kinds=("operating_while_barred",)) == []
        fleet = pd.DataFrame([{"vehicle_id": "SUS1", "status": "suspended"}])
        trips = detect_trips(pings)
        assert detect_operating_while_barred(trips, fleet, pings=pings).empty
        assert len(detect_operating_while_barred(trips, fleet, as_of=dt.date(2024, 3, 5))) == 1
