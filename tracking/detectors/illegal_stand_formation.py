"""Illegal stand formation: places outside every stand where free taxis keep waiting.

Law served: Porto Alegre, Decree of 23 Dec 2019 (seed 000), art. 59 XIV (gravíssima): "utilizar
área não permitida com finalidade de formação de ponto"; Pinto Bandeira, Lei 169/2015 (seed 003),
art. 20 VII (leve): "Aguardar o usuário somente dentro dos limites do ponto de táxi ou em áreas
de estacionamento permitido", and art. 44 V: "utilizar pontos de táxi em áreas particulares,
não-regulamentados pelo órgão municipal".

Definitions (each one appears in the finding's ``details``):

waiting stop
    A stop (:mod:`tracking.stops`) lasting at least ``min_wait_s``, with the meter ``free`` on
    more than ``min_free_share`` of its fixes (the pings of the vehicle between the stop's start
    and end, inclusive), whose position (the mean of its fixes) is farther than
    ``stand_buffer_m`` from every stand and from every allowed place. The margin keeps GPS jitter
    at a stand's edge, and taxis queueing just outside a full stand, from counting; a brief stop
    at a red light never lasts ``min_wait_s``; a taxi waiting inside a stand is not counted.
place
    Waiting stops are indexed to H3 cells at resolution ``r``, the one whose average edge
    length ``e`` makes ``2.7·e`` closest to ``cluster_radius_m`` (75 m → resolution 11,
    e ≈ 29 m); cells that are equal or neighbours (``grid_disk`` k = 1) are linked, and a place
    is a connected group of linked cells with their stops (single linkage). Two stops in linked
    cells are between 0 and about ``3.7·e`` apart, and always linked below about ``1.7·e`` (so
    ``2.7·e`` is the typical link distance). ``extent_m``, the largest distance between two stops
    of the place, shows how spread a place is.
finding
    A place with stops of at least ``min_vehicles`` distinct vehicles, on at least ``min_days``
    distinct local days (of the stops' starts, in ``timezone``). One finding per place:
    ``vehicle_id`` and ``stand_id`` null, geometry the convex hull of the stops buffered by
    :data:`AREA_BUFFER_M`, ``started_at``/``ended_at`` the first stop's start and the last stop's
    end. ``details`` has the vehicles, the dates and every stop (vehicle, start, end,
    ``duration_s``, position, share of free fixes, distance to the nearest stand) with the first
    and last fix of each stop as ``fixes``.
finding_id
    Derived as for every finding, with the place's key (``place_id``: the H3 cell of the earliest
    stop) in the place of the stand, so that two places starting at the same instant keep
    distinct ids; ``stand_id`` stays null in the output.
confidence
    ``0.5 + 0.25·(1 − min_vehicles/vehicles) + 0.2·(1 − min_days/days)``, at most 0.95: it grows
    with the number of vehicles and of days beyond the thresholds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo import h3 as gh3
from geo.calendar import DEFAULT_TIMEZONE
from geo.crs import WGS84, utm_crs_for
from tracking import frames as fr
from tracking.arrays import iso_utc
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors._track_kernels import (
    METER_FREE,
    TrackArrays,
    check_columns,
    check_positive,
    check_timezone,
    fix_evidences,
    local_dates,
    track_arrays,
    utc_ns,
)
from tracking.detectors.findings import empty_findings, make_findings

KIND = "illegal_stand_formation"
DEFAULT_STAND_BUFFER_M = 50.0
"""A stop within this distance of a stand or allowed place is not counted (m)."""
DEFAULT_CLUSTER_RADIUS_M = 75.0
"""Typical distance that links two stops into one place (m)."""
DEFAULT_MIN_VEHICLES = 3
"""Distinct vehicles waiting at a place (POA art. 59 XIV: "formação de ponto")."""
DEFAULT_MIN_DAYS = 3
"""Distinct local days with waiting at a place (recurrence)."""
DEFAULT_MIN_WAIT_S = 600.0
"""Shortest waiting stop (s); PB art. 20 VII ("aguardar o usuário")."""
DEFAULT_MIN_FREE_SHARE = 0.5
"""The meter is ``free`` on more than this share of a stop's fixes."""
AREA_BUFFER_M = 10.0
"""Buffer of the convex hull of a place's stops, for its area (m)."""
LINK_FACTOR = 2.7
MAX_CONFIDENCE = 0.95
STOP_REQUIRED = (fr.VEHICLE_ID, "started_at", "ended_at", "duration_s", fr.LAT, fr.LON)


