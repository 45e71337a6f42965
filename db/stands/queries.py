"""Database reads for the stands room: registry frames, visits from stored fixes, and the views.

Keyword-only functions over a session. Frames come out in the contracts of the pure functions
(``stands/licences.py``, ``stands/visits.py``, ...), which the views below then apply:

- :func:`overdue_stands` — the 90-day rule (``stands/supervisors.py``);
- ``supervisor_*`` — the supervisor's view (``stands/supervision.py``), for the stands of their
  scope only: the SQL itself selects nothing of other stands.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any, cast
from zoneinfo import ZoneInfo

import geopandas as gpd
import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.orm import Session

from db.engine import without_jit
from db.tracking.store import H3_RESOLUTION as FIX_CELL_RESOLUTION
from fleet.dates import pandas_dates, pandas_instants
from geo.calendar import DEFAULT_TIMEZONE
from geo.cover import build_stand_cover
from stands import supervision
from stands._errors import NaiveTimestampError, ThresholdError
from stands.frames import STAND_ID
from stands.licences import LICENCE_COLUMNS, VALID_FROM, VALID_UNTIL
from stands.near import DEFAULT_SILENT_REACH_M, near_dwells
from stands.occupancy import present_at
from stands.supervisors import MAX_DAYS_WITHOUT_SUPERVISOR, supervisor_lapses
from stands.visits import (
    DEFAULT_BOARDING_GRACE_M,
    DEFAULT_BOARDING_GRACE_S,
    DEFAULT_EXIT_GRACE_M,
    DEFAULT_EXIT_GRACE_S,
    DEFAULT_MIN_DWELL_S,
    DEFAULT_NEAR_EXIT_GRACE_S,
    DEFAULT_VISIT_MAX_GAP_S,
    detect_visits,
)
from tracking import frames as fr

_STANDS_SQL = """
SELECT stand_id, name, address, phone, order_number, kind, capacity,
       municipality_code AS municipality, radius_m, location_note, retired_at, geometry
