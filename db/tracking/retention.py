"""Retention of raw fixes (LGPD): delete the fixes older than the period, keep the evidence.

A fix is *evidence*, and is kept whatever its age, when

- a finding's ``details`` names it: any JSON object with ``timestamp``, ``lat`` and ``lon`` (the
  records of :func:`tracking.detectors._evidence.fix_record`), of the vehicle named by the nearest
  enclosing ``vehicle_id`` (the vehicle passed in a queue jump, each vehicle of an illegal stand),
  else the finding's. Evidence times are whole seconds (the fraction is dropped), so the fixes of
  that vehicle in ``[timestamp, timestamp + 1 s)`` are kept; a record with no vehicle at all keeps
  the fixes at that second and position (1e-6°);
- or it lies on the stored track of a proposal's vehicle over ``[committed_at - margin,
  committed_until + margin]``: what the auto de infração draws (``db/enforcement/evidence.py``).

Unreadable evidence fails closed: a record whose instant cannot be read (not ISO 8601, no
offset, not a string) or whose position is not numeric, when the finding has no vehicle to
keep by, cannot say which fixes it names; every fix of every vehicle over the finding's UTC
days (one day of margin either side) is then kept, the partitions of those days are left
whole (``partitions_refused``) and the record is reported (``unreadable_evidence``: finding,
value), so the run's audit entry names it.

Kept fixes stay in ``fixes`` (and in their daily partition), so the documents and every query
read them as before. Per daily partition older than the cutoff:

- no evidence in it: the partition is dropped whole (no row-by-row delete, no bloat);
- evidence in it: the evidence rows are copied aside, the partition is truncated and they are put
  back (a delete of every other row, at the cost of the rows kept);
- fixes older than the cutoff in the DEFAULT partition are deleted row by row, evidence excepted;
- the pickups of those days (``db.tracking.pickups``) are deleted.

The cutoff is a UTC midnight: ``keep_days`` whole UTC days before today's are kept, so a daily
partition is either wholly kept or wholly past.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from db.tracking.models import FIXES_DEFAULT_PARTITION
from db.tracking.store import daily_partitions
from tracking._errors import InvalidParameterError

_RETAINED = "_retained_fixes"
_DAY = dt.timedelta(days=1)


@dataclass(kw_only=True)
class RetentionReport:
    """What a retention run did (or, dry, would do); JSON-ready through :meth:`as_dict`."""

    keep_days: int
    cutoff: str
    dry_run: bool
    evidence_refs: int = 0
    partitions_dropped: list[str] = field(default_factory=list)
    partitions_trimmed: list[str] = field(default_factory=list)
    rows_deleted: int = 0
    rows_kept: int = 0
    partitions_refused: list[str] = field(default_factory=list)
    unreadable_evidence: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Return the report as plain data."""
        return asdict(self)


def retention_cutoff(*, keep_days: int, today: dt.date) -> dt.datetime:
    """Return the UTC midnight before which fixes are past the retention period.

    Parameters
    ----------
    keep_days : int
        Whole UTC days kept before ``today`` (>= 1).
    today : datetime.date
        Today's UTC date.
    """
    if keep_days < 1:
        msg = f"'keep_days' era {keep_days}; esperado um inteiro >= 1"
        raise InvalidParameterError(msg)
    day = today - dt.timedelta(days=keep_days)
    return dt.datetime.combine(day, dt.time(0), tzinfo=dt.UTC)


