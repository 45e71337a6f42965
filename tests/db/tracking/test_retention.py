"""Retention of raw fixes on a real PostGIS: old partitions go, evidence stays."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
import shapely
from factories import make_pings, migrated_database
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from db.enforcement.workflow import generate_proposals, store_findings
from db.fleet.models import Municipality
from db.tracking.retention import apply_retention, evidence_fixes, retention_cutoff
from db.tracking.store import copy_fixes
from tracking._errors import InvalidParameterError
from tracking.detectors._evidence import fix_record
from tracking.detectors.findings import make_findings

PB = "4314548"
TODAY = dt.date(2025, 3, 10)  # keep 30 days: cutoff 2025-02-08T00:00Z
OFFSET = pd.Timedelta(milliseconds=400)  # stored fixes are not on whole seconds


def _track(vehicle: str, start: str, n: int = 61) -> list[dict[str, Any]]:
    t0 = pd.Timestamp(start) + OFFSET
    return [
        {
            "vehicle_id": vehicle,
            "timestamp": t0 + pd.Timedelta(seconds=30 * k),
            "lat": -29.1 + k * 1e-4,
            "lon": -51.45,
            "meter": "free",
        }
        for k in range(n)
    ]


def _record(vehicle_rows: list[dict[str, Any]], k: int) -> dict[str, Any]:
    row = vehicle_rows[k]
    return fix_record(row["timestamp"].value, row["lat"], row["lon"], None)


def _finding(vehicle: str | None, start: str, details: dict[str, Any]) -> Any:
    frame = pd.DataFrame(
        {
            "kind": "queue_jump",
            "vehicle_id": [vehicle],
            "stand_id": "S1",
            "started_at": [start],
            "ended_at": [pd.Timestamp(start) + pd.Timedelta(minutes=2)],
            "confidence": 0.9,
            "details": [details],
        }
    )
    return make_findings(frame, [shapely.Point(-51.45, -29.1)])


def _count(conn: Connection, where: str = "TRUE") -> int:
    return int(conn.execute(text(f"SELECT count(*) FROM fixes WHERE {where}")).scalar_one())


def _partitions(conn: Connection) -> set[str]:
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'fixes'::regclass"
        )
    ).scalars()
    return set(rows)


def _seed(session: Session) -> Connection:
    """Old days with and without evidence, a recent day, and old fixes in DEFAULT."""
    conn = session.connection()
    v1, v2 = _track("V1", "2025-02-01T10:00Z"), _track("V2", "2025-02-01T10:00Z")
    v3 = _track("V3", "2025-02-02T10:00Z")
    v4 = _track("V4", "2025-02-03T10:00Z")
    recent = _track("V1", "2025-03-09T10:00Z")
    copy_fixes(conn, make_pings(v1 + v2 + v3 + v4 + recent), source="t")
    # No partition for 2025-01-15: these land in DEFAULT.
    conn.execute(
        text(
            "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, speed_flag, source) VALUES "
            "('V5', '2025-01-15T10:00:00.4Z', -29.2, -51.5, "
            "ST_SetSRID(ST_MakePoint(-51.5, -29.2), 4326), false, 't'), "
            "('V5', '2025-01-15T10:00:30.4Z', -29.3, -51.5, "
            "ST_SetSRID(ST_MakePoint(-51.5, -29.3), 4326), false, 't')"
        )
    )
    session.add(Municipality(code=PB, name="Pinto Bandeira", uf="RS", timezone="America/Sao_Paulo"))
    session.flush()
    jump = _finding(
        "V1",
        "2025-02-01T10:05Z",
        {"boarding_fix": _record(v1, 10), "ahead": [{"vehicle_id": "V2", "fix": _record(v2, 12)}]},
    )
    place = _finding(
        None,
        "2025-01-15T10:00Z",
        {"fixes": [fix_record(pd.Timestamp("2025-01-15T10:00:00Z").value, -29.2, -51.5, None)]},
    )
    store_findings(session, pd.concat([jump, place], ignore_index=True))
    generate_proposals(session, municipality=PB, timezone="America/Sao_Paulo")  # V1's jump
    store_findings(session, _finding("V3", "2025-02-02T10:05Z", {"queue_position": 2}))
    generate_proposals(session, municipality=PB, timezone="America/Sao_Paulo")
    session.flush()
    return conn


class TestEvidenceFixes:
    def test_nested_records_take_the_nearest_vehicle(self) -> None:
        """A record under another vehicle_id belongs to it; the others to the finding's."""
        rec = {"timestamp": "2025-02-01T10:00:00Z", "lat": 1.0, "lon": 2.0, "row": None}
        details = {"fix": rec, "ahead": [{"vehicle_id": "B", "fix": rec}], "n": 3}
        assert [v for v, *_ in evidence_fixes(details, "A")] == ["A", "B"]
        assert list(evidence_fixes({"x": [1, "a", None]}, "A")) == []


