"""The supervisor de ponto's view: their stands now, intruders, licensees' presence and contacts.

Supervisors see only their own stands (403 for the others; the list is filtered); admins see
all. Every answer is computed by ``db/stands/queries.py`` for the one stand asked, so nothing of
another stand is read. The contact list (POA art. 43, parágrafo único) is personal data: each
read is written to the audit log before the answer leaves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Annotated, Any, cast

import pandas as pd
from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from api._errors import InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.audit import record_personal_data_access
from api.deps import SessionDep, SettingsDep, require_roles, supervisor_scope
from api.frame_rows import IntruderRow, PresenceRow, PresenceSummaryRow
from api.schemas import PresentVehicle, QueryDate, error_responses
from geo.calendar import local_today

router = APIRouter(prefix="/api/v1/supervision", tags=["supervisão de ponto"])

Supervisor = Annotated[Principal, Depends(require_roles("admin", "supervisor"))]
MAX_PERIOD_DAYS = 92
CONTACT_FIELDS = ("name", "address", "phone")
_ERRORS = error_responses(401, 403, 404, 422, 503)
Day = Annotated[QueryDate | None, Query(description="Dia local (AAAA-MM-DD); padrão: hoje.")]


class SupervisedStand(BaseModel):
    """A stand of the supervisor, with its licensees today."""

    stand_id: str
    name: str | None
    kind: str | None
    capacity: int | None
    address: str | None
    licensees: int


class SupervisedStands(BaseModel):
    """The caller's stands."""

    data: list[SupervisedStand]
    count: int


class StandQueue(BaseModel):
    """Who is at the stand now (from the fixes of the last ``window_min`` minutes)."""

    stand_id: str
    at: dt.datetime
    capacity: int | None
    vehicles_present: int
    overflow: bool
    intruders: int
    vehicles: list[PresentVehicle]


class IntruderVisit(BaseModel):
    """A visit to the stand by a vehicle without a parking licence for it that day."""

    vehicle_id: str
    arrived_at: dt.datetime
    departed_at: dt.datetime
    dwell_s: float
    boarded: bool | None
    boarding_distance_m: float | None = Field(
        None, description="Do início do taxímetro ao ponto, em metros (0: dentro do ponto)."
    )


class StandIntruders(BaseModel):
    """Intruders over local days ``start``–``end``."""

    stand_id: str
    start: dt.date
    end: dt.date
    data: list[IntruderVisit]
    count: int


class PresenceDay(BaseModel):
    """One licensee's day: operated (seen anywhere), present at the stand, and the visits.

    Not when it was first or last seen that day: a fellow driver's working hours (art. 49 needs
    only whether it operated and its time at the stand).
    """

    vehicle_id: str
    date: dt.date
    operated: bool
    present: bool
    n_visits: int
    presence_s: float
    visits: list[dict[str, Any]]


class PresenceSummary(BaseModel):
    """Per licensee: days licensed, operating, present, and the share present."""

    vehicle_id: str
    days_licensed: int
    days_operating: int
    days_present: int
    share: float | None


class StandPresence(BaseModel):
    """The licensees' presence table (POA art. 49: habitual attendance) over a period."""

    stand_id: str
    start: dt.date
    end: dt.date
    summary: list[PresenceSummary]
    days: list[PresenceDay]


class Licensee(BaseModel):
    """A person linked to a prefixo licensed at the stand."""

    vehicle_id: str
    role: str | None
    name: str | None
    address: str | None
    phone: str | None


class StandLicensees(BaseModel):
    """Name, address and phone of the autorizatários and condutores auxiliares (art. 43)."""

    stand_id: str
    on: dt.date
    data: list[Licensee]
    count: int


def _checked_stand(user: Principal, session: SessionDep, stand_id: str) -> Any:
    from db.stands.registry import get_stand
    from stands._errors import UnknownStandError

    supervisor_scope(user, stand_id)
    try:
        return get_stand(session=session, stand_id=stand_id)
    except UnknownStandError as exc:
        raise NotFoundError(str(exc)) from None


def _today(settings: SettingsDep) -> dt.date:
    return local_today(settings.timezone)


def _period(start: dt.date | None, end: dt.date | None, today: dt.date) -> tuple[dt.date, dt.date]:
    end = end or today
    start = start or end
    if end < start:
        msg = f"período invertido: start {start} depois de end {end}"
        raise InvalidRequestError(msg)
    if (end - start).days + 1 > MAX_PERIOD_DAYS:
        msg = f"período de {(end - start).days + 1} dias; o máximo é {MAX_PERIOD_DAYS}"
        raise InvalidRequestError(msg)
    return start, end


