"""Pages of the Meus pontos area (``/supervisao``): open to the roles of :data:`ROLES`.

- ``/supervisao``: the caller's stands (a supervisor's own; an admin's: every active stand,
  filtered with ``q``), each with its supervisor status (POA art. 50, III);
- ``/supervisao/pontos/{stand_id}``: a stand now (the queue and since when, intruders,
  occupancy against capacity), refreshed live by ``static/js/supervisao.js`` from the fragment
  below; its supervisor status; each licensee's presence over the last 30 days (art. 49);
- ``/supervisao/pontos/{stand_id}/agora``: the "now" panel alone (an HTML fragment the page
  polls every :data:`LIVE_INTERVAL_S` seconds while visible);
- ``/supervisao/pontos/{stand_id}/contatos``: name, address and phone of the stand's licensees
  (art. 43, parágrafo único): personal data, each reading written to the audit log first.

The figures are the JSON API's: its handlers (``api.routes.supervision``) are called as
functions, with its scope check (a supervisor asking for another stand gets the 403 page and
nothing of that stand is read). Queues, prefixos and presence are not personal data (README);
the contact list is.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import pandas as pd
from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import text
from starlette.responses import Response

from api._errors import ForbiddenError, NotFoundError
from api.deps import SessionDep, SettingsDep, supervisor_scope
from api.queries import SILENCE_LOOKBACK_DAYS, latest_fix_at
from api.routes import supervision as api
from api.web import formats as fmt
from api.web.auth import WebSession, require_web_roles
from api.web.pages import error_page
from api.web.templating import render
from geo.calendar import local_today

router = APIRouter(include_in_schema=False)

ROLES = ("admin", "supervisor")
"""Who may open this area (as in the API's authorisation)."""
SupervisorUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]

LIVE_INTERVAL_S = 5
"""Seconds between two refreshes of the "now" panel (paused while the tab is hidden)."""
QUEUE_WINDOW_MIN = 120
"""Fixes of the last this many minutes make the queue (the API's default)."""
MAX_LISTED = 60
"""Stands listed at most on ``/supervisao`` (an admin narrows the list with ``q``)."""
ART_49 = (
    "Art. 49. O não comparecimento regular e habitual do prefixo ao ponto fixo ensejará a "
    "cassação de sua licença de estacionamento."
)
ART_50_III = (
    "III - por ausência de supervisor devidamente eleito, por prazo superior a 90 (noventa) dias."
)
"""Verbatim, Porto Alegre's decree of 2019 (``enforcement/laws/``)."""

Search = Annotated[str, Query(max_length=100, description="Parte do número ou do nome")]
VehicleSearch = Annotated[str, Query(max_length=40, description="Parte do prefixo")]


# --- the supervisor's 90-day status (art. 50, III) ------------------------------------------


@dataclass(frozen=True)
class SupervisorStatus:
    """A stand's supervisor status on a day, as said to people."""

    tone: str
    """``ok``, ``warn``, ``bad`` or ``info`` (the colour of the notice)."""
    headline: str
    details: tuple[str, ...]
    days_without: int | None
    days_left: int | None


