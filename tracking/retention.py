"""Retention of raw fixes (LGPD): delete the fixes older than the period, keep the evidence.

A fix is *evidence*, and is kept whatever its age, when

- a finding's ``details`` names it: any JSON object with ``timestamp``, ``lat`` and ``lon`` (the
  records of :func:`tracking.detectors._evidence.fix_record`), of the vehicle named by the nearest
  enclosing ``vehicle_id`` (the vehicle passed in a queue jump, each vehicle of an illegal stand),
  else the finding's. Evidence times are whole seconds (the fraction is dropped), so the fixes of
  that vehicle in ``[timestamp, timestamp + 1 s)`` are kept; a record with no vehicle at all keeps
  the fixes at that second and position (1e-6°);
- or it lies on the stored track of a proposal's vehicle over ``[committed_at - margin,
  committed_until + margin]``: what the auto de infração draws (``enforcement/evidence.py``).

Kept fixes stay in ``fixes`` (and in their daily partition), so the documents and every query
read them as before. Per daily partition older than the cutoff:

- no evidence in it: the partition is dropped whole (no row-by-row delete, no bloat);
- evidence in it: the evidence rows are copied aside, the partition is truncated and they are put
  back (a delete of every other row, at the cost of the rows kept);
- fixes older than the cutoff in the DEFAULT partition are deleted row by row, evidence excepted.

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

from tracking._errors import InvalidParameterError
from tracking.models import FIXES_DEFAULT_PARTITION
from tracking.store import daily_partitions

_RETAINED = "_retained_fixes"


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
) -> Iterator[tuple[str | None, str, float, float]]:
    """Yield ``(vehicle_id, timestamp, lat, lon)`` of every fix record in a finding's details.

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
        ts, lat, lon = details.get("timestamp"), details.get("lat"), details.get("lon")
        if isinstance(ts, str) and isinstance(lat, int | float) and isinstance(lon, int | float):
            yield owner, ts, float(lat), float(lon)
        for value in details.values():
            yield from evidence_fixes(value, owner)
    elif isinstance(details, list):
        for value in details:
            yield from evidence_fixes(value, vehicle_id)


def _stage_evidence(conn: Connection, *, cutoff: dt.datetime, track_margin_s: float) -> int:
    """Fill the temporary table of retained spans; return the number of evidence references."""
    conn.execute(
        text(
            f'CREATE TEMP TABLE {_RETAINED} (vehicle_id text COLLATE "C", '
            "t0 timestamptz NOT NULL, t1 timestamptz NOT NULL, lat float8, lon float8) "
            "ON COMMIT DROP"
        )
    )
    rows: list[dict[str, Any]] = []
    found = conn.execute(
        text("SELECT vehicle_id, details FROM findings").execution_options(yield_per=2000)
    )
    for vehicle_id, details in found:
        for owner, ts, lat, lon in evidence_fixes(details, vehicle_id):
            try:
                t0 = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
            except ValueError:
                continue
            if t0.tzinfo is None or t0 >= cutoff:
                continue
            rows.append(
                {
                    "v": owner,
                    "t0": t0,
                    "t1": t0 + dt.timedelta(seconds=1),
                    "lat": None if owner else lat,
                    "lon": None if owner else lon,
                }
            )
    if rows:
        conn.execute(
            text(f"INSERT INTO {_RETAINED} VALUES (:v, :t0, :t1, :lat, :lon)"),
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


def _kept_predicate(alias: str) -> str:
    """Return the SQL condition: the row ``alias`` is evidence."""
    return (
        f"EXISTS (SELECT 1 FROM {_RETAINED} r WHERE "
        f"((r.vehicle_id = {alias}.vehicle_id) OR (r.vehicle_id IS NULL "
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
    report.evidence_refs = _stage_evidence(conn, cutoff=cutoff, track_margin_s=track_margin_s)
    keep = _kept_predicate("f")
    for name, day in daily_partitions(conn):
        if day >= cutoff.date():
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
    conn.execute(text(f"DROP TABLE {_RETAINED}"))
    return report
