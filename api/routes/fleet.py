"""The fleet registry: vehicles (prefixos) with status, documents and licences.

Plates (the vehicle's and the substituted one's) and the permit holder's name, CPF and phone
are personal data: only admins and
enforcement agents get them, only when they ask (``include_personal=true``), and every such
answer is written to the audit log before it is sent.

Admins edit a vehicle's document fields (``PATCH``: year, first registration, vistoria,
alvará, provisional substitution, Termo recolhido, service category) with the rules of the
fleet file (``fleet.loaders.check_vehicle_documents``); the audit log keeps the values before
and after.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field
from sqlalchemy import text

from api._errors import ForbiddenError, InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.audit import record_personal_data_access
from api.deps import SessionDep, SettingsDep, require_roles
from api.schemas import (
    MAX_OFFSET,
    DocumentDate,
    Int,
    RegistryDate,
    StrictBody,
    error_responses,
)
from fleet._errors import UnknownRecordError
from fleet.loaders import VEHICLE_YEAR_MAX, VEHICLE_YEAR_MIN
from fleet.vocabulary import SERVICE_CATEGORIES
from geo.calendar import local_today

router = APIRouter(prefix="/api/v1/vehicles", tags=["frota"])

Viewer = Annotated[Principal, Depends(require_roles("admin", "planner", "agent"))]
Admin = Annotated[Principal, Depends(require_roles("admin"))]
PERSONAL_ROLES = frozenset({"admin", "agent"})
PERSONAL_FIELDS = ("plate", "substituted_plate", "holder_name", "holder_cpf", "holder_phone")
_ERRORS = error_responses(401, 403, 404, 422, 503)


class Holder(BaseModel):
    """The autorizatário (personal data)."""

    name: str
    cpf: str | None
    phone: str | None


class VehiclePublic(BaseModel):
    """A vehicle; ``plate`` and ``holder`` only with ``include_personal`` (admin, agent)."""

    vehicle_id: str
    prefixo: str
    municipality_code: str | None
    accessible: bool | None
    make: str | None
    model: str | None
    year: int | None
    status: str | None
    alvara_valid_until: dt.date | None
    inspection_valid_until: dt.date | None
    stand_ids: list[str]
    first_registered_on: dt.date | None = None
    last_inspection_on: dt.date | None = None
    alvara_first_issued_on: dt.date | None = None
    substitution_since: dt.date | None = None
    termo_recolhido_since: dt.date | None = None
    termo_recolhido_until: dt.date | None = None
    service_category: str | None = None
    plate: str | None = None
    substituted_plate: str | None = None
    holder: Holder | None = None


class VehiclesPublic(BaseModel):
    """A page of vehicles and the total count of the filter."""

    data: list[VehiclePublic]
    count: int


class VehicleDocumentsUpdate(StrictBody):
    """A vehicle's document fields to change (those sent; null clears), as the fleet file's."""

    year: Annotated[Int, Field(ge=VEHICLE_YEAR_MIN, le=VEHICLE_YEAR_MAX)] | None = None
    first_registered_on: RegistryDate | None = None
    alvara_valid_until: DocumentDate | None = None
    inspection_valid_until: DocumentDate | None = None
    last_inspection_on: RegistryDate | None = None
    alvara_first_issued_on: RegistryDate | None = None
    substitution_since: RegistryDate | None = None
    substituted_plate: str | None = Field(default=None, min_length=1, max_length=16)
    termo_recolhido_since: RegistryDate | None = None
    termo_recolhido_until: RegistryDate | None = None
    service_category: Literal[SERVICE_CATEGORIES] | None = None  # type: ignore[valid-type]
    reason: str | None = Field(default=None, max_length=500)


_VEHICLE_SQL = """
SELECT v.vehicle_id, v.prefixo, v.municipality_code, v.accessible, v.make, v.model, v.year,
       v.alvara_valid_until, v.inspection_valid_until, v.plate, v.first_registered_on,
       v.last_inspection_on, v.alvara_first_issued_on, v.substitution_since,
       v.substituted_plate, v.termo_recolhido_since, v.termo_recolhido_until,
       v.service_category,
       h.name AS holder_name, h.cpf AS holder_cpf, h.phone AS holder_phone,
       (SELECT s.status FROM vehicle_status_periods s WHERE s.vehicle_id = v.vehicle_id
          AND (s.valid_from IS NULL OR s.valid_from <= :today)
          AND (s.valid_until IS NULL OR s.valid_until >= :today) LIMIT 1) AS status,
       ARRAY(SELECT DISTINCT l.stand_id FROM parking_licences l WHERE l.vehicle_id = v.vehicle_id
          AND (l.valid_until IS NULL OR l.valid_until >= :today) ORDER BY l.stand_id) AS stand_ids
