"""Read queries of the API: stands and findings as GeoJSON, nearby supply, a stand's queue now.

Keyword-only functions over a session; geometry leaves the database as GeoJSON (EPSG:4326).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from typing import Any, cast

import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from api.frame_rows import PresentRow
from api.schemas import PresentVehicle


def prefixo_part(column: str, wanted: str, *, key: str = "part") -> tuple[str, dict[str, str]]:
    """Return the SQL condition "the prefixo in ``column`` has ``wanted`` in it", and its params.

    Any case; as typed (``%`` and ``_`` plain characters), or by its letters and digits alone,
    separators aside, as the supervisor's filter (``api.web.supervisor.matches_prefixo``):
    "4227", "sim4227" and "SIM 4227" find SIM-4227.
    """
    escaped = re.sub(r"([\\%_])", r"\\\1", wanted.strip())
    cond = f"{column} ILIKE :{key} ESCAPE '\\'"
    params = {key: f"%{escaped}%"}
    letters = "".join(c for c in wanted.casefold() if c.isalnum())
    if letters:
        squeezed = f"regexp_replace(lower({column}), '[^[:alnum:]]', '', 'g')"
        cond = f"({cond} OR {squeezed} LIKE :{key}_letters)"
        params[f"{key}_letters"] = f"%{letters}%"
    return cond, params


_STAND_SQL = """
SELECT stand_id, name, address, capacity, kind, order_number, municipality_code,
       retired_at, radius_m, location_note, ST_AsGeoJSON(geometry, 7) AS geometry
