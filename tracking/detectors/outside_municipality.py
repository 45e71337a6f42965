"""Trips picked up outside the municipality (Porto Alegre art. 19; Pinto Bandeira art. 25 X).

Porto Alegre's taxi service "possui sua contratação restrita à Capital, podendo, no atendimento
das corridas nesta iniciadas, possuir por destino município diverso" (art. 19): a ride may end
elsewhere but must start in the city. Pinto Bandeira makes it *grave* to "efetuar corrida com
origem em outro município que não tenha convênio" (art. 25 X). Definitions (each is shown in the
evidence):

pickup
    The first fix of a trip (``tracking/trips.py``). Only meter trips by default: a trip
    inferred from stops (vehicle without meter data) says the vehicle moved, not that it
    carried anyone — a driver leaving home in the next town is no infraction.
outside
    The pickup is farther than ``boundary_tolerance_m`` from the municipal polygon, measured in
    the boundary's UTM zone (SIRGAS 2000 / UTM in Brazil), and no farther than
    :data:`MAX_SERVICE_DISTANCE_M` (100 km: beyond, the coordinate or the boundary is wrong —
    latitude and longitude swapped, another city's file — and nothing is judged). The default
    tolerance, 200 m, absorbs the errors of IBGE's 1:250,000 boundaries (hundreds of metres
    along rivers and ridges) and of GPS; use a smaller one with a surveyed boundary.
meter switch
    With ``pings`` given, the fix before the pickup must not be ``occupied``: a trip that
    "starts" where tracking resumed with the passenger aboard did not necessarily start there.
    Such trips are kept at half confidence (``details.meter_switch_seen`` False).
boarding between two fixes
    The passenger boarded somewhere between the fix before the pickup (``free`` or ``off``) and
    the pickup: when that fix is not outside (within the tolerance), the ride may have begun in
    the city (a hail at the border, the car driving outward before the next fix; art. 19). Up to
    :data:`CONTINUED_MAX_SILENCE_S` between the two, the trip is not judged; after a longer
    silence where the ride began is not known, and the trip is kept as one whose meter switch
    was not seen (half confidence).
meter blip
    A pickup that ends a meter blip (:func:`tracking.trips.meter_blip_ends`: at most
    :data:`~tracking.trips.METER_BLIP_MAX_FIXES` fixes not ``occupied`` after an ``occupied``
    fix at most :data:`~tracking.trips.METER_BLIP_MAX_S` before it) continues that ride (a meter
    read wrong once or twice, not a passenger leaving and another boarding): it is not judged
    on its own; the ride is, by its own pickup.
GPS error at the pickup
    With ``pings`` given, a trip is not judged when the step into its pickup fix from the fix
    before it, or a step between the trip's fixes of its first 5 minutes
    (:data:`tracking.validate.MAX_EXCURSION_S`), implies more than
    :data:`tracking.validate.MAX_SPEED_KMH`: the pickup may lie in a stretch the receiver threw
    away, and is no evidence of where the ride began (a receiver errs about 0.2 times an hour;
    ``bench/README.md``).
confidence
    ``0.5 + 0.45 min(1, (d - tol - acc) / (4 max(tol, 50)))`` with ``d`` the distance to the
    boundary, ``tol`` the tolerance and ``acc`` the pickup's ``accuracy_m`` (0 if unknown);
    times 0.5 without a seen meter switch; clipped to [0.05, 0.95].

Live (:data:`KERNEL`): the rule runs on meter trips cut from the fixes (trips inferred from stops
are not judged live; by default not in batch either). A vehicle keeps its open trip (from the
pickup, with the fix before it) or, between trips, its last two fixes: at most one trip of
fixes. A trip's finding is emitted when a later fix ends the trip.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely
from numpy.typing import NDArray
from shapely.geometry.base import BaseGeometry

from geo.crs import utm_crs_for
from tracking.arrays import NS, iso_utc
from tracking.detectors._errors import BoundaryError, DetectorInputError
from tracking.detectors._evidence import (
    check_threshold,
    clip_confidence,
    fix_record,
    meter_at,
    ping_rows,
    require_columns,
    sorted_view,
    utc_ns,
)
from tracking.detectors._meter_trips import DEFAULT_TRIP_MAX_GAP_S, meter_trips, open_trips
from tracking.detectors.findings import empty_findings, make_findings
from tracking.detectors.kernel import TrackKernel
from tracking.trips import METER_BLIP_MAX_FIXES, meter_blip_ends
from tracking.validate import MAX_EXCURSION_S, impossible_steps

KIND = "outside_municipality"
DEFAULT_BOUNDARY_TOLERANCE_M = 200.0
CONTINUED_MAX_SILENCE_S = 1800.0
"""Longest tracker silence across which an occupied ride begun inside continues (s)."""
MAX_SERVICE_DISTANCE_M = 100_000.0
"""A pickup farther than this from the boundary is not judged: no taxi of the municipality
serves there; such a position is a wrong coordinate (latitude and longitude swapped, another
city's file) or the wrong boundary, not a ride (m)."""
_TRIP_COLUMNS = ("vehicle_id", "started_at", "ended_at", "pickup_lat", "pickup_lon")


def boundary_polygon(boundary: Any) -> BaseGeometry:
    """Return the municipal boundary as one (Multi)Polygon in EPSG:4326.

    Parameters
    ----------
    boundary : shapely geometry, geopandas.GeoSeries or geopandas.GeoDataFrame
        A shapely Polygon/MultiPolygon is taken as EPSG:4326; a GeoSeries/GeoDataFrame needs a
        CRS and is reprojected to EPSG:4326 and unioned.

    Returns
    -------
    shapely.geometry.base.BaseGeometry
        A valid, non-empty Polygon or MultiPolygon.

    Raises
    ------
    BoundaryError
        If it is empty, not polygonal, without CRS, or not in longitude/latitude range.
    """
    if isinstance(boundary, gpd.GeoDataFrame | gpd.GeoSeries):
        if boundary.crs is None:
            msg = "limite municipal sem sistema de referência (CRS); esperado EPSG:4326"
            raise BoundaryError(msg)
        geom = boundary.to_crs(4326).geometry.union_all() if len(boundary) else None
    elif isinstance(boundary, BaseGeometry):
        geom = boundary
    else:
        msg = (
            f"limite municipal era {type(boundary).__name__}; "
            "esperado Polygon/MultiPolygon (shapely) ou GeoDataFrame"
        )
        raise BoundaryError(msg)
    if geom is None or geom.is_empty:
        msg = "limite municipal vazio"
        raise BoundaryError(msg)
    if not geom.is_valid:
        geom = shapely.make_valid(geom)
    if geom.geom_type == "GeometryCollection":
        polys = [g for g in shapely.get_parts(geom) if g.geom_type in ("Polygon", "MultiPolygon")]
        geom = shapely.union_all(polys) if polys else geom
    if geom.geom_type not in ("Polygon", "MultiPolygon"):
        msg = f"limite municipal é {geom.geom_type}; esperado Polygon ou MultiPolygon"
        raise BoundaryError(msg)
    minx, miny, maxx, maxy = geom.bounds
    if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
        msg = (
            f"limite municipal fora da faixa lon/lat ({minx:.1f}, {miny:.1f}, {maxx:.1f}, "
            f"{maxy:.1f}); esperado EPSG:4326 em graus"
        )
        raise BoundaryError(msg)
    return geom


@dataclass(frozen=True, eq=False)
class PreparedBoundary:
    """The boundary ready for measuring.

    Attributes
    ----------
    utm : pyproj.CRS
        The boundary's UTM zone (SIRGAS 2000 / UTM in Brazil).
    to_utm : pyproj.Transformer
        EPSG:4326 → ``utm``.
    polygon : shapely geometry
        The boundary in ``utm``.
    zone_ok : shapely geometry
        ``polygon`` grown by the tolerance (prepared).
    tolerance_m : float
        The tolerance.
    """

    utm: pyproj.CRS
    to_utm: pyproj.Transformer
    polygon: BaseGeometry
    zone_ok: BaseGeometry
    tolerance_m: float


def prepare_boundary(
    boundary: Any, *, boundary_tolerance_m: float = DEFAULT_BOUNDARY_TOLERANCE_M
) -> PreparedBoundary:
    """Prepare the municipal boundary for measuring pickups against it.

    Parameters
    ----------
    boundary : shapely (Multi)Polygon in EPSG:4326, or GeoDataFrame/GeoSeries with a CRS
        The municipality (see :func:`boundary_polygon`).
    boundary_tolerance_m : float, default 200
        Pickups up to this far outside the polygon are not reported.

    Returns
    -------
    PreparedBoundary

    Raises
    ------
    BoundaryError
        If the boundary is not a usable (Multi)Polygon.
    DetectorThresholdError
        If the tolerance is negative.
    """
    check_threshold("boundary_tolerance_m", boundary_tolerance_m, unit="metros")
    wkb = boundary_polygon(boundary).wkb
    return _prepared(wkb, float(boundary_tolerance_m), threading.get_ident())


@functools.lru_cache(maxsize=8)
def _prepared(wkb: bytes, boundary_tolerance_m: float, _thread: int) -> PreparedBoundary:
    """Prepare a valid polygon once per thread (:func:`prepare_boundary`; each bucket reads it).

    Per thread: a prepared GEOS geometry is not to be shared between threads.
    """
    geom = shapely.from_wkb(wkb)
    centre = geom.representative_point()
    utm = utm_crs_for(centre.x, centre.y)
    to_utm = pyproj.Transformer.from_crs(4326, utm, always_xy=True)
    poly = shapely.transform(geom, lambda xy: np.column_stack(to_utm.transform(xy[:, 0], xy[:, 1])))
    zone_ok = shapely.buffer(poly, boundary_tolerance_m) if boundary_tolerance_m > 0 else poly
    shapely.prepare(zone_ok)
    return PreparedBoundary(
        utm=utm,
        to_utm=to_utm,
        polygon=poly,
        zone_ok=zone_ok,
        tolerance_m=float(boundary_tolerance_m),
    )


def outside_fixes(
    prepared: PreparedBoundary, lat: NDArray[np.float64], lon: NDArray[np.float64]
) -> NDArray[np.bool_]:
    """Which positions lie beyond the boundary grown by its tolerance."""
    x, y = prepared.to_utm.transform(lon, lat)
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return ~np.asarray(shapely.contains_xy(prepared.zone_ok, x, y), dtype=bool)


def _outside(
    prepared: PreparedBoundary, lat: NDArray[np.float64], lon: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Which pickups lie beyond the tolerance, and the distance of those to the boundary (m).

    Beyond :data:`MAX_SERVICE_DISTANCE_M` a pickup is no pickup of the municipality's taxis:
    not outside (not judged).
    """
    outside = outside_fixes(prepared, lat, lon)
    x, y = prepared.to_utm.transform(lon[outside], lat[outside])
    dist = np.asarray(shapely.distance(prepared.polygon, shapely.points(x, y)), dtype=np.float64)
    served = dist <= MAX_SERVICE_DISTANCE_M
    outside[np.flatnonzero(outside)[~served]] = False
    return outside, dist[served]


def _pickup_jumps(
    pos: NDArray[np.int64],
    end_ns: NDArray[np.int64],
    codes: NDArray[np.integer],
    ns_sorted: NDArray[np.int64],
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    order: NDArray[np.int64] | None,
) -> NDArray[np.bool_]:
    """Whether the receiver erred at each pickup (a position in the sorted pings).

    It did when the step into the pickup from the vehicle's fix before it, or any step between
    the trip's fixes (up to its end, ``end_ns``) of the :data:`tracking.validate.MAX_EXCURSION_S`
    after the pickup, is impossible (:func:`tracking.validate.impossible_steps`): the pickup may
    lie in a displaced stretch. Only the trip's fixes: live judges a trip when it ends.
    """
    n = len(ns_sorted)
    limit = round(MAX_EXCURSION_S * 1e9)
    out = np.zeros(len(pos), dtype=bool)
    for k, p in enumerate(pos.tolist()):
        lo = p - 1 if p > 0 and codes[p - 1] == codes[p] else p
        last = min(int(ns_sorted[p]) + limit, int(end_ns[k]))
        hi = p
        while hi + 1 < n and codes[hi + 1] == codes[p] and ns_sorted[hi + 1] <= last:
            hi += 1
        if hi == lo:
            continue
        at = np.arange(lo, hi + 1)
        rows = at if order is None else order[at]
        steps = impossible_steps(ns_sorted[at], lat[rows], lon[rows], np.arange(1, len(at)))
        out[k] = bool(steps.any())
    return out


def _continued(
    prepared: PreparedBoundary,
    trips: pd.DataFrame,
    pings: pd.DataFrame,
    pos: NDArray[np.int64],
    orig: NDArray[np.int64],
    prev_orig: NDArray[np.int64],
    has_prev: NDArray[np.bool_],
    view: tuple[NDArray[np.int64] | None, NDArray[np.int64], NDArray[np.int64]],
) -> NDArray[np.bool_]:
    """Which pickups continue a ride begun inside across a tracker silence (art. 19).

    The pickup and the fix before it are ``occupied``, at most :data:`CONTINUED_MAX_SILENCE_S`
    apart, with no fix between (no meter switch: the same ride, only the tracker was silent),
    and the ride was inside before the silence: that fix is not outside (within the
    tolerance), or it ends a meter trip whose pickup is not outside and whose meter switch was
    seen (the fix before it ``free`` or ``off``). A silence after a pickup outside, or after a
    ride itself resumed aboard, excuses nothing.
    """
    order, codes, ns_sorted = view
    out = has_prev & np.asarray(meter_at(pings, prev_orig) == "occupied", dtype=bool)
    out &= np.asarray(meter_at(pings, orig) == "occupied", dtype=bool)
    silence = ns_sorted[pos] - ns_sorted[np.maximum(pos - 1, 0)]
    out &= np.asarray(silence <= round(CONTINUED_MAX_SILENCE_S * NS), dtype=bool)
    if not out.any():
        return np.asarray(out, dtype=bool)
    p_lat = pings["lat"].to_numpy(dtype=np.float64)
    p_lon = pings["lon"].to_numpy(dtype=np.float64)
    inside = np.zeros(len(pos), dtype=bool)
    inside[out] = ~_outside(prepared, p_lat[prev_orig[out]], p_lon[prev_orig[out]])[0]
    if "last_ping" in trips.columns:  # else: the fix before the silence only
        ends = pd.to_numeric(trips["last_ping"]).fillna(-1).to_numpy(dtype=np.int64)
        starts = pd.to_numeric(trips["first_ping"]).fillna(-1).to_numpy(dtype=np.int64)
        by_end = pd.Series(np.arange(len(trips)), index=ends)
        by_end = by_end[~by_end.index.duplicated()]
        todo = np.flatnonzero(out & ~inside)
        t = by_end.reindex(pos[todo] - 1).to_numpy(dtype=np.float64)
        found = np.isfinite(t)
        todo, t = todo[found], t[found].astype(np.int64)
        lat = trips["pickup_lat"].to_numpy(dtype=np.float64)[t]
        lon = trips["pickup_lon"].to_numpy(dtype=np.float64)[t]
        ok = np.isfinite(lat) & np.isfinite(lon) & (starts[t] > 0)
        todo, t, lat, lon = todo[ok], t[ok], lat[ok], lon[ok]
        if len(todo):
            first = starts[t]
            same = codes[first - 1] == codes[first]
            before = first - 1 if order is None else order[first - 1]
            seen = same & pd.Series(meter_at(pings, before)).isin(["free", "off"]).to_numpy(
                dtype=bool
            )
            inside[todo] = seen & ~_outside(prepared, lat, lon)[0]
    return np.asarray(out & inside, dtype=bool)


def _meter_blips(
    pings: pd.DataFrame,
    pos: NDArray[np.int64],
    view: tuple[NDArray[np.int64] | None, NDArray[np.int64], NDArray[np.int64]],
) -> NDArray[np.bool_]:
    """Which pickups (positions in the sorted pings) end a meter blip inside a ride.

    :func:`tracking.trips.meter_blip_ends` on each pickup's fixes back to the occupied one it
    may follow (a window apiece: the meter is read for those fixes only).
    """
    order, codes, ns_sorted = view
    width = METER_BLIP_MAX_FIXES + 2
    window = pos[:, None] - np.arange(width - 1, -1, -1)  # each pickup's fixes, pickup last
    valid = (window >= 0).ravel()
    at = np.maximum(window, 0).ravel()
    meter = meter_at(pings, at if order is None else order[at])
    # A window's own stretch: fixes before the pings' first, or of another vehicle, are apart.
    stretch = np.where(valid, codes[at], -1).astype(np.int64) * len(pos) + np.repeat(
        np.arange(len(pos), dtype=np.int64), width
    )
    ends = np.arange(len(pos), dtype=np.int64) * width + width - 1
    return meter_blip_ends(meter == "occupied", stretch, ns_sorted[at], ends)


def _finding_row(
    *,
    vehicle_id: str,
    trip_id: str | None,
    start_ns: int,
    end_ns: int,
    pickup: dict[str, Any],
    before: dict[str, Any] | None,
    distance_m: float,
    accuracy_m: float,
    switch_seen: bool | None,
    source: str,
    prepared: PreparedBoundary,
) -> tuple[dict[str, Any], Any]:
    """One finding from a judged pickup."""
    tol = prepared.tolerance_m
    conf = 0.5 + 0.45 * min(1.0, (distance_m - tol - accuracy_m) / (4.0 * max(tol, 50.0)))
    conf *= 0.5 if switch_seen is False else 1.0
    fixes = [pickup] if before is None else [before, pickup]
    details = {
        "fixes": fixes,
        "distance_to_boundary_m": distance_m,
        "pickup_accuracy_m": accuracy_m if accuracy_m > 0 else None,
        "meter_switch_seen": switch_seen,
        "trip_id": trip_id,
        "trip_started_at": iso_utc(start_ns),
        "trip_ended_at": iso_utc(end_ns),
        "trip_duration_s": float((end_ns - start_ns) / NS),
        "source": source,
        "crs": f"EPSG:{prepared.utm.to_epsg()}",
        "thresholds": {"boundary_tolerance_m": float(tol)},
    }
    row = {
        "kind": KIND,
        "vehicle_id": vehicle_id,
        "stand_id": None,
        "started_at": pd.Timestamp(start_ns, unit="ns", tz="UTC"),
        "ended_at": pd.Timestamp(end_ns, unit="ns", tz="UTC"),
        "confidence": clip_confidence(conf),
        "details": details,
    }
    return row, shapely.Point(pickup["lon"], pickup["lat"])


def detect_outside_municipality(
    trips: pd.DataFrame,
    boundary: Any,
    *,
    pings: pd.DataFrame | None = None,
    boundary_tolerance_m: float = DEFAULT_BOUNDARY_TOLERANCE_M,
    include_inferred_trips: bool = False,
) -> gpd.GeoDataFrame:
    """Find trips whose pickup lies outside the municipal boundary (beyond a tolerance).

    Serves Porto Alegre art. 19 and Pinto Bandeira art. 25 X (grave); see the module docstring
    for the definitions and the confidence.

    Parameters
    ----------
    trips : pandas.DataFrame
        Trips from :func:`tracking.trips.detect_trips` (``source``, ``first_row`` and
        ``first_ping`` helper columns used when present).
    boundary : shapely (Multi)Polygon in EPSG:4326, or GeoDataFrame/GeoSeries with a CRS
        The municipality.
    pings : pandas.DataFrame, optional
        The pings the trips came from (sorted, as their contract says): the fix before each
        pickup tells whether the meter switch was seen, and with the fixes after it whether the
        receiver erred there (not judged); the pickup's ``accuracy_m`` weighs on the confidence.
    boundary_tolerance_m : float, default 200
        Pickups up to this far outside the polygon are not reported.
    include_inferred_trips : bool, default False
        Also judge trips inferred from stops.

    Returns
    -------
    geopandas.GeoDataFrame
        Findings, kind ``outside_municipality``, one per trip; geometry the pickup fix.

    Raises
    ------
    BoundaryError
        If the boundary is not a usable (Multi)Polygon.
    DetectorInputError
        If trips lack columns or times are naive.
    DetectorThresholdError
        If the tolerance is negative.
    """
    check_threshold("boundary_tolerance_m", boundary_tolerance_m, unit="metros")
    require_columns(trips, _TRIP_COLUMNS, what="as viagens")
    geom = boundary_polygon(boundary)
    start = utc_ns(trips["started_at"], column="started_at", what="as viagens")
    end = utc_ns(trips["ended_at"], column="ended_at", what="as viagens")
    if len(trips) == 0:
        return empty_findings()
    source = (
        trips["source"].astype("str").to_numpy(dtype=object)
        if "source" in trips.columns
        else np.full(len(trips), "meter", dtype=object)
    )
    lat = trips["pickup_lat"].to_numpy(dtype=np.float64)
    lon = trips["pickup_lon"].to_numpy(dtype=np.float64)
    judged = np.isfinite(lat) & np.isfinite(lon)
    if not include_inferred_trips:
        judged &= source != "stops"
    idx = np.flatnonzero(judged)
    if not len(idx):
        return empty_findings()

    prepared = prepare_boundary(geom, boundary_tolerance_m=boundary_tolerance_m)
    outside, dist = _outside(prepared, lat[idx], lon[idx])
    idx = idx[outside]
    if not len(idx):
        return empty_findings()

    first_row = (
        pd.to_numeric(trips["first_row"]).fillna(-1).to_numpy(dtype=np.int64)
        if "first_row" in trips.columns
        else np.full(len(trips), -1, dtype=np.int64)
    )
    switch: list[bool | None] = [None] * len(idx)
    before: list[dict[str, Any] | None] = [None] * len(idx)
    accuracy = np.zeros(len(idx))
    if pings is not None and "first_ping" in trips.columns and len(pings):
        require_columns(pings, ("vehicle_id", "timestamp", "lat", "lon"), what="os pings")
        pos = pd.to_numeric(trips["first_ping"]).fillna(-1).to_numpy(dtype=np.int64)[idx]
        if pos.min() < 0 or pos.max() >= len(pings):
            msg = "as viagens apontam para pings inexistentes; passe os pings de onde vieram"
            raise DetectorInputError(msg)
        order, codes, ns_sorted = sorted_view(pings)
        p_lat = pings["lat"].to_numpy(dtype=np.float64)
        p_lon = pings["lon"].to_numpy(dtype=np.float64)
        # ``first_ping`` is a position in the sorted pings (detect_trips sorts a copy).
        keep = ~_pickup_jumps(pos, end[idx], codes, ns_sorted, p_lat, p_lon, order)
        idx, dist, pos = idx[keep], dist[keep], pos[keep]
        if not len(idx):
            return empty_findings()
        orig = pos if order is None else order[pos]
        prev = pos - 1
        has_prev = (prev >= 0) & (codes[np.maximum(prev, 0)] == codes[pos])
        prev_orig = prev if order is None else order[np.maximum(prev, 0)]
        prev_meter = meter_at(pings, prev_orig)
        seen = has_prev & pd.Series(prev_meter).isin(["free", "off"]).to_numpy(dtype=bool)
        keep = ~_continued(
            prepared, trips, pings, pos, orig, prev_orig, has_prev, (order, codes, ns_sorted)
        )
        left_inside = seen.copy()
        at = prev_orig[seen]
        left_inside[seen] = ~_outside(prepared, p_lat[at], p_lon[at])[0]
        gap = ns_sorted[pos] - ns_sorted[np.maximum(prev, 0)]
        long_gap = gap > round(CONTINUED_MAX_SILENCE_S * NS)
        keep &= ~(left_inside & ~long_gap) & ~_meter_blips(pings, pos, (order, codes, ns_sorted))
        seen &= ~left_inside
        if not keep.all():
            idx, dist, pos, orig = idx[keep], dist[keep], pos[keep], orig[keep]
            prev, has_prev, prev_orig = prev[keep], has_prev[keep], prev_orig[keep]
            seen = seen[keep]
            if not len(idx):
                return empty_findings()
        accuracy = np.zeros(len(idx))
        if "accuracy_m" in pings.columns:
            acc = pings["accuracy_m"].to_numpy(dtype=np.float64)[orig]
            accuracy = np.where(np.isfinite(acc) & (acc > 0), acc, 0.0)
        rows = ping_rows(pings)
        switch = [bool(x) for x in seen.tolist()]
        before = [None] * len(idx)
        for k in np.flatnonzero(has_prev).tolist():
            q = int(prev_orig[k])
            before[k] = fix_record(int(ns_sorted[prev[k]]), p_lat[q], p_lon[q], int(rows[q]))

    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for k, t in enumerate(idx.tolist()):
        row, geom_k = _finding_row(
            vehicle_id=str(trips["vehicle_id"].iloc[t]),
            trip_id=str(trips["trip_id"].iloc[t]) if "trip_id" in trips.columns else None,
            start_ns=int(start[t]),
            end_ns=int(end[t]),
            pickup=fix_record(int(start[t]), lat[t], lon[t], int(first_row[t])),
            before=before[k],
            distance_m=float(dist[k]),
            accuracy_m=float(accuracy[k]),
            switch_seen=switch[k],
            source=str(source[t]),
            prepared=prepared,
        )
        out.append(row)
        geoms.append(geom_k)
    return make_findings(pd.DataFrame(out), geoms)


# --------------------------------------------------------------------------------- kernel


def detect_in_fixes(
    pings: pd.DataFrame,
    *,
    boundary: Any,
    boundary_tolerance_m: float = DEFAULT_BOUNDARY_TOLERANCE_M,
    max_gap_s: float = DEFAULT_TRIP_MAX_GAP_S,
) -> gpd.GeoDataFrame:
    """Return :func:`detect_outside_municipality` on the meter trips of ``pings``."""
    trips = meter_trips(pings, max_gap_s=max_gap_s)
    return detect_outside_municipality(
        trips, boundary, pings=pings, boundary_tolerance_m=boundary_tolerance_m
    )


def open_from(
    pings: pd.DataFrame, *, max_gap_s: float = DEFAULT_TRIP_MAX_GAP_S, **_: Any
) -> dict[str, int]:
    """Each vehicle's open trip's pickup, else its last fix (the fix before a next pickup)."""
    trips = meter_trips(pings, max_gap_s=max_gap_s)
    opened = open_trips(pings, trips)
    out = {v: last if start is None else start for v, (last, start) in opened.items()}
    return _keep_ride_before(pings, trips, out)


def _keep_ride_before(
    pings: pd.DataFrame, trips: pd.DataFrame, out: dict[str, int]
) -> dict[str, int]:
    """Open from the trip before an open trip resumed aboard after a silence.

    :func:`_continued` reads that trip (its pickup, the fix before it) to judge the open one.
    """
    if not len(trips) or "first_ping" not in trips.columns or "meter" not in pings.columns:
        return out
    order, codes, ns = sorted_view(pings)
    start = trips["started_at"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    first = pd.to_numeric(trips["first_ping"]).fillna(-1).to_numpy(dtype=np.int64)
    last = pd.to_numeric(trips["last_ping"]).fillna(-1).to_numpy(dtype=np.int64)
    vehicle = trips["vehicle_id"].astype("str").to_numpy(dtype=object)
    by_end = dict(zip(last.tolist(), start.tolist(), strict=True))
    limit = round(CONTINUED_MAX_SILENCE_S * NS)
    for k in np.flatnonzero(start == np.asarray([out.get(v, -1) for v in vehicle])).tolist():
        p = int(first[k])
        if p < 1 or codes[p - 1] != codes[p] or ns[p] - ns[p - 1] > limit:
            continue
        at = np.asarray([p - 1, p]) if order is None else order[[p - 1, p]]
        if (meter_at(pings, at) == "occupied").all() and p - 1 in by_end:
            out[str(vehicle[k])] = int(by_end[p - 1])
    return out


KERNEL = TrackKernel(KIND, detect_in_fixes, open_from, context_fixes=METER_BLIP_MAX_FIXES + 1)
"""The rule as a kernel (``tracking.detectors.kernel.advance``); the fixes before the pickup
are kept as context: the finding shows the one before it, and they tell a meter blip."""
