"""Coordinate reference systems: the metric CRS for a place, geodesic distances, metric buffers.

Geometry is stored in EPSG:4326; metric work happens in SIRGAS 2000 / UTM in Brazil (EPSG:31978–
31985 for zones 18S–25S, EPSG:31972–31976 for 18N–22N; Porto Alegre is EPSG:31982) and in
WGS 84 / UTM elsewhere (Porto, Portugal: EPSG:32629).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import geopandas as gpd
import numpy as np
import pyproj
import shapely
from numpy.typing import ArrayLike, NDArray

from geo._errors import CRSError, NotGeographicCRSError, NotMetricCRSError

WGS84 = pyproj.CRS.from_epsg(4326)
EARTH_RADIUS_M = 6_371_008.8
"""Mean Earth radius (IUGG), used by :func:`haversine_m`."""

# Brazil's extent (lon_min, lat_min, lon_max, lat_max) with the islands; SIRGAS 2000 is the
# continental datum, so neighbouring land inside this box is fine in it too.
_BRAZIL_BBOX = (-74.0, -33.8, -28.8, 5.3)
_SIRGAS_SOUTH_ZONES = range(18, 26)  # EPSG:31978 (18S) … 31985 (25S)
_SIRGAS_NORTH_ZONES = range(18, 23)  # EPSG:31972 (18N) … 31976 (22N)


def utm_crs_for(lon: float, lat: float) -> pyproj.CRS:
    """Return the metric UTM CRS to use around a WGS84 position.

    Parameters
    ----------
    lon, lat : float
        Longitude and latitude in degrees (EPSG:4326).

    Returns
    -------
    pyproj.CRS
        SIRGAS 2000 / UTM zone ``NN`` S/N inside Brazil's extent, else WGS 84 / UTM.

    Raises
    ------
    ValueError
        If the position is not finite or outside [-180, 180] × [-80, 84] (UTM's range).
    """
    if not (math.isfinite(lon) and math.isfinite(lat)) or abs(lon) > 180 or not -80 <= lat <= 84:
        msg = (
            f"posição fora da faixa UTM: lon={lon}, lat={lat}; "
            "esperado lon em [-180, 180] e lat em [-80, 84] (graus WGS84)"
        )
        raise ValueError(msg)
    return pyproj.CRS.from_epsg(_utm_epsg(lon, lat))


def _utm_epsg(lon: float, lat: float) -> int:
    zone = min(int((lon + 180.0) // 6.0) + 1, 60)
    south = lat < 0
    lon_min, lat_min, lon_max, lat_max = _BRAZIL_BBOX
    in_brazil = lon_min <= lon <= lon_max and lat_min <= lat <= lat_max
    if in_brazil and south and zone in _SIRGAS_SOUTH_ZONES:
        return 31960 + zone
    if in_brazil and not south and zone in _SIRGAS_NORTH_ZONES:
        return 31954 + zone
    return (32700 if south else 32600) + zone


def _utm_epsg_many(lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
    """:func:`_utm_epsg` of many positions at once (all within UTM's range)."""
    zone = np.minimum(np.floor((lon + 180.0) / 6.0).astype(np.int64) + 1, 60)
    south = lat < 0
    lon_min, lat_min, lon_max, lat_max = _BRAZIL_BBOX
    in_brazil = (lon >= lon_min) & (lon <= lon_max) & (lat >= lat_min) & (lat <= lat_max)
    sirgas_s = in_brazil & south & (zone >= _SIRGAS_SOUTH_ZONES.start)
    sirgas_s &= zone < _SIRGAS_SOUTH_ZONES.stop
    sirgas_n = in_brazil & ~south & (zone >= _SIRGAS_NORTH_ZONES.start)
    sirgas_n &= zone < _SIRGAS_NORTH_ZONES.stop
    out = np.where(south, 32700, 32600) + zone
    out = np.where(sirgas_s, 31960 + zone, out)
    return np.where(sirgas_n, 31954 + zone, out).astype(np.int64)


def haversine_m(
    lat1: ArrayLike, lon1: ArrayLike, lat2: ArrayLike, lon2: ArrayLike
) -> NDArray[np.float64]:
    """Great-circle distance between WGS84 positions, vectorised with numpy broadcasting.

    Parameters
    ----------
    lat1, lon1, lat2, lon2 : array_like
        Latitudes and longitudes in degrees; broadcast against each other.

    Returns
    -------
    numpy.ndarray
        Distances in metres on a sphere of radius :data:`EARTH_RADIUS_M` (error up to ~0.5 %
        against the ellipsoid); NaN where an input is NaN.
    """
    p1 = np.radians(np.asarray(lat1, dtype=np.float64))
    p2 = np.radians(np.asarray(lat2, dtype=np.float64))
    dphi = p2 - p1
    dlmb = np.radians(np.asarray(lon2, dtype=np.float64) - np.asarray(lon1, dtype=np.float64))
    a = np.sin(dphi / 2.0) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlmb / 2.0) ** 2
    out = 2.0 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
    return np.asarray(out, dtype=np.float64)


def require_geographic(
    gdf: gpd.GeoDataFrame | gpd.GeoSeries, *, what: str = "camada"
) -> pyproj.CRS:
    """Return the CRS of ``gdf`` if it is geographic (lon/lat degrees), else raise.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame or geopandas.GeoSeries
        Frame to check.
    what : str
        Name of the layer for the message (pt-BR).

    Returns
    -------
    pyproj.CRS
        The frame's CRS.

    Raises
    ------
    NotGeographicCRSError
        If the frame has no CRS or a projected one.
    """
    crs = gdf.crs
    if crs is None:
        msg = f"{what} sem sistema de referência (CRS); esperado um CRS geográfico, ex. EPSG:4326"
        raise NotGeographicCRSError(msg)
    if not crs.is_geographic:
        msg = (
            f"CRS de {what} era {crs.to_string()}; "
            "esperado um CRS geográfico (lon/lat), ex. EPSG:4326"
        )
        raise NotGeographicCRSError(msg)
    return pyproj.CRS(crs)


def require_metric(gdf: gpd.GeoDataFrame | gpd.GeoSeries, *, what: str = "camada") -> pyproj.CRS:
    """Return the CRS of ``gdf`` if it is projected in metres, else raise.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame or geopandas.GeoSeries
        Frame to check.
    what : str
        Name of the layer for the message (pt-BR).

    Returns
    -------
    pyproj.CRS
        The frame's CRS.

    Raises
    ------
    NotMetricCRSError
        If the frame has no CRS, a geographic one, or a projected one not in metres.
    """
    crs = gdf.crs
    if crs is None or not crs.is_projected:
        got = "nenhum" if crs is None else crs.to_string()
        msg = f"CRS de {what} era {got}; esperado um CRS projetado em metros, ex. EPSG:31982"
        raise NotMetricCRSError(msg)
    units = {axis.unit_name for axis in crs.axis_info}
    if units - {"metre", "meter"}:
        msg = f"CRS de {what} ({crs.to_string()}) usa unidades {sorted(units)}; esperado metros"
        raise NotMetricCRSError(msg)
    return pyproj.CRS(crs)


def utm_crs_for_frame(gdf: gpd.GeoDataFrame | gpd.GeoSeries) -> pyproj.CRS:
    """Return the UTM CRS for the centre of a geographic frame's bounds.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame or geopandas.GeoSeries
        Non-empty frame in a geographic CRS.

    Returns
    -------
    pyproj.CRS
        As :func:`utm_crs_for` at the centre of the frame's total bounds (in EPSG:4326).

    Raises
    ------
    NotGeographicCRSError
        If the frame is not geographic.
    CRSError
        If the frame is empty.
    """
    require_geographic(gdf)
    geo = gdf if pyproj.CRS(gdf.crs).equals(WGS84) else gdf.to_crs(WGS84)
    minx, miny, maxx, maxy = geo.total_bounds
    if not np.all(np.isfinite([minx, miny, maxx, maxy])):
        msg = "camada vazia (sem geometrias): não há posição para escolher a zona UTM"
        raise CRSError(msg)
    return utm_crs_for((minx + maxx) / 2.0, (miny + maxy) / 2.0)


def buffer_points_m(
    gdf: gpd.GeoDataFrame, radius_m: float | ArrayLike, *, quad_segs: int = 16
) -> gpd.GeoDataFrame:
    """Buffer geometries by a distance in metres, measured in the local UTM CRS.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        Frame in a geographic CRS (normally EPSG:4326), usually of points.
    radius_m : float or array_like
        Buffer radius in metres: one for all rows, or one per row; each must be > 0.
    quad_segs : int
        Segments per quarter circle of the buffer polygons.

    Returns
    -------
    geopandas.GeoDataFrame
        A copy with polygon geometries, in EPSG:4326, each row buffered in the UTM CRS of its
        own position (:func:`utm_crs_for`). Null or empty geometries stay as they are. An empty
        frame gives an empty frame.

    Raises
    ------
    NotGeographicCRSError
        If the frame's CRS is missing or not geographic.
    ValueError
        If a radius is not a finite number > 0, or the per-row radii do not match the rows.
    """
    require_geographic(gdf)
    out = gdf.copy()
    radius = np.asarray(radius_m, dtype=np.float64)
    if radius.ndim > 1 or (radius.ndim == 1 and radius.shape[0] != len(gdf)):
        msg = f"'radius_m' tem {radius.size} valores para {len(gdf)} linhas"
        raise ValueError(msg)
    if radius.size and not (np.all(np.isfinite(radius)) and np.all(radius > 0)):
        msg = f"'radius_m' deve ser um número finito > 0 (metros); recebido {radius_m!r}"
        raise ValueError(msg)
    out = out.to_crs(WGS84)
    if len(out) == 0:
        return out
    # Each row in the UTM zone of its own position, so a frame spanning zones stays exact.
    geoms = np.asarray(out.geometry.values, dtype=object)
    radii = np.broadcast_to(radius, (len(out),))
    anchors = shapely.centroid(geoms)
    lon, lat = shapely.get_x(anchors), shapely.get_y(anchors)
    known = np.isfinite(lon) & np.isfinite(lat)
    outside = known & ((np.abs(lon) > 180) | (lat < -80) | (lat > 84))
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        utm_crs_for(float(lon[i]), float(lat[i]))  # raises, naming the position
    epsg = np.array(
        [
            _utm_epsg(x, y) if ok else 0
            for x, y, ok in zip(lon.tolist(), lat.tolist(), known.tolist(), strict=True)
        ],
        dtype=np.int64,
    )
    result = geoms.copy()
    for code in np.unique(epsg[epsg > 0]):
        rows = np.flatnonzero(epsg == code)
        metric = gpd.GeoSeries(geoms[rows], crs=WGS84).to_crs(int(code))
        buffered = metric.buffer(radii[rows], quad_segs=quad_segs).to_crs(WGS84)
        result[rows] = buffered.to_numpy()
    out[out.geometry.name] = gpd.GeoSeries(result, index=out.index, crs=WGS84)
    return out


@functools.cache
def _to_utm(epsg: int) -> pyproj.Transformer:
    """Lon/lat (EPSG:4326) to the metric CRS ``epsg``; one per zone and process (thread-safe)."""
    return pyproj.Transformer.from_crs(WGS84, pyproj.CRS.from_epsg(epsg), always_xy=True)


def distance_to_geometries_m(
    lat: ArrayLike,
    lon: ArrayLike,
    geometries: ArrayLike,
    *,
    which: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Distance in metres from each point to a geometry: 0 inside a polygon, else to its edge.

    Each pair is measured in the UTM CRS of its point (:func:`utm_crs_for`: SIRGAS 2000 / UTM in
    Brazil, WGS 84 / UTM elsewhere), the geometry projected into that zone. A geometry used by
    many points of one zone is projected once. The same pair gives the same distance whether it
    is measured alone or among others (live and batch agree to the last bit).

    Parameters
    ----------
    lat, lon : array_like
        1-D point coordinates in degrees (EPSG:4326).
    geometries : array_like of shapely geometries
        Geometries in EPSG:4326: one per point, or the distinct ones indexed by ``which``.
    which : array_like of int, optional
        Per point, the position of its geometry in ``geometries``.

    Returns
    -------
    numpy.ndarray
        ``float64`` distances, one per point; NaN where a coordinate is not finite or outside
        UTM's range, or the geometry is null or empty.

    Raises
    ------
    ValueError
        If the arrays are not 1-D or their lengths do not match.
    """
    lat_a = np.asarray(lat, dtype=np.float64)
    lon_a = np.asarray(lon, dtype=np.float64)
    geoms = np.asarray(geometries, dtype=object)
    index = np.arange(len(geoms)) if which is None else np.asarray(which, dtype=np.int64)
    if lat_a.ndim != 1 or lat_a.shape != lon_a.shape or index.shape != lat_a.shape:
        msg = (
            f"lat, lon e as geometrias devem ser vetores 1-D do mesmo tamanho; recebidos "
            f"{lat_a.shape}, {lon_a.shape} e {index.shape}"
        )
        raise ValueError(msg)
    out = np.full(lat_a.shape, np.nan, dtype=np.float64)
    if lat_a.size == 0:
        return out
    usable = ~(shapely.is_missing(geoms) | shapely.is_empty(geoms))
    ok = (
        np.isfinite(lat_a)
        & np.isfinite(lon_a)
        & (np.abs(lon_a) <= 180)
        & (lat_a >= -80)
        & (lat_a <= 84)
        & usable[index]
    )
    epsg = np.zeros(lat_a.shape, dtype=np.int64)
    epsg[ok] = _utm_epsg_many(lon_a[ok], lat_a[ok])
    for code in np.unique(epsg[ok]).tolist():
        rows = np.flatnonzero(epsg == code)
        transformer = _to_utm(code)
        used, local = np.unique(index[rows], return_inverse=True)

        def project(xy: NDArray[np.float64], t: pyproj.Transformer = transformer) -> Any:
            x, y = t.transform(xy[:, 0], xy[:, 1])
            return np.column_stack([x, y])

        metric = shapely.transform(geoms[used], project)
        x, y = transformer.transform(lon_a[rows], lat_a[rows])
        out[rows] = shapely.distance(shapely.points(x, y), metric[local])
    return out