FROM stands
"""


def stands_frame(
    *,
    session: Session,
    stand_ids: Collection[str] | None = None,
    municipality: str | None = None,
    include_retired: bool = False,
) -> gpd.GeoDataFrame:
    """Return stands as a GeoDataFrame (EPSG:4326), sorted by stand_id.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    stand_ids : collection of str, optional
        Only these stands.
    municipality : str, optional
        Only this municipality (IBGE code).
    include_retired : bool, default False
        Keep retired stands.

    Returns
    -------
    geopandas.GeoDataFrame
        ``stands.loaders.REGISTRY_COLUMNS`` and ``retired_at``; ``capacity`` and
        ``order_number`` Int64; geometry None where the stand has no location.
    """
    where: list[str] = ["TRUE"]
    params: dict[str, Any] = {}
    if stand_ids is not None:
        where.append("stand_id = ANY(:ids)")
        params["ids"] = list(stand_ids)
    if municipality is not None:
        where.append("municipality_code = :mun")
        params["mun"] = municipality
    if not include_retired:
        where.append("retired_at IS NULL")
    sql = f"{_STANDS_SQL} WHERE {' AND '.join(where)} ORDER BY stand_id"
    frame = gpd.read_postgis(
        text(sql), session.connection(), geom_col="geometry", params=params, crs=4326
    )
    for col in ("capacity", "order_number"):
        frame[col] = frame[col].astype("Int64")
    frame["retired_at"] = pandas_instants(frame["retired_at"].astype("object").tolist())
    return frame


def allowed_places_frame(*, session: Session) -> gpd.GeoDataFrame | None:
    """Return the allowed places not retired (``place_id``, ``name``, geometry), None if none."""
    frame = gpd.read_postgis(
        text(
            "SELECT place_id, name, geometry FROM allowed_places WHERE retired_at IS NULL "
            "ORDER BY place_id"
        ),
        session.connection(),
        geom_col="geometry",
        crs=4326,
    )
    return frame if len(frame) else None


def licence_unknown(*, session: Session) -> set[str]:
    """Return the vehicles whose licences are not known.

    The latest fleet import named a stand for them that the registry could not place
    (``vehicles.unplaced_stands``): at any stand, whether they are licensed is not known.
    """
    rows = session.execute(
        text("SELECT vehicle_id FROM vehicles WHERE cardinality(unplaced_stands) > 0")
    ).scalars()
    return set(rows)


def licence_frame(
    *,
    session: Session,
    stand_ids: Collection[str] | None = None,
    vehicle_ids: Collection[str] | None = None,
) -> pd.DataFrame:
    """Return parking licences as a licence frame (``stands/licences.py``) with ``licence_id``.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    stand_ids, vehicle_ids : collection of str, optional
        Only these stands / prefixos.

    Returns
    -------
    pandas.DataFrame
        ``licence_id`` then ``LICENCE_COLUMNS`` (dates naive ``datetime64[ns]``, NaT: open),
        sorted by (stand_id, vehicle_id, valid_from).
    """
    where, params = ["TRUE"], {}
    if stand_ids is not None:
        where.append("stand_id = ANY(:ids)")
        params["ids"] = list(stand_ids)
    if vehicle_ids is not None:
        where.append("vehicle_id = ANY(:vids)")
        params["vids"] = list(vehicle_ids)
    rows = session.execute(
        text(
            "SELECT licence_id, vehicle_id, stand_id, valid_from, valid_until "
            f"FROM parking_licences WHERE {' AND '.join(where)} "
            "ORDER BY stand_id, vehicle_id, valid_from NULLS FIRST"
        ),
        params,
    ).all()
    return pd.DataFrame(
        {
            "licence_id": pd.Series([r.licence_id for r in rows], dtype="int64"),
            "vehicle_id": pd.Series([r.vehicle_id for r in rows], dtype="str"),
            STAND_ID: pd.Series([r.stand_id for r in rows], dtype="str"),
            VALID_FROM: pandas_dates(r.valid_from for r in rows),
            VALID_UNTIL: pandas_dates(r.valid_until for r in rows),
        }
    )[["licence_id", *LICENCE_COLUMNS]]


def supervisors_frame(
    *, session: Session, stand_ids: Collection[str] | None = None
) -> pd.DataFrame:
    """Return supervisor records (every term): id, stand, person, election, homologation, end.

    Returns
    -------
    pandas.DataFrame
        ``supervisor_id``, ``stand_id``, ``person_name``, ``elected_on``, ``minutes_ref``,
        ``homologated_on``, ``until`` (dates naive ``datetime64[ns]``), sorted by stand and
        election.
    """
    where, params = "TRUE", {}
    if stand_ids is not None:
        where, params = "stand_id = ANY(:ids)", {"ids": list(stand_ids)}
    rows = session.execute(
        text(
            "SELECT supervisor_id, stand_id, person_name, elected_on, minutes_ref, "
            f"homologated_on, until FROM stand_supervisors WHERE {where} "
            "ORDER BY stand_id, elected_on, supervisor_id"
        ),
        params,
    ).all()
    frame = pd.DataFrame(
        rows,
        columns=[
            "supervisor_id",
            STAND_ID,
            "person_name",
            "elected_on",
            "minutes_ref",
            "homologated_on",
            "until",
        ],
    )
    for col in ("elected_on", "homologated_on", "until"):
        frame[col] = pandas_dates(frame[col].astype("object").tolist())
    return frame.astype({"supervisor_id": "int64", STAND_ID: "str"})


def overdue_stands(
    *,
    session: Session,
    as_of: dt.date,
    max_days: int = MAX_DAYS_WITHOUT_SUPERVISOR,
    municipality: str | None = None,
    only_overdue: bool = True,
    include_unrecorded: bool = False,
) -> pd.DataFrame:
    """Pontos fixos without a homologated supervisor for more than ``max_days`` (art. 50, III).

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    as_of : datetime.date
        Day of the check.
    max_days : int, default 90
        Days allowed without a supervisor.
    municipality : str, optional
        Only this municipality's stands.
    only_overdue, include_unrecorded : bool
        See :func:`stands.supervisors.supervisor_lapses`.

    Returns
    -------
    pandas.DataFrame
        :data:`stands.supervisors.LAPSE_COLUMNS`, plus ``name``.
    """
    stands = stands_frame(session=session, municipality=municipality, include_retired=True)
    ids = stands[STAND_ID].tolist()
    lapses = supervisor_lapses(
        stands,
        supervisors_frame(session=session, stand_ids=ids),
        licence_frame(session=session, stand_ids=ids),
        as_of=as_of,
        max_days=max_days,
        only_overdue=only_overdue,
        include_unrecorded=include_unrecorded,
    )
    names = stands.set_index(STAND_ID)["name"]
    lapses.insert(1, "name", lapses[STAND_ID].map(names).astype("object"))
    return lapses


# --- visits and sightings from the stored fixes ----------------------------------------------

# The fixes inside a stand are found through the stands' place cells (:func:`place_cells`) and
# each closed day's place index, not by testing every fix of the period (a fix stored without
# its cell is tested). Each vehicle's inside fixes less than twice ``keep`` apart form a run;
# the fixes within ``keep`` of a run are read through the primary key: only the fixes near an
# inside one, never a vehicle's whole track. ``latest``: its last fix in the period.
IN_PLACE_CELLS = "(f.h3_r9 = ANY(CAST(:cells AS bigint[])) OR f.h3_r9 IS NULL)"
"""Whether fix ``f`` lies in the ``:cells`` of :func:`place_cells` (or was stored without a cell):
the fixes that may be inside the stands, found through the closed days' place index."""

