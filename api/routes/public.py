"""Public endpoints for citizens: accessible taxis and stands near a point. No login.

Nothing personal and no exact track leaves these endpoints:

- no vehicle id, prefixo, plate or driver: each taxi gets an index valid in this response only;
- every position is replaced by the centre of its H3 cell of resolution
  :data:`CELL_RESOLUTION` (hexagons of ≈ 15,000 m², edge ≈ 76 m, ≈ 120 m across) *before* any
  filter, distance or count is computed: the taxis' positions, the search point too. The
  radius is rounded up to :data:`DISTANCE_STEP_M` metres and distances (between cell centres)
  too, ages to whole minutes. Every answer is therefore a function of the taxis' cells: two
  positions in one cell give identical answers, so no sequence of queries (a binary search
  on ``radius_m`` from several points, say) learns more than the cell;
- only the latest fix of each taxi, and only if recent (``public_recent_fix_s``) and with the
  meter ``free``.

A stand's supply counts the free accessible taxis whose cell overlaps the stand (at the stand)
and whose cell centre is within :data:`NEARBY_M` of it (nearby). Requests are rate-limited per
client IP (``public_rate_limit_per_min``): 429 with ``Retry-After``.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.orm import Session

from api._errors import InvalidRequestError
from api.deps import SessionDep, SettingsDep, public_rate_limit
from api.schemas import error_responses
from geo.crs import haversine_m
from geo.h3 import cell_polygons, cells_to_strings, snap_to_cell_centres

router = APIRouter(
    prefix="/api/v1/public",
    tags=["público"],
    dependencies=[Depends(public_rate_limit)],
    responses=error_responses(422, 429, 503),
)

CELL_RESOLUTION = 10
"""H3 resolution of the public grid (the citizen map's too): cells ≈ 120 m across."""
DISTANCE_STEP_M = 100
"""Public radii and distances are rounded up to this step."""
NEARBY_M = 500.0
"""A taxi whose cell centre is this close to a stand counts in the stand's nearby supply."""
POSITION_DECIMALS = 6
"""Decimals of the cell centres shown (the centre is public: it only names the cell)."""

Lat = Annotated[float, Query(ge=-90, le=90, description="Latitude WGS84 do ponto de busca")]
Lon = Annotated[float, Query(ge=-180, le=180, description="Longitude WGS84 do ponto de busca")]
Radius = Annotated[float, Query(gt=0, description="Raio de busca em metros")]


class Position(BaseModel):
    """The centre of an H3 cell of the public grid (see the module doc)."""

    lat: float
    lon: float


class AccessibleTaxi(BaseModel):
    """A free accessible taxi seen recently; ``index`` is valid in this response only."""

    index: int
    cell: str
    position: Position
    distance_m: int
    last_seen_min: int


class AccessibleTaxisPublic(BaseModel):
    """Free accessible taxis near the point, nearest first (positions: cell centres)."""

    data: list[AccessibleTaxi]
    count: int
    cell_resolution: int = CELL_RESOLUTION
    distance_step_m: int = DISTANCE_STEP_M


class StandNearby(BaseModel):
    """A taxi stand near the point with its accessible supply now."""

    stand_id: str
    name: str | None
    capacity: int | None
    position: Position
    distance_m: int
    accessible_free_at_stand: int
    accessible_free_nearby: int


class StandsNearbyPublic(BaseModel):
    """Stands near the point, nearest first."""

    data: list[StandNearby]
    count: int


def _position(lat: float, lon: float) -> Position:
    return Position(lat=round(lat, POSITION_DECIMALS), lon=round(lon, POSITION_DECIMALS))


def _step_up(metres: float) -> int:
    return int(math.ceil(round(metres, 6) / DISTANCE_STEP_M) * DISTANCE_STEP_M)


def _check_radius(radius_m: float, limit_m: float) -> int:
    if radius_m > limit_m:
        msg = f"radius_m {radius_m:g} acima do máximo de {limit_m:g} m"
        raise InvalidRequestError(msg)
    return _step_up(radius_m)


def _search_point(lat: float, lon: float) -> tuple[float, float]:
    _, clat, clon = snap_to_cell_centres([lat], [lon], resolution=CELL_RESOLUTION)
    return float(clat[0]), float(clon[0])


_LATEST_FREE_ACCESSIBLE = (
    "SELECT ts, lat, lon FROM ("
    "  SELECT DISTINCT ON (f.vehicle_id) f.ts, f.lat, f.lon, f.meter"
    "  FROM fixes f JOIN vehicles v ON v.vehicle_id = f.vehicle_id AND v.accessible"
    "  WHERE f.ts >= :since AND f.ts <= :now ORDER BY f.vehicle_id, f.ts DESC"
    ") latest WHERE meter = 'free'"
)


def free_taxi_cells(
    session: Session, *, recent_s: float, now: dt.datetime
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dt.datetime]]:
    """Cells of the free accessible taxis seen in the last ``recent_s``: (cells, lat, lon, ts).

    The exact positions are read here and replaced by their cell centres at once; nothing
    else in this module sees them.
    """
    rows = session.execute(
        text(_LATEST_FREE_ACCESSIBLE),
        {
            "since": now - dt.timedelta(seconds=recent_s),
            "now": now + dt.timedelta(seconds=300),
        },
    ).all()
    lat = np.array([r.lat for r in rows], dtype=np.float64)
    lon = np.array([r.lon for r in rows], dtype=np.float64)
    cells, clat, clon = snap_to_cell_centres(lat, lon, resolution=CELL_RESOLUTION)
    return cells, clat, clon, [r.ts for r in rows]


