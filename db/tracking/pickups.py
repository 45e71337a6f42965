"""Pickups per closed UTC day: the planner's demand over weeks without reading every fix.

A pickup is a fix with the meter ``occupied`` whose fix before (the vehicle's, at most
:data:`LOOKBACK` earlier) was not ``occupied``, or that has none: a ride's start. Finding them in
``fixes`` means reading and ordering every fix of the window by vehicle and time: 21 s for 30
days of 310 taxis (35M fixes), minutes for a city's fleet. :func:`build_closed_days` (the daily
``pontual db partitions``) stores each closed day's pickups in ``pickups`` and lists the day in
``pickup_days``; :func:`pickup_points` reads the listed days from there and the others (today, a
day not built yet) from ``fixes``, by the same rule.

A built day goes stale when fixes are written into it later: a file imported into that day
(:func:`db.tracking.store.copy_fixes` removes the day from ``pickup_days``, so it is read from
``fixes`` until built again) or the live ingest's late fixes, accepted up to its
``ingest_max_age_days``: each run builds again the closed days of that many last days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from db.engine import without_jit

LOOKBACK = dt.timedelta(hours=1)
"""A fix before further back than this says nothing of the ride (a tracker off, a day off)."""

# A vehicle's first fix of the span is compared with its fix before the span, found by the
# primary key (one probe, only for a first fix with the meter on; no scan of the day before).
# Callers turn JIT off: a day's partition gives estimated costs that start it, and compiling
# cost more than the query.
_STARTS = """
SELECT vehicle_id, ts, lat, lon FROM (
    SELECT vehicle_id, ts, lat, lon, meter,
           lag(meter) OVER w AS before, lag(ts) OVER w AS before_ts, row_number() OVER w AS k
    FROM fixes WHERE ts >= :lo AND ts < :hi
    WINDOW w AS (PARTITION BY vehicle_id ORDER BY ts)
) d
WHERE meter = 'occupied'
  AND (CASE WHEN k = 1 THEN
                (SELECT x.meter FROM fixes x
                 WHERE x.vehicle_id = d.vehicle_id AND x.ts < d.ts
                   AND x.ts >= d.ts - CAST(:lookback AS interval)
                 ORDER BY x.ts DESC LIMIT 1)
            WHEN ts - before_ts <= CAST(:lookback AS interval) THEN before
       END) IS DISTINCT FROM 'occupied'
"""

_MUNICIPALITY = " AND vehicle_id IN (SELECT vehicle_id FROM vehicles WHERE municipality_code = :m)"


def _utc_day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


def build_day(conn: Connection, day: dt.date) -> int:
    """Store the pickups of the UTC ``day`` (replacing any) and list the day as built.

    Returns
    -------
    int
        Pickups stored.
    """
    lo, hi = _utc_day_start(day), _utc_day_start(day + dt.timedelta(days=1))
    without_jit(conn)
    conn.execute(text("DELETE FROM pickups WHERE ts >= :lo AND ts < :hi"), {"lo": lo, "hi": hi})
    stored = conn.execute(
        text(f"INSERT INTO pickups (vehicle_id, ts, lat, lon) {_STARTS}"),
        {"lo": lo, "hi": hi, "lookback": LOOKBACK},
    ).rowcount
    conn.execute(
        text(
            "INSERT INTO pickup_days (day) VALUES (:day) "
            "ON CONFLICT (day) DO UPDATE SET built_at = now()"
        ),
        {"day": day},
    )
    return int(stored)


def build_closed_days(
    engine: Engine,
    *,
    before: dt.date,
    recheck_days: int,
    progress: Callable[[dt.date], None] | None = None,
) -> list[dt.date]:
    """Build the pickups of each closed UTC day (a daily partition before ``before``).

    A day already built is built again only within ``recheck_days`` of ``before`` (the live
    ingest may still write late fixes into it). Each day in its own transaction.

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        Engine of the database.
    before : datetime.date
        First UTC day not built (today's, as a rule).
    recheck_days : int
        Built days this close to ``before`` are built again.
    progress : callable, optional
        Called with each day before it is built.

    Returns
    -------
    list of datetime.date
        The days built.
    """
    from db.tracking.store import daily_partitions

    with engine.connect() as conn:
        days = [day for _, day in daily_partitions(conn) if day < before]
        built = set(conn.execute(text("SELECT day FROM pickup_days")).scalars())
    recheck_from = before - dt.timedelta(days=recheck_days)
    done = []
    for day in days:
        if day in built and day < recheck_from:
            continue
        if progress is not None:
            progress(day)
        with engine.begin() as conn:
            build_day(conn, day)
        done.append(day)
    return done


def _spans(
    since: dt.datetime, now: dt.datetime, built: set[dt.date]
) -> Iterator[tuple[bool, dt.datetime, dt.datetime]]:
    """Yield (built, start, end) of the runs of UTC days in [since, now], end exclusive."""
    end = now + dt.timedelta(microseconds=1)
    day = since.astimezone(dt.UTC).date()
    start, kind = since, day in built
    while True:
        day += dt.timedelta(days=1)
        cut = _utc_day_start(day)
        if cut >= end:
            yield kind, start, end
            return
        if (day in built) != kind:
            yield kind, start, cut
            start, kind = cut, day in built


def pickup_points(
    session: Session, *, since: dt.datetime, now: dt.datetime, municipality: str | None = None
) -> pd.DataFrame:
    """Return the pickups in [since, now]: built days from ``pickups``, others from ``fixes``.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    since, now : datetime.datetime
        Tz-aware bounds (inclusive).
    municipality : str, optional
        IBGE code: only the vehicles registered there.

    Returns
    -------
    pandas.DataFrame
        ``pickup_lat``, ``pickup_lon``.
    """
    only = _MUNICIPALITY if municipality is not None else ""
    built = set(
        session.execute(
            text("SELECT day FROM pickup_days WHERE day >= :a AND day <= :b"),
            {"a": since.astimezone(dt.UTC).date(), "b": now.astimezone(dt.UTC).date()},
        ).scalars()
    )
    without_jit(session)
    lat: list[float] = []
    lon: list[float] = []
    for stored, lo, hi in _spans(since, now, built) if since <= now else ():
        sql = (
            f"SELECT lat, lon FROM pickups WHERE ts >= :lo AND ts < :hi{only}"
            if stored
            else f"SELECT lat, lon FROM ({_STARTS}) s WHERE true{only}"
        )
        rows = session.execute(
            text(sql), {"lo": lo, "hi": hi, "lookback": LOOKBACK, "m": municipality}
        ).all()
        lat.extend(r.lat for r in rows)
        lon.extend(r.lon for r in rows)
    return pd.DataFrame(
        {"pickup_lat": np.array(lat, dtype=float), "pickup_lon": np.array(lon, dtype=float)}
    )
