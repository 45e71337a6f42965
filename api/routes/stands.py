"""Stands (GeoJSON), their parking licences and current occupancy; admins create and edit.

Supervisors see only their own stands (403 for the others; lists are filtered).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field
from sqlalchemy import select

from api import queries
from api._errors import ConflictError, InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.deps import SessionDep, SettingsDep, require_roles, supervisor_scope
from api.schemas import MAX_OFFSET, error_responses

router = APIRouter(prefix="/api/v1/stands", tags=["pontos e licenças"])

Viewer = Annotated[Principal, Depends(require_roles("admin", "planner", "agent", "supervisor"))]
Admin = Annotated[Principal, Depends(require_roles("admin"))]
_ERRORS = error_responses(401, 403, 404, 422, 503)


class Feature(BaseModel):
    """A GeoJSON Feature (EPSG:4326)."""

    type: Literal["Feature"] = "Feature"
    id: str | None = None
    geometry: dict[str, Any] | None
    properties: dict[str, Any]


class StandsPublic(BaseModel):
    """A GeoJSON FeatureCollection of stands, with the total count of the filter."""

    type: Literal["FeatureCollection"] = "FeatureCollection"
    features: list[Feature]
    count: int


class StandCreate(BaseModel):
    """A new stand: its area as a GeoJSON Polygon/MultiPolygon (EPSG:4326)."""

    stand_id: str = Field(min_length=1, max_length=100)
    name: str | None = None
    capacity: int | None = Field(None, ge=0, le=10_000)
    kind: Literal["fixo", "livre"] | None = None
    municipality_code: str | None = Field(None, pattern=r"^\d{7}$")
    geometry: dict[str, Any]


class StandUpdate(BaseModel):
    """Fields to change (absent: unchanged)."""

    name: str | None = None
    capacity: int | None = Field(None, ge=0, le=10_000)
    kind: Literal["fixo", "livre"] | None = None
    geometry: dict[str, Any] | None = None


class LicencePublic(BaseModel):
    """A parking licence of a prefixo at the stand (inclusive local dates; null: open)."""

    vehicle_id: str
    valid_from: dt.date | None
    valid_until: dt.date | None


class LicencesPublic(BaseModel):
    """Licences of a stand."""

    data: list[LicencePublic]
    count: int


class PresentVehicle(BaseModel):
    """A vehicle waiting at the stand now, in queue order."""

    position: int
    vehicle_id: str
    arrived_at: dt.datetime
    waited_s: float
    licensed: bool


class OccupancyPublic(BaseModel):
    """Who is at the stand now (from the fixes of the last ``window_min`` minutes)."""

    stand_id: str
    at: dt.datetime
    capacity: int | None
    vehicles_present: int
    utilisation: float | None
    intruders: int
    vehicles: list[PresentVehicle]


def _multipolygon_wkt(geometry: dict[str, Any]) -> str:
    import shapely
    from shapely.geometry import MultiPolygon, Polygon, shape

    try:
        geom = shape(geometry)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
        msg = f"geometria GeoJSON inválida: {exc}"
        raise InvalidRequestError(msg) from None
    if isinstance(geom, Polygon):
        geom = MultiPolygon([geom])
    if not isinstance(geom, MultiPolygon) or geom.is_empty or not geom.is_valid:
        msg = "a geometria deve ser um Polygon ou MultiPolygon GeoJSON válido e não vazio"
        raise InvalidRequestError(msg)
    minx, miny, maxx, maxy = geom.bounds
    if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
        msg = "coordenadas fora de WGS84 (lon em [-180, 180], lat em [-90, 90])"
        raise InvalidRequestError(msg)
    return str(shapely.to_wkt(geom))


def _stand_or_404(session: SessionDep, stand_id: str) -> dict[str, Any]:
    feature = queries.stand_feature(session=session, stand_id=stand_id)
    if feature is None:
        msg = f"ponto '{stand_id}' não encontrado"
        raise NotFoundError(msg)
    return feature


@router.get("", response_model=StandsPublic, responses=_ERRORS)
def list_stands(
    user: Viewer,
    session: SessionDep,
    include_retired: bool = False,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    """Pontos de táxi como GeoJSON (o supervisor vê só os seus)."""
    ids = sorted(user.stand_ids) if user.role == "supervisor" else None
    features, count = queries.stand_features(
        session=session, stand_ids=ids, include_retired=include_retired, limit=limit, offset=offset
    )
    return {"type": "FeatureCollection", "features": features, "count": count}


@router.get("/{stand_id}", response_model=Feature, responses=_ERRORS)
def get_stand(stand_id: str, user: Viewer, session: SessionDep) -> Any:
    """Um ponto como Feature GeoJSON."""
    supervisor_scope(user, stand_id)
    return _stand_or_404(session, stand_id)


@router.post(
    "", response_model=Feature, status_code=201, responses=error_responses(401, 403, 409, 422, 503)
)
def create_stand(body: StandCreate, user: Admin, session: SessionDep) -> Any:
    """Cria um ponto (admin)."""
    from geoalchemy2 import WKTElement

    from stands.models import Stand

    wkt = _multipolygon_wkt(body.geometry)
    if session.get(Stand, body.stand_id) is not None:
        msg = f"o ponto '{body.stand_id}' já existe"
        raise ConflictError(msg)
    if body.municipality_code is not None:
        from fleet.models import Municipality

        if session.get(Municipality, body.municipality_code) is None:
            msg = f"município {body.municipality_code} não cadastrado"
            raise InvalidRequestError(msg)
    session.add(
        Stand(
            stand_id=body.stand_id,
            name=body.name,
            capacity=body.capacity,
            kind=body.kind,
            municipality_code=body.municipality_code,
            geometry=WKTElement(wkt, srid=4326),
        )
    )
    session.commit()
    return _stand_or_404(session, body.stand_id)


@router.patch("/{stand_id}", response_model=Feature, responses=_ERRORS)
def update_stand(stand_id: str, body: StandUpdate, user: Admin, session: SessionDep) -> Any:
    """Altera nome, capacidade, tipo ou área de um ponto (admin)."""
    from geoalchemy2 import WKTElement
    from sqlalchemy import func

    from stands.models import Stand

    stand = session.get(Stand, stand_id)
    if stand is None:
        msg = f"ponto '{stand_id}' não encontrado"
        raise NotFoundError(msg)
    changes = body.model_dump(exclude_unset=True)
    if changes.get("geometry") is not None:
        stand.geometry = WKTElement(_multipolygon_wkt(changes["geometry"]), srid=4326)  # type: ignore[assignment]
        stand.radius_m = None
    for field in ("name", "capacity", "kind"):
        if field in changes:
            setattr(stand, field, changes[field])
    stand.updated_at = func.now()  # type: ignore[assignment]
    session.commit()
    return _stand_or_404(session, stand_id)


@router.post("/{stand_id}/retire", response_model=Feature, responses=_ERRORS)
def retire_stand(stand_id: str, user: Admin, session: SessionDep) -> Any:
    """Desativa um ponto (admin); o histórico permanece."""
    from sqlalchemy import func

    from stands.models import Stand

    stand = session.get(Stand, stand_id)
    if stand is None:
        msg = f"ponto '{stand_id}' não encontrado"
        raise NotFoundError(msg)
    if stand.retired_at is None:
        stand.retired_at = func.now()  # type: ignore[assignment]
        session.commit()
    return _stand_or_404(session, stand_id)


@router.get("/{stand_id}/licences", response_model=LicencesPublic, responses=_ERRORS)
def stand_licences(stand_id: str, user: Viewer, session: SessionDep) -> Any:
    """Licenças de estacionamento do ponto (prefixos e vigência; POA art. 43 parágrafo único)."""
    from stands.models import ParkingLicence

    supervisor_scope(user, stand_id)
    _stand_or_404(session, stand_id)
    rows = session.scalars(
        select(ParkingLicence)
        .where(ParkingLicence.stand_id == stand_id)
        .order_by(ParkingLicence.vehicle_id, ParkingLicence.valid_from)
    ).all()
    data = [
        LicencePublic(vehicle_id=r.vehicle_id, valid_from=r.valid_from, valid_until=r.valid_until)
        for r in rows
    ]
    return LicencesPublic(data=data, count=len(data))


@router.get("/{stand_id}/occupancy", response_model=OccupancyPublic, responses=_ERRORS)
def stand_occupancy(
    stand_id: str,
    user: Viewer,
    session: SessionDep,
    settings: SettingsDep,
    window_min: Annotated[int, Query(ge=1, le=1440)] = 120,
) -> Any:
    """Quem está no ponto agora, em ordem de fila, a partir das posições recentes."""
    supervisor_scope(user, stand_id)
    feature = _stand_or_404(session, stand_id)
    now = dt.datetime.now(dt.UTC)
    present = queries.current_occupancy(
        session=session, stand_id=stand_id, now=now, window_s=window_min * 60.0
    )
    today = now.astimezone(ZoneInfo(settings.timezone)).date()
    licensed = queries.licensed_vehicles(session=session, stand_id=stand_id, on=today)
    vehicles = [
        PresentVehicle(
            position=int(r.position),
            vehicle_id=str(r.vehicle_id),
            arrived_at=r.arrived_at.to_pydatetime(),
            waited_s=float(r.waited_s),
            licensed=str(r.vehicle_id) in licensed,
        )
        for r in present.itertuples(index=False)
    ]
    capacity = feature["properties"]["capacity"]
    return OccupancyPublic(
        stand_id=stand_id,
        at=now,
        capacity=capacity,
        vehicles_present=len(vehicles),
        utilisation=len(vehicles) / capacity if capacity else None,
        intruders=sum(not v.licensed for v in vehicles),
        vehicles=vehicles,
    )