def supervisor_statuses(
    *, session: Any, stands: list[api.SupervisedStand], today: dt.date
) -> dict[str, SupervisorStatus]:
    """Return each stand's status under the 90-day rule (``stands.supervisors``), by stand_id."""
    from db.stands.queries import licence_frame, supervisors_frame
    from stands.licences import LICENCE_COLUMNS
    from stands.supervisors import MAX_DAYS_WITHOUT_SUPERVISOR, supervisor_lapses

    ids = [s.stand_id for s in stands]
    if not ids:
        return {}
    frame = pd.DataFrame(
        {"stand_id": pd.Series(ids, dtype="str"), "kind": [s.kind for s in stands]}
    )
    terms = supervisors_frame(session=session, stand_ids=ids)
    licences = licence_frame(session=session, stand_ids=ids)[list(LICENCE_COLUMNS)]
    lapses = supervisor_lapses(
        frame, terms, licences, as_of=today, only_overdue=False, include_unrecorded=True
    )
    lapse_of = {str(r["stand_id"]): r for r in lapses.to_dict("records")}
    day = pd.Timestamp(today)
    out: dict[str, SupervisorStatus] = {}
    for stand in stands:
        if stand.kind != "fixo":
            kind = "livre" if stand.kind == "livre" else None
            out[stand.stand_id] = SupervisorStatus(
                tone="info",
                headline=(
                    "Ponto livre: a regra dos 90 dias (art. 50, III) vale para pontos fixos."
                    if kind
                    else "Tipo do ponto não informado no cadastro (fixo ou livre); a regra dos "
                    "90 dias (art. 50, III) vale para pontos fixos."
                ),
                details=(),
                days_without=None,
                days_left=None,
            )
            continue
        lapse = lapse_of.get(stand.stand_id)
        if lapse is None:  # a homologated supervisor is in office today
            mine = terms[terms["stand_id"] == stand.stand_id]
            serving = mine[
                mine["homologated_on"].notna()
                & (mine["homologated_on"] <= day)
                & (mine["until"].isna() | (mine["until"] >= day))
            ].sort_values("homologated_on")
            term = serving.iloc[-1]
            details = [
                f"Eleição em {fmt.date(_day(term['elected_on']))}; homologação em "
                f"{fmt.date(_day(term['homologated_on']))}."
            ]
            until = _day(term["until"])
            if until is not None:
                left = (until - today).days
                details.append(
                    f"Mandato até {fmt.date(until)} ({fmt.plural(left, 'dia', 'dias')}); "
                    f"depois, o ponto tem {MAX_DAYS_WITHOUT_SUPERVISOR} dias para eleger e "
                    "homologar outro(a) supervisor(a)."
                )
            out[stand.stand_id] = SupervisorStatus(
                tone="ok",
                headline="Supervisor(a) homologado(a) em exercício: o ponto está em dia.",
                details=tuple(details),
                days_without=0,
                days_left=None,
            )
            continue
        details = []
        pending = _day(lapse["pending_elected_on"])
        if pending is not None:
            details.append(
                f"Eleição de {fmt.date(pending)} aguardando homologação da EPTC (art. 42, § 2º): "
                "só a homologação conta."
            )
        if pd.isna(lapse["days_without"]):
            out[stand.stand_id] = SupervisorStatus(
                tone="warn",
                headline="Nenhum(a) supervisor(a) homologado(a) registrado(a) para este ponto: "
                "não dá para contar o prazo de 90 dias (art. 50, III).",
                details=tuple(details),
                days_without=None,
                days_left=None,
            )
            continue
        without = int(lapse["days_without"])
        since = _day(lapse["last_supervised_on"])
        details.insert(0, f"Último dia com supervisor(a) homologado(a): {fmt.date(since)}.")
        if bool(lapse["overdue"]):
            late = without - MAX_DAYS_WITHOUT_SUPERVISOR
            headline = (
                f"Sem supervisor(a) há {fmt.plural(without, 'dia', 'dias')}: o prazo de "
                f"{MAX_DAYS_WITHOUT_SUPERVISOR} dias (art. 50, III) venceu há "
                f"{fmt.plural(late, 'dia', 'dias')}; os prefixos do ponto podem ser excluídos."
            )
            tone, left_days = "bad", 0
        else:
            left_days = MAX_DAYS_WITHOUT_SUPERVISOR - without
            headline = (
                f"Sem supervisor(a) há {fmt.plural(without, 'dia', 'dias')}: restam "
                f"{fmt.plural(left_days, 'dia', 'dias')} para eleger e homologar um(a) "
                f"supervisor(a) antes que os prefixos possam ser excluídos (art. 50, III)."
            )
            tone = "warn"
        out[stand.stand_id] = SupervisorStatus(
            tone=tone,
            headline=headline,
            details=tuple(details),
            days_without=without,
            days_left=left_days,
        )
    return out