class TestRetentionCutoff:
    def test_whole_utc_days(self) -> None:
        """Keeping 30 days on 2025-03-10 cuts at 2025-02-08T00:00Z; 0 days is refused."""
        assert retention_cutoff(keep_days=30, today=TODAY) == dt.datetime(2025, 2, 8, tzinfo=dt.UTC)
        with pytest.raises(InvalidParameterError, match="'keep_days' era 0"):
            retention_cutoff(keep_days=0, today=TODAY)


class TestApplyRetention:
    def test_drops_old_partitions_and_keeps_evidence(self, db_session: Session) -> None:
        """Old day without evidence dropped; evidence fixes and proposal tracks kept; recent too."""
        conn = _seed(db_session)
        before = _count(conn)
        report = apply_retention(conn, keep_days=30, today=TODAY)
        assert report.partitions_dropped == ["fixes_p20250203"]
        assert report.partitions_trimmed == ["fixes_p20250201", "fixes_p20250202"]
        assert "fixes_p20250203" not in _partitions(conn)
        # V2's fix, named in V1's evidence (whole second; stored 0.4 s later), alone of V2's.
        kept = conn.execute(text("SELECT ts FROM fixes WHERE vehicle_id = 'V2'")).scalars().all()
        assert [t.isoformat() for t in kept] == ["2025-02-01T10:06:00.400000+00:00"]
        # V1's jump and V3's are proposals: their tracks (interval ± 5 min) stay, nothing else.
        for vehicle, day in (("V1", "2025-02-01"), ("V3", "2025-02-02")):
            where = f"vehicle_id = '{vehicle}' AND ts < '2025-03-01'"
            assert _count(conn, where) == 24
            assert _count(conn, f"{where} AND ts < '{day}T10:00Z'") == 0
            assert _count(conn, f"{where} AND ts > '{day}T10:12Z'") == 0
        # DEFAULT: the vehicle-less record keeps its fix (same second and position).
        assert _count(conn, "vehicle_id = 'V5'") == 1
        assert _count(conn, "ts >= '2025-03-09'") == 61
        assert report.rows_kept == _count(conn, "ts < '2025-02-08'")
        assert report.rows_deleted == before - _count(conn)

    @pytest.mark.parametrize(
        ("vehicle", "record"),
        [
            ("V4", {"timestamp": "03/02/2025 10:05", "lat": -29.1, "lon": -51.45}),  # not ISO
            ("V4", {"timestamp": "2025-02-03T10:05:00", "lat": -29.1, "lon": -51.45}),  # naive
            ("V4", {"timestamp": 1738577100, "lat": -29.1, "lon": -51.45}),  # not a string
            (None, {"timestamp": "2025-02-03T10:05:00Z", "lat": "-29.1", "lon": -51.45}),
        ],
    )
    def test_unreadable_evidence_fails_closed(
        self, db_session: Session, vehicle: str | None, record: dict[str, Any]
    ) -> None:
        """Evidence whose instant (or, with no vehicle, place) cannot be read keeps its
        finding's days whole (partition not dropped, no fix deleted), reported by finding."""
        conn = _seed(db_session)
        store_findings(db_session, _finding(vehicle, "2025-02-03T10:05Z", {"fix": record}))
        db_session.flush()
        v4_before = _count(conn, "vehicle_id = 'V4'")
        report = apply_retention(conn, keep_days=30, today=TODAY)
        # The finding's day and one either side (2025-02-04 has no partition) are left whole.
        assert report.partitions_refused == ["fixes_p20250202", "fixes_p20250203"]
        assert "fixes_p20250203" in _partitions(conn)
        assert "fixes_p20250203" not in report.partitions_dropped
        assert _count(conn, "vehicle_id = 'V4'") == v4_before == 61
        (bad,) = report.unreadable_evidence
        assert bad["timestamp"] == repr(record["timestamp"])
        assert bad["finding_id"] in {
            r for r in conn.execute(text("SELECT finding_id FROM findings")).scalars()
        }
        assert _count(conn, "vehicle_id = 'V3' AND ts < '2025-03-01'") == 61  # untouched day
        # The readable rest is applied as before.
        assert report.partitions_trimmed == ["fixes_p20250201"]

    def test_dry_run_changes_nothing(self, db_session: Session) -> None:
        """A dry run reports what a real run does, and deletes nothing."""
        conn = _seed(db_session)
        before, parts = _count(conn), _partitions(conn)
        dry = apply_retention(conn, keep_days=30, today=TODAY, dry_run=True)
        assert (_count(conn), _partitions(conn)) == (before, parts)
        real = apply_retention(conn, keep_days=30, today=TODAY)
        assert {**dry.as_dict(), "dry_run": False} == real.as_dict()
        again = apply_retention(conn, keep_days=30, today=TODAY)
        assert (again.rows_deleted, again.partitions_dropped) == (0, [])


