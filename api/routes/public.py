"""Public endpoints for citizens: accessible taxis and stands near a point. No login.

Nothing personal and no exact track leaves these endpoints:

- no vehicle id, prefixo, plate or driver: each taxi gets an index valid in this response only;
- positions are rounded to :data:`COORDINATE_DECIMALS` decimal places (0.001° ≈ 111 m north-south,
  ≈ 96 m east-west in Porto Alegre), distances to :data:`DISTANCE_STEP_M` metres (rounded up) and
  ages to whole minutes, so repeated queries cannot pin a car down more finely;
- only the latest fix of each taxi, and only if recent (``public_recent_fix_s``) and with the
  meter ``free``.

Requests are rate-limited per client IP (``public_rate_limit_per_min``): 429 with ``Retry-After``.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.orm import Session

from api._errors import InvalidRequestError
from api.deps import SessionDep, SettingsDep, public_rate_limit
from api.schemas import error_responses

router = APIRouter(
    prefix="/api/v1/public",
    tags=["público"],
    dependencies=[Depends(public_rate_limit)],
    responses=error_responses(422, 429, 503),
)

COORDINATE_DECIMALS = 3
"""Decimal places of public positions (≈ 100 m)."""
DISTANCE_STEP_M = 100
"""Public distances are rounded up to this step."""
NEARBY_M = 500.0
"""A taxi this close to a stand counts in the stand's nearby accessible supply."""

Lat = Annotated[float, Query(ge=-90, le=90, description="Latitude WGS84 do ponto de busca")]
Lon = Annotated[float, Query(ge=-180, le=180, description="Longitude WGS84 do ponto de busca")]
Radius = Annotated[float, Query(gt=0, description="Raio de busca em metros")]


class Position(BaseModel):
    """A coarsened position (see the module doc)."""

    lat: float
    lon: float


class AccessibleTaxi(BaseModel):
    """A free accessible taxi seen recently; ``index`` is valid in this response only."""

    index: int
    position: Position
    distance_m: int
    last_seen_min: int


class AccessibleTaxisPublic(BaseModel):
    """Free accessible taxis near the point, nearest first."""

    data: list[AccessibleTaxi]
    count: int
    precision_decimals: int = COORDINATE_DECIMALS


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


def _coarse(lat: float, lon: float) -> Position:
    return Position(lat=round(lat, COORDINATE_DECIMALS), lon=round(lon, COORDINATE_DECIMALS))


def _distance(metres: float) -> int:
    return int(math.ceil(metres / DISTANCE_STEP_M) * DISTANCE_STEP_M)


def _check_radius(radius_m: float, limit_m: float) -> None:
    if radius_m > limit_m:
        msg = f"radius_m {radius_m:g} acima do máximo de {limit_m:g} m"
        raise InvalidRequestError(msg)


_LATEST_FREE_ACCESSIBLE = """
latest AS (
    SELECT DISTINCT ON (f.vehicle_id) f.vehicle_id, f.ts, f.geom, f.meter
    FROM fixes f JOIN vehicles v ON v.vehicle_id = f.vehicle_id AND v.accessible
    WHERE f.ts >= :since AND f.ts <= :now
    ORDER BY f.vehicle_id, f.ts DESC
), free AS (SELECT ts, geom FROM latest WHERE meter = 'free')
"""


def _recent_window(settings: SettingsDep) -> dict[str, dt.datetime]:
    now = dt.datetime.now(dt.UTC)
    return {
        "since": now - dt.timedelta(seconds=settings.public_recent_fix_s),
        "now": now + dt.timedelta(seconds=300),
    }


@router.get("/accessible-taxis", response_model=AccessibleTaxisPublic)
def accessible_taxis(
    session: SessionDep, settings: SettingsDep, lat: Lat, lon: Lon, radius_m: Radius = 1000.0
) -> Any:
    """Táxis acessíveis livres vistos há pouco perto de um ponto, com a distância."""
    _check_radius(radius_m, settings.public_max_radius_m)
    rows = _nearby_taxis(session, settings, lat=lat, lon=lon, radius_m=radius_m)
    now = dt.datetime.now(dt.UTC)
    data = [
        AccessibleTaxi(
            index=i,
            position=_coarse(r.lat, r.lon),
            distance_m=_distance(r.distance_m),
            last_seen_min=max(0, int((now - r.ts).total_seconds() // 60)),
        )
        for i, r in enumerate(rows, start=1)
    ]
    return AccessibleTaxisPublic(data=data, count=len(data))


def _nearby_taxis(
    session: Session, settings: SettingsDep, *, lat: float, lon: float, radius_m: float
) -> list[Any]:
    return list(
        session.execute(
            text(
                f"WITH {_LATEST_FREE_ACCESSIBLE}, here AS "
                "(SELECT ST_SetSRID(ST_MakePoint(:lon, :lat), 4326)::geography AS g) "
                "SELECT ST_Y(free.geom) AS lat, ST_X(free.geom) AS lon, free.ts, "
                "ST_Distance(free.geom::geography, here.g) AS distance_m FROM free, here "
                "WHERE ST_DWithin(free.geom::geography, here.g, :r) "
                "ORDER BY distance_m, free.ts DESC"
            ),
            {"lat": lat, "lon": lon, "r": radius_m, **_recent_window(settings)},
        ).all()
    )


@router.get("/stands", response_model=StandsNearbyPublic)
def stands_near(
    session: SessionDep, settings: SettingsDep, lat: Lat, lon: Lon, radius_m: Radius = 1000.0
) -> Any:
    """Pontos de táxi perto de um ponto, com a oferta de táxis acessíveis livres agora."""
    _check_radius(radius_m, settings.public_max_radius_m)
    rows = session.execute(
        text(
            f"WITH {_LATEST_FREE_ACCESSIBLE}, here AS "
            "(SELECT ST_SetSRID(ST_MakePoint(:lon, :lat), 4326)::geography AS g), "
            "near AS (SELECT s.stand_id, s.name, s.capacity, s.geometry, "
            "  ST_PointOnSurface(s.geometry) AS p, "
            "  ST_Distance(s.geometry::geography, here.g) AS distance_m "
            "  FROM stands s, here WHERE s.retired_at IS NULL AND s.geometry IS NOT NULL "
            "  AND ST_DWithin(s.geometry::geography, here.g, :r)) "
            "SELECT near.stand_id, near.name, near.capacity, ST_Y(near.p) AS lat, "
            "ST_X(near.p) AS lon, near.distance_m, "
            "(SELECT count(*) FROM free WHERE ST_Covers(near.geometry, free.geom)) AS at_stand, "
            "(SELECT count(*) FROM free WHERE ST_DWithin(near.geometry::geography, "
            "  free.geom::geography, :nearby)) AS nearby "
            "FROM near ORDER BY near.distance_m, near.stand_id LIMIT 200"
        ),
        {"lat": lat, "lon": lon, "r": radius_m, "nearby": NEARBY_M, **_recent_window(settings)},
    ).all()
    data = [
        StandNearby(
            stand_id=r.stand_id,
            name=r.name,
            capacity=r.capacity,
            position=_coarse(r.lat, r.lon),
            distance_m=_distance(r.distance_m),
            accessible_free_at_stand=int(r.at_stand),
            accessible_free_nearby=int(r.nearby),
        )
        for r in rows
    ]
    return StandsNearbyPublic(data=data, count=len(data))
