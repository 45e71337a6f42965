"""The registry of drivers: a driver's CNH / ICTP and their history, links to prefixos.

Admins only: a driver's name and CNH are personal data, and each answer (one driver or a page
of the search) is written to the audit log before it is sent; each change is audited too, with
the values before and after (``db.fleet.store``). The rules are those of ``pontual import
drivers`` / ``driver-links`` (``fleet.drivers``, ``db.fleet.store``).

Nothing of a driver's history is deleted: a status period or a link is ended (``valid_until``)
or corrected (``PATCH``), and the audit log keeps what it was. The findings of past runs were
judged against that history, so it must stay reconstructable; a period entered by mistake is
corrected (its status set to ``regular``, its dates fixed), with the reason in ``reason``.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from api._errors import ConflictError, InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.audit import record_personal_data_access
from api.deps import SessionDep, require_roles
from api.schemas import MAX_OFFSET, DocumentDate, RegistryDate, StrictBody, error_responses
from fleet._errors import UnknownRecordError
from fleet.drivers import CNH_CATEGORIES
from fleet.ids import REGISTRY_ID_MAX_CHARS, REGISTRY_ID_PATTERN

router = APIRouter(prefix="/api/v1/drivers", tags=["condutores"])

Admin = Annotated[Principal, Depends(require_roles("admin"))]
PERSONAL_FIELDS = ("name", "cnh_number", "cnh_category")
_ERRORS = error_responses(401, 403, 404, 422, 503)
_CREATE_ERRORS = error_responses(401, 403, 409, 422, 503)


Reason = Annotated[str | None, Field(default=None, max_length=500)]
"""Why a change is made (kept in the audit log)."""


class DriverPeriod(BaseModel):
    """A status of the CNH or the ICTP over inclusive local dates (null: unknown / open)."""

    period_id: int
    document: Literal["cnh", "ictp"]
    status: Literal["regular", "suspensa", "cassada"]
    valid_from: dt.date | None
    valid_until: dt.date | None


class DriverLink(BaseModel):
    """A link to a prefixo (inclusive local dates; ``valid_until`` null: open)."""

    link_id: int
    vehicle_id: str
    role: Literal["titular", "auxiliar"]
    valid_from: dt.date
    valid_until: dt.date | None


class DriverSummary(BaseModel):
    """A driver's fields, without the history (personal data: admins only, audited)."""

    driver_id: str
    municipality_code: str | None
    name: str
    synthetic: bool
    cnh_number: str | None
    cnh_category: str | None
    cnh_valid_until: dt.date | None
    ictp_valid_until: dt.date | None


class DriverPublic(DriverSummary):
    """A driver of the registry with their status periods and links (admins only, audited)."""

    periods: list[DriverPeriod]
    links: list[DriverLink]


class DriversPublic(BaseModel):
    """A page of drivers and the total count of the search."""

    data: list[DriverSummary]
    count: int


class DriverCreate(StrictBody):
    """A new driver; ``synthetic`` marks demo data (not a real person)."""

    driver_id: str = Field(
        min_length=1, max_length=REGISTRY_ID_MAX_CHARS, pattern=REGISTRY_ID_PATTERN
    )
    name: str = Field(min_length=1, max_length=200)
    municipality_code: str | None = Field(default=None, pattern=r"^\d{7}$")
    synthetic: bool = False
    cnh_number: str | None = Field(default=None, min_length=1, max_length=32)
    cnh_category: Literal[CNH_CATEGORIES] | None = None  # type: ignore[valid-type]
    cnh_valid_until: DocumentDate | None = None
    ictp_valid_until: DocumentDate | None = None


class DriverUpdate(StrictBody):
    """Fields of a driver to change (those sent; null clears, except ``name``)."""

    name: str | None = Field(default=None, min_length=1, max_length=200)
    municipality_code: str | None = Field(default=None, pattern=r"^\d{7}$")
    synthetic: bool | None = None
    cnh_number: str | None = Field(default=None, min_length=1, max_length=32)
    cnh_category: Literal[CNH_CATEGORIES] | None = None  # type: ignore[valid-type]
    cnh_valid_until: DocumentDate | None = None
    ictp_valid_until: DocumentDate | None = None
    reason: Reason


class PeriodCreate(StrictBody):
    """A new status period of the CNH or the ICTP (Registro de Condutor)."""

    document: Literal["cnh", "ictp"]
    status: Literal["regular", "suspensa", "cassada"]
    valid_from: RegistryDate | None = None
    valid_until: RegistryDate | None = None


class PeriodUpdate(StrictBody):
    """End or correct a status period: the fields sent change (null: unknown start / open)."""

    status: Literal["regular", "suspensa", "cassada"] | None = None
    valid_from: RegistryDate | None = None
    valid_until: RegistryDate | None = None
    reason: Reason


class LinkCreate(StrictBody):
    """A new link of the driver to a prefixo."""

    vehicle_id: str = Field(min_length=1, max_length=64)
    role: Literal["titular", "auxiliar"]
    valid_from: RegistryDate
    valid_until: RegistryDate | None = None


class LinkUpdate(StrictBody):
    """End or correct a link: the fields sent change (``valid_until`` null: open)."""

    role: Literal["titular", "auxiliar"] | None = None
    valid_from: RegistryDate | None = None
    valid_until: RegistryDate | None = None
    reason: Reason


