"""Illegal stand formation: places outside every stand where free taxis keep waiting.

Law served: Porto Alegre, Decree of 23 Dec 2019 (seed 000), art. 59 XIV (gravíssima): "utilizar
área não permitida com finalidade de formação de ponto"; Pinto Bandeira, Lei 169/2015 (seed 003),
art. 20 VII (leve): "Aguardar o usuário somente dentro dos limites do ponto de táxi ou em áreas
de estacionamento permitido", and art. 44 V: "utilizar pontos de táxi em áreas particulares,
não-regulamentados pelo órgão municipal".

Definitions (each one appears in the finding's ``details``):

waiting stop
    A stop (:mod:`tracking.stops`), or consecutive stops of a vehicle that GPS noise split
    (joined when at most :data:`JOIN_GAP_S` apart in time and :data:`JOIN_APART_M` in place,
    with no step between them over :data:`JOIN_STEP_M`, and not spread over more than
    :data:`JOIN_APART_M` — a crawl in traffic is not joined; ``joined_stops`` in the evidence),
    lasting at least ``min_wait_s``, with the meter ``free`` on more than ``min_free_share`` of
    its fixes (the pings of the vehicle between its start and end, inclusive), whose position
    (the mean of its stops' positions, weighted by their durations) is farther than
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
boarding
    A waiting stop ends with a boarding when the first fix not ``free`` after its last ``free``
    fix is ``occupied``, within :data:`BOARDING_WITHIN_S` of its end and
    :data:`BOARDING_WITHIN_M` of its position (``boarded``; the fix is in its ``fixes``). A
    rank is where taxis wait for passengers (art. 59 XIV: "com finalidade de formação de
    ponto"); taxis queueing at a fuel pump or an inspection line leave with the meter ``free``.
finding
    A place with stops of at least ``min_vehicles`` distinct vehicles, on at least ``min_days``
    days of service (of the stops' starts, in ``timezone``; see ``accused``), at least
    ``min_boarding_share`` of them ending with a boarding (``n_boardings``). One finding per place:
    ``vehicle_id`` and ``stand_id`` null, geometry the convex hull of the stops buffered by
    :data:`AREA_BUFFER_M`, ``started_at``/``ended_at`` the first stop's start and the last stop's
    end. ``details`` has the vehicles, the dates and every stop (vehicle, start, end,
    ``duration_s``, position, share of free fixes, distance to the nearest stand) with the first
    and last fix of each stop as ``fixes``, each naming its ``vehicle_id``.
accused
    The vehicles of a place whose own waits there show the "finalidade de formação de ponto"
    (art. 59 XIV): waits on at least ``min_vehicle_days`` days of service, those of at least
    :data:`MIN_BOARDING_DAYS` days (or of each, if fewer) ending with a boarding. A day of
    service opens with a wait and holds the later waits of its local date and those of the
    next date within :data:`SERVICE_DAY_S` (12 h) of it: a night shift's waits at 23:30 and
    00:40 are one day (the place's ``min_days`` counts so too). A taxi
    that waited there once, or took a passenger from there once (a called ride, a pause, a
    hail in a fuel queue), is in the evidence (``vehicles``) but not in ``accused``; proposals
    are made for ``accused`` only.
finding_id
    Derived as for every finding, with the place's key (``place_id``: the H3 cell of the earliest
    stop) in the place of the stand, so that two places starting at the same instant keep
    distinct ids; ``stand_id`` stays null in the output.
confidence
    ``0.5 + 0.25·(1 − min_vehicles/vehicles) + 0.2·(1 − min_days/days)``, at most 0.95: it grows
    with the number of vehicles and of days beyond the thresholds.

Live: :data:`KERNEL` (:func:`advance_illegal_stand_formation`) keeps the fleet's waiting stops
(found by :func:`waiting_stops` once the vehicle's run of fixes closed) and judges each closed
local day with :func:`detect_illegal_stand_formation` over the stops ended by then — in live,
those of the last ``window_days`` days only (the state holds no more), where the batch counts
its whole input; a place is returned once, on the first day it meets the thresholds.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from geo import h3 as gh3
from geo.calendar import DEFAULT_TIMEZONE
from geo.crs import WGS84, haversine_m, utm_crs_for
from stands.near import STAND_REACH_M
from tracking import frames as fr
from tracking.arrays import iso_utc
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors._track_kernels import (
    METER_FREE,
    METER_OCCUPIED,
    NS,
    TrackArrays,
    check_columns,
    check_positive,
    check_timezone,
    fix_evidences,
    local_dates,
    track_arrays,
    utc_ns,
)
from tracking.detectors.day_kernel import DayKernel
from tracking.detectors.findings import empty_findings, make_findings

KIND = "illegal_stand_formation"
DEFAULT_STAND_BUFFER_M = STAND_REACH_M
"""A stop within this distance of a stand or allowed place is not counted (m): where a stand
ends, as for ``habitual_absence``'s presence (``stands.near``)."""
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
JOIN_GAP_S = 120.0
"""Longest time between two stops of a vehicle joined into one wait (s)."""
JOIN_APART_M = 50.0
"""Farthest apart the stops of one wait lie (m): a stop's diameter (``tracking.stops``)."""
JOIN_STEP_M = 100.0
"""Longest step between two joined stops' fixes (m): twice a stop's diameter, the live engine's
longest step within a run."""
DEFAULT_MIN_BOARDING_SHARE = 0.25
"""Fewest share of a place's waits that end with a boarding (POA art. 59 XIV: "com finalidade de
formação de ponto" — a rank is where taxis wait for passengers)."""
DEFAULT_MIN_VEHICLE_DAYS = 2
"""Distinct local days a vehicle waited at a place, one wait ending with a boarding, for the
finding to accuse it (``accused``; art. 59 XIV: a purpose shown by repetition)."""
MIN_BOARDING_DAYS = 2
"""Distinct local days on which a vehicle's wait at the place ended with a boarding, for the
finding to accuse it: one passenger who walked up to a taxi in a fuel queue or a jam is no
purpose of forming a stand (an independent check had four taxis of a fuel queue proposed
under art. 59 XIV, each hailed once in four days)."""
SERVICE_DAY_S = 12 * 3600.0
"""Waits of a vehicle starting closer than this to the first of a day of service are of that
day (s): a shift, not the calendar, makes a day, so a night shift across midnight is one."""
BOARDING_WITHIN_S = 120.0
"""Longest time from a wait's end to the boarding that ends it (s)."""
BOARDING_WITHIN_M = 100.0
"""Farthest a boarding that ends a wait lies from the wait's position (m): a stop's diameter
plus GPS error."""
AREA_BUFFER_M = 10.0
"""Buffer of the convex hull of a place's stops, for its area (m)."""
LINK_FACTOR = 2.7
MAX_CONFIDENCE = 0.95
STOP_REQUIRED = (fr.VEHICLE_ID, "started_at", "ended_at", "duration_s", fr.LAT, fr.LON)


