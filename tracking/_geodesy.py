"""Private vectorised geodesy of the tracking room: step distances and a local metric plane.

Distances use :func:`geo.crs.haversine_m` (sphere of the mean Earth radius, within about 0.5 % of
the WGS84 ellipsoid: below GPS noise at the distances compared here). The local plane of
:func:`local_xy_m` is for comparing small extents (tens of metres) fast, without a projection.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from geo.crs import EARTH_RADIUS_M, haversine_m

FloatArray = NDArray[np.float64]


def step_distances_m(lat: FloatArray, lon: FloatArray) -> FloatArray:
    """Haversine distance from each point to the next one (``len - 1`` values).

    Parameters
    ----------
    lat, lon : numpy.ndarray
        Latitudes and longitudes in degrees, in track order.

    Returns
    -------
    numpy.ndarray
        ``d[i]`` is the distance in metres from point ``i`` to point ``i + 1``.
    """
    return haversine_m(lat[:-1], lon[:-1], lat[1:], lon[1:])


def local_xy_m(lat: FloatArray, lon: FloatArray, lat0: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Project to a local equirectangular plane in metres around the reference latitude ``lat0``.

    ``x = R·cos(lat0)·lon``, ``y = R·lat`` (radians). Distances between nearby points are off by
    the relative factor ``cos(lat)/cos(lat0) - 1`` east–west, about ``tan(lat0)·Δlat``: 0.9 % for
    points 1° of latitude away from ``lat0`` at 30° S, and nothing north–south. Enough to compare
    extents of tens of metres against a threshold; not a survey-grade projection.

    Parameters
    ----------
    lat, lon : numpy.ndarray
        Points in degrees.
    lat0 : numpy.ndarray
        Reference latitude in degrees, per point (usually the mean latitude of its vehicle).

    Returns
    -------
    tuple of numpy.ndarray
        ``(x, y)`` in metres.
    """
    k = EARTH_RADIUS_M * np.pi / 180.0
    x = k * np.cos(np.radians(lat0)) * lon
    y = k * lat
    return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
