"""Drivers (``/admin/condutores``): find a driver, see and edit their CNH / ICTP and links.

Every form goes through the JSON API's request models (``api/routes/drivers.py``) and the
registry's functions (``db.fleet.store``): the same rules as ``pontual import drivers`` and the
API, one implementation. A driver's name and CNH are personal data: each page that shows them
writes a ``read_personal_data`` entry first. Each change is audited by the store with the values
before and after. Nothing of the history is deleted: a status period or a link is ended or
corrected (``docs/api.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException
from starlette.responses import Response

from api.audit import record_personal_data_access
from api.deps import SessionDep
from api.routes.drivers import (
    PERSONAL_FIELDS,
    DriverCreate,
    DriverUpdate,
    LinkCreate,
    LinkUpdate,
    PeriodCreate,
    PeriodUpdate,
)
from api.web.admin_base import AdminUser, FormError, form_text
from api.web.admin_base import validate as validate_form
from api.web.templating import render
from db.fleet import store
from enforcement.rulebook import auxiliary_caps_sentence
from fleet._errors import FleetError
from fleet.drivers import CNH_CATEGORIES

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
NOTICES = {
    "criado": "Condutor cadastrado.",
    "alterado": "Dados do condutor alterados; o registro de auditoria guarda os anteriores.",
    "periodo": "Período de situação registrado.",
    "periodo-alterado": "Período alterado; o registro de auditoria guarda o anterior.",
    "vinculo": "Vínculo ao prefixo registrado.",
    "vinculo-alterado": "Vínculo alterado; o registro de auditoria guarda o anterior.",
}
DOCUMENTS = (("cnh", "CNH"), ("ictp", "ICTP (Registro de Condutor)"))
STATUSES = (("regular", "regular"), ("suspensa", "suspensa"), ("cassada", "cassada"))
ROLES = (("titular", "titular (autorizatário condutor)"), ("auxiliar", "auxiliar"))
_DRIVER_FORM = (
    "name", "municipality_code", "cnh_number", "cnh_category", "cnh_valid_until",
    "ictp_valid_until",
)  # fmt: skip


def _url(driver_id: str) -> str:
    return f"/admin/condutores/{quote(driver_id, safe='')}"


def _audit_read(session: Session, web: AdminUser, ids: list[str], route: str) -> None:
    if ids:
        record_personal_data_access(
            session=session,
            actor=web.principal.actor,
            entity="drivers",
            ids=ids,
            fields=PERSONAL_FIELDS,
            route=route,
        )
        session.commit()  # audited before the data leaves


def _attempt(write: Callable[[], None]) -> dict[str, str] | None:
    """Run a form's validation and write; return its errors by field, or None when written."""
    try:
        write()
    except FormError as exc:
        return exc.errors
    except FleetError as exc:
        return {"": str(exc)}
    return None


def _driver_values(form: dict[str, str]) -> dict[str, Any]:
    return {k: form_text(form.get(k)) for k in _DRIVER_FORM}


# --- the list ---------------------------------------------------------------------------------


