"""Read queries of the API: stands and findings as GeoJSON, current occupancy, nearby supply.

Keyword-only functions over a session; geometry leaves the database as GeoJSON (EPSG:4326).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from stands.occupancy import present_at
from stands.visits import detect_visits
from tracking import frames as fr

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


def licensed_vehicles(*, session: Session, stand_id: str, on: dt.date) -> set[str]:
    """Return the vehicles holding a parking licence for ``stand_id`` on local date ``on``."""
    rows = session.execute(
        text(
            "SELECT vehicle_id FROM parking_licences WHERE stand_id = :s "
            "AND (valid_from IS NULL OR valid_from <= :d) "
            "AND (valid_until IS NULL OR valid_until >= :d)"
        ),
        {"s": stand_id, "d": on},
    ).scalars()
    return set(rows)


def current_occupancy(
    *,
    session: Session,
    stand_id: str,
    now: dt.datetime,
    window_s: float,
    max_gap_s: float = 600.0,
) -> pd.DataFrame:
    """Return who is at the stand now, in queue order, from the fixes of the last ``window_s``.

    Visits are detected with :func:`stands.visits.detect_visits` on the fixes of the vehicles
    seen inside the stand in the window; a visit is still in progress when its last inside fix
    is the vehicle's latest fix and at most ``max_gap_s`` old. Its departure is then taken as
    ``now`` and :func:`stands.occupancy.present_at` gives the queue at ``now``.

    Returns
    -------
    pandas.DataFrame
        Columns of :data:`stands.occupancy.PRESENT_COLUMNS` (``licensed`` is <NA>).
    """
    since = now - dt.timedelta(seconds=window_s)
    rows = session.execute(
        text(
            "WITH s AS (SELECT geometry FROM stands WHERE stand_id = :id), "
            "seen AS (SELECT DISTINCT f.vehicle_id FROM fixes f, s "
            "  WHERE f.ts >= :since AND f.ts <= :now AND ST_Covers(s.geometry, f.geom)) "
            "SELECT f.vehicle_id, f.ts, f.meter, ST_Covers(s.geometry, f.geom) AS inside "
            "FROM fixes f, s WHERE f.vehicle_id IN (SELECT vehicle_id FROM seen) "
            "AND f.ts >= :since AND f.ts <= :now ORDER BY f.vehicle_id, f.ts"
        ),
        {"id": stand_id, "since": since, "now": now},
    ).all()
    pings = pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series([r.vehicle_id for r in rows], dtype="str"),
            fr.TIMESTAMP: pd.to_datetime([r.ts for r in rows], utc=True),
            fr.METER: pd.Series([r.meter for r in rows], dtype="object"),
        }
    )
    inside = np.array([bool(r.inside) for r in rows], dtype=bool)
    memberships = pd.DataFrame(
        {
            "ping_index": np.flatnonzero(inside).astype(np.int64),
            "stand_id": pd.Series([stand_id] * int(inside.sum()), dtype="str"),
        }
    )
    visits = detect_visits(pings, memberships, min_dwell_s=0.0, max_gap_s=max_gap_s)
    if visits.empty:
        return present_at(visits, pd.Timestamp(now))
    latest = pings.groupby(fr.VEHICLE_ID)[fr.TIMESTAMP].max()
    now_ts = pd.Timestamp(now)
    ongoing = (
        visits["departed_at"].to_numpy() == latest.reindex(visits[fr.VEHICLE_ID]).to_numpy()
    ) & ((now_ts - visits["departed_at"]).dt.total_seconds().to_numpy() <= max_gap_s)
    visits = visits.loc[ongoing].copy()
    visits["departed_at"] = now_ts
    return present_at(visits, now_ts)