def _value(value: Any) -> Any:
    if value is None or (not isinstance(value, list | dict | tuple) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


@router.get("/stands", response_model=SupervisedStands, responses=_ERRORS)
def my_stands(user: Supervisor, session: SessionDep, settings: SettingsDep) -> Any:
    """Os pontos do supervisor (admin: todos os ativos), com o número de licenciados hoje."""
    from db.stands.queries import licence_frame, stands_frame

    ids = sorted(user.stand_ids) if user.role == "supervisor" else None
    stands = stands_frame(session=session, stand_ids=ids)
    licences = licence_frame(session=session, stand_ids=stands["stand_id"].tolist())
    today = pd.Timestamp(_today(settings))
    valid = (licences["valid_from"].isna() | (licences["valid_from"] <= today)) & (
        licences["valid_until"].isna() | (licences["valid_until"] >= today)
    )
    counts = licences[valid].groupby("stand_id")["vehicle_id"].nunique()
    data = [
        SupervisedStand(
            stand_id=r.stand_id,
            name=_value(r.name),
            kind=_value(r.kind),
            capacity=_value(r.capacity),
            address=_value(r.address),
            licensees=int(counts.get(r.stand_id, 0)),
        )
        for r in stands.itertuples(index=False)
    ]
    return SupervisedStands(data=data, count=len(data))


@router.get("/stands/{stand_id}/occupancy", response_model=StandQueue, responses=_ERRORS)
def stand_queue(
    stand_id: str,
    user: Supervisor,
    session: SessionDep,
    settings: SettingsDep,
    window_min: Annotated[int, Query(ge=1, le=1440)] = 120,
) -> Any:
    """Quem está no ponto agora, em ordem de fila, e quem não tem licença."""
    from api.queries import queue_now

    stand = _checked_stand(user, session, stand_id)
    now, vehicles = queue_now(
        session=session, stand_id=stand_id, window_min=window_min, timezone=settings.timezone
    )
    return StandQueue(
        stand_id=stand_id,
        at=now,
        capacity=stand.capacity,
        vehicles_present=len(vehicles),
        overflow=stand.capacity is not None and len(vehicles) > stand.capacity,
        intruders=sum(v.licensed is False for v in vehicles),
        vehicles=vehicles,
    )


@router.get("/stands/{stand_id}/intruders", response_model=StandIntruders, responses=_ERRORS)
def stand_intruders(
    stand_id: str,
    user: Supervisor,
    session: SessionDep,
    settings: SettingsDep,
    start: Day = None,
    end: Day = None,
) -> Any:
    """Visitas ao ponto de veículos sem licença de estacionamento nele, no período."""
    from db.stands.queries import supervisor_intruders

    _checked_stand(user, session, stand_id)
    start, end = _period(start, end, _today(settings))
    frame = supervisor_intruders(
        session=session, stand_ids=[stand_id], start=start, end=end, timezone=settings.timezone
    )
    data = [
        IntruderVisit(
            vehicle_id=str(r.vehicle_id),
            arrived_at=r.arrived_at.to_pydatetime(),
            departed_at=r.departed_at.to_pydatetime(),
            dwell_s=float(r.dwell_s),
            boarded=_value(r.boarded),
            boarding_distance_m=_value(r.boarding_distance_m),
        )
        for r in cast("Iterator[IntruderRow]", frame.itertuples(index=False))
    ]
    return StandIntruders(stand_id=stand_id, start=start, end=end, data=data, count=len(data))


@router.get("/stands/{stand_id}/presence", response_model=StandPresence, responses=_ERRORS)
def stand_presence(
    stand_id: str,
    user: Supervisor,
    session: SessionDep,
    settings: SettingsDep,
    start: Day = None,
    end: Day = None,
) -> Any:
    """Presença dos licenciados no ponto, dia a dia: dias presentes × dias em operação."""
    from db.stands.queries import supervisor_presence
    from stands.presence import presence_summary

    _checked_stand(user, session, stand_id)
    start, end = _period(start, end, _today(settings))
    table = supervisor_presence(
        session=session, stand_ids=[stand_id], start=start, end=end, timezone=settings.timezone
    )
    summary = presence_summary(table) if len(table) else table.iloc[:0]
    days = [
        PresenceDay(
            vehicle_id=str(r.vehicle_id),
            date=pd.Timestamp(r.date).date(),
            operated=bool(r.operated),
            present=bool(r.present),
            n_visits=int(r.n_visits),
            presence_s=float(r.presence_s),
            visits=list(r.visits),
        )
        for r in cast("Iterator[PresenceRow]", table.itertuples(index=False))
    ]
    rows = [
        PresenceSummary(
            vehicle_id=str(r.vehicle_id),
            days_licensed=int(r.days_licensed),
            days_operating=int(r.days_operating),
            days_present=int(r.days_present),
            share=_value(r.share),
        )
        for r in cast("Iterator[PresenceSummaryRow]", summary.itertuples(index=False))
    ]
    return StandPresence(stand_id=stand_id, start=start, end=end, summary=rows, days=days)


@router.get("/stands/{stand_id}/licensees", response_model=StandLicensees, responses=_ERRORS)
def stand_licensees(
    stand_id: str,
    request: Request,
    user: Supervisor,
    session: SessionDep,
    settings: SettingsDep,
    on: Day = None,
) -> Any:
    """Nome, endereço e telefone dos autorizatários e auxiliares do ponto (art. 43, par. único).

    Dado pessoal: cada leitura fica no registro de auditoria.
    """
    from db.stands.queries import supervisor_contacts

    _checked_stand(user, session, stand_id)
    day = on or _today(settings)
    frame = supervisor_contacts(session=session, stand_ids=[stand_id], on=day)
    data = [
        Licensee(
            vehicle_id=str(r.vehicle_id),
            role=_value(r.role),
            name=_value(r.name),
            address=_value(r.address),
            phone=_value(r.phone),
        )
        for r in frame.itertuples(index=False)
    ]
    if data:
        record_personal_data_access(
            session=session,
            actor=user.actor,
            entity="stand_licensees",
            ids=sorted({d.vehicle_id for d in data}),
            fields=CONTACT_FIELDS,
            route=request.url.path,
        )
        session.commit()  # audited before the data leaves
    return StandLicensees(stand_id=stand_id, on=day, data=data, count=len(data))
