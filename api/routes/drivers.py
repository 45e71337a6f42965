"""The registry of drivers: a driver's CNH / ICTP and their history, links to prefixos.

Admins only: a driver's name and CNH are personal data, and each answer is written to the audit
log before it is sent; each change is audited too (``db.fleet.store``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from api._errors import NotFoundError
from api.accounts import Principal
from api.audit import record_personal_data_access
from api.deps import SessionDep, require_roles
from api.schemas import RegistryDate, StrictBody, error_responses

router = APIRouter(prefix="/api/v1/drivers", tags=["condutores"])

Admin = Annotated[Principal, Depends(require_roles("admin"))]
PERSONAL_FIELDS = ("name", "cnh_number", "cnh_category")
_ERRORS = error_responses(401, 403, 404, 422, 503)


class DriverPeriod(BaseModel):
    """A status of the CNH or the ICTP over inclusive local dates (null: unknown / open)."""

    document: Literal["cnh", "ictp"]
    status: Literal["regular", "suspensa", "cassada"]
    valid_from: dt.date | None
    valid_until: dt.date | None


class DriverLink(BaseModel):
    """A link to a prefixo (inclusive local dates; ``valid_until`` null: open)."""

    vehicle_id: str
    role: Literal["titular", "auxiliar"]
    valid_from: dt.date
    valid_until: dt.date | None


class DriverPublic(BaseModel):
    """A driver of the registry (personal data: admins only, audited)."""

    driver_id: str
    municipality_code: str | None
    name: str
    synthetic: bool
    cnh_number: str | None
    cnh_category: str | None
    cnh_valid_until: dt.date | None
    ictp_valid_until: dt.date | None
    periods: list[DriverPeriod]
    links: list[DriverLink]


class PeriodCreate(StrictBody):
    """A new status period of the CNH or the ICTP (Registro de Condutor)."""

    document: Literal["cnh", "ictp"]
    status: Literal["regular", "suspensa", "cassada"]
    valid_from: RegistryDate | None = None
    valid_until: RegistryDate | None = None


class LinkCreate(StrictBody):
    """A new link of the driver to a prefixo."""

    vehicle_id: str = Field(min_length=1, max_length=64)
    role: Literal["titular", "auxiliar"]
    valid_from: RegistryDate
    valid_until: RegistryDate | None = None


def _driver(session: Any, driver_id: str, *, actor: str, route: str) -> DriverPublic:
    from db.fleet.store import driver_record

    record = driver_record(session=session, driver_id=driver_id)
    if record is None:
        msg = f"condutor '{driver_id}' não encontrado"
        raise NotFoundError(msg)
    record_personal_data_access(
        session=session,
        actor=actor,
        entity="drivers",
        ids=[driver_id],
        fields=PERSONAL_FIELDS,
        route=route,
    )
    session.commit()  # audited before the data leaves
    return DriverPublic(**record)


@router.get("/{driver_id}", response_model=DriverPublic, responses=_ERRORS)
def get_driver(driver_id: str, request: Request, user: Admin, session: SessionDep) -> Any:
    """Um condutor: CNH, ICTP, histórico de situação e vínculos (admin; auditado)."""
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.post(
    "/{driver_id}/periods", response_model=DriverPublic, status_code=201, responses=_ERRORS
)
def add_period(
    driver_id: str, body: PeriodCreate, request: Request, user: Admin, session: SessionDep
) -> Any:
    """Registra um período de situação da CNH ou da ICTP (admin; auditado)."""
    from db.fleet.store import add_driver_period

    add_driver_period(session=session, driver_id=driver_id, actor=user.actor, **body.model_dump())
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.post("/{driver_id}/links", response_model=DriverPublic, status_code=201, responses=_ERRORS)
def add_link(
    driver_id: str, body: LinkCreate, request: Request, user: Admin, session: SessionDep
) -> Any:
    """Vincula o condutor a um prefixo, como titular ou auxiliar (admin; auditado)."""
    from db.fleet.store import add_driver_link

    add_driver_link(session=session, driver_id=driver_id, actor=user.actor, **body.model_dump())
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)
