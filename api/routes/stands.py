"""Stands (GeoJSON), their parking licences and current occupancy; admins create and edit.

Supervisors see only their own stands (403 for the others; lists are filtered).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.encoders import jsonable_encoder
from pydantic import AfterValidator, BaseModel, Field, StringConstraints
from sqlalchemy import select

from api import queries
from api._errors import ConflictError, NotFoundError
from api.accounts import Principal
from api.audit import record_personal_data_access
from api.deps import SessionDep, SettingsDep, require_roles, supervisor_scope
from api.schemas import (
    MAX_OFFSET,
    Float,
    Int,
    PresentVehicle,
    RegistryDate,
    RegistryId,
    StrictBody,
    display_text,
    error_responses,
)
from geo.calendar import local_today

router = APIRouter(prefix="/api/v1/stands", tags=["pontos e licenças"])

Viewer = Annotated[Principal, Depends(require_roles("admin", "planner", "agent", "supervisor"))]
Admin = Annotated[Principal, Depends(require_roles("admin"))]
SupervisorReader = Annotated[Principal, Depends(require_roles("admin", "agent", "supervisor"))]
"""Who reads the supervisors' names and who is at a stand now, licensed or not (personal data;
planners size the fleet with counts: the stand map gives them those)."""
_ERRORS = error_responses(401, 403, 404, 409, 422, 503)

StandName = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=200), AfterValidator(display_text)
]
"""A stand's name: stripped (blank: none), no control character nor bidirectional override."""


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


class StandCreate(StrictBody):
    """A new stand: a GeoJSON Polygon/MultiPolygon (EPSG:4326), or a point with ``radius_m``."""

    stand_id: RegistryId
    name: StandName | None = None
    capacity: Int | None = Field(None, ge=0, le=10_000)
    order_number: Int | None = Field(None, ge=1)
    kind: Literal["fixo", "livre"] | None = None
    address: str | None = Field(None, max_length=500)
    municipality_code: str | None = Field(None, pattern=r"^\d{7}$")
    geometry: dict[str, Any] | None = None
    lat: Float | None = Field(None, ge=-90, le=90)
    lon: Float | None = Field(None, ge=-180, le=180)
    radius_m: Float | None = Field(None, gt=0)


class StandUpdate(StrictBody):
    """Fields to change (absent: unchanged)."""

    name: StandName | None = None
    capacity: Int | None = Field(None, ge=0, le=10_000)
    order_number: Int | None = Field(None, ge=1)
    kind: Literal["fixo", "livre"] | None = None
    address: str | None = Field(None, max_length=500)
    geometry: dict[str, Any] | None = None
    lat: Float | None = Field(None, ge=-90, le=90)
    lon: Float | None = Field(None, ge=-180, le=180)
    radius_m: Float | None = Field(None, gt=0)


class RetireRequest(StrictBody):
    """From which local date the stand is retired (default: today) and why."""

    on: RegistryDate | None = None
    reason: str | None = Field(default=None, max_length=2000)


class LicenceGrant(StrictBody):
    """A parking licence of a prefixo at the stand (inclusive local dates)."""

    vehicle_id: str = Field(min_length=1, max_length=64)
    valid_from: RegistryDate
    valid_until: RegistryDate | None = None


class LicenceEnd(StrictBody):
    """The licence's last day, and why."""

    until: RegistryDate
    reason: str | None = Field(None, max_length=2000)


class ExclusionRequest(StrictBody):
    """Exclusion of a prefixo from a ponto fixo (POA art. 50): its ground and a note."""

    vehicle_id: str = Field(min_length=1, max_length=64)
    on: RegistryDate
    ground: Literal["solicitacao", "penalidade", "sem_supervisor"]
    note: str | None = Field(None, max_length=2000)


class ElectionRequest(StrictBody):
    """An election of the supervisor de ponto (POA art. 42): name, date, ata."""

    person_name: str = Field(min_length=1, max_length=200)
    elected_on: RegistryDate
    minutes_ref: str = Field(min_length=1, max_length=200)


class HomologationRequest(StrictBody):
    """The date of the homologation (POA art. 42 § 2º)."""

    on: RegistryDate


class SupervisorPublic(BaseModel):
    """A supervisor term of a stand."""

    supervisor_id: int
    stand_id: str
    person_name: str
    elected_on: dt.date | None
    minutes_ref: str | None
    homologated_on: dt.date | None
    until: dt.date | None


