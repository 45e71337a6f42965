"""Frames for the maps, read from PostGIS (``maps/`` itself never touches the database).

Stand map: the stands (a supervisor's own only), the fixes of the window of the vehicles seen
inside them or licensed there, visits by :func:`stands.visits.detect_visits` (a visit still in
progress — its last inside fix is the vehicle's latest and at most ``max_gap_s`` old — lasts
until ``now``), occupancy and presence. Citizen map: the fixes of accessible vehicles in the
recent window and the accessibility flag. Planner map: pickups (a fix turning the meter
``occupied``) of the window as trips.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from fleet.dates import pandas_dates

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


def licences_frame(session: Session, *, stand_ids: list[str]) -> pd.DataFrame:
    """Parking licences of the stands (licence frame of ``stands.licences``)."""
    rows = session.execute(
        text(
            "SELECT vehicle_id, stand_id, valid_from, valid_until FROM parking_licences "
            "WHERE stand_id = ANY(:ids) ORDER BY vehicle_id, stand_id"
        ),
        {"ids": stand_ids},
    ).all()
    return pd.DataFrame(
        {
            "vehicle_id": pd.Series([r.vehicle_id for r in rows], dtype="str"),
            "stand_id": pd.Series([r.stand_id for r in rows], dtype="str"),
            "valid_from": pandas_dates(r.valid_from for r in rows),
            "valid_until": pandas_dates(r.valid_until for r in rows),
        }
    )


def stand_frames(
    session: Session,
    *,
    stands: gpd.GeoDataFrame,
    since: dt.datetime,
    now: dt.datetime,
    timezone: str,
) -> dict[str, Any]:
    """Visits, occupancy and presence of ``stands`` over [since, now].

    Returns
    -------
    dict
        ``visits``, ``occupancy`` (None without visits), ``presence`` (None without licences).
    """
    from db.engine import without_jit
    from db.stands.queries import IN_PLACE_CELLS, licence_unknown, place_cells
    from stands.near import near_dwells
    from stands.occupancy import occupancy
    from stands.presence import presence
    from stands.visits import detect_visits

    ids = stands["stand_id"].astype(str).tolist()
    licences = licences_frame(session, stand_ids=ids)
    params = {"ids": ids, "since": since, "now": now, "cells": place_cells(stands)}
    without_jit(session)
    rows = session.execute(
        text(
            "WITH s AS (SELECT stand_id, geometry FROM stands WHERE stand_id = ANY(:ids)), "
            "seen AS (SELECT DISTINCT f.vehicle_id FROM fixes f JOIN s "
            "  ON ST_Covers(s.geometry, f.geom) WHERE f.ts BETWEEN :since AND :now "
            f"  AND {IN_PLACE_CELLS}"
            "  UNION SELECT vehicle_id FROM parking_licences WHERE stand_id = ANY(:ids)) "
            "SELECT f.vehicle_id, f.ts, f.lat, f.lon, f.meter, "
            f"  CASE WHEN {IN_PLACE_CELLS} THEN (SELECT s.stand_id FROM s "
            "   WHERE ST_Covers(s.geometry, f.geom) ORDER BY s.stand_id LIMIT 1) END AS stand_id "
            "FROM fixes f WHERE f.vehicle_id IN (SELECT vehicle_id FROM seen) "
            "AND f.ts BETWEEN :since AND :now ORDER BY f.vehicle_id, f.ts"
        ),
        params,
    ).all()
    pings = pd.DataFrame(
        {
            "vehicle_id": pd.Series([r.vehicle_id for r in rows], dtype="str"),
            "timestamp": pd.to_datetime([r.ts for r in rows], utc=True).as_unit("ns"),
            "lat": np.array([r.lat for r in rows], dtype=float),
            "lon": np.array([r.lon for r in rows], dtype=float),
            "meter": pd.Series([r.meter for r in rows], dtype="object"),
        }
    )
    inside = np.array([r.stand_id is not None for r in rows], dtype=bool)
    memberships = pd.DataFrame(
        {
            "ping_index": np.flatnonzero(inside).astype(np.int64),
            "stand_id": pd.Series(
                [r.stand_id for r in rows if r.stand_id is not None], dtype="str"
            ),
        }
    )
    visits = detect_visits(
        pings,
        memberships,
        stands=stands,
        licences=licences,
        unknown_licences=licence_unknown(session=session),
        min_dwell_s=0.0,
        max_gap_s=MAX_GAP_S,
        timezone=timezone,
    )
    if len(visits):
        now_ts = pd.Timestamp(now)
        latest = pings.groupby("vehicle_id")["timestamp"].max()
        ongoing = (
            visits["departed_at"].to_numpy() == latest.reindex(visits["vehicle_id"]).to_numpy()
        ) & ((now_ts - visits["departed_at"]).dt.total_seconds().to_numpy() <= MAX_GAP_S)
        visits.loc[ongoing, "departed_at"] = now_ts
    occ = occupancy(visits, stands, start=since, end=now) if len(visits) else None
    table = None
    if len(licences):
        start = pd.Timestamp(since).tz_convert(timezone).date()
        end = pd.Timestamp(now).tz_convert(timezone).date()
        # Only the licensees are in the table; passing only their fixes and visits also avoids
        # an IndexError in stands.presence._sightings when a part holds no licensee.
        licensees = set(licences["vehicle_id"])
        own = pings.loc[pings["vehicle_id"].isin(licensees)]
        mine = visits.loc[visits["vehicle_id"].isin(licensees)]
        dwells = near_dwells(own, licences, stands)  # as habitual_absence: beyond the polygon
        table = presence(
            pd.concat([mine, dwells], ignore_index=True) if len(dwells) else mine,
            licences,
            own if len(own) else None,
            start=start,
            end=end,
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
    session: Session, *, kinds: tuple[str, ...] | None = None, limit: int
) -> gpd.GeoDataFrame:
    """Return the most recent findings (``kinds`` only, if given) with their details, EPSG:4326."""
    where = "WHERE kind = ANY(:kinds) " if kinds else ""
    frame = gpd.read_postgis(
        text(
            "SELECT finding_id, kind, vehicle_id, stand_id, started_at, ended_at, confidence, "
            f"details, geometry FROM findings {where}ORDER BY started_at DESC LIMIT :limit"
        ),
        session.connection(),
        geom_col="geometry",
        params={"kinds": list(kinds or ()), "limit": limit},
    )
    for col in ("started_at", "ended_at"):
        frame[col] = pd.to_datetime(frame[col], utc=True).dt.as_unit("ns")
    return frame.set_crs(4326, allow_override=True)
