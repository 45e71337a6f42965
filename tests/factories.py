"""Factories for tiny hand-made test data: valid pings frames and raw ping rows.

Import from a test module as ``from factories import make_pings`` (``tests/`` is on ``sys.path``
because it holds the root ``conftest.py``).

Times are given as seconds after :data:`BASE_TIME` (int/float), as ISO 8601 strings with an
offset, or as tz-aware ``pandas.Timestamp``; positions as (lat, lon) in degrees, or built in metres
around :data:`ORIGIN` with :func:`offset_m`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from geo.crs import EARTH_RADIUS_M
from tracking import frames as fr
from tracking.validate import speed_flags

BASE_TIME = pd.Timestamp("2024-03-04T12:00:00Z")
"""Time zero of hand-made tracks (a Monday, 09:00 in Porto Alegre)."""

ORIGIN = (-30.0277, -51.2287)
"""Centre of Porto Alegre (Praça da Matriz), the default place of hand-made tracks."""

_TUPLE_FIELDS = (fr.VEHICLE_ID, fr.TIMESTAMP, fr.LAT, fr.LON, fr.METER, fr.TARIFF)


def at(t: float | str | pd.Timestamp) -> pd.Timestamp:
    """Return the UTC instant of a factory time (seconds after BASE_TIME, ISO text or Timestamp)."""
    if isinstance(t, int | float | np.integer | np.floating):
        return BASE_TIME + pd.Timedelta(seconds=float(t))
    ts = pd.Timestamp(t)
    if ts.tzinfo is None:
        msg = f"factory time {t!r} has no UTC offset"
        raise ValueError(msg)
    return ts.tz_convert("UTC")


def offset_m(
    north_m: float, east_m: float, *, origin: tuple[float, float] = ORIGIN
) -> tuple[float, float]:
    """Return the (lat, lon) ``north_m`` metres north and ``east_m`` east of ``origin``.

    Spherical, exact enough for tracks of a few kilometres (haversine agrees to < 0.1 %).
    """
    lat0, lon0 = origin
    dlat = math.degrees(north_m / EARTH_RADIUS_M)
    dlon = math.degrees(east_m / (EARTH_RADIUS_M * math.cos(math.radians(lat0))))
    return lat0 + dlat, lon0 + dlon


def make_pings(
    rows: Sequence[Sequence[Any] | Mapping[str, Any]], *, max_speed_kmh: float = 250.0
) -> pd.DataFrame:
    """Build a valid pings frame (the contract of :mod:`tracking.frames`) from tiny rows.

    Parameters
    ----------
    rows : sequence of tuples or dicts
        Tuples ``(vehicle_id, t, lat, lon[, meter[, tariff]])`` or dicts with any ping columns
        (``vehicle_id``, ``timestamp``, ``lat`` and ``lon`` required). ``t``/``timestamp`` as
        accepted by :func:`at`; ``meter`` None for unknown.
    max_speed_kmh : float, default 250.0
        Limit used to compute ``speed_flag`` (as the validation does).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`tracking.frames.PING_COLUMNS` with their dtypes, sorted by
        (vehicle_id, timestamp) with a RangeIndex; ``row`` is the 1-based position in ``rows``.
    """
    records = []
    for i, item in enumerate(rows):
        rec = (
            dict(item)
            if isinstance(item, Mapping)
            else dict(zip(_TUPLE_FIELDS, item, strict=False))
        )
        if fr.TIMESTAMP not in rec and "t" in rec:
            rec[fr.TIMESTAMP] = rec.pop("t")
        rec[fr.TIMESTAMP] = at(rec[fr.TIMESTAMP])
        rec.setdefault(fr.ROW, i + 1)
        records.append(rec)
    n = len(records)

    def column(name: str, default: Any) -> list[Any]:
        return [r.get(name, default) for r in records]

    frame = pd.DataFrame(
        {
            fr.VEHICLE_ID: pd.Series([str(v) for v in column(fr.VEHICLE_ID, None)], dtype="str"),
            fr.TIMESTAMP: pd.Series(
                pd.DatetimeIndex(column(fr.TIMESTAMP, None), dtype="datetime64[ns, UTC]")
                if n
                else pd.DatetimeIndex([], dtype="datetime64[ns, UTC]")
            ),
            fr.LAT: np.asarray(column(fr.LAT, np.nan), dtype=np.float64),
            fr.LON: np.asarray(column(fr.LON, np.nan), dtype=np.float64),
            fr.SPEED_KMH: np.asarray(column(fr.SPEED_KMH, np.nan), dtype=np.float64),
            fr.HEADING_DEG: np.asarray(column(fr.HEADING_DEG, np.nan), dtype=np.float64),
            fr.ACCURACY_M: np.asarray(column(fr.ACCURACY_M, np.nan), dtype=np.float64),
            fr.METER: pd.Series(column(fr.METER, None), dtype="str"),
            fr.TARIFF: pd.array(column(fr.TARIFF, None), dtype="Int8"),
            fr.DRIVER_ID: pd.Series(column(fr.DRIVER_ID, None), dtype="str"),
            fr.ROW: np.asarray(column(fr.ROW, 0), dtype=np.int64),
        }
    )
    frame = frame.sort_values([fr.VEHICLE_ID, fr.TIMESTAMP], kind="stable", ignore_index=True)
    codes = pd.factorize(frame[fr.VEHICLE_ID])[0].astype(np.int64)
    ts_ns = frame[fr.TIMESTAMP].to_numpy(dtype="datetime64[ns]").view(np.int64)
    frame[fr.SPEED_FLAG] = speed_flags(
        codes,
        ts_ns,
        frame[fr.LAT].to_numpy(),
        frame[fr.LON].to_numpy(),
        max_speed_kmh=max_speed_kmh,
    )
    return frame[list(fr.PING_COLUMNS)]


def make_track(
    vehicle_id: str,
    points: Sequence[tuple[float, float, float]],
    *,
    meter: str | None | Sequence[str | None] = None,
    origin: tuple[float, float] = ORIGIN,
) -> list[dict[str, Any]]:
    """Build rows for :func:`make_pings` from ``(t_s, north_m, east_m)`` points of one vehicle.

    ``meter`` is one value for every fix or one per point.
    """
    meters = [meter] * len(points) if meter is None or isinstance(meter, str) else list(meter)
    rows = []
    for (t, north, east), m in zip(points, meters, strict=True):
        lat, lon = offset_m(north, east, origin=origin)
        rows.append(
            {fr.VEHICLE_ID: vehicle_id, fr.TIMESTAMP: t, fr.LAT: lat, fr.LON: lon, fr.METER: m}
        )
    return rows


def make_raw_pings(
    rows: Sequence[Mapping[str, Any]], *, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Build a raw frame as :func:`tracking.validate.validate_pings` takes it: text cells + ``row``.

    Missing keys become empty cells; values are written with ``str`` (None as empty).
    """
    cols = list(columns) if columns is not None else list(dict.fromkeys(k for r in rows for k in r))
    data = {
        c: pd.Series(["" if r.get(c) is None else str(r.get(c)) for r in rows], dtype="str")
        for c in cols
    }
    raw = pd.DataFrame(data)
    raw[fr.ROW] = np.arange(1, len(rows) + 1, dtype=np.int64)
    return raw


@contextmanager
def migrated_database(
    server_url: str, *, prefix: str = "pontual_test", migrate: bool = True
) -> Iterator[str]:
    """Create a fresh database on ``server_url``'s server, migrate it (unless not ``migrate``:
    PostGIS only), yield its URL, drop it."""
    import secrets

    from db.engine import create_database, drop_database, parse_url
    from db.migrate import upgrade

    name = f"{prefix}_{secrets.token_hex(4)}"
    url = parse_url(server_url).set(database=name).render_as_string(hide_password=False)
    create_database(url)
    try:
        if migrate:
            upgrade(url)
        yield url
    finally:
        drop_database(url)


def circle_stands(radius_m: float = 30.0, stand_id: str = "S1") -> Any:
    """A stands frame of one circle of ``radius_m`` around :data:`ORIGIN` (a point and a radius,
    as the open data gives them), EPSG:4326."""
    import geopandas as gpd

    centre = gpd.GeoSeries.from_xy([ORIGIN[1]], [ORIGIN[0]], crs=4326)
    circle = centre.to_crs(31982).buffer(radius_m, 64).to_crs(4326)
    return gpd.GeoDataFrame({"stand_id": [stand_id]}, geometry=circle, crs=4326)