def _list_page(
    request: Request,
    *,
    web: AdminUser,
    session: Session,
    q: str,
    page: int,
    errors: dict[str, str] | None = None,
    values: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    drivers, count = store.find_drivers(
        session=session,
        query=q.strip() or None,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
    )
    _audit_read(session, web, [d["driver_id"] for d in drivers], request.url.path)
    pages = max(1, -(-count // PAGE_SIZE))
    return render(
        request,
        "admin/condutores.html",
        web=web,
        title="Condutores",
        status_code=status_code,
        drivers=drivers,
        count=count,
        q=q,
        page=page,
        pages=pages,
        page_url=lambda n: f"/admin/condutores?q={quote(q)}&pagina={n}",
        categories=[("", "—"), *((c, c) for c in CNH_CATEGORIES)],
        errors=errors or {},
        values=values or {},
    )


@router.get("/admin/condutores", name="web_admin_drivers")
def drivers(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    q: Annotated[str, Query(max_length=100)] = "",
    pagina: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    """Find drivers by id, name or CNH number; the form of a new driver."""
    return _list_page(request, web=web, session=session, q=q, page=pagina)


@router.post("/admin/condutores", name="web_admin_driver_create")
def create_driver(
    request: Request,
    web: AdminUser,
    session: SessionDep,
    driver_id: Annotated[str, Form(max_length=200)] = "",
    name: Annotated[str, Form(max_length=400)] = "",
    municipality_code: Annotated[str, Form(max_length=40)] = "",
    cnh_number: Annotated[str, Form(max_length=100)] = "",
    cnh_category: Annotated[str, Form(max_length=10)] = "",
    cnh_valid_until: Annotated[str, Form(max_length=40)] = "",
    ictp_valid_until: Annotated[str, Form(max_length=40)] = "",
    synthetic: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    """Register a driver (``DriverCreate`` then ``store.create_driver``)."""
    posted = {
        "driver_id": driver_id,
        "name": name,
        "municipality_code": municipality_code,
        "cnh_number": cnh_number,
        "cnh_category": cnh_category,
        "cnh_valid_until": cnh_valid_until,
        "ictp_valid_until": ictp_valid_until,
        "synthetic": synthetic,
    }

    def write() -> None:
        values = _driver_values(posted) | {
            "driver_id": driver_id.strip(),
            "synthetic": bool(synthetic),
        }
        body = validate_form(DriverCreate, values)
        if store.driver_record(session=session, driver_id=body.driver_id) is not None:
            raise FormError({"driver_id": "já está no cadastro; abra o condutor para alterá-lo"})
        store.create_driver(session=session, actor=web.principal.actor, **body.model_dump())

    errors = _attempt(write)
    if errors is None:
        session.commit()
        return RedirectResponse(f"{_url(driver_id.strip())}?aviso=criado", status_code=303)
    session.rollback()
    return _list_page(
        request,
        web=web,
        session=session,
        q="",
        page=1,
        errors=errors,
        values=posted,
        status_code=422,
    )


# --- one driver -------------------------------------------------------------------------------


def _record_or_404(session: Session, driver_id: str) -> dict[str, Any]:
    record = store.driver_record(session=session, driver_id=driver_id)
    if record is None:
        raise HTTPException(404)
    return record


def _driver_page(
    request: Request,
    *,
    web: AdminUser,
    session: Session,
    driver_id: str,
    errors: dict[str, dict[str, str]] | None = None,
    posted: dict[str, dict[str, str]] | None = None,
    notice: str | None = None,
    status_code: int = 200,
) -> Response:
    record = _record_or_404(session, driver_id)
    _audit_read(session, web, [driver_id], request.url.path)
    stored = {k: ("" if record[k] is None else str(record[k])) for k in _DRIVER_FORM} | {
        "synthetic": "on" if record["synthetic"] else ""
    }
    return render(
        request,
        "admin/condutor.html",
        web=web,
        title=f"Condutor {driver_id}",
        status_code=status_code,
        driver=record,
        url=_url(driver_id),
        form=(posted or {}).get("editar", stored),
        errors=errors or {},
        posted=posted or {},
        documents=DOCUMENTS,
        statuses=STATUSES,
        roles=ROLES,
        auxiliary_caps=auxiliary_caps_sentence(),
        categories=[("", "—"), *((c, c) for c in CNH_CATEGORIES)],
        notice=notice,
    )


@router.get("/admin/condutores/{driver_id}", name="web_admin_driver")
def driver_page(
    request: Request, driver_id: str, web: AdminUser, session: SessionDep, aviso: str = ""
) -> Response:
    """One driver: identity and CNH, status periods of the CNH and ICTP, links to prefixos."""
    return _driver_page(
        request, web=web, session=session, driver_id=driver_id, notice=NOTICES.get(aviso)
    )


def _finish(
    request: Request,
    *,
    web: AdminUser,
    session: Session,
    driver_id: str,
    write: Callable[[], None],
    form_name: str,
    posted: dict[str, str],
    notice: str,
) -> Response:
    """Write and go back to the driver's page with a notice, or show the form's errors (422)."""
    _record_or_404(session, driver_id)
    errors = _attempt(write)
    if errors is None:
        session.commit()
        return RedirectResponse(f"{_url(driver_id)}?aviso={notice}", status_code=303)
    session.rollback()
    return _driver_page(
        request,
        web=web,
        session=session,
        driver_id=driver_id,
        errors={form_name: errors},
        posted={form_name: posted},
        status_code=422,
    )


@router.post("/admin/condutores/{driver_id}", name="web_admin_driver_update")
def update_driver(
    request: Request,
    driver_id: str,
    web: AdminUser,
    session: SessionDep,
    name: Annotated[str, Form(max_length=400)] = "",
    municipality_code: Annotated[str, Form(max_length=40)] = "",
    cnh_number: Annotated[str, Form(max_length=100)] = "",
    cnh_category: Annotated[str, Form(max_length=10)] = "",
    cnh_valid_until: Annotated[str, Form(max_length=40)] = "",
    ictp_valid_until: Annotated[str, Form(max_length=40)] = "",
    synthetic: Annotated[str, Form(max_length=10)] = "",
    reason: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    """Change a driver's fields (``DriverUpdate`` then ``store.update_driver``)."""
    posted = {
        "name": name,
        "municipality_code": municipality_code,
        "cnh_number": cnh_number,
        "cnh_category": cnh_category,
        "cnh_valid_until": cnh_valid_until,
        "ictp_valid_until": ictp_valid_until,
        "synthetic": synthetic,
        "reason": reason,
    }

    def write() -> None:
        values = _driver_values(posted) | {"synthetic": bool(synthetic)}
        if values["name"] is None:
            raise FormError({"name": "campo obrigatório"})
        body = validate_form(DriverUpdate, values | {"reason": form_text(reason)})
        fields = body.model_dump()
        store.update_driver(
            session=session,
            driver_id=driver_id,
            actor=web.principal.actor,
            reason=fields.pop("reason"),
            **fields,
        )

    return _finish(
        request,
        web=web,
        session=session,
        driver_id=driver_id,
        write=write,
        form_name="editar",
        posted=posted,
        notice="alterado",
    )


@router.post("/admin/condutores/{driver_id}/periodos", name="web_admin_driver_period")
def add_period(
    request: Request,
    driver_id: str,
    web: AdminUser,
    session: SessionDep,
    document: Annotated[str, Form(max_length=20)] = "",
    status: Annotated[str, Form(max_length=20)] = "",
    valid_from: Annotated[str, Form(max_length=40)] = "",
    valid_until: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Record a CNH / ICTP status period (``PeriodCreate`` then ``store.add_driver_period``)."""
    posted = {
        "document": document,
        "status": status,
        "valid_from": valid_from,
        "valid_until": valid_until,
    }

    def write() -> None:
        body = validate_form(PeriodCreate, {k: form_text(v) for k, v in posted.items()})
        store.add_driver_period(
            session=session, driver_id=driver_id, actor=web.principal.actor, **body.model_dump()
        )

    return _finish(
        request,
        web=web,
        session=session,
        driver_id=driver_id,
        write=write,
        form_name="periodo",
        posted=posted,
        notice="periodo",
    )


@router.post(
    "/admin/condutores/{driver_id}/periodos/{period_id}", name="web_admin_driver_period_update"
)
def update_period(
    request: Request,
    driver_id: str,
    period_id: int,
    web: AdminUser,
    session: SessionDep,
    status: Annotated[str, Form(max_length=20)] = "",
    valid_from: Annotated[str, Form(max_length=40)] = "",
    valid_until: Annotated[str, Form(max_length=40)] = "",
    reason: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    """End or correct a status period (``PeriodUpdate`` then ``store.update_driver_period``)."""
    posted = {
        "status": status,
        "valid_from": valid_from,
        "valid_until": valid_until,
        "reason": reason,
    }
    if not any(p["period_id"] == period_id for p in _record_or_404(session, driver_id)["periods"]):
        raise HTTPException(404)

    def write() -> None:
        body = validate_form(PeriodUpdate, {k: form_text(v) for k, v in posted.items()})
        fields = body.model_dump()
        if fields["status"] is None:
            raise FormError({"status": "campo obrigatório"})
        store.update_driver_period(
            session=session,
            driver_id=driver_id,
            period_id=period_id,
            actor=web.principal.actor,
            reason=fields.pop("reason"),
            **fields,
        )

    return _finish(
        request,
        web=web,
        session=session,
        driver_id=driver_id,
        write=write,
        form_name=f"periodo:{period_id}",
        posted=posted,
        notice="periodo-alterado",
    )


@router.post("/admin/condutores/{driver_id}/vinculos", name="web_admin_driver_link")
def add_link(
    request: Request,
    driver_id: str,
    web: AdminUser,
    session: SessionDep,
    vehicle_id: Annotated[str, Form(max_length=200)] = "",
    role: Annotated[str, Form(max_length=20)] = "",
    valid_from: Annotated[str, Form(max_length=40)] = "",
    valid_until: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Link the driver to a prefixo (``LinkCreate`` then ``store.add_driver_link``)."""
    posted = {
        "vehicle_id": vehicle_id,
        "role": role,
        "valid_from": valid_from,
        "valid_until": valid_until,
    }

    def write() -> None:
        body = validate_form(LinkCreate, {k: form_text(v) for k, v in posted.items()})
        store.add_driver_link(
            session=session, driver_id=driver_id, actor=web.principal.actor, **body.model_dump()
        )

    return _finish(
        request,
        web=web,
        session=session,
        driver_id=driver_id,
        write=write,
        form_name="vinculo",
        posted=posted,
        notice="vinculo",
    )


@router.post(
    "/admin/condutores/{driver_id}/vinculos/{link_id}", name="web_admin_driver_link_update"
)
def update_link(
    request: Request,
    driver_id: str,
    link_id: int,
    web: AdminUser,
    session: SessionDep,
    role: Annotated[str, Form(max_length=20)] = "",
    valid_from: Annotated[str, Form(max_length=40)] = "",
    valid_until: Annotated[str, Form(max_length=40)] = "",
    reason: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    """End or correct a link (``LinkUpdate`` then ``store.update_driver_link``)."""
    posted = {"role": role, "valid_from": valid_from, "valid_until": valid_until, "reason": reason}
    if not any(k["link_id"] == link_id for k in _record_or_404(session, driver_id)["links"]):
        raise HTTPException(404)

    def write() -> None:
        body = validate_form(LinkUpdate, {k: form_text(v) for k, v in posted.items()})
        fields = body.model_dump()
        for required in ("role", "valid_from"):
            if fields[required] is None:
                raise FormError({required: "campo obrigatório"})
        store.update_driver_link(
            session=session,
            driver_id=driver_id,
            link_id=link_id,
            actor=web.principal.actor,
            reason=fields.pop("reason"),
            **fields,
        )

    return _finish(
        request,
        web=web,
        session=session,
        driver_id=driver_id,
        write=write,
        form_name=f"vinculo:{link_id}",
        posted=posted,
        notice="vinculo-alterado",
    )