@pytest.fixture(scope="module")
def fresh_url(database_url: str) -> Iterator[str]:
    """A database of its own for the CLI (it commits)."""
    with migrated_database(database_url) as url:
        yield url


class TestRetentionCommand:
    def test_partitions_then_retention_audited(self, run_pontual, fresh_url: str) -> None:
        """`db partitions --ahead-days 2` makes 3 days, indexes yesterday's by place and builds
        its pickups; `db retention` runs and is audited."""
        from db.engine import make_engine

        yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
        engine = make_engine(fresh_url)
        try:
            with engine.begin() as conn:
                at = dt.datetime.combine(yesterday, dt.time(12), tzinfo=dt.UTC)
                pings = pd.DataFrame(
                    {"vehicle_id": ["A"], "timestamp": [at], "lat": [-30.03], "lon": [-51.22]}
                )
                copy_fixes(conn, pings, source="ontem")
        finally:
            engine.dispose()
        env = {"DATABASE_URL": fresh_url, "PATH": os.environ.get("PATH", "")}
        done = run_pontual("db", "partitions", "--ahead-days", "2", **env)
        assert done.returncode == 0, done.stderr
        assert "3 partição(ões) criada(s)" in done.stdout
        assert f"Indexando por lugar fixes_p{yesterday:%Y%m%d}" in done.stdout
        assert "Índice por lugar criado em 1 dia(s) fechado(s)." in done.stdout
        assert f"Embarques de {yesterday}…" in done.stdout
        assert "guardados de 1 dia(s) fechado(s)" in done.stdout
        again = run_pontual("db", "partitions", "--ahead-days", "2", **env)
        assert "já existiam" in again.stdout
        assert "Todos os dias fechados já têm o índice por lugar." in again.stdout
        assert f"Embarques de {yesterday}…" in again.stdout  # still receiving late fixes
        done = run_pontual("db", "retention", "--keep-days", "30", "--dry-run", **env)
        assert done.returncode == 0, done.stderr
        assert "0 fixes seriam apagados" in done.stdout
        engine = make_engine(fresh_url)
        try:
            with engine.connect() as conn:
                action, details = conn.execute(
                    text("SELECT action, details FROM audit_log ORDER BY entry_id DESC LIMIT 1")
                ).one()
        finally:
            engine.dispose()
        assert action == "fix_retention_dry_run"
        assert json.loads(json.dumps(details))["keep_days"] == 30