class SupervisorsPublic(BaseModel):
    """Supervisor terms of a stand (the history)."""

    data: list[SupervisorPublic]
    count: int


class SuspensionRequest(StrictBody):
    """A prefixo or a driver kept from the stand (POA art. 45 § único), or the stand closed.

    As decided; ``closed`` (the municipality's "interdição do ponto") names neither.
    """

    vehicle_id: str | None = Field(None, min_length=1, max_length=64)
    driver_id: str | None = Field(None, min_length=1, max_length=64)
    starts_on: RegistryDate
    ends_on: RegistryDate | None = None
    kind: Literal["suspension", "barred", "closed"]
    reason: str | None = Field(None, max_length=2000)
    process_ref: str | None = Field(None, max_length=200)


class SuspensionPublic(BaseModel):
    """A suspension of a prefixo or a driver at the stand, or its closure (inclusive dates)."""

    suspension_id: int
    stand_id: str
    vehicle_id: str | None
    driver_id: str | None
    starts_on: dt.date
    ends_on: dt.date | None
    kind: str
    reason: str | None
    process_ref: str | None
    created_at: dt.datetime


class SuspensionsPublic(BaseModel):
    """Suspensions of a stand (every date)."""

    data: list[SuspensionPublic]
    count: int


class Recorded(BaseModel):
    """What a registry write recorded."""

    stand_id: str
    detail: dict[str, Any]


class LicencePublic(BaseModel):
    """A parking licence of a prefixo at the stand (inclusive local dates; null: open)."""

    vehicle_id: str
    valid_from: dt.date | None
    valid_until: dt.date | None


class LicencesPublic(BaseModel):
    """Licences of a stand."""

    data: list[LicencePublic]
    count: int


class OccupancyPublic(BaseModel):
    """Who is at the stand now (from the fixes of the last ``window_min`` minutes)."""

    stand_id: str
    at: dt.datetime
    capacity: int | None
    vehicles_present: int
    utilisation: float | None
    intruders: int
    vehicles: list[PresentVehicle]


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


@contextmanager
def _registry_errors() -> Iterator[None]:
    """Map the registry's named errors to 404/409; the others stay 422."""
    from stands import _errors as se

    try:
        yield
    except (
        se.UnknownStandError,
        se.UnknownVehicleError,
        se.UnknownLicenceError,
        se.UnknownDriverError,
    ) as exc:
        raise NotFoundError(str(exc)) from None
    except (se.StandExistsError, se.LicenceOverlapError) as exc:
        raise ConflictError(str(exc)) from None


def _geometry_args(body: BaseModel) -> dict[str, Any]:
    fields = body.model_dump(exclude_unset=True)
    return {
        "area": fields.get("geometry"),
        "lat": fields.get("lat"),
        "lon": fields.get("lon"),
        "radius_m": fields.get("radius_m"),
    }


def _licence_detail(lic: Any) -> dict[str, Any]:
    fields = ("vehicle_id", "valid_from", "valid_until")
    detail: dict[str, Any] = jsonable_encoder({k: getattr(lic, k) for k in fields})
    return detail


def _today(settings: Any) -> dt.date:
    return local_today(settings.timezone)


@router.post(
    "", response_model=Feature, status_code=201, responses=error_responses(401, 403, 409, 422, 503)
)
def create_stand(body: StandCreate, user: Admin, session: SessionDep) -> Any:
    """Cria um ponto (admin), como polígono ou ponto com raio; a mudança fica na auditoria."""
    from db.stands import registry

    attrs = body.model_dump(exclude={"geometry", "lat", "lon", "radius_m", "stand_id"})
    with _registry_errors():
        stand = registry.create_stand(
            session=session,
            stand_id=body.stand_id,
            actor=user.actor,
            **_geometry_args(body),
            **attrs,
        )
    session.commit()
    return _stand_or_404(session, stand.stand_id)


@router.patch("/{stand_id}", response_model=Feature, responses=_ERRORS)
def update_stand(stand_id: str, body: StandUpdate, user: Admin, session: SessionDep) -> Any:
    """Altera atributos ou a área de um ponto (admin); a mudança fica na auditoria."""
    from db.stands import registry

    attrs = body.model_dump(exclude_unset=True, exclude={"geometry", "lat", "lon", "radius_m"})
    geometry = {k: v for k, v in _geometry_args(body).items() if v is not None}
    with _registry_errors():
        registry.edit_stand(
            session=session, stand_id=stand_id, actor=user.actor, **geometry, **attrs
        )
    session.commit()
    return _stand_or_404(session, stand_id)


