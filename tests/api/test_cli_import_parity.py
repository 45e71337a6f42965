"""`pontual import pings` end to end: every row stored, already there, or quarantined with a reason.

Before, rows of one vehicle less than 1 µs apart and rows repeating a stored (vehicle, µs) with
other values were counted as "já existentes" and lost, and a rejected cell of 2 MB went whole
into the quarantine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import migrated_database
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

Run = Callable[..., subprocess.CompletedProcess[str]]
HEADER = "vehicle_id,timestamp,lat,lon,speed_kmh\n"


@pytest.fixture
def import_db(database_url: str) -> Iterator[str]:
    """A migrated database of its own: the CLI commits."""
    with migrated_database(database_url, prefix="pontual_parity") as url:
        yield url


def _import(run_pontual: Run, url: str, path: Path) -> str:
    done = run_pontual("import", "pings", str(path), PONTUAL_DATABASE_URL=url)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0]


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


class TestImportPings:
    def test_nothing_is_lost(self, run_pontual: Run, import_db: str, tmp_path: Path) -> None:
        """Sub-microsecond rows, a resend with other values and a 2 MB cell: each row is stored,
        already there, or quarantined with its reason, row number and (capped) cells."""
        first = tmp_path / "first.csv"
        first.write_text(
            HEADER + "A,2026-11-30T10:00:00.000000100Z,-30.03,-51.22,10\n"
            "A,2026-11-30T10:00:00.000000400Z,-30.04,-51.23,20\n"  # other values, same µs
            "B,2026-11-30T10:00:00.000000100Z,-30.03,-51.22,10\n"
            "B,2026-11-30T10:00:00.000000400Z,-30.03,-51.22,10\n"  # same values, same µs
            "C,2026-11-30T10:00:00Z,-30.03,-51.22," + "x" * 2_000_000 + "\n",
            encoding="utf-8",
        )
        assert _import(run_pontual, import_db, first) == (
            "Pings válidos: 2; gravados: 2; já existentes: 0; rejeitados: 3 (3 novos na "
            "quarentena)."
        )
        second = tmp_path / "second.csv"
        second.write_text(
            HEADER + "A,2026-11-30T10:00:00.000000900Z,-30.05,-51.25,30\n"  # stored µs, other
            "B,2026-11-30T10:00:00Z,-30.03,-51.22,10\n"  # stored, same values
            "B,2026-11-30T10:00:05Z,-30.03,-51.22,10\n",
            encoding="utf-8",
        )
        assert _import(run_pontual, import_db, second) == (
            "Pings válidos: 2; gravados: 1; já existentes: 1; rejeitados: 1 (1 novos na "
            "quarentena)."
        )
        assert _import(run_pontual, import_db, second) == (  # again: nothing new
            "Pings válidos: 2; gravados: 0; já existentes: 2; rejeitados: 1 (0 novos na "
            "quarentena)."
        )
        fixes = _query(import_db, "SELECT vehicle_id, lat, source FROM fixes ORDER BY 1, ts")
        assert fixes == [
            ("A", -30.03, "first.csv"),
            ("B", -30.03, "first.csv"),
            ("B", -30.03, "second.csv"),
        ]
        quarantined = _query(
            import_db,
            "SELECT source, row, reason, raw->>'timestamp', length(raw->>'speed_kmh') "
            "FROM rejected_fixes ORDER BY source, row",
        )
        assert quarantined == [
            ("first.csv", 2, "conflicting_duplicate", "2026-11-30T10:00:00.000000400Z", 2),
            ("first.csv", 4, "duplicate", "2026-11-30T10:00:00.000000400Z", 2),
            ("first.csv", 5, "invalid_speed", "2026-11-30T10:00:00Z", 1000),
            ("second.csv", 1, "conflicting_duplicate", "2026-11-30T10:00:00.000000900Z", 2),
        ]

    def test_porto_trip_over_a_stored_fix_is_quarantined(
        self, run_pontual: Run, import_db: str, tmp_path: Path
    ) -> None:
        """A Porto trip whose point repeats a stored fix with another position is quarantined
        with its values (the trip is not read again), the other point stored."""
        header = "TRIP_ID,CALL_TYPE,ORIGIN_CALL,ORIGIN_STAND,TAXI_ID,TIMESTAMP,DAY_TYPE,"
        header += "MISSING_DATA,POLYLINE\n"
        for name, polyline in (
            ("p1.csv", "[[-8.61,41.14]]"),
            ("p2.csv", "[[-8.62,41.15],[-8.62,41.15]]"),
        ):
            path = tmp_path / name
            path.write_text(
                header + f'"T{name}","C","","","20000001","1372636858","A","False","{polyline}"\n',
                encoding="utf-8",
            )
            done = run_pontual("import", "porto", str(path), PONTUAL_DATABASE_URL=import_db)
            assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == (
            "Pings válidos: 1; gravados: 1; já existentes: 0; rejeitados: 1 (1 novos na "
            "quarentena)."
        )
        quarantined = _query(
            import_db, "SELECT row, reason, raw->>'lat', raw->>'timestamp' FROM rejected_fixes"
        )
        assert quarantined == [(1, "conflicting_duplicate", "41.15", "2013-07-01T00:00:58.000000Z")]
        assert _query(import_db, "SELECT lat FROM fixes ORDER BY ts") == [(41.14,), (41.15,)]

    def test_speed_beyond_the_physical_bound_is_quarantined(
        self, run_pontual: Run, import_db: str, tmp_path: Path
    ) -> None:
        """A speed of 1e9 km/h (or above 400 km/h) is ``invalid_speed`` with its cells kept;
        400 km/h itself is stored."""
        path = tmp_path / "speeds.csv"
        path.write_text(
            HEADER + "S,2026-11-30T10:00:00Z,-30.03,-51.22,400\n"
            "S,2026-11-30T10:00:05Z,-30.03,-51.22,400.5\n"
            "S,2026-11-30T10:00:10Z,-30.03,-51.22,1e9\n",
            encoding="utf-8",
        )
        assert _import(run_pontual, import_db, path).startswith(
            "Pings válidos: 1; gravados: 1; já existentes: 0; rejeitados: 2"
        )
        assert _query(import_db, "SELECT speed_kmh FROM fixes WHERE vehicle_id = 'S'") == [(400.0,)]
        quarantined = _query(
            import_db,
            "SELECT row, reason, raw->>'speed_kmh' FROM rejected_fixes "
            "WHERE source = 'speeds.csv' ORDER BY row",
        )
        assert quarantined == [(2, "invalid_speed", "400.5"), (3, "invalid_speed", "1e9")]