FROM vehicles v LEFT JOIN permit_holders h ON h.holder_id = v.holder_id
"""


def _check_personal(user: Principal, include_personal: bool) -> None:
    if include_personal and user.role not in PERSONAL_ROLES:
        msg = f"o papel '{user.role}' não tem acesso a dados pessoais (placas, titulares)"
        raise ForbiddenError(msg)


def _vehicle(row: Any, *, personal: bool) -> VehiclePublic:
    extra: dict[str, Any] = {}
    if personal:
        holder = (
            Holder(name=row.holder_name, cpf=row.holder_cpf, phone=row.holder_phone)
            if row.holder_name is not None
            else None
        )
        extra = {"plate": row.plate, "substituted_plate": row.substituted_plate, "holder": holder}
    return VehiclePublic(
        vehicle_id=row.vehicle_id,
        prefixo=row.prefixo,
        municipality_code=row.municipality_code,
        accessible=row.accessible,
        make=row.make,
        model=row.model,
        year=row.year,
        status=row.status,
        alvara_valid_until=row.alvara_valid_until,
        inspection_valid_until=row.inspection_valid_until,
        stand_ids=list(row.stand_ids or []),
        first_registered_on=row.first_registered_on,
        last_inspection_on=row.last_inspection_on,
        alvara_first_issued_on=row.alvara_first_issued_on,
        substitution_since=row.substitution_since,
        termo_recolhido_since=row.termo_recolhido_since,
        termo_recolhido_until=row.termo_recolhido_until,
        service_category=row.service_category,
        **extra,
    )


def _today(settings: SettingsDep) -> dt.date:
    return local_today(settings.timezone)


@router.get("", response_model=VehiclesPublic, responses=_ERRORS)
def list_vehicles(
    request: Request,
    user: Viewer,
    session: SessionDep,
    settings: SettingsDep,
    accessible: bool | None = None,
    municipality_code: Annotated[str | None, Query(pattern=r"^\d{7}$")] = None,
    include_personal: bool = False,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    """Veículos da frota; placas e titulares só com `include_personal` (admin, agente; auditado)."""
    _check_personal(user, include_personal)
    where, params = ["TRUE"], {"limit": limit, "offset": offset, "today": _today(settings)}
    if accessible is not None:
        where.append("v.accessible = :accessible")
        params["accessible"] = accessible
    if municipality_code is not None:
        where.append("v.municipality_code = :municipality")
        params["municipality"] = municipality_code
    clause = " AND ".join(where)
    rows = session.execute(
        text(f"{_VEHICLE_SQL} WHERE {clause} ORDER BY v.vehicle_id LIMIT :limit OFFSET :offset"),
        params,
    ).all()
    count = session.execute(
        text(f"SELECT count(*) FROM vehicles v WHERE {clause}"), params
    ).scalar()
    data = [_vehicle(r, personal=include_personal) for r in rows]
    if include_personal and data:
        record_personal_data_access(
            session=session,
            actor=user.actor,
            entity="vehicles",
            ids=[v.vehicle_id for v in data],
            fields=PERSONAL_FIELDS,
            route=request.url.path,
        )
        session.commit()  # audited before the data leaves
    return VehiclesPublic(data=data, count=int(count or 0))


@router.get("/{vehicle_id}", response_model=VehiclePublic, responses=_ERRORS)
def get_vehicle(
    vehicle_id: str,
    request: Request,
    user: Viewer,
    session: SessionDep,
    settings: SettingsDep,
    include_personal: bool = False,
) -> Any:
    """Um veículo; placa e titular só com `include_personal` (admin, agente; auditado)."""
    _check_personal(user, include_personal)
    row = session.execute(
        text(f"{_VEHICLE_SQL} WHERE v.vehicle_id = :id"),
        {"id": vehicle_id, "today": _today(settings)},
    ).first()
    if row is None:
        msg = f"veículo '{vehicle_id}' não encontrado"
        raise NotFoundError(msg)
    vehicle = _vehicle(row, personal=include_personal)
    if include_personal:
        record_personal_data_access(
            session=session,
            actor=user.actor,
            entity="vehicles",
            ids=[vehicle_id],
            fields=PERSONAL_FIELDS,
            route=request.url.path,
        )
        session.commit()
    return vehicle


@router.patch("/{vehicle_id}", response_model=VehiclePublic, responses=_ERRORS)
def update_vehicle_documents(
    vehicle_id: str,
    body: VehicleDocumentsUpdate,
    user: Admin,
    session: SessionDep,
    settings: SettingsDep,
) -> Any:
    """Altera os documentos do veículo (ano, vistoria, alvará, substituição, Termo, categoria).

    Só admin; as regras são as do arquivo de frota; o registro de auditoria guarda antes e
    depois. A resposta não traz placas (peça-as com `include_personal`).
    """
    from db.fleet.store import update_vehicle_documents

    values = body.model_dump(exclude_unset=True)
    reason = values.pop("reason", None)
    if not values:
        msg = "nenhum campo para alterar; envie ao menos um"
        raise InvalidRequestError(msg)
    try:
        update_vehicle_documents(
            session=session, vehicle_id=vehicle_id, actor=user.actor, reason=reason, **values
        )
    except UnknownRecordError as exc:
        raise NotFoundError(str(exc)) from None
    session.commit()
    row = session.execute(
        text(f"{_VEHICLE_SQL} WHERE v.vehicle_id = :id"),
        {"id": vehicle_id, "today": _today(settings)},
    ).first()
    return _vehicle(row, personal=False)