_VISIT_FIXES_SQL = f"""
WITH s AS (
    SELECT stand_id, geometry FROM stands
    WHERE stand_id = ANY(:ids) AND geometry IS NOT NULL
), ins AS (
    SELECT DISTINCT f.vehicle_id, f.ts FROM fixes f JOIN s ON ST_Covers(s.geometry, f.geom)
    WHERE f.ts >= :lo AND f.ts <= :hi
      AND {IN_PLACE_CELLS}
), gaps AS (
    SELECT vehicle_id, ts,
           ts - lag(ts) OVER (PARTITION BY vehicle_id ORDER BY ts)
               <= 2 * CAST(:keep AS interval) IS NOT TRUE AS starts
    FROM ins
), runs AS (
    SELECT vehicle_id, ts,
           count(*) FILTER (WHERE starts) OVER (PARTITION BY vehicle_id ORDER BY ts) AS run
    FROM gaps
), win AS (
    SELECT vehicle_id, greatest(min(ts) - CAST(:keep AS interval), :lo) AS a,
           least(max(ts) + CAST(:keep AS interval), :hi) AS b
    FROM runs GROUP BY vehicle_id, run
), last AS MATERIALIZED (
    SELECT v.vehicle_id,
           (SELECT max(x.ts) FROM fixes x
            WHERE x.vehicle_id = v.vehicle_id AND x.ts >= :lo AND x.ts <= :hi) AS latest
    FROM (SELECT DISTINCT vehicle_id FROM ins) v
), f AS MATERIALIZED (
    SELECT f.vehicle_id, f.ts, f.meter, f.lat, f.lon,
           CASE WHEN {IN_PLACE_CELLS}
                THEN ARRAY(SELECT s.stand_id FROM s WHERE ST_Covers(s.geometry, f.geom))
                ELSE '{{}}' END AS stand_ids
    FROM win CROSS JOIN LATERAL (
        SELECT * FROM fixes x
        WHERE x.vehicle_id = win.vehicle_id AND x.ts >= win.a AND x.ts <= win.b
          AND x.ts >= :lo AND x.ts <= :hi
        OFFSET 0  -- not flattened: each window read by the primary key, whatever the estimates
    ) f
)
SELECT f.vehicle_id, f.ts, f.meter, f.lat, f.lon, f.stand_ids, last.latest
FROM f JOIN last ON last.vehicle_id = f.vehicle_id
ORDER BY f.vehicle_id, f.ts
"""

# The same rows as one row per vehicle of arrays: decoding 500k rows one by one cost seconds.
# A fix's first stand in an array (null outside); a fix in overlapping stands, all of them with
# its position in the vehicle's arrays (``more``).
_VISIT_FIXES_BY_VEHICLE_SQL = f"""
WITH r AS ({_VISIT_FIXES_SQL}),
k AS (SELECT *, row_number() OVER (PARTITION BY vehicle_id ORDER BY ts) - 1 AS k FROM r)
SELECT vehicle_id, max(latest) AS latest,
       array_agg((extract(epoch FROM ts) * 1000000)::bigint ORDER BY ts) AS us,
       array_agg(lat ORDER BY ts) AS lat, array_agg(lon ORDER BY ts) AS lon,
       array_agg(meter ORDER BY ts) AS meter, array_agg(stand_ids[1] ORDER BY ts) AS stand_id,
       json_agg(json_build_array(k, stand_ids)) FILTER (WHERE cardinality(stand_ids) > 1) AS more
FROM k GROUP BY vehicle_id ORDER BY vehicle_id
"""


