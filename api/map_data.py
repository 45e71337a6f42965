"""Frames for the maps, read from PostGIS (``maps/`` itself never touches the database).

Stand map: the stands (a supervisor's own only), their visits, occupancy and licensees'
presence, by the supervisor's reads (``db.stands.queries``). Citizen map: the fixes of
accessible vehicles in the recent window and the accessibility flag. Planner map: pickups (a
fix turning the meter ``occupied``) of the window as trips.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

MAX_GAP_S = 600.0


def stands_frame(session: Session, *, stand_ids: list[str] | None = None) -> gpd.GeoDataFrame:
    """Active stands with geometry (``stand_ids`` limits them), EPSG:4326."""
    where = " AND stand_id = ANY(:ids)" if stand_ids is not None else ""
    frame = gpd.read_postgis(
        text(
            "SELECT stand_id, coalesce(name, stand_id) AS name, capacity, geometry FROM stands "
            f"WHERE retired_at IS NULL AND geometry IS NOT NULL{where} ORDER BY stand_id"
        ),
        session.connection(),
        geom_col="geometry",
        params={"ids": stand_ids or []},
    )
    frame["capacity"] = pd.array(frame["capacity"], dtype="Int64")
    return frame.set_crs(4326, allow_override=True)


def stand_frames(
    session: Session,
    *,
    stands: gpd.GeoDataFrame,
    since: dt.datetime,
    now: dt.datetime,
    timezone: str,
) -> dict[str, Any]:
    """Visits and occupancy of ``stands`` over [since, now], and their licensees' presence.

    The supervisor's own reads (``db.stands.queries``): the visits of
    :func:`~db.stands.queries.recent_visits` (one in progress lasts until ``now``), and the
    presence table of :func:`~db.stands.queries.supervisor_presence` over the local days from
    ``since`` to ``now``.

    Returns
    -------
    dict
        ``visits``, ``occupancy`` (None without visits), ``presence`` (None without licences).
    """
    from db.stands.queries import licence_frame, recent_visits, supervisor_presence
    from stands.licences import LICENCE_COLUMNS
    from stands.occupancy import occupancy
    from stands.visits import empty_visits

    ids = stands["stand_id"].astype(str).tolist()
    if not ids:
        return {"visits": empty_visits(), "occupancy": None, "presence": None}
    licences = licence_frame(session=session, stand_ids=ids)[list(LICENCE_COLUMNS)]
    visits = recent_visits(
        session=session,
        stand_ids=ids,
        since=since,
        now=now,
        licences=licences,
        max_gap_s=MAX_GAP_S,
        timezone=timezone,
    )
    occ = occupancy(visits, stands, start=since, end=now) if len(visits) else None
    table = None
    if len(licences):
        table = supervisor_presence(
            session=session,
            stand_ids=ids,
            start=pd.Timestamp(since).tz_convert(timezone).date(),
            end=pd.Timestamp(now).tz_convert(timezone).date(),
            timezone=timezone,
        )
    return {"visits": visits, "occupancy": occ, "presence": table}


def citizen_frames(
    session: Session, *, since: dt.datetime, now: dt.datetime
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Latest fix of each accessible vehicle in [since, now] and the accessible fleet.

    Positions are the centres of their cells of the public grid
    (:data:`api.routes.public.CELL_RESOLUTION`): the exact fixes never reach the citizen map.
    """
    from api.routes.public import CELL_RESOLUTION
    from geo.h3 import snap_to_cell_centres

    rows = session.execute(
        text(
            "SELECT DISTINCT ON (f.vehicle_id) f.vehicle_id, f.ts, f.lat, f.lon, f.meter "
            "FROM fixes f JOIN vehicles v ON v.vehicle_id = f.vehicle_id AND v.accessible "
            "WHERE f.ts BETWEEN :since AND :now ORDER BY f.vehicle_id, f.ts DESC"
        ),
        {"since": since, "now": now},
    ).all()
    _, lat, lon = snap_to_cell_centres(
        np.array([r.lat for r in rows], dtype=float),
        np.array([r.lon for r in rows], dtype=float),
        resolution=CELL_RESOLUTION,
    )
    pings = pd.DataFrame(
        {
            "vehicle_id": pd.Series([r.vehicle_id for r in rows], dtype="str"),
            "timestamp": pd.to_datetime([r.ts for r in rows], utc=True).as_unit("ns"),
            "lat": lat,
            "lon": lon,
            "meter": pd.Series([r.meter for r in rows], dtype="object"),
        }
    )
    fleet = pd.DataFrame({"vehicle_id": pings["vehicle_id"], "accessible": True})
    return pings, fleet


def pickups_frame(
    session: Session, *, since: dt.datetime, now: dt.datetime, municipality: str | None = None
) -> pd.DataFrame:
    """Pickups of the window (``db.tracking.pickups``): ``pickup_lat``, ``pickup_lon``.

    ``municipality`` (IBGE code): only the vehicles registered there.
    """
    from db.tracking.pickups import pickup_points

    return pickup_points(session, since=since, now=now, municipality=municipality)


def findings_frame(
    session: Session,
    *,
    kinds: tuple[str, ...] | None = None,
    limit: int,
    window: tuple[dt.datetime, dt.datetime] | None = None,
) -> gpd.GeoDataFrame:
    """Return the most recent findings with their details, EPSG:4326.

    Only ``kinds``, if given, and only those overlapping ``window`` (since, until), if given:
    the planner's candidate sites count the days of its demand window, as its page says.
    """
    where = ["kind = ANY(:kinds)"] if kinds else []
    if window is not None:
        where.append("ended_at >= :since AND started_at <= :until")
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    since, until = window if window is not None else (None, None)
    frame = gpd.read_postgis(
        text(
            "SELECT finding_id, kind, vehicle_id, stand_id, started_at, ended_at, confidence, "
            f"details, geometry FROM findings {clause}ORDER BY started_at DESC LIMIT :limit"
        ),
        session.connection(),
        geom_col="geometry",
        params={"kinds": list(kinds or ()), "limit": limit, "since": since, "until": until},
    )
    for col in ("started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True).dt.as_unit("ns")
    return frame.set_crs(4326, allow_override=True)