def _day(value: Any) -> dt.date | None:
    return None if value is None or pd.isna(value) else pd.Timestamp(value).date()


# --- the "now" panel and the presence table ----------------------------------------------


def latest_fix_day(
    *, session: Any, vehicle_ids: list[str], until: dt.date, timezone: str
) -> dt.date | None:
    """Return the latest local day up to ``until`` with a fix of one of ``vehicle_ids``.

    None when none of the vehicles has a fix up to ``until`` (:func:`latest_fix_at`).
    """
    zone = ZoneInfo(timezone)
    before = dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), tzinfo=zone)
    found = latest_fix_at(session=session, vehicle_ids=vehicle_ids, before=before)
    return None if found is None else found.astimezone(zone).date()


def matches_prefixo(vehicle_id: str, wanted: str) -> bool:
    """Say whether ``wanted`` (any case, any part, separators aside) is in the prefixo.

    "4227", "sim4227" and "SIM 4227" find "SIM-4227".
    """

    def letters(text: str) -> str:
        return "".join(c for c in fmt.plain(text) if c.isalnum())

    needle = letters(wanted)
    return not needle or needle in letters(vehicle_id)


def now_panel(
    *, web: WebSession, session: Any, settings: Any, stand_id: str, capacity: int | None
) -> dict[str, Any]:
    """Return the queue now (``GET /api/v1/supervision/stands/{id}/occupancy``) for the page."""
    queue = api.stand_queue(stand_id, web.principal, session, settings, QUEUE_WINDOW_MIN)
    tz = settings.timezone
    vehicles = [
        {
            "position": v.position,
            "vehicle_id": v.vehicle_id,
            "since": fmt.clock(v.arrived_at, timezone=tz),
            "waited": fmt.duration(v.waited_s),
            "licensed": v.licensed,
        }
        for v in queue.vehicles
    ]
    present = queue.vehicles_present
    parts = [f"{fmt.plural(present, 'veículo', 'veículos')} no ponto"]
    if queue.capacity is not None:
        parts[0] += f" para {fmt.plural(queue.capacity, 'vaga', 'vagas')}"
    parts.append(
        "nenhum intruso"
        if queue.intruders == 0
        else fmt.plural(queue.intruders, "intruso (sem licença)", "intrusos (sem licença)")
    )
    if queue.overflow:
        parts.append("acima da capacidade")
    # A dead feed must not read as an empty stand: the licensees' latest fix, if it is older
    # than the positions the panel reads.
    latest = latest_fix_at(
        session=session,
        vehicle_ids=_licensees_ever(session, stand_id),
        before=queue.at + dt.timedelta(seconds=1),
        after=queue.at - dt.timedelta(days=SILENCE_LOOKBACK_DAYS),  # polled every 5 s
    )
    window = dt.timedelta(minutes=QUEUE_WINDOW_MIN)
    silent = latest is None or latest < queue.at - window
    return {
        "silent": silent,
        "silent_since": fmt.local_datetime(latest, timezone=tz) if latest else None,
        "lookback_days": SILENCE_LOOKBACK_DAYS,
        "stand_id": stand_id,
        "at": fmt.clock_s(queue.at, timezone=tz),
        "capacity": queue.capacity if queue.capacity is not None else capacity,
        "present": present,
        "intruders": queue.intruders,
        "overflow": queue.overflow,
        "vehicles": vehicles,
        "summary": "; ".join(parts) + ".",
        "window_min": QUEUE_WINDOW_MIN,
        "zone": fmt.zone_label(tz),
    }