def place_cells(stands: gpd.GeoDataFrame) -> list[int]:
    """Return the cells (``fixes.h3_r9``, as stored) that a fix inside one of ``stands`` can have.

    Every H3 cell of the stored resolution touching a stand: the stand cover's exact test on
    the cells' polygons, each stand grown by the cover's margin (``geo.cover``).

    Parameters
    ----------
    stands : geopandas.GeoDataFrame
        Stands (EPSG:4326); those without a geometry have no cells.

    Returns
    -------
    list of int
        Signed 64-bit cells, as ``fixes.h3_r9`` stores them; empty without stands.
    """
    placed = stands.loc[stands.geometry.notna() & ~stands.geometry.is_empty]
    cover = build_stand_cover(placed, resolution=FIX_CELL_RESOLUTION)
    return [int(c) for c in cover.cells.view(np.int64)]


def visits_from_fixes(
    *,
    session: Session,
    stand_ids: Collection[str],
    start: dt.datetime,
    end: dt.datetime,
    licences: pd.DataFrame | None = None,
    unknown_licences: Collection[str] = (),
    exit_grace_s: float = DEFAULT_EXIT_GRACE_S,
    exit_grace_m: float = DEFAULT_EXIT_GRACE_M,
    near_exit_grace_s: float = DEFAULT_NEAR_EXIT_GRACE_S,
    min_dwell_s: float = DEFAULT_MIN_DWELL_S,
    boarding_grace_s: float = DEFAULT_BOARDING_GRACE_S,
    boarding_grace_m: float = DEFAULT_BOARDING_GRACE_M,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> pd.DataFrame:
    """Detect visits to ``stand_ids`` from the fixes stored between ``start`` and ``end``.

    Only fixes of vehicles seen inside one of the stands are read, and of those only the fixes
    within ``max(exit_grace_s, near_exit_grace_s, boarding_grace_s, max_gap_s)`` of an inside
    fix: everything the
    visit rules of ``stands/visits.py`` look at (excursions, boardings, silences), so the
    visits equal those detected on the vehicles' whole tracks.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    stand_ids : collection of str
        Stands to detect visits at (others are not read).
    start, end : datetime.datetime
        Tz-aware bounds of the fixes read (inclusive).
    licences : pandas.DataFrame, optional
        Licence frame for ``licensed``.
    unknown_licences : collection of str, default ()
        Vehicles whose licences are not known: ``licensed`` <NA> (``stands.visits``).
    exit_grace_s, exit_grace_m, near_exit_grace_s, min_dwell_s, boarding_grace_s,
    boarding_grace_m, max_gap_s : float
        Visit thresholds (``stands.visits.detect_visits``; boardings are measured to the
        stands' stored geometries).
    timezone : str, default "America/Sao_Paulo"
        Zone of the licence dates.

    Returns
    -------
    pandas.DataFrame
        ``stands.visits.VISIT_FRAME_COLUMNS``; ``attrs["latest"]``: each seen vehicle's last
        fix time up to ``end`` (dict vehicle_id → ISO 8601 instant).

    Raises
    ------
    NaiveTimestampError
        If the bounds are naive.
    """
    for name, value in (("start", start), ("end", end)):
        if value.tzinfo is None:
            msg = f"'{name}' sem fuso horário; esperado um instante com fuso"
            raise NaiveTimestampError(msg)
    keep = dt.timedelta(seconds=max(exit_grace_s, near_exit_grace_s, boarding_grace_s, max_gap_s))
    stands = stands_frame(session=session, stand_ids=list(stand_ids), include_retired=True)
    stands = stands.loc[stands.geometry.notna(), [STAND_ID, "geometry"]]
    without_jit(session)
    rows = session.execute(
        text(_VISIT_FIXES_BY_VEHICLE_SQL),
        {
            "ids": list(stand_ids),
            "lo": start,
            "hi": end,
            "keep": keep,
            "cells": place_cells(stands),
        },
    ).all()
    n = [len(r.us) for r in rows]
    empty = np.zeros(0)
    us = np.concatenate([np.asarray(r.us, dtype=np.int64) for r in rows] or [np.zeros(0, int)])
    pings = pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series(
                np.repeat(np.array([r.vehicle_id for r in rows], dtype=object), n), dtype="str"
            ),
            fr.TIMESTAMP: pd.Series(pd.to_datetime(us, unit="us", utc=True)).astype(
                pd.DatetimeTZDtype("ns", "UTC")
            ),
            fr.LAT: np.concatenate([np.asarray(r.lat, dtype=np.float64) for r in rows] or [empty]),
            fr.LON: np.concatenate([np.asarray(r.lon, dtype=np.float64) for r in rows] or [empty]),
            fr.METER: pd.Series([m for r in rows for m in r.meter], dtype="object"),
        }
    )
    # each fix's first stand, then the other stands of the fixes in overlapping stands
    first = np.array([sid for r in rows for sid in r.stand_id], dtype=object)
    at = np.flatnonzero(pd.notna(first))
    offsets = (np.cumsum(n, dtype=np.int64) - np.asarray(n, dtype=np.int64)).tolist()
    extra = [
        (o + k, sid)
        for r, o in zip(rows, offsets, strict=True)
        for k, ids in r.more or []
        for sid in ids[1:]
    ]
    index = np.concatenate([at, np.array([k for k, _ in extra], dtype=np.int64)])
    ids = np.concatenate([first[at], np.array([sid for _, sid in extra], dtype=object)])
    order = np.argsort(index, kind="stable")
    memberships = pd.DataFrame(
        {"ping_index": index[order], STAND_ID: pd.Series(ids[order], dtype="str")}
    )
    visits = detect_visits(
        pings,
        memberships,
        stands=stands,
        licences=licences,
        unknown_licences=unknown_licences,
        exit_grace_s=exit_grace_s,
        exit_grace_m=exit_grace_m,
        near_exit_grace_s=near_exit_grace_s,
        min_dwell_s=min_dwell_s,
        boarding_grace_s=boarding_grace_s,
        boarding_grace_m=boarding_grace_m,
        max_gap_s=max_gap_s,
        timezone=timezone,
    )
    latest = {str(r.vehicle_id): r.latest for r in rows}
    visits.attrs["latest"] = {v: pd.Timestamp(t).isoformat() for v, t in latest.items()}
    return visits