@router.post("/{stand_id}/retire", response_model=Feature, responses=_ERRORS)
def retire_stand(
    stand_id: str,
    user: Admin,
    session: SessionDep,
    settings: SettingsDep,
    body: RetireRequest | None = None,
) -> Any:
    """Desativa um ponto (admin); as licenças vigentes terminam na véspera; o histórico fica."""
    from db.stands import registry

    body = body or RetireRequest()
    with _registry_errors():
        registry.retire_stand(
            session=session,
            stand_id=stand_id,
            actor=user.actor,
            on=body.on or _today(settings),
            reason=body.reason,
            timezone=settings.timezone,
        )
    session.commit()
    return _stand_or_404(session, stand_id)


@router.post("/{stand_id}/licences", response_model=Recorded, status_code=201, responses=_ERRORS)
def grant_licence(stand_id: str, body: LicenceGrant, user: Admin, session: SessionDep) -> Any:
    """Concede licença de estacionamento a um prefixo neste ponto (admin)."""
    from db.stands import registry

    with _registry_errors():
        lic = registry.grant_licence(
            session=session,
            stand_id=stand_id,
            vehicle_id=body.vehicle_id,
            valid_from=body.valid_from,
            valid_until=body.valid_until,
            actor=user.actor,
        )
    session.commit()
    detail = {
        "vehicle_id": lic.vehicle_id,
        "valid_from": lic.valid_from,
        "valid_until": lic.valid_until,
    }
    return {"stand_id": stand_id, "detail": jsonable_encoder(detail)}


@router.post("/{stand_id}/licences/{vehicle_id}/end", response_model=Recorded, responses=_ERRORS)
def end_licence(
    stand_id: str, vehicle_id: str, body: LicenceEnd, user: Admin, session: SessionDep
) -> Any:
    """Encerra a licença do prefixo vigente em `until` (admin)."""
    from db.stands import registry

    with _registry_errors():
        lic = registry.end_licence(
            session=session,
            stand_id=stand_id,
            vehicle_id=vehicle_id,
            until=body.until,
            reason=body.reason,
            actor=user.actor,
        )
    session.commit()
    detail = {
        "vehicle_id": lic.vehicle_id,
        "valid_from": lic.valid_from,
        "valid_until": lic.valid_until,
    }
    return {"stand_id": stand_id, "detail": jsonable_encoder(detail)}


@router.post("/{stand_id}/exclusions", response_model=Recorded, status_code=201, responses=_ERRORS)
def exclude(stand_id: str, body: ExclusionRequest, user: Admin, session: SessionDep) -> Any:
    """Exclui um prefixo do ponto fixo (art. 50 do decreto de Porto Alegre), com o motivo."""
    from db.stands import registry

    with _registry_errors():
        exclusion = registry.exclude_prefixo(
            session=session,
            stand_id=stand_id,
            vehicle_id=body.vehicle_id,
            on=body.on,
            ground=body.ground,
            note=body.note,
            actor=user.actor,
        )
    session.commit()
    detail = {"vehicle_id": body.vehicle_id, "on": body.on, "reason": exclusion.reason}
    return {"stand_id": stand_id, "detail": jsonable_encoder(detail)}


def _supervisor_public(s: Any) -> dict[str, Any]:
    return {k: getattr(s, k) for k in SupervisorPublic.model_fields}


@router.get("/{stand_id}/supervisors", response_model=SupervisorsPublic, responses=_ERRORS)
def supervisors(
    stand_id: str, request: Request, user: SupervisorReader, session: SessionDep
) -> Any:
    """Supervisores do ponto ao longo do tempo (eleição, ata, homologação).

    O nome é dado pessoal: admin, agente e o supervisor do ponto; cada leitura é auditada.
    """
    from db.stands import registry

    supervisor_scope(user, stand_id)
    _stand_or_404(session, stand_id)
    rows = [
        _supervisor_public(s)
        for s in registry.list_supervisors(session=session, stand_ids=[stand_id])
    ]
    if rows:
        record_personal_data_access(
            session=session,
            actor=user.actor,
            entity="stand_supervisors",
            ids=[str(r["supervisor_id"]) for r in rows],
            fields=("person_name",),
            route=request.url.path,
        )
        session.commit()  # audited before the names leave
    return {"data": rows, "count": len(rows)}