@router.get("/accessible-taxis", response_model=AccessibleTaxisPublic)
def accessible_taxis(
    session: SessionDep, settings: SettingsDep, lat: Lat, lon: Lon, radius_m: Radius = 1000.0
) -> Any:
    """Táxis acessíveis livres vistos há pouco perto de um ponto (posição: centro da célula)."""
    radius = _check_radius(radius_m, settings.public_max_radius_m)
    qlat, qlon = _search_point(lat, lon)
    now = dt.datetime.now(dt.UTC)
    cells, clat, clon, seen = free_taxi_cells(
        session, recent_s=settings.public_recent_fix_s, now=now
    )
    distance = [_step_up(d) for d in haversine_m(qlat, qlon, clat, clon).tolist()]
    names = cells_to_strings(cells).tolist()
    ages = [max(0, int((now - ts).total_seconds() // 60)) for ts in seen]
    order = sorted(
        (k for k in range(len(names)) if distance[k] <= radius),
        key=lambda k: (distance[k], ages[k], names[k]),
    )
    data = [
        AccessibleTaxi(
            index=i,
            cell=names[k],
            position=_position(float(clat[k]), float(clon[k])),
            distance_m=distance[k],
            last_seen_min=ages[k],
        )
        for i, k in enumerate(order, start=1)
    ]
    return AccessibleTaxisPublic(data=data, count=len(data))


@router.get("/stands", response_model=StandsNearbyPublic)
def stands_near(
    session: SessionDep, settings: SettingsDep, lat: Lat, lon: Lon, radius_m: Radius = 1000.0
) -> Any:
    """Pontos de táxi perto de um ponto, com a oferta de táxis acessíveis livres agora."""
    radius = _check_radius(radius_m, settings.public_max_radius_m)
    qlat, qlon = _search_point(lat, lon)
    cells, clat, clon, _ = free_taxi_cells(
        session, recent_s=settings.public_recent_fix_s, now=dt.datetime.now(dt.UTC)
    )
    rows = session.execute(
        text(
            "WITH here AS (SELECT ST_SetSRID(ST_MakePoint(:lon, :lat), 4326)::geography AS g), "
            "taxi AS (SELECT ST_SetSRID(ST_MakePoint(x, y), 4326) AS c, "
            "  ST_GeomFromText(w, 4326) AS cell FROM unnest(CAST(:xs AS float8[]), "
            "  CAST(:ys AS float8[]), CAST(:ws AS text[])) AS t(x, y, w)), "
            "near AS (SELECT s.stand_id, s.name, s.capacity, s.geometry, "
            "  ST_PointOnSurface(s.geometry) AS p, "
            "  ST_Distance(s.geometry::geography, here.g) AS distance_m "
            "  FROM stands s, here WHERE s.retired_at IS NULL AND s.geometry IS NOT NULL "
            "  AND ST_DWithin(s.geometry::geography, here.g, :r)) "
            "SELECT near.stand_id, near.name, near.capacity, ST_Y(near.p) AS lat, "
            "ST_X(near.p) AS lon, near.distance_m, "
            "(SELECT count(*) FROM taxi WHERE ST_Intersects(near.geometry, taxi.cell)) "
            "  AS at_stand, "
            "(SELECT count(*) FROM taxi WHERE ST_DWithin(near.geometry::geography, "
            "  taxi.c::geography, :nearby)) AS nearby "
            "FROM near ORDER BY near.distance_m, near.stand_id LIMIT 200"
        ),
        {
            "lat": qlat,
            "lon": qlon,
            "r": float(radius),
            "nearby": NEARBY_M,
            "xs": clon.tolist(),
            "ys": clat.tolist(),
            "ws": [p.wkt for p in cell_polygons(cells)],
        },
    ).all()
    data = [
        StandNearby(
            stand_id=r.stand_id,
            name=r.name,
            capacity=r.capacity,
            position=_position(r.lat, r.lon),
            distance_m=_step_up(r.distance_m),
            accessible_free_at_stand=int(r.at_stand),
            accessible_free_nearby=int(r.nearby),
        )
        for r in rows
    ]
    return StandsNearbyPublic(data=data, count=len(data))