def operation_sightings(
    *,
    session: Session,
    vehicle_ids: Sequence[str],
    start: dt.date,
    end: dt.date,
    timezone: str = DEFAULT_TIMEZONE,
) -> pd.DataFrame:
    """Return the first and last fix of each vehicle on each local day: proof it operated.

    A fix with the meter ``off`` (out of service) is not operation (``stands.presence``).

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    vehicle_ids : sequence of str
        Vehicles.
    start, end : datetime.date
        First and last local day (inclusive).
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.

    Returns
    -------
    pandas.DataFrame
        ``vehicle_id``, ``timestamp`` (tz-aware UTC): two rows per vehicle and day operated
        (one when a single fix), sorted; a pings-like frame for ``stands.presence.presence``.
    """
    zone = ZoneInfo(timezone)
    lo = dt.datetime.combine(start, dt.time(), tzinfo=zone)
    hi = dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    without_jit(session)
    rows = session.execute(
        text(
            "SELECT vehicle_id, min(ts) AS first, max(ts) AS last FROM fixes "
            "WHERE vehicle_id = ANY(:v) AND ts >= :lo AND ts < :hi "
            "AND meter IS DISTINCT FROM 'off' "
            "GROUP BY vehicle_id, (ts AT TIME ZONE :tz)::date"
        ),
        {"v": list(vehicle_ids), "lo": lo, "hi": hi, "tz": timezone},
    ).all()
    vehicles = [r.vehicle_id for r in rows for _ in (0, 1)]
    stamps = [t for r in rows for t in (r.first, r.last)]
    frame = pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series(vehicles, dtype="str"),
            fr.TIMESTAMP: pd.to_datetime(pd.Series(stamps, dtype="object"), utc=True).astype(
                pd.DatetimeTZDtype("ns", "UTC")
            ),
        }
    )
    frame = frame.drop_duplicates().sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable")
    return frame.reset_index(drop=True)