def _sent(body: StrictBody, *, required: tuple[str, ...] = ()) -> tuple[dict[str, Any], str | None]:
    """Return the fields sent (``reason`` apart); a non-null field sent as null is 422."""
    values = body.model_dump(exclude_unset=True)
    reason = values.pop("reason", None)
    for name in required:
        if name in values and values[name] is None:
            msg = f"'{name}' não pode ser null"
            raise InvalidRequestError(msg)
    if not values:
        msg = "nenhum campo para alterar; envie ao menos um"
        raise InvalidRequestError(msg)
    return values, reason


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


def _require(session: Any, driver_id: str) -> None:
    from db.fleet.store import driver_record

    if driver_record(session=session, driver_id=driver_id) is None:
        msg = f"condutor '{driver_id}' não encontrado"
        raise NotFoundError(msg)


@router.get("", response_model=DriversPublic, responses=_ERRORS)
def list_drivers(
    request: Request,
    user: Admin,
    session: SessionDep,
    q: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    municipality_code: Annotated[str | None, Query(pattern=r"^\d{7}$")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> Any:
    """Condutores cujo id, nome ou CNH contém `q` (admin; cada consulta é auditada)."""
    from db.fleet.store import find_drivers

    data, count = find_drivers(
        session=session, query=q, municipality_code=municipality_code, limit=limit, offset=offset
    )
    record_personal_data_access(
        session=session,
        actor=user.actor,
        entity="drivers",
        ids=[d["driver_id"] for d in data],
        fields=PERSONAL_FIELDS,
        route=request.url.path,
    )
    session.commit()  # audited before the data leaves
    return DriversPublic(data=[DriverSummary(**d) for d in data], count=count)


@router.post("", response_model=DriverPublic, status_code=201, responses=_CREATE_ERRORS)
def create_driver(body: DriverCreate, request: Request, user: Admin, session: SessionDep) -> Any:
    """Cadastra um condutor (admin; auditado). `synthetic` marca dados de demonstração."""
    from db.fleet.store import create_driver, driver_record

    if driver_record(session=session, driver_id=body.driver_id) is not None:
        msg = f"condutor '{body.driver_id}' já está no cadastro; altere-o com PATCH"
        raise ConflictError(msg)
    create_driver(session=session, actor=user.actor, **body.model_dump())
    session.commit()
    return _driver(session, body.driver_id, actor=user.actor, route=request.url.path)


@router.get("/{driver_id}", response_model=DriverPublic, responses=_ERRORS)
def get_driver(driver_id: str, request: Request, user: Admin, session: SessionDep) -> Any:
    """Um condutor: CNH, ICTP, histórico de situação e vínculos (admin; auditado)."""
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.patch("/{driver_id}", response_model=DriverPublic, responses=_ERRORS)
def update_driver(
    driver_id: str, body: DriverUpdate, request: Request, user: Admin, session: SessionDep
) -> Any:
    """Altera campos do condutor; o registro de auditoria guarda antes e depois (admin)."""
    from db.fleet.store import update_driver

    _require(session, driver_id)
    values, reason = _sent(body, required=("name", "synthetic"))
    update_driver(session=session, driver_id=driver_id, actor=user.actor, reason=reason, **values)
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.post(
    "/{driver_id}/periods", response_model=DriverPublic, status_code=201, responses=_ERRORS
)
def add_period(
    driver_id: str, body: PeriodCreate, request: Request, user: Admin, session: SessionDep
) -> Any:
    """Registra um período de situação da CNH ou da ICTP (admin; auditado)."""
    from db.fleet.store import add_driver_period

    _require(session, driver_id)
    add_driver_period(session=session, driver_id=driver_id, actor=user.actor, **body.model_dump())
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.patch("/{driver_id}/periods/{period_id}", response_model=DriverPublic, responses=_ERRORS)
def update_period(
    driver_id: str,
    period_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    body: PeriodUpdate,
    request: Request,
    user: Admin,
    session: SessionDep,
) -> Any:
    """Encerra ou corrige um período de situação; auditado com antes e depois (admin)."""
    from db.fleet.store import update_driver_period

    _require(session, driver_id)
    values, reason = _sent(body, required=("status",))
    try:
        update_driver_period(
            session=session,
            driver_id=driver_id,
            period_id=period_id,
            actor=user.actor,
            reason=reason,
            **values,
        )
    except UnknownRecordError as exc:
        raise NotFoundError(str(exc)) from None
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.post("/{driver_id}/links", response_model=DriverPublic, status_code=201, responses=_ERRORS)
def add_link(
    driver_id: str, body: LinkCreate, request: Request, user: Admin, session: SessionDep
) -> Any:
    """Vincula o condutor a um prefixo, como titular ou auxiliar (admin; auditado)."""
    from db.fleet.store import add_driver_link

    _require(session, driver_id)
    add_driver_link(session=session, driver_id=driver_id, actor=user.actor, **body.model_dump())
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)


@router.patch("/{driver_id}/links/{link_id}", response_model=DriverPublic, responses=_ERRORS)
def update_link(
    driver_id: str,
    link_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    body: LinkUpdate,
    request: Request,
    user: Admin,
    session: SessionDep,
) -> Any:
    """Encerra ou corrige um vínculo a um prefixo; auditado com antes e depois (admin)."""
    from db.fleet.store import update_driver_link

    _require(session, driver_id)
    values, reason = _sent(body, required=("role", "valid_from"))
    try:
        update_driver_link(
            session=session,
            driver_id=driver_id,
            link_id=link_id,
            actor=user.actor,
            reason=reason,
            **values,
        )
    except UnknownRecordError as exc:
        raise NotFoundError(str(exc)) from None
    session.commit()
    return _driver(session, driver_id, actor=user.actor, route=request.url.path)