def evidence_fixes(
    details: Any, vehicle_id: str | None
) -> Iterator[tuple[str | None, Any, Any, Any]]:
    """Yield ``(vehicle_id, timestamp, lat, lon)`` of every fix record in a finding's details.

    A fix record is a JSON object with the keys ``timestamp``, ``lat`` and ``lon``; their
    values are yielded as they are (numbers as floats), readable or not: the caller decides.

    Parameters
    ----------
    details : Any
        The finding's ``details`` (JSON).
    vehicle_id : str or None
        The finding's vehicle (the default owner of its records).
    """
    if isinstance(details, dict):
        owner = details.get("vehicle_id", vehicle_id)
        owner = owner if isinstance(owner, str) else vehicle_id
        if {"timestamp", "lat", "lon"} <= details.keys():
            lat, lon = details["lat"], details["lon"]
            yield (
                owner,
                details["timestamp"],
                float(lat) if _is_number(lat) else lat,
                float(lon) if _is_number(lon) else lon,
            )
        for value in details.values():
            yield from evidence_fixes(value, owner)
    elif isinstance(details, list):
        for value in details:
            yield from evidence_fixes(value, vehicle_id)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _instant(value: Any) -> dt.datetime | None:
    """Return the tz-aware instant of an evidence timestamp, or None when it cannot be read."""
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def _stage_evidence(
    conn: Connection, *, cutoff: dt.datetime, track_margin_s: float, report: RetentionReport
) -> int:
    """Fill the temporary table of retained spans; return the number of evidence references.

    Unreadable records go to ``report.unreadable_evidence`` and retain whole days (``whole``).
    """
    conn.execute(
        text(
            f'CREATE TEMP TABLE {_RETAINED} (vehicle_id text COLLATE "C", '
            "t0 timestamptz NOT NULL, t1 timestamptz NOT NULL, lat float8, lon float8, "
            "whole boolean NOT NULL DEFAULT false) ON COMMIT DROP"
        )
    )
    rows: list[dict[str, Any]] = []
    found = conn.execute(
        text(
            "SELECT finding_id, vehicle_id, started_at, ended_at, details FROM findings"
        ).execution_options(yield_per=2000)
    )
    for finding_id, vehicle_id, started_at, ended_at, details in found:
        for owner, ts, lat, lon in evidence_fixes(details, vehicle_id):
            t0 = _instant(ts)
            placed = owner is not None or (_is_number(lat) and _is_number(lon))
            if t0 is None or not placed:
                report.unreadable_evidence.append(
                    {"finding_id": finding_id, "timestamp": repr(ts)[:80], "vehicle_id": owner}
                )
                day0 = dt.datetime.combine(started_at.astimezone(dt.UTC).date(), dt.time(0), dt.UTC)
                day1 = dt.datetime.combine(ended_at.astimezone(dt.UTC).date(), dt.time(0), dt.UTC)
                if day0 - _DAY < cutoff:
                    span = {"t0": day0 - _DAY, "t1": day1 + 2 * _DAY}
                    rows.append({"v": None, "lat": None, "lon": None, "whole": True} | span)
                continue
            if t0 >= cutoff:
                continue
            rows.append(
                {
                    "v": owner,
                    "t0": t0,
                    "t1": t0 + dt.timedelta(seconds=1),
                    "lat": None if owner else lat,
                    "lon": None if owner else lon,
                    "whole": False,
                }
            )
    if rows:
        conn.execute(
            text(f"INSERT INTO {_RETAINED} VALUES (:v, :t0, :t1, :lat, :lon, :whole)"),
            rows,
        )
    tracks = conn.execute(
        text(
            f"INSERT INTO {_RETAINED} (vehicle_id, t0, t1) "
            "SELECT vehicle_id, committed_at - make_interval(secs => :m), "
            "committed_until + make_interval(secs => :m) + interval '1 microsecond' FROM proposals "
            "WHERE vehicle_id IS NOT NULL AND committed_at - make_interval(secs => :m) < :cutoff"
        ),
        {"m": track_margin_s, "cutoff": cutoff},
    ).rowcount
    conn.execute(text(f"CREATE INDEX ON {_RETAINED} (vehicle_id, t0)"))
    conn.execute(text(f"ANALYZE {_RETAINED}"))
    return len(rows) + int(tracks or 0)


def _refused_days(conn: Connection) -> list[tuple[dt.datetime, dt.datetime]]:
    """Spans retained whole (unreadable evidence)."""
    return [
        (r.t0, r.t1)
        for r in conn.execute(text(f"SELECT t0, t1 FROM {_RETAINED} WHERE whole")).all()
    ]