def near_stand_fixes(
    *,
    session: Session,
    licences: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    start: dt.date,
    end: dt.date,
    timezone: str = DEFAULT_TIMEZONE,
    margin_m: float = DEFAULT_SILENT_REACH_M,
) -> pd.DataFrame:
    """Return the licensees' fixes near their stands, for :func:`stands.near.near_dwells`.

    Only the fixes inside each licensed stand's bounding box widened by ``margin_m`` are read;
    where the vehicle's track left that box (fixes not read), a row without position is put in,
    so no chain of the dwells joins fixes that were not consecutive.

    Returns
    -------
    pandas.DataFrame
        ``vehicle_id``, ``timestamp`` (UTC), ``lat``, ``lon`` (NaN on the break rows).
    """
    zone = ZoneInfo(timezone)
    lo = dt.datetime.combine(start, dt.time(), tzinfo=zone)
    hi = dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    shapes = stands.loc[stands.geometry.notna(), [STAND_ID, "geometry"]]
    corners = shapes.geometry.bounds.assign(**{STAND_ID: shapes[STAND_ID].astype("str")})
    boxes = licences[[fr.VEHICLE_ID, STAND_ID]].astype("str").merge(corners, on=STAND_ID)
    dlat = margin_m / 111_320.0
    rows: Sequence[Any] = []
    if len(boxes):
        bounds = boxes[["minx", "miny", "maxx", "maxy"]].to_numpy(dtype=np.float64)
        dlon = margin_m / (111_320.0 * np.cos(np.radians(bounds[:, 1])))
        without_jit(session)
        rows = session.execute(
            text(
                "WITH b AS MATERIALIZED (SELECT * FROM unnest(CAST(:bv AS text[]), "
                " CAST(:y0 AS float8[]), CAST(:y1 AS float8[]), CAST(:x0 AS float8[]), "
                " CAST(:x1 AS float8[])) AS b(v, y0, y1, x0, x1)), "
                "f AS (SELECT vehicle_id, ts, lat, lon,"
                "  row_number() OVER (PARTITION BY vehicle_id ORDER BY ts) AS k"
                " FROM fixes WHERE vehicle_id = ANY(:v) AND ts >= :lo AND ts < :hi) "
                "SELECT vehicle_id, array_agg((extract(epoch FROM ts) * 1000000)::bigint"
                "  ORDER BY ts), array_agg(lat ORDER BY ts), array_agg(lon ORDER BY ts),"
                " array_agg(k ORDER BY ts) "
                "FROM f WHERE EXISTS (SELECT 1 FROM b WHERE b.v = f.vehicle_id"
                " AND f.lat BETWEEN b.y0 AND b.y1 AND f.lon BETWEEN b.x0 AND b.x1) "
                "GROUP BY vehicle_id ORDER BY vehicle_id"
            ),
            {
                "v": sorted(set(boxes[fr.VEHICLE_ID])),
                "lo": lo,
                "hi": hi,
                "bv": boxes[fr.VEHICLE_ID].tolist(),
                "y0": (bounds[:, 1] - dlat).tolist(),
                "y1": (bounds[:, 3] + dlat).tolist(),
                "x0": (bounds[:, 0] - dlon).tolist(),
                "x1": (bounds[:, 2] + dlon).tolist(),
            },
        ).all()
    n = [len(r[1]) for r in rows]
    vid = np.repeat(np.array([r[0] for r in rows], dtype=object), n)
    us = np.concatenate([np.asarray(r[1], dtype=np.int64) for r in rows] or [np.zeros(0, int)])
    lat = np.concatenate([np.asarray(r[2], dtype=np.float64) for r in rows] or [np.zeros(0)])
    lon = np.concatenate([np.asarray(r[3], dtype=np.float64) for r in rows] or [np.zeros(0)])
    k = np.concatenate([np.asarray(r[4], dtype=np.int64) for r in rows] or [np.zeros(0, int)])
    # where the track left the box (fixes not read), a row without position at the last one
    first = np.cumsum(n, dtype=np.int64) - np.asarray(n, dtype=np.int64)
    jump = np.diff(k, prepend=0) > 1
    jump[first] = False
    at = np.flatnonzero(jump)
    vid, us = np.insert(vid, at, vid[at]), np.insert(us, at, us[at - 1])
    lat, lon = np.insert(lat, at, np.nan), np.insert(lon, at, np.nan)
    return pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series(vid, dtype="str"),
            fr.TIMESTAMP: pd.Series(pd.to_datetime(us, unit="us", utc=True)).astype(
                pd.DatetimeTZDtype("ns", "UTC")
            ),
            fr.LAT: lat,
            fr.LON: lon,
        }
    )


