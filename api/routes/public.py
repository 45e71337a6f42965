"""Public endpoints for citizens: accessible taxis and stands near a point. No login.

Nothing personal, no exact track and no trip end leaves these endpoints:

- no vehicle id, prefixo, plate or driver, and no per-taxi entry: free accessible taxis are
  published as *counts per area*, an H3 cell of resolution :data:`TAXI_RESOLUTION` (hexagons
  of ≈ 0.74 km², ≈ 920 m across), with the age of the area's freshest fix rounded down to
  :data:`AGE_STEP_MIN` minutes. Every answer describes the fleet as of :func:`published_instant`
  (now rounded down to those minutes: the fixes after it wait for the next window), so polling
  shows at most that an area lost or gained a taxi in a 5-minute window, not where a passenger
  was picked up or dropped off (with a per-taxi cell of ≈ 120 m and a per-minute age, two polls
  gave both ends of a trip; computed afresh on every request, one poll 15 s after a pickup
  showed its area empty);
- every position is first replaced by the centre of its H3 cell of resolution
  :data:`CELL_RESOLUTION` (≈ 120 m across) *before* any filter, distance or count is computed:
  the taxis' positions, the search point too; the taxis' areas are those of these centres.
  The radius is rounded up to :data:`DISTANCE_STEP_M` metres and distances (between cell
  centres) too. Every answer is therefore a function of the cells: two positions in one cell
  give identical answers, so no sequence of queries (a binary search on ``radius_m`` from
  several points, say) learns more than the cell;
- only the latest fix of each taxi, and only if recent (``public_recent_fix_s``) and with the
  meter ``free``.

A stand's supply counts the free accessible taxis whose ≈ 120 m cell overlaps the stand (at
the stand: a public place where taxis wait) and those whose area's centre is within
:data:`NEARBY_M` of it (nearby). Requests are rate-limited per client IP
(``public_rate_limit_per_min``: 429 with ``Retry-After``) and at most a few use the database at
once (:class:`api.deps.DbGate`: 503 ``server_busy`` with ``Retry-After`` when saturated, at
once rather than after the pool's timeout). Answers carry ``Cache-Control: public,
max-age=`` :data:`MAX_AGE_S`.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import text
from sqlalchemy.orm import Session

from api._errors import InvalidRequestError
from api.deps import SettingsDep, public_query, public_rate_limit_async
from api.schemas import error_responses
from api.settings import Settings
from geo.crs import haversine_m
from geo.h3 import cell_polygons, cells_to_strings, snap_to_cell_centres

router = APIRouter(
    prefix="/api/v1/public",
    tags=["público"],
    dependencies=[Depends(public_rate_limit_async)],
    responses=error_responses(422, 429, 503),
)

CELL_RESOLUTION = 10
"""H3 resolution every position is snapped to first (the citizen map's too): ≈ 120 m across."""
TAXI_RESOLUTION = 8
"""H3 resolution of the areas taxis are counted in (the citizen map's too): ≈ 920 m across."""
AGE_STEP_MIN = 5
"""Ages are rounded down to this many minutes."""
MAX_AGE_S = 30
"""``Cache-Control: public, max-age`` of the answers (seconds)."""
DISTANCE_STEP_M = 100
"""Public radii and distances are rounded up to this step."""
NEARBY_M = 500.0
"""A taxi whose cell centre is this close to a stand counts in the stand's nearby supply."""
POSITION_DECIMALS = 6
"""Decimals of the cell centres shown (the centre is public: it only names the cell)."""
MAX_STANDS = 200
"""Stands listed at most by a stands search, the nearest; ``truncated`` says when more were in
the radius."""

Lat = Annotated[float, Query(ge=-90, le=90, description="Latitude WGS84 do ponto de busca")]
Lon = Annotated[float, Query(ge=-180, le=180, description="Longitude WGS84 do ponto de busca")]
Radius = Annotated[float, Query(gt=0, description="Raio de busca em metros")]


class Position(BaseModel):
    """The centre of an H3 cell of the public grid (see the module doc)."""

    lat: float
    lon: float


class AccessibleArea(BaseModel):
    """An area (H3 cell of :data:`TAXI_RESOLUTION`) with free accessible taxis seen recently."""

    index: int = Field(description="Posição na lista desta resposta (a mais próxima é 1)")
    cell: str = Field(description="Célula H3 da área (resolução `cell_resolution`)")
    position: Position = Field(description="Centro da área")
    distance_m: int = Field(description="Distância até o centro da área, arredondada para cima")
    count: int = Field(description="Táxis acessíveis livres na área")
    last_seen_min: int = Field(
        description="Idade da posição mais recente da área, em minutos, arredondada para baixo "
        "a múltiplos de `age_step_min`"
    )


class AccessibleTaxisPublic(BaseModel):
    """Areas with free accessible taxis near the point, nearest first (counts, no taxi)."""

    data: list[AccessibleArea]
    count: int = Field(description="Número de áreas listadas")
    taxis: int = Field(description="Total de táxis acessíveis livres nas áreas listadas")
    cell_resolution: int = TAXI_RESOLUTION
    distance_step_m: int = DISTANCE_STEP_M
    age_step_min: int = AGE_STEP_MIN


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
    """Stands near the point, nearest first: the nearest ``limit`` at most."""

    data: list[StandNearby]
    count: int = Field(description="Número de pontos listados")
    limit: int = Field(default=MAX_STANDS, description="Máximo de pontos listados numa resposta")
    truncated: bool = Field(
        description="Há mais pontos no raio do que `limit`: a lista tem só os mais próximos"
    )


def _position(lat: float, lon: float) -> Position:
    return Position(lat=round(lat, POSITION_DECIMALS), lon=round(lon, POSITION_DECIMALS))


def _step_up(metres: float) -> int:
    return int(math.ceil(round(metres, 6) / DISTANCE_STEP_M) * DISTANCE_STEP_M)


def _check_radius(radius_m: float, limit_m: float) -> int:
    if radius_m > limit_m:
        msg = f"radius_m {radius_m!r} acima do máximo de {limit_m:g} m"
        raise InvalidRequestError(msg)
    return _step_up(radius_m)


def published_instant(now: dt.datetime | None = None) -> dt.datetime:
    """Return the instant the public answers describe: ``now`` down to whole 5 minutes (UTC).

    :data:`AGE_STEP_MIN` minutes: the fixes after it wait for the next window.
    """
    now = now or dt.datetime.now(dt.UTC)
    step = AGE_STEP_MIN * 60
    return dt.datetime.fromtimestamp(now.timestamp() // step * step, tz=dt.UTC)


def _age_bucket(seconds: float) -> int:
    minutes = max(0, int(seconds // 60))
    return minutes - minutes % AGE_STEP_MIN


def _public(response: Response) -> None:
    response.headers["Cache-Control"] = f"public, max-age={MAX_AGE_S}"


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
    """Cells of the free accessible taxis seen in the ``recent_s`` before ``now``.

    Returns (cells, lat, lon, ts); ``now`` is :func:`published_instant` (a fix after it is not
    published yet).

    The exact positions are read here and replaced by their cell centres at once; nothing
    else in this module sees them.
    """
    rows = session.execute(
        text(_LATEST_FREE_ACCESSIBLE),
        {"since": now - dt.timedelta(seconds=recent_s), "now": now},
    ).all()
    lat = np.array([r.lat for r in rows], dtype=np.float64)
    lon = np.array([r.lon for r in rows], dtype=np.float64)
    cells, clat, clon = snap_to_cell_centres(lat, lon, resolution=CELL_RESOLUTION)
    return cells, clat, clon, [r.ts for r in rows]


def taxi_areas(clat: np.ndarray, clon: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Areas (cells of :data:`TAXI_RESOLUTION`) of cell centres: (areas, lat, lon of centres).

    A function of the ≈ 120 m cells (their centres are snapped), as every public answer.
    """
    return snap_to_cell_centres(clat, clon, resolution=TAXI_RESOLUTION)


def accessible_taxis(
    session: Session, settings: Settings, lat: float, lon: float, radius_m: float = 1000.0
) -> AccessibleTaxisPublic:
    """Areas with free accessible taxis seen recently near a point (counts per area).

    An area is listed when its centre is within ``radius_m`` (rounded up) of the search point.
    Also called by the citizen's web page (:mod:`api.web.citizen`).
    """
    radius = _check_radius(radius_m, settings.public_max_radius_m)
    qlat, qlon = _search_point(lat, lon)
    now = published_instant()
    _, clat, clon, seen = free_taxi_cells(session, recent_s=settings.public_recent_fix_s, now=now)
    areas, alat, alon = taxi_areas(clat, clon)
    freshest: dict[int, dt.datetime] = {}
    counts: dict[int, int] = {}
    centre: dict[int, tuple[float, float]] = {}
    for area, a_lat, a_lon, ts in zip(
        areas.tolist(), alat.tolist(), alon.tolist(), seen, strict=True
    ):
        counts[area] = counts.get(area, 0) + 1
        freshest[area] = max(freshest.get(area, ts), ts)
        centre[area] = (a_lat, a_lon)
    keys = list(counts)
    klat = np.array([centre[k][0] for k in keys], dtype=np.float64)
    klon = np.array([centre[k][1] for k in keys], dtype=np.float64)
    distance = [_step_up(d) for d in haversine_m(qlat, qlon, klat, klon).tolist()]
    names = cells_to_strings(np.array(keys, dtype=np.uint64)).tolist()
    ages = [_age_bucket((now - freshest[k]).total_seconds()) for k in keys]
    order = sorted(
        (i for i in range(len(keys)) if distance[i] <= radius),
        key=lambda i: (distance[i], names[i]),
    )
    data = [
        AccessibleArea(
            index=n,
            cell=names[i],
            position=_position(*centre[keys[i]]),
            distance_m=distance[i],
            count=counts[keys[i]],
            last_seen_min=ages[i],
        )
        for n, i in enumerate(order, start=1)
    ]
    return AccessibleTaxisPublic(data=data, count=len(data), taxis=sum(a.count for a in data))


@router.get(
    "/accessible-taxis",
    name="accessible_taxis",
    response_model=AccessibleTaxisPublic,
    responses={200: {"description": "Áreas com táxis acessíveis livres (contagens)"}},
)
async def accessible_taxis_route(
    request: Request,
    response: Response,
    settings: SettingsDep,
    lat: Lat,
    lon: Lon,
    radius_m: Radius = 1000.0,
) -> Any:
    """Áreas com táxis acessíveis livres vistos há pouco perto de um ponto (contagens).

    Áreas: células H3 de ≈ 0,7 km²; nenhuma posição ou identidade de táxi.
    """
    _check_radius(radius_m, settings.public_max_radius_m)  # a 422 takes no database slot
    body = await public_query(request, accessible_taxis, settings, lat, lon, radius_m)
    _public(response)
    return body


def stands_near(
    session: Session, settings: Settings, lat: float, lon: float, radius_m: float = 1000.0
) -> StandsNearbyPublic:
    """Stands near a point with their accessible supply now (also called by the web page).

    The nearest :data:`MAX_STANDS` at most; ``truncated`` when more are within the radius.
    """
    radius = _check_radius(radius_m, settings.public_max_radius_m)
    qlat, qlon = _search_point(lat, lon)
    cells, clat, clon, _ = free_taxi_cells(
        session, recent_s=settings.public_recent_fix_s, now=published_instant()
    )
    _, alat, alon = taxi_areas(clat, clon)
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
            "FROM near ORDER BY near.distance_m, near.stand_id LIMIT :limit"
        ),
        {
            "limit": MAX_STANDS + 1,  # one more tells that the list is cut
            "lat": qlat,
            "lon": qlon,
            "r": float(radius),
            "nearby": NEARBY_M,
            "xs": alon.tolist(),
            "ys": alat.tolist(),
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
        for r in rows[:MAX_STANDS]
    ]
    return StandsNearbyPublic(data=data, count=len(data), truncated=len(rows) > MAX_STANDS)


@router.get("/stands", name="stands_near", response_model=StandsNearbyPublic)
async def stands_near_route(
    request: Request,
    response: Response,
    settings: SettingsDep,
    lat: Lat,
    lon: Lon,
    radius_m: Radius = 1000.0,
) -> Any:
    """Pontos de táxi perto de um ponto, com a oferta de táxis acessíveis livres agora.

    Os mais próximos primeiro, no máximo `limit`; `truncated` diz que havia mais no raio.
    """
    _check_radius(radius_m, settings.public_max_radius_m)
    body = await public_query(request, stands_near, settings, lat, lon, radius_m)
    _public(response)
    return body