@router.post(
    "/{stand_id}/supervisors", response_model=SupervisorPublic, status_code=201, responses=_ERRORS
)
def elect(stand_id: str, body: ElectionRequest, user: Admin, session: SessionDep) -> Any:
    """Registra a eleição do supervisor do ponto fixo (art. 42), ainda não homologada."""
    from db.stands import registry

    with _registry_errors():
        sup = registry.elect_supervisor(
            session=session,
            stand_id=stand_id,
            person_name=body.person_name,
            elected_on=body.elected_on,
            minutes_ref=body.minutes_ref,
            actor=user.actor,
        )
    session.commit()
    return _supervisor_public(sup)


@router.post(
    "/{stand_id}/supervisors/{supervisor_id}/homologate",
    response_model=SupervisorPublic,
    responses=_ERRORS,
)
def homologate(
    stand_id: str, supervisor_id: int, body: HomologationRequest, user: Admin, session: SessionDep
) -> Any:
    """Homologa a eleição (art. 42 § 2º); o supervisor anterior deixa a função na véspera."""
    from db.stands import registry
    from db.stands.models import StandSupervisor

    sup = session.get(StandSupervisor, supervisor_id)
    if sup is None or sup.stand_id != stand_id:
        raise NotFoundError(f"eleição {supervisor_id} não encontrada no ponto '{stand_id}'")
    with _registry_errors():
        registry.homologate_supervisor(
            session=session, supervisor_id=supervisor_id, on=body.on, actor=user.actor
        )
    session.commit()
    session.refresh(sup)
    return _supervisor_public(sup)


@router.get("/{stand_id}/licences", response_model=LicencesPublic, responses=_ERRORS)
def stand_licences(stand_id: str, user: Viewer, session: SessionDep) -> Any:
    """Licenças de estacionamento do ponto (prefixos e vigência; POA art. 43 parágrafo único)."""
    from db.stands.models import ParkingLicence

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
    user: SupervisorReader,
    session: SessionDep,
    settings: SettingsDep,
    window_min: Annotated[int, Query(ge=1, le=1440)] = 120,
) -> Any:
    """Quem está no ponto agora, em ordem de fila, a partir das posições recentes."""
    supervisor_scope(user, stand_id)
    feature = _stand_or_404(session, stand_id)
    now, vehicles = queries.queue_now(
        session=session, stand_id=stand_id, window_min=window_min, timezone=settings.timezone
    )
    capacity = feature["properties"]["capacity"]
    return OccupancyPublic(
        stand_id=stand_id,
        at=now,
        capacity=capacity,
        vehicles_present=len(vehicles),
        utilisation=len(vehicles) / capacity if capacity else None,
        intruders=sum(v.licensed is False for v in vehicles),
        vehicles=vehicles,
    )


Registrar = Annotated[Principal, Depends(require_roles("admin", "agent"))]
"""Who reads the stand suspensions (a driver's discipline record: not planners nor supervisors)."""


def _suspension_public(row: Any) -> dict[str, Any]:
    return {k: getattr(row, k) for k in SuspensionPublic.model_fields}


@router.get("/{stand_id}/suspensions", response_model=SuspensionsPublic, responses=_ERRORS)
def stand_suspensions(stand_id: str, user: Registrar, session: SessionDep) -> Any:
    """Suspensões de uso do ponto fixo (POA art. 45, parágrafo único) e interdições do ponto."""
    from db.stands import registry

    with _registry_errors():
        rows = registry.list_suspensions(session=session, stand_id=stand_id)
    data = [_suspension_public(r) for r in rows]
    return {"data": data, "count": len(data)}


@router.post(
    "/{stand_id}/suspensions",
    response_model=SuspensionPublic,
    status_code=201,
    responses=_ERRORS,
)
def create_suspension(
    stand_id: str, body: SuspensionRequest, user: Admin, session: SessionDep
) -> Any:
    """Registra a suspensão de prefixo ou condutor, ou a interdição do ponto (admin).

    Como decidida; a interdição (``closed``) não leva prefixo nem condutor.
    """
    from db.stands import registry

    with _registry_errors():
        row = registry.create_suspension(
            session=session,
            stand_id=stand_id,
            vehicle_id=body.vehicle_id,
            driver_id=body.driver_id,
            starts_on=body.starts_on,
            ends_on=body.ends_on,
            kind=body.kind,
            reason=body.reason,
            process_ref=body.process_ref,
            actor=user.actor,
        )
    session.commit()
    session.refresh(row)
    return _suspension_public(row)