def licensee_people(*, session: Session, vehicle_ids: Sequence[str], on: dt.date) -> pd.DataFrame:
    """Return the autorizatário and the auxiliary drivers of each prefixo on ``on``.

    The registry keeps the address and phone of permit holders; drivers have no contact
    fields, so an auxiliary driver's address and phone are null. A prefixo without a permit
    holder names as autorizatário its driver linked as ``autorizatario_condutor`` on ``on``
    (the fleet registry's titular), without contact.

    Returns
    -------
    pandas.DataFrame
        ``vehicle_id``, ``role`` (``autorizatario`` / ``auxiliar``), ``name``, ``address``,
        ``phone``.
    """
    rows = session.execute(
        text(
            "SELECT v.vehicle_id, 'autorizatario' AS role, h.name, h.address, h.phone "
            "FROM vehicles v JOIN permit_holders h ON h.holder_id = v.holder_id "
            "WHERE v.vehicle_id = ANY(:v) "
            "UNION ALL "
            "SELECT a.vehicle_id, CASE a.role WHEN 'auxiliar' THEN 'auxiliar' "
            "ELSE 'autorizatario' END, d.name, NULL, NULL "
            "FROM driver_assignments a JOIN drivers d ON d.driver_id = a.driver_id "
            "JOIN vehicles v ON v.vehicle_id = a.vehicle_id "
            "WHERE a.vehicle_id = ANY(:v) AND (a.role = 'auxiliar' OR v.holder_id IS NULL) "
            "AND a.valid_from <= :on AND (a.valid_until IS NULL OR a.valid_until >= :on)"
        ),
        {"v": list(vehicle_ids), "on": on},
    ).all()
    columns = ("vehicle_id", "role", "name", "address", "phone")
    frame = pd.DataFrame(
        {c: pd.Series([r[i] for r in rows], dtype="object") for i, c in enumerate(columns)}
    )
    return frame.astype({"vehicle_id": "str"})


# --- the supervisor's view --------------------------------------------------------------------


