"""Pickups per closed day (db.tracking.pickups): the rule, built days against fixes, staleness."""

from __future__ import annotations

import datetime as dt

import pandas as pd
from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session

from db.tracking.pickups import build_closed_days, build_day, pickup_points
from db.tracking.retention import apply_retention
from db.tracking.store import copy_fixes

DAY = dt.date(2024, 3, 5)
T0 = dt.datetime(2024, 3, 5, 0, 0, tzinfo=dt.UTC)


def _fixes(conn: Connection, vehicle: str, rows: list[tuple[float, str]], lat: float) -> None:
    """Store fixes of ``vehicle`` (minutes after T0, meter) at ``lat``, 1 m apart eastwards."""
    frame = pd.DataFrame(
        {
            "vehicle_id": vehicle,
            "timestamp": [T0 + dt.timedelta(minutes=m) for m, _ in rows],
            "lat": lat,
            "lon": [-51.2 + k * 1e-5 for k in range(len(rows))],
            "meter": [meter for _, meter in rows],
            "speed_flag": False,
        }
    )
    copy_fixes(conn, frame, source="test")


def _world(conn: Connection) -> None:
    """Three days of fixes; the pickups (meter turning occupied) are marked in the comments.

    A: two rides on DAY (at 10 and 30 min) and one the day after. B: a ride begun 2 min before
    midnight (a pickup the day before), still on at midnight: no pickup then. C: a pickup at
    22:30 the day before and its next fix, occupied, 91 min later (beyond the look-back): a
    pickup.
    """
    _fixes(conn, "A", [(0, "free"), (5, "free"), (10, "occupied"), (15, "occupied"),
                       (20, "free"), (30, "occupied"), (1450, "free"), (1460, "occupied")],
           lat=-30.0)  # fmt: skip
    _fixes(conn, "B", [(-2, "occupied"), (0, "occupied"), (5, "free")], lat=-30.1)
    _fixes(conn, "C", [(-90, "occupied"), (1, "occupied"), (6, "free")], lat=-30.2)


def _points(session: Session, since: dt.datetime, now: dt.datetime) -> list[tuple[float, float]]:
    frame = pickup_points(session, since=since, now=now)
    return sorted(zip(frame["pickup_lat"], frame["pickup_lon"], strict=True))


class TestPickups:
    def test_rule_and_built_days_read_as_the_fixes(self, db_session: Session) -> None:
        """A ride's start is a pickup, a ride going on across midnight is not; the days built
        give the same pickups as the fixes read directly, window by window."""
        conn = db_session.connection()
        _world(conn)
        since, now = T0 - dt.timedelta(hours=1), T0 + dt.timedelta(days=1, hours=1)
        live = _points(db_session, since, now)
        assert [lat for lat, _ in live] == [-30.2, -30.1, -30.0, -30.0, -30.0]
        assert build_day(conn, DAY) == 3  # A's two and C's
        assert build_day(conn, DAY - dt.timedelta(days=1)) == 2  # B's and C's
        days = conn.execute(text("SELECT day FROM pickup_days ORDER BY day")).scalars().all()
        assert days == [DAY - dt.timedelta(days=1), DAY]
        assert _points(db_session, since, now) == live
        for lo, hi in ((T0 + dt.timedelta(minutes=9), T0 + dt.timedelta(minutes=10)),
                       (T0 - dt.timedelta(days=2), T0 + dt.timedelta(days=3)),
                       (T0 + dt.timedelta(minutes=11), T0 + dt.timedelta(hours=30))):  # fmt: skip
            stored = _points(db_session, lo, hi)
            conn.execute(text("DELETE FROM pickup_days"))
            assert stored == _points(db_session, lo, hi)
            build_day(conn, DAY)
            build_day(conn, DAY - dt.timedelta(days=1))

    def test_a_file_into_a_built_day_is_read_from_the_fixes(self, db_session: Session) -> None:
        """Fixes imported into a built day unlist it: its new pickup is seen at once."""
        conn = db_session.connection()
        _world(conn)
        build_day(conn, DAY)
        _fixes(conn, "D", [(100, "free"), (101, "occupied")], lat=-30.3)
        assert conn.execute(text("SELECT count(*) FROM pickup_days")).scalar_one() == 0
        got = _points(db_session, T0, T0 + dt.timedelta(hours=12))
        assert [lat for lat, _ in got] == [-30.3, -30.2, -30.0, -30.0]

    def test_retention_deletes_the_old_days_pickups(self, db_session: Session) -> None:
        """Pickups older than the retention cutoff go with the fixes."""
        conn = db_session.connection()
        _world(conn)
        build_day(conn, DAY)
        build_day(conn, DAY + dt.timedelta(days=1))
        apply_retention(conn, keep_days=1, today=DAY + dt.timedelta(days=2))
        left = conn.execute(text("SELECT min(ts) FROM pickups")).scalar_one()
        assert left >= T0 + dt.timedelta(days=1)
        days = conn.execute(text("SELECT day FROM pickup_days")).scalars().all()
        assert days == [DAY + dt.timedelta(days=1)]


def test_closed_days_built_once_recent_ones_again(own_engine: Engine) -> None:
    """Every closed day is built; a built day is built again only within the recheck days."""
    with own_engine.begin() as conn:
        _world(conn)
    today = DAY + dt.timedelta(days=2)
    assert build_closed_days(own_engine, before=today, recheck_days=1) == [
        DAY - dt.timedelta(days=1),
        DAY,
        DAY + dt.timedelta(days=1),
    ]
    assert build_closed_days(own_engine, before=today, recheck_days=1) == [
        DAY + dt.timedelta(days=1)
    ]
    with own_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pickups")).scalar_one() == 6