FROM stands
"""


def _feature(row: Any, id_field: str) -> dict[str, Any]:
    props = {k: v for k, v in row._mapping.items() if k != "geometry"}
    for key, value in props.items():
        if isinstance(value, dt.datetime | dt.date):
            props[key] = value.isoformat()
    geometry = json.loads(row.geometry) if row.geometry else None
    return {"type": "Feature", "id": props[id_field], "geometry": geometry, "properties": props}


def stand_features(
    *,
    session: Session,
    stand_ids: list[str] | None = None,
    include_retired: bool = False,
    limit: int = 1000,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """Return stands as GeoJSON features (sorted by id) and the total count of the filter."""
    where = ["TRUE"]
    params: dict[str, object] = {"limit": limit, "offset": offset}
    if stand_ids is not None:
        where.append("stand_id = ANY(:ids)")
        params["ids"] = stand_ids
    if not include_retired:
        where.append("retired_at IS NULL")
    clause = " AND ".join(where)
    rows = session.execute(
        text(f"{_STAND_SQL} WHERE {clause} ORDER BY stand_id LIMIT :limit OFFSET :offset"), params
    ).all()
    count = session.execute(text(f"SELECT count(*) FROM stands WHERE {clause}"), params).scalar()
    return [_feature(r, "stand_id") for r in rows], int(count or 0)


def stand_feature(*, session: Session, stand_id: str) -> dict[str, Any] | None:
    """Return one stand as a GeoJSON feature, or None."""
    row = session.execute(text(f"{_STAND_SQL} WHERE stand_id = :id"), {"id": stand_id}).first()
    return None if row is None else _feature(row, "stand_id")


def finding_features(
    *,
    session: Session,
    kind: str | None = None,
    vehicle_id: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    finding_id: str | None = None,
    limit: int = 1000,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """Return findings as GeoJSON features (newest first) and the total count of the filter.

    ``since``/``until`` select findings overlapping the period.
    """
    where = ["TRUE"]
    params: dict[str, object] = {"limit": limit, "offset": offset}
    for column, value in (("kind", kind), ("vehicle_id", vehicle_id), ("finding_id", finding_id)):
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    if since is not None:
        where.append("ended_at >= :since")
        params["since"] = since
    if until is not None:
        where.append("started_at <= :until")
        params["until"] = until
    clause = " AND ".join(where)
    rows = session.execute(
        text(
            "SELECT finding_id, kind, vehicle_id, stand_id, started_at, ended_at, confidence, "
            "details, ST_AsGeoJSON(geometry, 7) AS geometry FROM findings "
            f"WHERE {clause} ORDER BY started_at DESC, finding_id LIMIT :limit OFFSET :offset"
        ),
        params,
    ).all()
    count = session.execute(text(f"SELECT count(*) FROM findings WHERE {clause}"), params).scalar()
    return [_feature(r, "finding_id") for r in rows], int(count or 0)


def queue_now(
    *, session: Session, stand_id: str, window_min: int, timezone: str
) -> tuple[dt.datetime, list[PresentVehicle]]:
    """Who is at ``stand_id`` now, in queue order (``db.stands.queries.supervisor_queue``).

    Returns
    -------
    tuple
        The instant (UTC) and the vehicles present then.
    """
    from db.stands.queries import supervisor_queue

    now = dt.datetime.now(dt.UTC)
    present = supervisor_queue(
        session=session,
        stand_ids=[stand_id],
        now=now,
        window_s=window_min * 60.0,
        timezone=timezone,
    )
    vehicles = [
        PresentVehicle(
            position=int(r.position),
            vehicle_id=str(r.vehicle_id),
            arrived_at=r.arrived_at.to_pydatetime(),
            waited_s=float(r.waited_s),
            licensed=None if pd.isna(cast(Any, r.licensed)) else bool(r.licensed),
        )
        for r in cast("Iterator[PresentRow]", present.itertuples(index=False))
    ]
    return now, vehicles


_LATEST_OF_VEHICLES = (
    "SELECT max(x.ts) FROM unnest(CAST(:ids AS text[])) AS v(id) CROSS JOIN LATERAL ("
    "  SELECT f.ts FROM {table} f WHERE f.vehicle_id = v.id AND f.ts < :before"
    "  AND f.ts >= :after{free} ORDER BY f.ts DESC LIMIT 1) x"
)
SILENCE_LOOKBACK_DAYS = 30
"""How far back a page polled or open to the public looks for a silent feed's latest fix (a
partition read per day of silence: bounded)."""


def latest_fix_at(
    *,
    session: Any,
    vehicle_ids: list[str],
    before: dt.datetime,
    after: dt.datetime | None = None,
    free_only: bool = False,
) -> dt.datetime | None:
    """Return the instant of the latest fix of one of ``vehicle_ids`` in ``[after, before)``.

    ``fixes`` is partitioned by UTC day and keyed ``(vehicle_id, ts)``: the daily partitions
    (from the catalog, :func:`db.tracking.store.daily_partitions`) are read newest first, each
    with one backward step of its primary key per vehicle, and the search stops at the first
    partition with a fix; the DEFAULT partition (days without their own) is read once. A
    partition is never scanned.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Session of the request.
    vehicle_ids : list of str
        Vehicles whose fixes count.
    before : datetime.datetime
        Bound (exclusive, aware).
    after : datetime.datetime, optional
        Bound (inclusive, aware): older partitions are not read. None: no bound.
    free_only : bool, default False
        Only fixes with the meter ``free`` (what the public pages show).

    Returns
    -------
    datetime.datetime or None
        The instant, or None when none of the vehicles has a fix in the span.
    """
    from db.tracking.models import FIXES_DEFAULT_PARTITION
    from db.tracking.store import daily_partitions

    if not vehicle_ids:
        return None
    since = after if after is not None else dt.datetime.min.replace(tzinfo=dt.UTC)
    params = {"ids": list(vehicle_ids), "before": before, "after": since}
    free = " AND f.meter = 'free'" if free_only else ""
    conn = session.connection()

    def latest_in(table: str) -> dt.datetime | None:
        value: dt.datetime | None = conn.execute(
            text(_LATEST_OF_VEHICLES.format(table=table, free=free)), params
        ).scalar()
        return value

    found = latest_in(FIXES_DEFAULT_PARTITION)
    last_utc_day = before.astimezone(dt.UTC).date()
    for table, day in reversed(daily_partitions(conn)):
        if day > last_utc_day:
            continue
        if day < since.astimezone(dt.UTC).date() or (
            found is not None and day < found.astimezone(dt.UTC).date()
        ):
            break  # older than the bound, or than the DEFAULT partition's latest fix
        ts = latest_in(table)
        if ts is not None:
            found = ts if found is None else max(found, ts)
            break
    return found