def recent_visits(
    *,
    session: Session,
    stand_ids: Collection[str],
    since: dt.datetime,
    now: dt.datetime,
    licences: pd.DataFrame | None = None,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> pd.DataFrame:
    """Visits to ``stand_ids`` seen in the fixes of [since, now], however short.

    A visit is in progress when its last inside fix is the vehicle's latest fix up to ``now``
    and at most ``max_gap_s`` old; its departure is then ``now``. Visits shorter than a minute
    count (a vehicle that just arrived is in the queue).

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    stand_ids : collection of str
        Stands to read.
    since, now : datetime.datetime
        Tz-aware bounds of the fixes read.
    licences : pandas.DataFrame, optional
        Licence frame for ``licensed`` (the licences not known are read here).
    max_gap_s : float, default 600
        Longest silence of a vehicle still counted as present.
    timezone : str, default "America/Sao_Paulo"
        Zone of the licence dates.

    Returns
    -------
    pandas.DataFrame
        ``stands.visits.VISIT_FRAME_COLUMNS``; those in progress depart at ``now`` (UTC).
    """
    visits = visits_from_fixes(
        session=session,
        stand_ids=stand_ids,
        start=since,
        end=now,
        licences=licences,
        unknown_licences=licence_unknown(session=session) if licences is not None else (),
        min_dwell_s=0.0,
        max_gap_s=max_gap_s,
        timezone=timezone,
    )
    latest = visits.attrs.pop("latest", {})
    if len(visits):
        now_ts = pd.Timestamp(now).tz_convert("UTC")
        last_fix = pd.to_datetime(  # ISO 8601 with or without a fraction of a second
            visits[fr.VEHICLE_ID].astype("str").map(latest), utc=True, format="ISO8601"
        ).to_numpy()
        ongoing = (visits["departed_at"].to_numpy() == last_fix) & (
            (now_ts - visits["departed_at"]).dt.total_seconds().to_numpy() <= max_gap_s
        )
        visits.loc[ongoing, "departed_at"] = now_ts
    return visits


def supervisor_queue(
    *,
    session: Session,
    stand_ids: Collection[str],
    now: dt.datetime,
    window_s: float = 7200.0,
    max_gap_s: float = DEFAULT_VISIT_MAX_GAP_S,
    timezone: str = DEFAULT_TIMEZONE,
) -> pd.DataFrame:
    """Who is at the supervisor's stands now, in queue order, licensed or not.

    The visits in progress of :func:`recent_visits` over the last ``window_s`` seconds.

    Parameters
    ----------
    session : sqlalchemy.orm.Session
        Database session.
    stand_ids : collection of str
        The supervisor's stands.
    now : datetime.datetime
        Tz-aware instant.
    window_s : float, default 7200
        Fixes of the last ``window_s`` seconds are read.
    max_gap_s, timezone
        As for :func:`recent_visits`.

    Returns
    -------
    pandas.DataFrame
        ``stands.occupancy.PRESENT_COLUMNS``.
    """
    ids = supervision.scope(stand_ids)
    if window_s <= 0:
        msg = f"'window_s' era {window_s}; esperado > 0"
        raise ThresholdError(msg)
    visits = recent_visits(
        session=session,
        stand_ids=ids,
        since=now - dt.timedelta(seconds=window_s),
        now=now,
        max_gap_s=max_gap_s,
        timezone=timezone,
    )
    now_ts = pd.Timestamp(now).tz_convert("UTC")
    visits = visits.loc[visits["departed_at"] == now_ts] if len(visits) else visits
    if visits.empty:
        return present_at(visits, now_ts)
    return supervision.queue_now(
        visits,
        licence_frame(session=session, stand_ids=ids),
        stand_ids=ids,
        at=now_ts,
        timezone=timezone,
        unknown_licences=licence_unknown(session=session),
    )


def _local_bounds(start: dt.date, end: dt.date, timezone: str) -> tuple[dt.datetime, dt.datetime]:
    if end < start:
        msg = f"período invertido: {start} a {end}"
        raise ThresholdError(msg)
    zone = ZoneInfo(timezone)
    lo = dt.datetime.combine(start, dt.time(), tzinfo=zone)
    hi = dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    return lo, hi - dt.timedelta(microseconds=1)


def supervisor_intruders(
    *,
    session: Session,
    stand_ids: Collection[str],
    start: dt.date,
    end: dt.date,
    timezone: str = DEFAULT_TIMEZONE,
    **thresholds: float,
) -> pd.DataFrame:
    """Visits to the supervisor's stands by unlicensed vehicles over local days start–end.

    ``thresholds`` are passed to :func:`visits_from_fixes`.

    Returns
    -------
    pandas.DataFrame
        :data:`stands.supervision.INTRUDER_COLUMNS`.
    """
    ids = supervision.scope(stand_ids)
    lo, hi = _local_bounds(start, end, timezone)
    visits = visits_from_fixes(
        session=session,
        stand_ids=ids,
        start=lo,
        end=hi,
        timezone=timezone,
        **cast(dict[str, Any], thresholds),
    )
    licences = licence_frame(session=session, stand_ids=ids)
    return supervision.intruders(
        visits,
        licences,
        stand_ids=ids,
        timezone=timezone,
        unknown_licences=licence_unknown(session=session),
    )


def supervisor_presence(
    *,
    session: Session,
    stand_ids: Collection[str],
    start: dt.date,
    end: dt.date,
    timezone: str = DEFAULT_TIMEZONE,
    min_presence_s: float = 60.0,
    **thresholds: float,
) -> pd.DataFrame:
    """Presence table of the licensees of the supervisor's stands over local days start–end.

    Returns
    -------
    pandas.DataFrame
        See :func:`stands.supervision.licensee_presence`.
    """
    ids = supervision.scope(stand_ids)
    lo, hi = _local_bounds(start, end, timezone)
    licences = licence_frame(session=session, stand_ids=ids)
    visits = visits_from_fixes(
        session=session,
        stand_ids=ids,
        start=lo,
        end=hi,
        timezone=timezone,
        **cast(dict[str, Any], thresholds),
    )
    sightings = operation_sightings(
        session=session,
        vehicle_ids=sorted(set(licences["vehicle_id"])),
        start=start,
        end=end,
        timezone=timezone,
    )
    stands = stands_frame(session=session, stand_ids=ids, include_retired=True)
    fixes = near_stand_fixes(
        session=session, licences=licences, stands=stands, start=start, end=end, timezone=timezone
    )
    dwells = near_dwells(fixes, licences, stands, min_presence_s=min_presence_s)
    if len(dwells):  # the queue beyond the polygon, a silent tracker (as habitual_absence)
        visits = pd.concat([visits, dwells], ignore_index=True) if len(visits) else dwells
    return supervision.licensee_presence(
        visits,
        licences[list(LICENCE_COLUMNS)],
        sightings,
        stand_ids=ids,
        start=start,
        end=end,
        timezone=timezone,
        min_presence_s=min_presence_s,
    )


def supervisor_contacts(
    *, session: Session, stand_ids: Collection[str], on: dt.date
) -> pd.DataFrame:
    """Contact list of the licensees of the supervisor's stands on ``on`` (art. 43, par. único).

    Returns
    -------
    pandas.DataFrame
        :data:`stands.supervision.CONTACT_COLUMNS`.
    """
    ids = supervision.scope(stand_ids)
    licences = licence_frame(session=session, stand_ids=ids)
    people = licensee_people(
        session=session, vehicle_ids=sorted(set(licences["vehicle_id"])), on=on
    )
    return supervision.licensee_contacts(
        licences[list(LICENCE_COLUMNS)], people, stand_ids=ids, on=on
    )