def presence_view(
    *,
    web: WebSession,
    session: Any,
    settings: Any,
    stand_id: str,
    today: dt.date,
    prefixo: str = "",
) -> dict[str, Any]:
    """Each licensee's presence over the rule's window (art. 49), with the rule's verdict.

    ``prefixo`` (part of a prefixo, any case) keeps the matching licensees only; the rule is
    judged on each licensee alone, so the verdicts do not change.
    """
    from stands.near import (
        DEFAULT_MIN_SILENCE_S,
        DEFAULT_SILENT_REACH_M,
        MAX_SILENCE_S,
        STAND_REACH_M,
    )
    from stands.presence import DEFAULT_MIN_PRESENCE_S
    from tracking.detectors.habitual_absence import (
        DEFAULT_MIN_OPERATING_DAYS,
        DEFAULT_MIN_PRESENCE_SHARE,
        DEFAULT_WINDOW_DAYS,
        habitually_absent,
    )

    start = today - dt.timedelta(days=DEFAULT_WINDOW_DAYS - 1)
    table = api.stand_presence(stand_id, web.principal, session, settings, start, today)
    summary = pd.DataFrame(
        [r.model_dump() for r in table.summary],
        columns=list(api.PresenceSummary.model_fields),
    )
    summary["share"] = summary["share"].astype("float64")
    absent = habitually_absent(summary).tolist()
    found = _absence_findings(
        session,
        stand_id,
        start,
        today,
        page_rule={
            "window_days": DEFAULT_WINDOW_DAYS,
            "min_operating_days": DEFAULT_MIN_OPERATING_DAYS,
            "min_presence_share": DEFAULT_MIN_PRESENCE_SHARE,
        },
    )
    days = [start + dt.timedelta(days=k) for k in range(DEFAULT_WINDOW_DAYS)]
    flags = {
        (d.vehicle_id, d.date): (d.operated, d.present, _how_present(d.visits)) for d in table.days
    }
    rows = []
    for row, hit in zip(table.summary, absent, strict=True):
        if not matches_prefixo(row.vehicle_id, prefixo):
            continue
        if hit:
            tone, verdict = "bad", "Ausência habitual: abaixo do limite (art. 49)"
        elif row.days_operating == 0:
            tone, verdict = "info", "Não operou no período"
        elif row.days_operating < DEFAULT_MIN_OPERATING_DAYS:
            tone, verdict = "info", "Poucos dias em operação para avaliar"
        else:
            tone, verdict = "ok", "Regular"
        strip = []
        for day in days:
            flag = flags.get((row.vehicle_id, day))
            code = (
                "none"
                if flag is None
                else ((flag[2] if flag[1] else "absent") if flag[0] else "idle")
            )
            strip.append({"code": code, "label": f"{fmt.date(day)}: {_DAY_LABELS[code]}"})
        rows.append(
            {
                "vehicle_id": row.vehicle_id,
                "days_present": row.days_present,
                "days_operating": row.days_operating,
                "days_licensed": row.days_licensed,
                "share": fmt.percent(row.share),
                "tone": tone,
                "verdict": verdict,
                "strip": strip,
                "away_days": [
                    f"{d:%d/%m}" for d, x in zip(days, strip, strict=True) if x["code"] == "absent"
                ],
                "absent": bool(hit),
                "finding": found.get(row.vehicle_id),
            }
        )
    return {
        "start": fmt.date(start),
        "end": fmt.date(today),
        "window_days": DEFAULT_WINDOW_DAYS,
        "min_operating_days": DEFAULT_MIN_OPERATING_DAYS,
        "min_share": fmt.percent(DEFAULT_MIN_PRESENCE_SHARE),
        "min_presence_min": int(DEFAULT_MIN_PRESENCE_S // 60),
        "reach_m": int(STAND_REACH_M),
        "silent_reach_m": int(DEFAULT_SILENT_REACH_M),
        "min_silence_min": int(DEFAULT_MIN_SILENCE_S // 60),
        "max_silence_h": int(MAX_SILENCE_S // 3600),
        "rows": sorted(rows, key=lambda r: (not r["absent"], r["days_operating"] == 0)),
        "absent": sum(r["absent"] for r in rows),
        "licensees": len(table.summary),
    }


def _absence_findings(
    session: Any, stand_id: str, start: dt.date, end: dt.date, *, page_rule: dict[str, float]
) -> dict[str, str]:
    """Per licensee, the enforcement's latest art. 49 finding at the stand in [start, end].

    Told with the limits it was judged by; where they differ from ``page_rule`` (the page's;
    a run's ``--thresholds``), said so, lest the row read as two verdicts of one rule.
    """
    rows = session.execute(
        text(
            "SELECT DISTINCT ON (vehicle_id) vehicle_id, details -> 'window' AS w, "
            "details -> 'thresholds' AS t FROM findings "
            "WHERE kind = 'habitual_absence' AND stand_id = :s AND vehicle_id IS NOT NULL "
            "AND details -> 'window' ->> 'start' <= :end "
            "AND details -> 'window' ->> 'end' >= :start "
            "ORDER BY vehicle_id, details -> 'window' ->> 'end' DESC"
        ),
        {"s": stand_id, "start": start.isoformat(), "end": end.isoformat()},
    ).all()
    out = {}
    for vehicle_id, window, limits in rows:
        limits = limits or {}
        rule = (
            f"janela de {limits['window_days']} dias, ao menos {limits['min_operating_days']} "
            f"em operação, presença em menos de {fmt.percent(limits['min_presence_share'])}"
            if {"window_days", "min_operating_days", "min_presence_share"} <= set(limits)
            else "limites não registrados"
        )
        other = any(limits.get(k, v) != v for k, v in page_rule.items())
        out[str(vehicle_id)] = (
            f"Achado da fiscalização: ausência habitual de {fmt.iso_date(window.get('start'))} "
            f"a {fmt.iso_date(window.get('end'))} "
            + (f"por outra regra que a desta tabela ({rule})" if other else f"({rule})")
        )
    return out


def _how_present(visits: list[dict[str, Any]]) -> str:
    """How a present day counted: a visit in the stand, else beside it (``stands.near``)."""
    counted = [v.get("how") for v in visits if v.get("counted")]
    if not counted or None in counted:
        return "present"
    return "near" if "perto" in counted else "silent"


def boarded_text(boarded: bool | None, distance_m: float | None) -> str:
    """Say whether a visit boarded, and where the meter came on: in the stand or past its edge.

    A visit's boarding counts up to ``stands.visits``' grace past the edge (a passenger who
    walked from the stand); a meter started there may also be a hail down the street after a
    red light, which the supervisor should see as such.
    """
    if boarded is None:
        return "não se sabe"
    if not boarded:
        return "não"
    if distance_m is None or distance_m <= 0:
        return "sim, no ponto"
    return f"sim, taxímetro ligado a {fmt.integer(round(distance_m))} m do ponto, já fora dele"


_DAY_LABELS = {
    "present": "no ponto",
    "near": "no ponto: esperou ao lado (fila além do ponto)",
    "silent": "no ponto: rastreador em silêncio junto ao ponto (carro desligado)",
    "absent": "operou fora do ponto",
    "idle": "não operou",
    "none": "sem licença neste dia",
}


# --- routes -------------------------------------------------------------------------------


def _refused(request: Request, web: WebSession, stand_id: str) -> Response:
    return error_page(
        request,
        web=web,
        status_code=403,
        title="Acesso negado",
        message=f"O ponto {fmt.clipped(stand_id)} não está entre os seus pontos: você não tem "
        "acesso a esta página.",
    )


def _missing(request: Request, web: WebSession, stand_id: str) -> Response:
    return error_page(
        request,
        web=web,
        status_code=404,
        title="Ponto não encontrado",
        message=f"Não há ponto com o número {fmt.clipped(stand_id)}.",
    )


def _stand(web: WebSession, session: Any, stand_id: str) -> Any:
    """Return the stand, after the API's scope check (ForbiddenError, NotFoundError)."""
    from db.stands.registry import get_stand
    from stands._errors import UnknownStandError

    supervisor_scope(web.principal, stand_id)
    try:
        return get_stand(session=session, stand_id=stand_id)
    except UnknownStandError as exc:
        raise NotFoundError(str(exc)) from None


@router.get("/supervisao", name="web_supervisor_home")
def home(
    request: Request,
    web: SupervisorUser,
    session: SessionDep,
    settings: SettingsDep,
    q: Search = "",
) -> Response:
    """List the caller's stands, each with its supervisor status (art. 50, III)."""
    mine = api.my_stands(web.principal, session, settings).data
    wanted = q.strip().casefold()
    shown = [
        s
        for s in mine
        if not wanted or wanted in s.stand_id.casefold() or wanted in (s.name or "").casefold()
    ]
    total = len(shown)
    shown = shown[:MAX_LISTED]
    today = local_today(settings.timezone)
    statuses = supervisor_statuses(session=session, stands=shown, today=today)
    return render(
        request,
        "supervisao/inicio.html",
        web=web,
        title="Meus pontos",
        stands=shown,
        statuses=statuses,
        total=total,
        owned=len(mine),
        q=q,
        searchable=web.principal.role == "admin",
        today=fmt.date(today),
        fmt=fmt,
    )


@router.get("/supervisao/pontos/{stand_id}", name="web_supervisor_stand")
def stand_page(
    request: Request,
    stand_id: str,
    web: SupervisorUser,
    session: SessionDep,
    settings: SettingsDep,
    ate: Annotated[str, Query(max_length=40)] = "",
    prefixo: VehicleSearch = "",
) -> Response:
    """Show a stand now (live), its supervisor status and its licensees' presence.

    The day asked, ``ate`` (a local day; today by default), is the day of the intruders and
    the last of the presence window; when it has no fix of the stand's licensees, the page
    says so and links to the latest day that has one. ``prefixo`` (part of a prefixo, any
    case) narrows the intruders and the presence to the matching vehicles.
    """
    try:
        stand = _stand(web, session, stand_id)
    except ForbiddenError:
        return _refused(request, web, stand_id)
    except NotFoundError:
        return _missing(request, web, stand_id)
    today = local_today(settings.timezone)
    until, until_error = _window_end(ate, today)
    summary = api.SupervisedStand(
        stand_id=stand.stand_id,
        name=stand.name,
        kind=stand.kind,
        capacity=stand.capacity,
        address=stand.address,
        licensees=0,
    )
    status = supervisor_statuses(session=session, stands=[summary], today=today)[stand_id]
    intruders = api.stand_intruders(stand_id, web.principal, session, settings, until, until)
    tz = settings.timezone
    latest = latest_fix_day(
        session=session,
        vehicle_ids=_licensees_ever(session, stand_id),
        until=until,
        timezone=tz,
    )
    no_data = None
    if latest != until:
        no_data = {
            "day": fmt.date(until),
            "latest": fmt.date(latest) if latest is not None else None,
            "href": _stand_href(stand_id, day=latest, prefixo=prefixo) if latest else None,
        }
    panel = now_panel(
        web=web, session=session, settings=settings, stand_id=stand_id, capacity=stand.capacity
    )
    # an intruder in the stand now: its last visit goes on (no departure yet)
    here_now = {x["vehicle_id"] for x in panel["vehicles"]} if until == today else set()
    last_visit = {v.vehicle_id: k for k, v in enumerate(intruders.data)}
    return render(
        request,
        "supervisao/ponto.html",
        web=web,
        title=f"Ponto {stand.stand_id}" + (f" — {stand.name}" if stand.name else ""),
        stand=stand,
        panel=panel,
        live_interval_s=LIVE_INTERVAL_S,
        status=status,
        presence=presence_view(
            web=web,
            session=session,
            settings=settings,
            stand_id=stand_id,
            today=until,
            prefixo=prefixo,
        ),
        presence_until=until.isoformat(),
        presence_until_error=until_error,
        prefixo=prefixo.strip(),
        no_data=no_data,
        intruders_today=[
            {
                "vehicle_id": v.vehicle_id,
                "arrived": fmt.clock(v.arrived_at, timezone=tz),
                "departed": (
                    "ainda no ponto"
                    if v.vehicle_id in here_now and last_visit[v.vehicle_id] == k
                    else fmt.clock(v.departed_at, timezone=tz)
                ),
                "stay": fmt.duration(v.dwell_s),
                "boarded": boarded_text(v.boarded, v.boarding_distance_m),
            }
            for k, v in enumerate(intruders.data)
            if matches_prefixo(v.vehicle_id, prefixo)
        ],
        intruders_total=len(intruders.data),
        day=fmt.date(until),
        is_today=until == today,
        zone_label=fmt.zone_label(tz),
        today=fmt.date(today),
        art_49=ART_49,
        art_50_iii=ART_50_III,
        status_code=422 if until_error else 200,
    )


def _licensees_ever(session: Any, stand_id: str) -> list[str]:
    """Vehicles with a parking licence for the stand, in any period."""
    rows = session.execute(
        text("SELECT DISTINCT vehicle_id FROM parking_licences WHERE stand_id = :s"),
        {"s": stand_id},
    ).scalars()
    return [str(v) for v in rows]


def _stand_href(stand_id: str, *, day: dt.date, prefixo: str = "") -> str:
    from urllib.parse import quote, urlencode

    query = {"ate": day.isoformat()} | ({"prefixo": prefixo.strip()} if prefixo.strip() else {})
    return f"/supervisao/pontos/{quote(stand_id, safe='')}?{urlencode(query)}"


def _window_end(text: str, today: dt.date) -> tuple[dt.date, str | None]:
    """Return the presence window's last day typed (``AAAA-MM-DD``), or today and why."""
    if not text.strip():
        return today, None
    try:
        day = dt.date.fromisoformat(text.strip())
    except ValueError:
        return today, f"“{text.strip()[:40]}” não é uma data (AAAA-MM-DD); mostrando até hoje"
    if day > today or day.year < 2000:
        return today, f"{fmt.date(day)} fora do período aceito (2000 até hoje); mostrando até hoje"
    return day, None


@router.get("/supervisao/pontos/{stand_id}/agora", name="web_supervisor_now")
def stand_now(
    request: Request, stand_id: str, web: SupervisorUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """Answer the "now" panel of a stand alone (HTML fragment polled by its page)."""
    try:
        stand = _stand(web, session, stand_id)
    except ForbiddenError:
        return _refused(request, web, stand_id)
    except NotFoundError:
        return _missing(request, web, stand_id)
    panel = now_panel(
        web=web, session=session, settings=settings, stand_id=stand_id, capacity=stand.capacity
    )
    return render(request, "supervisao/_agora.html", web=web, title="Agora", panel=panel)


@router.get("/supervisao/pontos/{stand_id}/contatos", name="web_supervisor_contacts")
def stand_contacts(
    request: Request, stand_id: str, web: SupervisorUser, session: SessionDep, settings: SettingsDep
) -> Response:
    """Name, address and phone of the stand's licensees (art. 43, par. único); audited."""
    try:
        stand = _stand(web, session, stand_id)
    except ForbiddenError:
        return _refused(request, web, stand_id)
    except NotFoundError:
        return _missing(request, web, stand_id)
    # The API's handler writes the audit entry (this page's path) and commits before we answer.
    contacts = api.stand_licensees(stand_id, request, web.principal, session, settings, None)
    return render(
        request,
        "supervisao/contatos.html",
        web=web,
        title=f"Contatos do ponto {stand.stand_id}",
        stand=stand,
        contacts=contacts.data,
        on=fmt.date(contacts.on),
        role_labels={"autorizatario": "Autorizatário(a)", "auxiliar": "Condutor(a) auxiliar"},
    )