def _accused(waits: pd.DataFrame, min_days: int) -> list[str]:
    """Return the vehicles that waited on ``min_days`` days and boarded on 2 (or each) of them.

    Days are days of service (:func:`_service_days`): one night shift is one day.
    """
    out = []
    for vehicle, own in waits.groupby("vehicle", sort=True):
        starts = own["start"].to_numpy(dtype=np.int64)
        days = own["day"].to_numpy(dtype="datetime64[D]")
        took = own["boarded"].to_numpy(dtype=bool)
        boarded = _service_days(starts[took], days[took])
        if _service_days(starts, days) >= min_days and boarded >= min(MIN_BOARDING_DAYS, min_days):
            out.append(str(vehicle))
    return out


def _service_days(starts_ns: NDArray[np.int64], days: NDArray[np.datetime64]) -> int:
    """Count the days of service of waits (their starts, epoch ns; their local dates).

    A wait opens a day when it starts on another local date than the wait that opened the
    current day and at least :data:`SERVICE_DAY_S` after it: a night shift's 23:30 and 00:40
    are one day, not two; never more days than local dates.
    """
    order = np.argsort(starts_ns, kind="stable")
    count, opened, on = 0, 0, None
    for t, d in zip(starts_ns[order].tolist(), days[order].tolist(), strict=True):
        if on is None or (d != on and t - opened >= SERVICE_DAY_S * 1e9):
            count, opened, on = count + 1, t, d
    return count


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
    min_boarding_share: float = DEFAULT_MIN_BOARDING_SHARE,
    min_vehicle_days: int = DEFAULT_MIN_VEHICLE_DAYS,
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
    min_boarding_share : float, default 0.25
        Fewest share of a place's waiting stops that end with a boarding (0: not checked).
    min_vehicle_days : int, default 2
        Fewest local days a vehicle waited at the place, one wait ending with a boarding, to be
        among the ``accused`` (the others are evidence only).
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
    for name, value in (
        ("min_vehicles", min_vehicles),
        ("min_days", min_days),
        ("min_vehicle_days", min_vehicle_days),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            msg = f"'{name}' era {value!r}; esperado um inteiro >= 1"
            raise DetectorThresholdError(msg)
    if not (
        isinstance(min_boarding_share, int | float)
        and math.isfinite(min_boarding_share)
        and 0 <= min_boarding_share <= 1
    ):
        msg = f"'min_boarding_share' era {min_boarding_share!r}; esperado um número em [0, 1]"
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
        min_boarding_share=min_boarding_share,
        min_vehicle_days=min_vehicle_days,
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
    """Return the waits long and free enough, with their evidence (plain data).

    A wait is a stop, or consecutive stops of a vehicle that GPS noise split (:func:`_joined`).
    """
    start = utc_ns(stops["started_at"], name="started_at", what="as paradas")
    end = utc_ns(stops["ended_at"], name="ended_at", what="as paradas")
    if not len(start):
        return []
    vehicle = stops[fr.VEHICLE_ID].astype("str").to_numpy(dtype=object)
    lat = stops[fr.LAT].to_numpy(dtype=np.float64)
    lon = stops[fr.LON].to_numpy(dtype=np.float64)
    stop_id = (
        stops["stop_id"].astype("str").to_numpy(dtype=object)
        if "stop_id" in stops.columns
        else np.full(len(stops), None, dtype=object)
    )
    order = np.lexsort((start, pd.factorize(vehicle, sort=True)[0]))
    vehicle, start, end = vehicle[order], start[order], end[order]
    lat, lon, stop_id = lat[order], lon[order], stop_id[order]
    track = track_arrays(pings)
    first, last = _stop_fixes(track, vehicle, start, end)
    head, tail = _joined(track, vehicle, start, end, lat, lon, first, last)
    weight = (end - start).astype(np.float64)
    w_sum = np.add.reduceat(weight, head)
    w_lat = np.add.reduceat(weight * lat, head)
    w_lon = np.add.reduceat(weight * lon, head)
    with np.errstate(invalid="ignore", divide="ignore"):
        lat_w = np.where(w_sum > 0, w_lat / w_sum, lat[head])
        lon_w = np.where(w_sum > 0, w_lon / w_sum, lon[head])
    duration = (end[tail] - start[head]).astype(np.float64) / NS
    first, last = first[head], last[tail]
    cand = np.flatnonzero(duration >= min_wait_s)
    if not len(cand):
        return []
    share = _free_share(track, first[cand], last[cand])
    keep = share > min_free_share
    cand, share = cand[keep], share[keep]
    board = _boardings(track, first[cand], last[cand], end[tail[cand]], lat_w[cand], lon_w[cand])
    first_fix = fix_evidences(track, first[cand])
    last_fix = fix_evidences(track, last[cand])
    board_fix = fix_evidences(track, board[board >= 0])
    out = []
    for k, c in enumerate(cand.tolist()):
        a, b = int(head[c]), int(tail[c])
        fixes = [first_fix[k]] if last[c] == first[c] else [first_fix[k], last_fix[k]]
        boarded = bool(board[k] >= 0)
        if boarded:
            fix = board_fix.pop(0)
            if board[k] > last[c]:
                fixes.append(fix)
            elif board[k] < last[c]:
                fixes.insert(-1, fix)  # within the wait, before its last fix
        fixes = [{**f, "vehicle_id": str(vehicle[a])} for f in fixes]  # a place's: whose
        out.append(
            {
                "vehicle_id": str(vehicle[a]),
                "start_ns": int(start[a]),
                "end_ns": int(end[b]),
                "duration_s": float(duration[c]),
                "lat": float(lat_w[c]),
                "lon": float(lon_w[c]),
                "share": float(share[k]),
                "stop_id": None if stop_id[a] is None else str(stop_id[a]),
                "joined_stops": b - a + 1,
                "boarded": boarded,
                "fixes": fixes,
            }
        )
    return out


def _joined(
    track: TrackArrays,
    vehicle: NDArray[np.object_],
    start: NDArray[np.int64],
    end: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    first: NDArray[np.int64],
    last: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Group a vehicle's consecutive stops (sorted by vehicle, start) into waits.

    Noise of 15–30 m splits a wait into stops of a few minutes (one fix beyond the stop's
    diameter ends it). Two consecutive stops of a vehicle are one wait when the second starts
    within :data:`JOIN_GAP_S` of the first's end, their positions are within
    :data:`JOIN_APART_M`, and no step of the fixes between them is longer than
    :data:`JOIN_STEP_M` (the live engine's runs never span such a step, so live and batch join
    alike); a group whose positions spread farther than :data:`JOIN_APART_M` from their mean
    (a slow crawl) is left as its stops. Returns the index of each wait's first and last stop.
    """
    n = len(start)
    link = np.zeros(max(n - 1, 0), dtype=bool)
    if n > 1:
        link = (
            (vehicle[1:] == vehicle[:-1])
            & (start[1:] - end[:-1] <= round(JOIN_GAP_S * NS))
            & (haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:]) <= JOIN_APART_M)
            & (last[:-1] >= first[:-1])
            & (last[1:] >= first[1:])
        )
    pairs = np.flatnonzero(link)
    if len(pairs):  # the steps from the first stop's last fix to the second's first fix
        lo, hi = last[pairs], first[pairs + 1]
        count = np.maximum(hi - lo, 0)
        idx = np.repeat(lo - np.cumsum(np.r_[0, count[:-1]]), count) + np.arange(count.sum())
        steps = haversine_m(track.lat[idx], track.lon[idx], track.lat[idx + 1], track.lon[idx + 1])
        longest = np.zeros(len(pairs))
        has = count > 0
        longest[has] = np.maximum.reduceat(steps, np.r_[0, np.cumsum(count)[:-1]][has])
        link[pairs] = longest <= JOIN_STEP_M
    group = np.r_[0, np.cumsum(~link)]
    head = np.flatnonzero(np.r_[True, ~link])
    tail = np.r_[head[1:] - 1, n - 1]
    joined = np.flatnonzero(tail > head)
    if len(joined):  # too spread: the stops stay apart
        size = np.bincount(group)
        mlat = np.bincount(group, lat) / size
        mlon = np.bincount(group, lon) / size
        spread = haversine_m(lat, lon, mlat[group], mlon[group]) > JOIN_APART_M
        bad = np.zeros(len(head), dtype=bool)
        np.logical_or.at(bad, group, spread)
        if bad.any():
            split = np.isin(group[:-1], np.flatnonzero(bad))
            link &= ~split
            head = np.flatnonzero(np.r_[True, ~link])
            tail = np.r_[head[1:] - 1, n - 1]
    return head, tail


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
    min_boarding_share: float,
    min_vehicle_days: int,
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
    boarded = np.array([bool(c.get("boarded", False)) for c in candidates], dtype=bool)
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
    cand, share, stop_id, boarded = cand[out], share[out], stop_id[out], boarded[out]
    lat, lon, pts, stand_dist = lat[out], lon[out], pts[out], stand_dist[out]
    if not len(cand):
        return empty_findings()

    resolution = link_resolution(cluster_radius_m)
    cells = gh3.latlng_to_cells(lat, lon, resolution=resolution)
    place = _places(cells)
    day = local_dates(start[cand], timezone)
    frame = pd.DataFrame(
        {
            "place": place,
            "vehicle": vehicle[cand],
            "day": day,
            "start": start[cand],
            "boarded": boarded,
        }
    )
    per_place = frame.groupby("place").agg(
        vehicles=("vehicle", "nunique"), boarded=("boarded", "mean")
    )
    per_place["days"] = [
        _service_days(g["start"].to_numpy(dtype=np.int64), g["day"].to_numpy(dtype="datetime64[D]"))
        for _, g in frame.groupby("place", sort=True)
    ]
    good = per_place.loc[
        (per_place["vehicles"] >= min_vehicles)
        & (per_place["days"] >= min_days)
        & (per_place["boarded"] >= min_boarding_share - 1e-9)
    ]
    if good.empty:
        return empty_findings()
    thresholds = {
        "min_vehicles": int(min_vehicles),
        "min_days": int(min_days),
        "min_wait_s": float(min_wait_s),
        "min_free_share": float(min_free_share),
        "min_boarding_share": float(min_boarding_share),
        "min_vehicle_days": int(min_vehicle_days),
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
                    "joined_stops": int(candidates[c].get("joined_stops", 1)),
                    "lat": float(lat[m]),
                    "lon": float(lon[m]),
                    "local_date": str(day[m]),
                    "free_share": round(float(share[m]), 3),
                    "boarded": bool(boarded[m]),
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
            "accused": _accused(frame.iloc[members], min_vehicle_days),
            "dates": sorted({str(day[m]) for m in members.tolist()}),
            "n_vehicles": n_vehicles,
            "n_days": n_days,
            "n_stops": len(members),
            "n_boardings": int(boarded[members].sum()),
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


def _boardings(
    track: TrackArrays,
    first: NDArray[np.int64],
    last: NDArray[np.int64],
    end: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Position of the fix where each wait ends with a boarding, -1 when it does not.

    The first fix not ``free`` after the wait's last ``free`` fix is ``occupied`` (the meter
    switched on), :data:`BOARDING_WITHIN_M` from its position and at most
    :data:`BOARDING_WITHIN_S` after the wait's end or its last ``free`` fix that near (GPS
    noise may cut a wait's end from its stops), with no step over :data:`JOIN_STEP_M` before
    it (the live engine's run and the fix that closes it): a passenger boarded at the place. A
    taxi that leaves with the meter ``free`` (a fuel queue, an inspection line) or switches it
    ``off`` boarded no one there.
    """
    out = np.full(len(first), -1, dtype=np.int64)
    n = len(track.ts_ns)
    free = track.meter == METER_FREE
    limit = round(BOARDING_WITHIN_S * NS)
    # Where each free run ends: the next fix not free, or another vehicle's first fix.
    stop = ~free
    stop[1:] |= track.codes[1:] != track.codes[:-1]
    run_end = np.flatnonzero(np.append(stop, True))
    for k in range(len(first)):
        a, b = int(first[k]), int(last[k])
        at = np.flatnonzero(free[a : b + 1])
        if not len(at):
            continue
        j = a + int(at[-1]) + 1
        near = int(end[k])  # the last instant seen free at the place
        if j < n and track.codes[j] == track.codes[a]:
            j, near = _left_place(
                track,
                j,
                int(run_end[np.searchsorted(run_end, j)]),
                (float(lat[k]), float(lon[k])),
                near=near,
                limit=limit,
            )
        if j >= n or track.codes[j] != track.codes[a] or track.meter[j] != METER_OCCUPIED:
            continue
        span = np.arange(a + int(at[-1]), j)
        steps = haversine_m(
            track.lat[span], track.lon[span], track.lat[span + 1], track.lon[span + 1]
        )
        if (
            track.ts_ns[j] - near <= limit
            and float(haversine_m(lat[k], lon[k], track.lat[j], track.lon[j])) <= BOARDING_WITHIN_M
            and not (steps[:-1] > JOIN_STEP_M).any()
        ):
            out[k] = j
    return out


def _left_place(
    track: TrackArrays, j: int, r: int, place: tuple[float, float], *, near: int, limit: int
) -> tuple[int, int]:
    """Scan the free fixes ``[j, r)`` after a wait at ``place`` (lat, lon).

    Returns the fix past them, or the first one that left the place for longer than ``limit``
    ns, and the last instant near the place. A fix within :data:`BOARDING_WITHIN_M` of the
    place moves ``near`` on (noise cut the stop). Read in blocks, since a free run may last
    hours while the scan ends a few fixes in.
    """
    block = 32
    while j < r:
        stop = min(j + block, r)
        ts = track.ts_ns[j:stop]
        away = haversine_m(place[0], place[1], track.lat[j:stop], track.lon[j:stop])
        close = away <= BOARDING_WITHIN_M
        seen = np.maximum.accumulate(np.where(close, ts, near))
        gone = np.flatnonzero(~close & (ts - seen > limit))
        if len(gone):
            i = int(gone[0])
            return j + i, int(seen[i])
        near = int(seen[-1])
        j = stop
        block *= 4
    return j, near


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


def advance_illegal_stand_formation(
    state: Mapping[str, Any] | None,
    waiting: Sequence[Mapping[str, Any]],
    *,
    stands: gpd.GeoDataFrame,
    through: dt.date | None = None,
    final: bool = False,
    window_days: int | None = None,
    allowed_places: gpd.GeoDataFrame | gpd.GeoSeries | None = None,
    stand_buffer_m: float = DEFAULT_STAND_BUFFER_M,
    cluster_radius_m: float = DEFAULT_CLUSTER_RADIUS_M,
    min_vehicles: int = DEFAULT_MIN_VEHICLES,
    min_days: int = DEFAULT_MIN_DAYS,
    min_wait_s: float = DEFAULT_MIN_WAIT_S,
    min_free_share: float = DEFAULT_MIN_FREE_SHARE,
    min_boarding_share: float = DEFAULT_MIN_BOARDING_SHARE,
    min_vehicle_days: int = DEFAULT_MIN_VEHICLE_DAYS,
    timezone: str = DEFAULT_TIMEZONE,
) -> tuple[dict[str, Any], gpd.GeoDataFrame]:
    """Take new waiting stops into the fleet's state; judge each local day closed.

    The kernel of :func:`detect_illegal_stand_formation` (``tracking.detectors.day_kernel``).
    Each local day up to ``through`` (and, with ``final``, up to the day of the latest stop's
    end) not judged yet is judged by :func:`detect_illegal_stand_formation` over the waiting
    stops ended by its end — within its last ``window_days`` days when given (live), all of
    them otherwise (batch) — when that set differs from the day before's; a place is returned
    once, with what it had on the first day it met the thresholds (a place that grows keeps
    its ``finding_id``: its earliest stop does not change). A stop given after its end day was
    judged counts from the next day judged.

    Parameters
    ----------
    state : mapping or None
        From the previous call (None at first); not modified.
    waiting : sequence of mapping
        New waiting stops (:func:`waiting_stops` with the same ``min_wait_s`` and
        ``min_free_share``), final: their runs of fixes closed.
    stands : geopandas.GeoDataFrame
        As in :func:`detect_illegal_stand_formation`.
    through : datetime.date, optional
        Last local day closed (every stop that ends by its end is given).
    final : bool, default False
        End of the input: judge up to the day of the latest stop's end.
    window_days : int, optional
        Days of stops a place is judged over (live); None: every stop so far.
    allowed_places, stand_buffer_m, cluster_radius_m, min_vehicles, min_days, min_wait_s,
    min_free_share, min_boarding_share, min_vehicle_days, timezone
        As in :func:`detect_illegal_stand_formation`.

    Returns
    -------
    tuple of (dict, geopandas.GeoDataFrame)
        The new state (plain data: ``stops``, the waiting stops that a day still to judge can
        count, in the batch's order; ``judged``, the last day judged; ``dirty``, stops were
        added to a judged day; ``emitted``, the findings' ids with the day they were returned)
        and the places found on the closed days.
    """
    if window_days is not None and (
        isinstance(window_days, bool) or not isinstance(window_days, int) or window_days < 1
    ):
        msg = f"'window_days' era {window_days!r}; esperado um inteiro >= 1"
        raise DetectorThresholdError(msg)
    st: dict[str, Any] = {"stops": [], "judged": None, "dirty": False, "emitted": {}}
    st.update(dict(state or {}))
    stops = [*st["stops"], *(dict(w) for w in waiting)]
    stops.sort(key=lambda c: (c["vehicle_id"], c["start_ns"]))
    ends = _end_days(stops, timezone)
    judged = st["judged"]
    dirty = bool(st["dirty"])
    if judged is not None and bool((_end_days(waiting, timezone) <= judged).any()):
        dirty = True  # a stop of a day already judged: counted from the next day judged
    last = -(2**62)
    if through is not None:
        last = (through - dt.date(1970, 1, 1)).days
    if final and len(ends):
        last = max(last, int(ends.max()))
    first = (
        (int(judged) + 1) if judged is not None else (int(ends.min()) if len(ends) else last + 1)
    )
    marks = set(ends.tolist())
    if window_days is not None:
        marks |= {d + window_days for d in ends.tolist()}
    options: dict[str, Any] = {
        "allowed_places": allowed_places,
        "stand_buffer_m": stand_buffer_m,
        "cluster_radius_m": cluster_radius_m,
        "min_vehicles": min_vehicles,
        "min_days": min_days,
        "min_wait_s": min_wait_s,
        "min_free_share": min_free_share,
        "min_boarding_share": min_boarding_share,
        "min_vehicle_days": min_vehicle_days,
        "timezone": timezone,
    }
    empty = pd.DataFrame()
    detect_illegal_stand_formation(empty, empty, stands, waiting=[], **options)  # checks only
    emitted = dict(st["emitted"])
    frames = []
    for day in range(first, last + 1):
        if not (day in marks or (dirty and day == first)):
            continue
        keep = ends <= day
        if window_days is not None:
            keep &= ends > day - window_days
        found = detect_illegal_stand_formation(
            empty, empty, stands, waiting=[stops[k] for k in np.flatnonzero(keep)], **options
        )
        fresh = ~found["finding_id"].isin(list(emitted)).to_numpy(dtype=bool)
        if fresh.any():
            frames.append(found.loc[fresh])
            emitted.update({str(f): day for f in found.loc[fresh, "finding_id"]})
    if last >= first:
        st["judged"] = last
        dirty = False
    if window_days is not None and st["judged"] is not None:
        floor = int(st["judged"]) - window_days  # no day still to judge counts these
        stops = [c for c, e in zip(stops, ends.tolist(), strict=True) if e > floor]
        emitted = {f: d for f, d in emitted.items() if d > floor}
    st.update(stops=stops, dirty=dirty, emitted=emitted)
    if not frames:
        return st, empty_findings()
    out = pd.concat(frames, ignore_index=True)
    return st, gpd.GeoDataFrame(out, geometry="geometry", crs=WGS84)


def advance_runs(
    runs: Mapping[str, Mapping[str, Any] | None],
    pings: pd.DataFrame,
    *,
    max_step_m: float,
    max_gap_s: float,
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, int, int]]]:
    """Advance each vehicle's open run of fixes; return the new runs and the runs that closed.

    A run is a span of a vehicle's fixes with no step longer than ``max_step_m`` and no silence
    longer than ``max_gap_s``: no stop spans a longer step or silence, so the stops of a closed
    run are final (the live engine finds them and gives their :func:`waiting_stops` to
    :data:`KERNEL`). A run: ``{first_ns, last_ns, lat, lon}`` (its first instant and its last
    fix); a closed run: ``(vehicle, first ns, last ns)``. A fix not later than its vehicle's
    last is skipped. Returns the runs of the vehicles with new fixes only.
    """
    frame = pings.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable")
    vids = frame[fr.VEHICLE_ID].astype("str").to_numpy(dtype=object)
    ts = utc_ns(frame[fr.TIMESTAMP], name=fr.TIMESTAMP, what="os pings")
    lat = frame[fr.LAT].to_numpy(dtype=np.float64)
    lon = frame[fr.LON].to_numpy(dtype=np.float64)
    bounds = np.r_[0, np.flatnonzero(vids[1:] != vids[:-1]) + 1, len(vids)]
    closed: list[tuple[str, int, int]] = []
    out: dict[str, dict[str, Any]] = {}
    for lo_, hi_ in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if hi_ <= lo_:
            continue
        vehicle = str(vids[lo_])
        run = runs.get(vehicle)
        t = ts[lo_:hi_]
        new = np.r_[True, t[1:] > t[:-1]]  # late fixes (not after the last seen) are skipped
        if run is not None:
            new &= t > int(run["last_ns"])
        t, la, lo = t[new], lat[lo_:hi_][new], lon[lo_:hi_][new]
        if not len(t):
            continue
        head = (t[0], la[0], lo[0]) if run is None else (run["last_ns"], run["lat"], run["lon"])
        prev_t, prev_la, prev_lo = (
            np.r_[h, x[:-1]] for h, x in zip(head, (t, la, lo), strict=True)
        )
        breaks = (haversine_m(prev_la, prev_lo, la, lo) > max_step_m) | (
            (t - prev_t) / 1e9 > max_gap_s
        )
        breaks[0] |= run is None
        first = None if run is None else int(run["first_ns"])
        for start in np.flatnonzero(breaks).tolist():  # a new run begins: the one before closes
            if first is not None:
                closed.append((vehicle, first, int(prev_t[start])))
            first = int(t[start])
        out[vehicle] = {
            "first_ns": first,
            "last_ns": int(t[-1]),
            "lat": float(la[-1]),
            "lon": float(lo[-1]),
        }
    return out, closed


def _end_days(stops: Sequence[Mapping[str, Any]], timezone: str) -> NDArray[np.int64]:
    """Local day number of each stop's end."""
    ns = np.asarray([int(c["end_ns"]) for c in stops], dtype=np.int64)
    if not len(ns):
        return np.zeros(0, dtype=np.int64)
    return np.asarray(local_dates(ns, timezone).astype(np.int64), dtype=np.int64)


KERNEL = DayKernel(KIND, detect_illegal_stand_formation, advance_illegal_stand_formation)
"""The rule as a day kernel (``tracking.detectors.day_kernel``)."""