def detect_illegal_stand_formation(
    stops: pd.DataFrame,
    pings: pd.DataFrame,
    stands: gpd.GeoDataFrame,
    *,
    allowed_places: gpd.GeoDataFrame | gpd.GeoSeries | None = None,
    stand_buffer_m: float = DEFAULT_STAND_BUFFER_M,
    cluster_radius_m: float = DEFAULT_CLUSTER_RADIUS_M,
    min_vehicles: int = DEFAULT_MIN_VEHICLES,
    min_days: int = DEFAULT_MIN_DAYS,
    min_wait_s: float = DEFAULT_MIN_WAIT_S,
    min_free_share: float = DEFAULT_MIN_FREE_SHARE,
    timezone: str = DEFAULT_TIMEZONE,
    waiting: list[dict[str, Any]] | None = None,
) -> gpd.GeoDataFrame:
    """Find places outside every stand where free taxis recurrently wait.

    Parameters
    ----------
    stops : pandas.DataFrame
        Stops (``tracking/stops.py``): ``vehicle_id``, ``started_at``, ``ended_at``
        (tz-aware), ``duration_s``, ``lat``, ``lon``; optional ``stop_id``.
    pings : pandas.DataFrame
        The pings the stops come from (the meter state during each stop).
    stands : geopandas.GeoDataFrame
        Stands (``stands/frames.py``), geographic CRS; may be empty.
    allowed_places : geopandas.GeoDataFrame or GeoSeries, optional
        Polygons where waiting is allowed (e.g. regulated parking), geographic CRS.
    stand_buffer_m : float, default 50
        Margin around stands and allowed places.
    cluster_radius_m : float, default 75
        Typical link distance of the stops of a place (picks the H3 resolution).
    min_vehicles : int, default 3
        Fewest distinct vehicles at a place (POA art. 59 XIV).
    min_days : int, default 3
        Fewest distinct local days at a place.
    min_wait_s : float, default 600
        Shortest waiting stop (PB art. 20 VII).
    min_free_share : float, default 0.5
        A waiting stop has the meter ``free`` on more than this share of its fixes.
    timezone : str, default "America/Sao_Paulo"
        Zone of the local days.
    waiting : list of dict, optional
        The waiting stops already found vehicle by vehicle (:func:`waiting_stops` with the same
        ``min_wait_s`` and ``min_free_share``), by an engine that sees the fixes in partitions;
        ``stops`` and ``pings`` are then not read.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings of kind ``illegal_stand_formation``, one per place.

    Raises
    ------
    DetectorInputError
        If an input lacks columns, has naive times, or a layer is not geographic.
    DetectorThresholdError
        If a threshold is out of range or the timezone is unknown.
    """
    check_positive(stand_buffer_m=stand_buffer_m, cluster_radius_m=cluster_radius_m)
    _check_waiting(min_wait_s, min_free_share)
    for name, value in (("min_vehicles", min_vehicles), ("min_days", min_days)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            msg = f"'{name}' era {value!r}; esperado um inteiro >= 1"
            raise DetectorThresholdError(msg)
    check_timezone(timezone)
    layers = [_geographic(stands, "os pontos")]
    if allowed_places is not None:
        layers.append(_geographic(allowed_places, "as áreas permitidas"))
    if waiting is None:
        check_columns(stops, STOP_REQUIRED, what="as paradas")
        waiting = _candidates(stops, pings, min_wait_s=min_wait_s, min_free_share=min_free_share)
    return _place_findings(
        waiting,
        layers,
        stand_buffer_m=stand_buffer_m,
        cluster_radius_m=cluster_radius_m,
        min_vehicles=min_vehicles,
        min_days=min_days,
        min_wait_s=min_wait_s,
        min_free_share=min_free_share,
        timezone=timezone,
    )


def waiting_stops(
    stops: pd.DataFrame,
    pings: pd.DataFrame,
    *,
    min_wait_s: float = DEFAULT_MIN_WAIT_S,
    min_free_share: float = DEFAULT_MIN_FREE_SHARE,
) -> list[dict[str, Any]]:
    """Return the waiting stops of some vehicles (see the module docstring), as plain data.

    The per-vehicle half of :func:`detect_illegal_stand_formation`: an engine that sees the fixes
    vehicle by vehicle passes what this returns for all of them as its ``waiting``, sorted by
    vehicle then start (the order of the stops).

    Raises
    ------
    DetectorInputError
        If the stops lack columns or times are naive.
    DetectorThresholdError
        If a threshold is out of range.
    """
    _check_waiting(min_wait_s, min_free_share)
    check_columns(stops, STOP_REQUIRED, what="as paradas")
    return _candidates(stops, pings, min_wait_s=min_wait_s, min_free_share=min_free_share)


def _check_waiting(min_wait_s: float, min_free_share: float) -> None:
    check_positive(min_wait_s=min_wait_s)
    if not (
        isinstance(min_free_share, int | float)
        and math.isfinite(min_free_share)
        and 0 <= min_free_share < 1
    ):
        msg = f"'min_free_share' era {min_free_share!r}; esperado um número em [0, 1)"
        raise DetectorThresholdError(msg)


def _candidates(
    stops: pd.DataFrame, pings: pd.DataFrame, *, min_wait_s: float, min_free_share: float
) -> list[dict[str, Any]]:
    """Return the stops long and free enough to be waiting, with their evidence (plain data)."""
    start = utc_ns(stops["started_at"], name="started_at", what="as paradas")
    end = utc_ns(stops["ended_at"], name="ended_at", what="as paradas")
    duration = stops["duration_s"].to_numpy(dtype=np.float64)
    cand = np.flatnonzero(duration >= min_wait_s)
    if not len(cand):
        return []
    track = track_arrays(pings)
    vehicle = stops[fr.VEHICLE_ID].astype("str").to_numpy(dtype=object)
    first, last = _stop_fixes(track, vehicle[cand], start[cand], end[cand])
    share = _free_share(track, first, last)
    keep = share > min_free_share
    cand, first, last, share = cand[keep], first[keep], last[keep], share[keep]
    lat = stops[fr.LAT].to_numpy(dtype=np.float64)
    lon = stops[fr.LON].to_numpy(dtype=np.float64)
    stop_id = (
        stops["stop_id"].astype("str").to_numpy(dtype=object)
        if "stop_id" in stops.columns
        else np.full(len(stops), None, dtype=object)
    )
    first_fix = fix_evidences(track, first)
    last_fix = fix_evidences(track, last)
    out = []
    for k, c in enumerate(cand.tolist()):
        fixes = [first_fix[k]] if last[k] == first[k] else [first_fix[k], last_fix[k]]
        out.append(
            {
                "vehicle_id": str(vehicle[c]),
                "start_ns": int(start[c]),
                "end_ns": int(end[c]),
                "duration_s": float(duration[c]),
                "lat": float(lat[c]),
                "lon": float(lon[c]),
                "share": float(share[k]),
                "stop_id": None if stop_id[c] is None else str(stop_id[c]),
                "fixes": fixes,
            }
        )
    return out


def _place_findings(
    candidates: list[dict[str, Any]],
    layers: list[gpd.GeoSeries],
    *,
    stand_buffer_m: float,
    cluster_radius_m: float,
    min_vehicles: int,
    min_days: int,
    min_wait_s: float,
    min_free_share: float,
    timezone: str,
) -> gpd.GeoDataFrame:
    """Find the places of waiting stops outside the stands that meet the thresholds."""
    if not candidates:
        return empty_findings()
    cand = np.arange(len(candidates))
    vehicle = np.array([c["vehicle_id"] for c in candidates], dtype=object)
    start = np.array([c["start_ns"] for c in candidates], dtype=np.int64)
    end = np.array([c["end_ns"] for c in candidates], dtype=np.int64)
    duration = np.array([c["duration_s"] for c in candidates], dtype=np.float64)
    share = np.array([c["share"] for c in candidates], dtype=np.float64)
    stop_id = np.array([c["stop_id"] for c in candidates], dtype=object)
    lat = np.array([c["lat"] for c in candidates], dtype=np.float64)
    lon = np.array([c["lon"] for c in candidates], dtype=np.float64)
    crs = utm_crs_for(float(np.mean(lon)), float(np.mean(lat)))
    points = gpd.GeoSeries(gpd.points_from_xy(lon, lat), crs=WGS84).to_crs(crs)
    pts = np.asarray(points.values, dtype=object)
    near = np.zeros(len(cand), dtype=bool)
    stand_dist = np.full(len(cand), np.nan)
    for i, layer in enumerate(layers):
        if layer.empty:
            continue
        geoms = np.asarray(layer.to_crs(crs).values, dtype=object)
        tree = shapely.STRtree(geoms)
        hit, _ = tree.query(pts, predicate="dwithin", distance=stand_buffer_m)
        near[hit] = True
        if i == 0:
            nearest = np.flatnonzero(~near)  # the others are dropped below
            idx, dist = tree.query_nearest(pts[nearest], return_distance=True, all_matches=False)
            stand_dist[nearest[idx[0]]] = dist
    out = ~near
    cand, share, stop_id = cand[out], share[out], stop_id[out]
    lat, lon, pts, stand_dist = lat[out], lon[out], pts[out], stand_dist[out]
    if not len(cand):
        return empty_findings()

    resolution = link_resolution(cluster_radius_m)
    cells = gh3.latlng_to_cells(lat, lon, resolution=resolution)
    place = _places(cells)
    day = local_dates(start[cand], timezone)
    frame = pd.DataFrame(
        {"place": place, "vehicle": vehicle[cand], "day": day, "start": start[cand]}
    )
    per_place = frame.groupby("place").agg(vehicles=("vehicle", "nunique"), days=("day", "nunique"))
    good = per_place.loc[(per_place["vehicles"] >= min_vehicles) & (per_place["days"] >= min_days)]
    if good.empty:
        return empty_findings()
    thresholds = {
        "min_vehicles": int(min_vehicles),
        "min_days": int(min_days),
        "min_wait_s": float(min_wait_s),
        "min_free_share": float(min_free_share),
        "stand_buffer_m": float(stand_buffer_m),
        "cluster_radius_m": float(cluster_radius_m),
    }
    rows: list[dict[str, Any]] = []
    geometries = []
    for p, n_vehicles, n_days in zip(
        good.index.tolist(),
        good["vehicles"].to_numpy(dtype=np.int64).tolist(),
        good["days"].to_numpy(dtype=np.int64).tolist(),
        strict=True,
    ):
        members = np.flatnonzero(place == p)
        members = members[np.lexsort((vehicle[cand][members], start[cand][members]))]
        hull = shapely.convex_hull(shapely.multipoints(pts[members]))
        corners = shapely.get_coordinates(hull)  # the diameter joins two hull vertices
        extent = np.hypot(*(corners[:, None, :] - corners[None, :, :]).transpose(2, 0, 1))
        area = gpd.GeoSeries([hull.buffer(AREA_BUFFER_M)], crs=crs).to_crs(WGS84).iloc[0]
        geometries.append(area)
        stop_list = []
        fixes = []
        for m in members.tolist():
            c = int(cand[m])
            stop_list.append(
                {
                    "stop_id": stop_id[m],
                    "vehicle_id": str(vehicle[c]),
                    "started_at": iso_utc(int(start[c])),
                    "ended_at": iso_utc(int(end[c])),
                    "duration_s": float(duration[c]),
                    "lat": float(lat[m]),
                    "lon": float(lon[m]),
                    "local_date": str(day[m]),
                    "free_share": round(float(share[m]), 3),
                    "nearest_stand_m": (
                        None if math.isnan(stand_dist[m]) else round(float(stand_dist[m]), 1)
                    ),
                }
            )
            fixes.extend(candidates[c]["fixes"])
        place_id = gh3.cells_to_strings(cells[members[:1]])[0]
        known = stand_dist[members][~np.isnan(stand_dist[members])]
        details = {
            "place_id": str(place_id),
            "vehicles": sorted({str(vehicle[cand][m]) for m in members.tolist()}),
            "dates": sorted({str(day[m]) for m in members.tolist()}),
            "n_vehicles": n_vehicles,
            "n_days": n_days,
            "n_stops": len(members),
            "extent_m": round(float(extent.max()), 1),
            "nearest_stand_m": round(float(known.min()), 1) if len(known) else None,
            "h3_resolution": resolution,
            "stops": stop_list,
            "fixes": fixes,
            "thresholds": thresholds,
        }
        conf = 0.5 + 0.25 * (1.0 - min_vehicles / n_vehicles) + 0.2 * (1.0 - min_days / n_days)
        rows.append(
            {
                "kind": KIND,
                "vehicle_id": None,
                "stand_id": f"place:{place_id}",  # id key only; nulled below
                "started_at": pd.Timestamp(int(start[cand][members].min()), unit="ns", tz="UTC"),
                "ended_at": pd.Timestamp(int(end[cand][members].max()), unit="ns", tz="UTC"),
                "confidence": min(MAX_CONFIDENCE, conf),
                "details": details,
            }
        )
    findings = make_findings(pd.DataFrame(rows), geometries)
    findings["stand_id"] = pd.Series([None] * len(findings), dtype=object)
    return findings


def link_resolution(cluster_radius_m: float) -> int:
    """H3 resolution whose typical link distance (``2.7 ×`` edge length) is nearest the radius.

    Parameters
    ----------
    cluster_radius_m : float
        Wanted link distance in metres.

    Returns
    -------
    int
        Resolution in 0–15 (75 m → 11).
    """
    best = min(
        range(gh3.MIN_RESOLUTION, gh3.MAX_RESOLUTION + 1),
        key=lambda r: abs(math.log(LINK_FACTOR * gh3.edge_length_m(r) / cluster_radius_m)),
    )
    return int(best)


# --- private -------------------------------------------------------------------------------


def _geographic(layer: gpd.GeoDataFrame | gpd.GeoSeries, what: str) -> gpd.GeoSeries:
    if not isinstance(layer, gpd.GeoDataFrame | gpd.GeoSeries):
        msg = f"{what} devem ser um GeoDataFrame/GeoSeries; recebido {type(layer).__name__}"
        raise DetectorInputError(msg)
    geoms = layer.geometry if isinstance(layer, gpd.GeoDataFrame) else layer
    if len(geoms) and (geoms.crs is None or not geoms.crs.is_geographic):
        got = "nenhum" if geoms.crs is None else geoms.crs.to_string()
        msg = f"CRS de {what} era {got}; esperado um CRS geográfico (EPSG:4326)"
        raise DetectorInputError(msg)
    geoms = geoms[geoms.notna() & ~geoms.is_empty]
    return geoms.set_crs(WGS84, allow_override=True) if geoms.crs is None else geoms


def _stop_fixes(
    track: TrackArrays,
    vehicle: NDArray[np.object_],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Positions of the first and last fix of each stop's vehicle within [start, end].

    Searches per vehicle (a loop over vehicles, not fixes); ``last < first`` when none.
    """
    first = np.zeros(len(vehicle), dtype=np.int64)
    last = np.full(len(vehicle), -1, dtype=np.int64)
    code = pd.Index(track.vehicles).get_indexer(pd.Index(vehicle))
    bounds = np.searchsorted(track.codes, np.arange(len(track.vehicles) + 1), side="left")
    for c in np.unique(code[code >= 0]).tolist():
        sel = np.flatnonzero(code == c)
        a, b = int(bounds[c]), int(bounds[c + 1])
        ts = track.ts_ns[a:b]
        first[sel] = a + np.searchsorted(ts, start[sel], side="left")
        last[sel] = a + np.searchsorted(ts, end[sel], side="right") - 1
    return first, last


def _free_share(
    track: TrackArrays, first: NDArray[np.int64], last: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Share of fixes with the meter ``free`` in each [first, last] (0 when empty)."""
    free = np.concatenate(([0], np.cumsum(track.meter == METER_FREE)))
    count = np.maximum(last - first + 1, 0)
    n_free = np.where(count > 0, free[np.maximum(last, 0) + 1] - free[first], 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, n_free / np.maximum(count, 1), 0.0)


def _places(cells: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Label each point with the connected component of its cell (linked: equal or neighbours)."""
    uniq, inverse = np.unique(cells, return_inverse=True)
    origin, neighbour = gh3.grid_disk(uniq, k=1)
    pos = np.searchsorted(uniq, neighbour)
    pos = np.minimum(pos, len(uniq) - 1)
    ok = uniq[pos] == neighbour
    a, b = origin[ok], pos[ok]
    label = np.arange(len(uniq), dtype=np.int64)
    while True:  # min-label propagation with pointer jumping
        m = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, m)
        np.minimum.at(new, b, m)
        new = new[new]
        if np.array_equal(new, label):
            break
        label = new
    return np.asarray(label[inverse], dtype=np.int64)


# ------------------------------------------------------------------------------------- live


def new_stand_formation_state() -> dict[str, Any]:
    """Return the initial live state (plain data), one for the whole fleet.

    ``stops``: every waiting stop so far (long and free enough; near a stand or not, since the
    metric zone is chosen from all of them as in batch), with its evidence fixes;
    ``emitted``: the ids of the findings already emitted.
    """
    return {"stops": [], "emitted": []}


def update_illegal_stand_formation(
    state: dict[str, Any] | None,
    stop: Mapping[str, Any],
    fixes: pd.DataFrame,
    *,
    stands: gpd.GeoDataFrame,
    allowed_places: gpd.GeoDataFrame | gpd.GeoSeries | None = None,
    stand_buffer_m: float = DEFAULT_STAND_BUFFER_M,
    cluster_radius_m: float = DEFAULT_CLUSTER_RADIUS_M,
    min_vehicles: int = DEFAULT_MIN_VEHICLES,
    min_days: int = DEFAULT_MIN_DAYS,
    min_wait_s: float = DEFAULT_MIN_WAIT_S,
    min_free_share: float = DEFAULT_MIN_FREE_SHARE,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], gpd.GeoDataFrame | None]:
    """Take one closed stop into the fleet's state; emit the places that now meet the thresholds.

    The input is a stop, not a fix: stops come from :func:`tracking.stops.detect_stops` run by
    the caller over the vehicle's recent fixes once the stop has ended (its extent depends on
    the vehicle's mean latitude, so it is not cut fix by fix here). A waiting stop is kept (as
    plain data) and the places are rebuilt with the batch kernel over every waiting stop so
    far; a place that meets the thresholds is emitted once, with the content
    :func:`detect_illegal_stand_formation` gives over the stops seen so far. A place that
    later grows keeps its ``finding_id`` (its earliest stop does not change) and is not
    re-emitted; two places that merge into one with an earlier first stop give a new id.

    Parameters
    ----------
    state : dict or None
        From :func:`new_stand_formation_state` or the previous call.
    stop : mapping
        One stop (a row of ``detect_stops``): ``vehicle_id``, ``started_at``, ``ended_at``,
        ``duration_s``, ``lat``, ``lon``, optional ``stop_id``.
    fixes : pandas.DataFrame
        The stop's vehicle's pings covering [started_at, ended_at] (the meter of the stop).
    stands, allowed_places, stand_buffer_m, cluster_radius_m, min_vehicles, min_days,
    min_wait_s, min_free_share, timezone
        As in :func:`detect_illegal_stand_formation`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame or None)
        The new state and the newly certain findings, or None.

    Raises
    ------
    DetectorInputError
        If an input lacks columns, has naive times, or a layer is not geographic.
    DetectorThresholdError
        If a threshold is out of range or the timezone is unknown.
    """
    st = new_stand_formation_state() if state is None else dict(state)
    frame = pd.DataFrame([dict(stop)])
    for column in ("started_at", "ended_at"):
        frame[column] = pd.to_datetime(frame[column], utc=True) if len(frame) else frame[column]
    vid = str(stop.get(fr.VEHICLE_ID))
    mine = fixes.loc[fixes[fr.VEHICLE_ID].astype("str") == vid]
    options: dict[str, Any] = {
        "stand_buffer_m": stand_buffer_m,
        "cluster_radius_m": cluster_radius_m,
        "min_vehicles": min_vehicles,
        "min_days": min_days,
        "min_wait_s": min_wait_s,
        "min_free_share": min_free_share,
        "timezone": timezone,
    }
    # Validation as in batch (the stop frame of one row).
    detect_illegal_stand_formation(
        frame.iloc[:0], mine, stands, allowed_places=allowed_places, **options
    )
    new = _candidates(frame, mine, min_wait_s=min_wait_s, min_free_share=min_free_share)
    if not new:
        return st, None
    st["stops"] = sorted([*st["stops"], *new], key=lambda c: (c["start_ns"], c["vehicle_id"]))
    layers = [_geographic(stands, "os pontos")]
    if allowed_places is not None:
        layers.append(_geographic(allowed_places, "as áreas permitidas"))
    found = _place_findings(st["stops"], layers, **options)
    fresh = ~found["finding_id"].isin(st["emitted"]).to_numpy(dtype=bool)
    if not fresh.any():
        return st, None
    found = found.loc[fresh].reset_index(drop=True)
    st["emitted"] = [*st["emitted"], *found["finding_id"].tolist()]
    return st, found
