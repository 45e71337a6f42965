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
    the boundary's UTM zone (SIRGAS 2000 / UTM in Brazil). The default, 200 m, absorbs the
    errors of IBGE's 1:250,000 boundaries (hundreds of metres along rivers and ridges) and of
    GPS; use a smaller one with a surveyed boundary.
meter switch
    With ``pings`` given, the fix before the pickup must not be ``occupied``: a trip that
    "starts" where tracking resumed with the passenger aboard did not necessarily start there.
    Such trips are kept at half confidence (``details.meter_switch_seen`` False).
confidence
    ``0.5 + 0.45 min(1, (d - tol - acc) / (4 max(tol, 50)))`` with ``d`` the distance to the
    boundary, ``tol`` the tolerance and ``acc`` the pickup's ``accuracy_m`` (0 if unknown);
    times 0.5 without a seen meter switch and 0.8 if the pickup is speed-flagged; clipped to
    [0.05, 0.95].
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely
from shapely.geometry.base import BaseGeometry

from geo.crs import utm_crs_for
from tracking.detectors._errors import BoundaryError, DetectorInputError
from tracking.detectors._evidence import (
    NS,
    check_threshold,
    clip_confidence,
    fix_record,
    iso_utc,
    ping_rows,
    require_columns,
    sorted_view,
    utc_ns,
)
from tracking.detectors.findings import empty_findings, make_findings

KIND = "outside_municipality"
DEFAULT_BOUNDARY_TOLERANCE_M = 200.0
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
        pickup tells whether the meter switch was seen; ``accuracy_m`` and ``speed_flag`` of
        the pickup weigh on the confidence.
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

    centre = geom.representative_point()
    utm = utm_crs_for(centre.x, centre.y)
    to_utm = pyproj.Transformer.from_crs(4326, utm, always_xy=True)
    poly = shapely.transform(geom, lambda xy: np.column_stack(to_utm.transform(xy[:, 0], xy[:, 1])))
    zone_ok = shapely.buffer(poly, boundary_tolerance_m) if boundary_tolerance_m > 0 else poly
    shapely.prepare(zone_ok)
    x, y = to_utm.transform(lon[idx], lat[idx])
    outside = ~shapely.contains_xy(zone_ok, x, y)
    idx, x, y = idx[outside], np.asarray(x)[outside], np.asarray(y)[outside]
    if not len(idx):
        return empty_findings()
    dist = shapely.distance(poly, shapely.points(x, y))

    first_row = (
        pd.to_numeric(trips["first_row"]).fillna(-1).to_numpy(dtype=np.int64)
        if "first_row" in trips.columns
        else np.full(len(trips), -1, dtype=np.int64)
    )
    accuracy = np.zeros(len(idx))
    flagged = np.zeros(len(idx), dtype=bool)
    switch: list[bool | None] = [None] * len(idx)
    before: list[dict[str, Any] | None] = [None] * len(idx)
    if pings is not None and "first_ping" in trips.columns and len(pings):
        require_columns(pings, ("vehicle_id", "timestamp", "lat", "lon"), what="os pings")
        pos = pd.to_numeric(trips["first_ping"]).fillna(-1).to_numpy(dtype=np.int64)[idx]
        if pos.min() < 0 or pos.max() >= len(pings):
            msg = "as viagens apontam para pings inexistentes; passe os pings de onde vieram"
            raise DetectorInputError(msg)
        order, codes, ns_sorted = sorted_view(pings)
        # ``first_ping`` is a position in the sorted pings (detect_trips sorts a copy).
        orig = pos if order is None else order[pos]
        prev = pos - 1
        has_prev = (prev >= 0) & (codes[np.maximum(prev, 0)] == codes[pos])
        prev_orig = prev if order is None else order[np.maximum(prev, 0)]
        meter = (
            pings["meter"].to_numpy(dtype=object)
            if "meter" in pings.columns
            else np.full(len(pings), None, dtype=object)
        )
        prev_meter = pd.Series(meter[prev_orig]).to_numpy(dtype=object)
        seen = has_prev & pd.Series(prev_meter).isin(["free", "off"]).to_numpy(dtype=bool)
        if "accuracy_m" in pings.columns:
            acc = pings["accuracy_m"].to_numpy(dtype=np.float64)[orig]
            accuracy = np.where(np.isfinite(acc) & (acc > 0), acc, 0.0)
        if "speed_flag" in pings.columns:
            flagged = pings["speed_flag"].fillna(False).to_numpy(dtype=bool)[orig]
        rows = ping_rows(pings)
        p_lat = pings["lat"].to_numpy(dtype=np.float64)
        p_lon = pings["lon"].to_numpy(dtype=np.float64)
        for k in range(len(idx)):
            switch[k] = bool(seen[k])
            if has_prev[k]:
                q = int(prev_orig[k])
                before[k] = fix_record(int(ns_sorted[prev[k]]), p_lat[q], p_lon[q], int(rows[q]))

    tol = boundary_tolerance_m
    out: list[dict[str, Any]] = []
    geoms: list[Any] = []
    for k, t in enumerate(idx.tolist()):
        d = float(dist[k])
        conf = 0.5 + 0.45 * min(1.0, (d - tol - accuracy[k]) / (4.0 * max(tol, 50.0)))
        conf *= (0.5 if switch[k] is False else 1.0) * (0.8 if flagged[k] else 1.0)
        fixes = [fix_record(int(start[t]), lat[t], lon[t], int(first_row[t]))]
        prior = before[k]
        if prior is not None:
            fixes.insert(0, prior)
        details = {
            "fixes": fixes,
            "distance_to_boundary_m": d,
            "pickup_accuracy_m": float(accuracy[k]) if accuracy[k] > 0 else None,
            "meter_switch_seen": switch[k],
            "trip_id": str(trips["trip_id"].iloc[t]) if "trip_id" in trips.columns else None,
            "trip_started_at": iso_utc(start[t]),
            "trip_ended_at": iso_utc(end[t]),
            "trip_duration_s": float((end[t] - start[t]) / NS),
            "source": str(source[t]),
            "crs": f"EPSG:{utm.to_epsg()}",
            "thresholds": {"boundary_tolerance_m": float(tol)},
        }
        out.append(
            {
                "kind": KIND,
                "vehicle_id": str(trips["vehicle_id"].iloc[t]),
                "stand_id": None,
                "started_at": pd.Timestamp(int(start[t]), unit="ns", tz="UTC"),
                "ended_at": pd.Timestamp(int(end[t]), unit="ns", tz="UTC"),
                "confidence": clip_confidence(conf),
                "details": details,
            }
        )
        geoms.append(shapely.Point(lon[t], lat[t]))
    return make_findings(pd.DataFrame(out), geoms)