def _kept_predicate(alias: str) -> str:
    """Return the SQL condition: the row ``alias`` is evidence."""
    return (
        f"EXISTS (SELECT 1 FROM {_RETAINED} r WHERE "
        f"(r.whole OR (r.vehicle_id = {alias}.vehicle_id) OR (r.vehicle_id IS NULL "
        f"AND abs(r.lat - {alias}.lat) < 1e-6 AND abs(r.lon - {alias}.lon) < 1e-6)) "
        f"AND {alias}.ts >= r.t0 AND {alias}.ts < r.t1)"
    )


def apply_retention(
    conn: Connection,
    *,
    keep_days: int,
    today: dt.date,
    dry_run: bool = False,
    track_margin_s: float = 300.0,
) -> RetentionReport:
    """Delete the fixes older than ``keep_days`` whole UTC days, except evidence (see the module).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        Connection inside the caller's transaction (all or nothing).
    keep_days : int
        Whole UTC days kept before ``today``.
    today : datetime.date
        Today's UTC date.
    dry_run : bool, default False
        Count only; change nothing.
    track_margin_s : float, default 300
        Margin kept either side of a proposal's interval (the documents' track margin).

    Returns
    -------
    RetentionReport
        Partitions dropped and trimmed, rows deleted and kept (evidence).

    Raises
    ------
    InvalidParameterError
        If ``keep_days`` is below 1.
    """
    cutoff = retention_cutoff(keep_days=keep_days, today=today)
    report = RetentionReport(keep_days=keep_days, cutoff=cutoff.isoformat(), dry_run=dry_run)
    report.evidence_refs = _stage_evidence(
        conn, cutoff=cutoff, track_margin_s=track_margin_s, report=report
    )
    keep = _kept_predicate("f")
    refused = _refused_days(conn)
    for name, day in daily_partitions(conn):
        if day >= cutoff.date():
            continue
        start = dt.datetime.combine(day, dt.time(0), dt.UTC)
        if any(t0 < start + _DAY and start < t1 for t0, t1 in refused):
            report.partitions_refused.append(name)  # unreadable evidence may be in it
            continue
        total = int(conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one())
        kept = int(conn.execute(text(f"SELECT count(*) FROM {name} f WHERE {keep}")).scalar_one())
        report.rows_deleted += total - kept
        report.rows_kept += kept
        if kept == 0:
            report.partitions_dropped.append(name)
            if not dry_run:
                conn.execute(text(f"DROP TABLE {name}"))
            continue
        report.partitions_trimmed.append(name)
        if not dry_run and kept < total:
            conn.execute(
                text(
                    f"CREATE TEMP TABLE _kept_rows ON COMMIT DROP AS "
                    f"SELECT * FROM {name} f WHERE {keep}"
                )
            )
            conn.execute(text(f"TRUNCATE {name}"))
            conn.execute(text(f"INSERT INTO {name} SELECT * FROM _kept_rows"))
            conn.execute(text("DROP TABLE _kept_rows"))
    old = "f.ts < :cutoff"
    default_total = int(
        conn.execute(
            text(f"SELECT count(*) FROM {FIXES_DEFAULT_PARTITION} f WHERE {old}"),
            {"cutoff": cutoff},
        ).scalar_one()
    )
    if default_total:
        if dry_run:
            kept = int(
                conn.execute(
                    text(
                        f"SELECT count(*) FROM {FIXES_DEFAULT_PARTITION} f WHERE {old} AND {keep}"
                    ),
                    {"cutoff": cutoff},
                ).scalar_one()
            )
            deleted = default_total - kept
        else:
            deleted = int(
                conn.execute(
                    text(f"DELETE FROM {FIXES_DEFAULT_PARTITION} f WHERE {old} AND NOT {keep}"),
                    {"cutoff": cutoff},
                ).rowcount
                or 0
            )
            kept = default_total - deleted
        report.rows_deleted += deleted
        report.rows_kept += kept
    if not dry_run:  # the rides' starts derived from the fixes go with them
        conn.execute(text("DELETE FROM pickups WHERE ts < :cutoff"), {"cutoff": cutoff})
        conn.execute(text("DELETE FROM pickup_days WHERE day < :d"), {"d": cutoff.date()})
    conn.execute(text(f"DROP TABLE {_RETAINED}"))
    return report
