"""Pages of the Fiscalização area (``/fiscal``): the enforcement agent's daily work.

- ``/fiscal``: the inbox: alerts arriving live (SSE from the process's alert hub; a plain list
  without JavaScript), the deadlines due soon and the queue's counts.
- ``/fiscal/alertas``: every alert, paged; asked with ``Accept: text/event-stream`` (as
  ``EventSource`` does), the live stream of the session: ``event: alert`` with ``id: <alert
  id>``; on reconnection the alerts after ``Last-Event-ID`` (or after ``desde``) are sent first.
  An alert announced again (settled or withdrawn) is an ``event: revision`` without an id.
- ``/fiscal/achados/{finding_id}``: a finding's evidence, the proposals resting on it, and the
  form that generates proposals for the stored findings (as ``pontual proposals generate``).
- ``/fiscal/propostas``: the queue, filtered, counted and paged (:mod:`api.proposal_queue`),
  with keyboard triage (``fiscal-fila.js``).
- ``/fiscal/propostas/{proposal_id}``: the evidence as a person needs it (map, fixes and their
  times, measures and thresholds, the article verbatim, the earlier autos) and the workflow's
  steps as forms (:mod:`db.enforcement.workflow` audits each with the web user as actor).
- ``/fiscal/propostas/{proposal_id}/documentos/{documento}``: the auto de infração or the
  notificação de penalidade, as a page or (``?formato=pdf``) a PDF; personal data audited.

Open to the roles of :data:`ROLES`; every form carries the session's CSRF token.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Annotated, Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import shapely
from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, StreamingResponse
from geoalchemy2.shape import to_shape
from markupsafe import Markup
from pydantic import BaseModel, BeforeValidator, Field, StringConstraints
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session
from starlette.responses import Response

from api import accounts
from api.alerts import (
    ANNOUNCED,
    SESSION_CLOSED,
    AlertHub,
    alert_event,
    list_alerts,
    sse_event,
    stream_event,
)
from api.audit import record_personal_data_access
from api.deps import SessionDep
from api.proposal_queue import (
    QueueFilters,
    proposals_of_findings,
    queue_counts,
    queue_names,
    queue_page,
    queue_total,
)
from api.routes.proposals import DOCUMENT_PERSONAL_FIELDS
from api.web import formats as fmt
from api.web.auth import BACK_STATE, MAX_NEXT_LENGTH, WebSession, require_web_roles, safe_next
from api.web.pages import error_page
from api.web.templating import render
from db.enforcement import workflow
from db.enforcement.models import STATUSES
from enforcement._errors import (
    DocumentError,
    ProposalNotFoundError,
    ReviewDataError,
    TransitionError,
)
from enforcement.coverage import unset_limit
from enforcement.documents import (
    DEADLINE_LABELS,
    DOCUMENT_KINDS,
    LABELS,
    MAP_CAPTION,
    NO_AUTO,
    STATUS_LABELS,
    TITLES,
    EvidenceFinding,
    banner,
    document_fields,
    evidence_summary,
    fix_vehicles,
    has_penalty,
    is_draft,
    place_municipality,
    render_map_svg,
    render_pdf,
    shown_end,
)
from enforcement.rulebook import Rule, Rulebook, bundled_rulebooks
from fleet.dates import REGISTRY_DATE_MIN, registry_date_max
from geo.calendar import DEFAULT_TIMEZONE, UF_TIMEZONES
from maps.findings import METER_LABELS
from tracking.detectors.findings import (
    KINDS,
    PROVISIONAL,
    WITHDRAWN,
    finding_name,
    findings_name,
    kind_filter_name,
    kind_name,
)

router = APIRouter(include_in_schema=False)

ROLES = ("admin", "agent")
"""Who may open this area (as in the API's authorisation)."""
AgentUser = Annotated[WebSession, Depends(require_web_roles(*ROLES))]

PAGE_SIZE = 50
"""Proposals (and alerts) per page."""
INBOX_ALERTS = 20
"""Alerts listed on the inbox when it opens."""
DEADLINE_DAYS = 5
"""The inbox lists deadlines due within this many days (and those already missed)."""
KEEPALIVE_S = 15.0
"""A comment line after this much silence on the stream (and the session checked again)."""
RETRY_MS = 3000
"""How long a browser waits before reconnecting a dropped stream."""
REPLAY_MAX = 100
"""At most this many alerts are sent again on reconnection."""
MAX_FIX_ROWS = 300
"""At most this many fixes of a finding in its table (all are on the map)."""
MAX_TEXT = 2000


def _one_line_break(value: Any) -> Any:
    """Return a text box's value with its line breaks as the page counts them.

    Browsers send a break as CRLF, two characters that the box's ``maxlength`` counts as one
    (2,000 typed with 28 breaks arrived as 2,028).
    """
    return value.replace("\r\n", "\n") if isinstance(value, str) else value


TextBox = Annotated[
    Annotated[str, StringConstraints(max_length=MAX_TEXT)],  # "no máximo 2000 caracteres"
    BeforeValidator(_one_line_break),
    Form(),
]
"""A free-text field of a ``<textarea maxlength=MAX_TEXT>``."""
"""Longest answer, reason or grounds a form accepts (characters; 422 page above it)."""
MAX_CHOICE = 40
"""Longest value of a field chosen from a list (a pontuação, a decision)."""
MUNICIPALITY_CODE = 7
"""An IBGE municipality code: seven digits."""
FILTER_TEXT = 64
"""Longest text filter (a kind, a state, a stand, a vehicle) the queue and the alerts read."""
FILTER_VALUE = 40
"""Longest date, percentage, page number or instant of the filters."""
EVENT_STREAM = "text/event-stream"

STATUS_NAMES = {s: STATUS_LABELS.get(s, s).split(" (")[0] for s in STATUSES}
"""Short pt-BR name of each review state (the documents' labels without their note)."""
LINE_LAYERS = (
    ("driven_line", "Trajeto da corrida (GPS)"),
    ("matched_line", "Trajeto ajustado à malha viária"),
    ("reference_line", "Rota de referência (mais curta)"),
    ("fastest_route_line", "Rota mais rápida"),
)
"""Lines a finding's ``details`` may carry (``longer_route``), and their legend."""
LAYER_LABELS = {
    "stand": "Ponto de táxi",
    "area": "Área da constatação",
    "track": "Trajeto registrado (posições do rastreador)",
    "segment": "Linha da constatação (salto ou intervalo sem posições)",
    "fixes": "Posições da constatação (numeradas, com hora)",
    "point": "Local da constatação",
    **dict(LINE_LAYERS),
}
"""Legend of every map layer (the legend lists those drawn)."""
LAYER_ORDER = (
    "stand",
    "area",
    "track",
    "segment",
    *(k for k, _ in LINE_LAYERS),
    "fixes",
    "point",
)
LABELLED_FIXES = 12
"""Up to this many fixes, each carries its number and time on the map (more: on hover)."""

DONE_NOTICES = {
    "confirmar": "Proposta confirmada: auto de infração {auto} lavrado.",
    "descartar": "Proposta descartada, com o motivo registrado.",
    "notificar": (
        "Entrega da notificação de penalidade registrada: o prazo de defesa conta da data da "
        "entrega."
    ),
    "defesa": "Defesa registrada.",
    "decidir": "Decisão da defesa registrada.",
    "notificar-decisao": (
        "Entrega da notificação da decisão registrada: o prazo de recurso conta da data da entrega."
    ),
    "finalizar": "Decisão definitiva registrada.",
}
"""Notice of the proposal page after each step (``?feito=<step>``)."""
STEP_OF_FORM = {
    "confirmar": "confirm",
    "descartar": "dismiss",
    "notificar": "notify",
    "defesa": "file_defence",
    "decidir": "decide_defence",
    "notificar-decisao": "notify_decision",
    "finalizar": "finalize",
}
"""The workflow step (``workflow.TRANSITIONS``) each form of the proposal page runs."""
STEP_DATES = {
    "notificar": ("data_entrega", "hora_entrega", "Data da entrega", "Hora da entrega"),
    "defesa": ("data_defesa", "hora_defesa", "Data do protocolo da defesa", "Hora do protocolo"),
    "decidir": ("data_decisao", "hora_decisao", "Data da decisão", "Hora da decisão"),
    "notificar-decisao": (
        "data_notificacao_decisao",
        "hora_notificacao_decisao",
        "Data da entrega da notificação da decisão",
        "Hora da entrega",
    ),
    "finalizar": ("data_final", "hora_final", "Data da decisão definitiva", "Hora da decisão"),
}
"""The forms whose step is dated by the agent: date field, time field and their pt-BR labels."""
STEP_DATE_ERRORS = ("a data do passo", "a data/hora do passo")
"""How the workflow's refusals of a step's date begin (said on the form's date field)."""
STEP_NOON = dt.time(12, 0)
"""A step's instant when only its date is given (the law counts periods in days, not hours)."""


# --- small helpers ----------------------------------------------------------------------------


def _instant(value: Any) -> dt.datetime | None:
    if value is None or value == "":
        return None
    at = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


def local_time(value: Any, zone: ZoneInfo, *, seconds: bool = True) -> str:
    """Return an instant (datetime or ISO text) as local ``dd/mm/aaaa HH:MM[:SS]``, or ''."""
    at = _instant(value)
    if at is None:
        return ""
    return at.astimezone(zone).strftime("%d/%m/%Y %H:%M:%S" if seconds else "%d/%m/%Y %H:%M")


def _percent(value: float | None) -> str:
    return "" if value is None else f"{round(float(value) * 100):d} %"


def _zone(request: Request) -> ZoneInfo:
    return ZoneInfo(request.app.state.settings.timezone)


def _municipalities() -> list[tuple[str, str, str]]:
    """Return ``(code, name, zone)`` of each municipality with a bundled rulebook, by name."""
    seen: dict[str, tuple[str, str, str]] = {}
    for (code, _), book in bundled_rulebooks().items():
        zone = UF_TIMEZONES.get(book.uf, "America/Sao_Paulo")
        seen.setdefault(code, (code, book.municipality_name, zone))
    return sorted(seen.values(), key=lambda m: m[1])


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _with_query(path: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


def proposal_url(proposal_id: str) -> str:
    """Return the path of a proposal's page."""
    return f"/fiscal/propostas/{proposal_id}"


def _queue_link(**params: Any) -> str:
    return _with_query("/fiscal/propostas", **params)


def finding_url(finding_id: str) -> str:
    """Return the path of a finding's page."""
    return f"/fiscal/achados/{finding_id}"


# --- alerts ---------------------------------------------------------------------------------


def alert_view(alert: Mapping[str, Any], zone: ZoneInfo) -> dict[str, Any]:
    """Return what the inbox shows of an alert (also sent, as JSON, on the live stream)."""
    kind = str(alert.get("kind") or "")
    return {
        "alert_id": alert["alert_id"],
        "finding_id": alert["finding_id"],
        "kind": kind,
        "kind_label": finding_name(kind, alert.get("details")),
        "vehicle_id": alert.get("vehicle_id"),
        "who": _alert_vehicles(alert),
        "stand_id": alert.get("stand_id"),
        "when": _alert_span(alert, zone),
        "created": local_time(alert.get("created_at"), zone),
        "confidence": _percent(alert.get("confidence")),
        "href": finding_url(str(alert["finding_id"])),
        "repeat_count": int(alert.get("repeat_count") or 0),
        "unsettled": unsettled(alert.get("details")),
    }


def unsettled(details: Any) -> str | None:
    """Return the badge of a live finding its closed day has not settled, or None."""
    if not isinstance(details, Mapping):
        return None
    if details.get(PROVISIONAL) is True:
        return "provisório"
    return "retirado" if details.get(WITHDRAWN) is True else None


def _alert_span(alert: Mapping[str, Any], zone: ZoneInfo) -> str:
    """Return an alert's finding as local start and end ("04/03/2024 10:00:00 a 10:35:00")."""
    start = local_time(alert.get("started_at"), zone)
    end = local_time(shown_end(alert.get("started_at"), alert.get("ended_at"), zone), zone)
    if not start or not end or end == start:
        return start or end
    day, _, hour = end.partition(" ")
    return f"{start} a {hour if start.startswith(day) else end}"


def place_vehicles(finding: Mapping[str, Any], *, key: str = "vehicles") -> list[str]:
    """Return the vehicles a finding of no one vehicle names (a place's: its evidence's).

    ``key="accused"``: those of them it accuses (the others are evidence only).
    """
    details = finding.get("details")
    named = details.get(key) if isinstance(details, Mapping) else None
    if finding.get("vehicle_id") or not isinstance(named, list):
        return []
    return [str(v) for v in named]


ALERT_VEHICLES_SHOWN = 4
"""Vehicles a place's alert names (the others are counted)."""


def _alert_vehicles(alert: Mapping[str, Any]) -> str:
    """Return who an alert is about: its vehicle, or a place's vehicles (its evidence's)."""
    if alert.get("vehicle_id"):
        return f"Veículo {alert['vehicle_id']}"
    named = place_vehicles(alert)
    if not named:
        return "Veículo não identificado"
    shown = ", ".join(str(v) for v in named[:ALERT_VEHICLES_SHOWN])
    more = len(named) - ALERT_VEHICLES_SHOWN
    return f"Veículos {shown}" + (f" e mais {more}" if more > 0 else "")


def _alerts_with_proposals(
    session: Session, alerts: list[dict[str, Any]], zone: ZoneInfo
) -> list[dict[str, Any]]:
    covered = proposals_of_findings(
        session=session, finding_ids=[str(a["finding_id"]) for a in alerts]
    )
    views = []
    for alert in alerts:
        view = alert_view(alert, zone)
        view["proposals"] = [
            {"href": proposal_url(pid), "proposal_id": pid, "status": STATUS_NAMES.get(s, s)}
            for pid, s in covered.get(str(alert["finding_id"]), [])
        ]
        views.append(view)
    return views


def _deadline_views(session: Session, zone: ZoneInfo) -> list[dict[str, Any]]:
    return [
        {
            "href": proposal_url(w["proposal_id"]),
            "auto_number": w["auto_number"] or w["proposal_id"],
            "deadline": DEADLINE_LABELS.get(w["deadline"], w["deadline"]),
            "due": local_time(w["due"], zone, seconds=False),
            "overdue": w["overdue"],
            "provision": w["provision"] or "",
            "on_lapse": w["on_lapse"] or "",
            "status": STATUS_NAMES.get(w["status"], w["status"]),
        }
        for w in workflow.deadline_warnings(session, within_days=DEADLINE_DAYS)
    ]


@router.get("/fiscal", name="web_agent_home")
def home(request: Request, web: AgentUser, session: SessionDep) -> Response:
    """Show the inbox: live alerts, deadlines due soon, the queue's counts."""
    zone = _zone(request)
    alerts, total = list_alerts(session=session, limit=INBOX_ALERTS)
    counts = queue_counts(session=session, filters=QueueFilters())
    since = alerts[0]["created_at"] if alerts else dt.datetime.now(dt.UTC).isoformat()
    return render(
        request,
        "fiscal/inicio.html",
        web=web,
        title="Fiscalização",
        alerts=_alerts_with_proposals(session, alerts, zone),
        alerts_total=total,
        zone=zone.key,
        stream_url=_with_query("/fiscal/alertas", desde=since),
        deadlines=_deadline_views(session, zone),
        deadline_days=DEADLINE_DAYS,
        status_counts=[
            (STATUS_NAMES[s], counts["status"].get(s, 0), _queue_link(situacao=s)) for s in STATUSES
        ],
    )


ALERT_PARAMS = ("tipo", "veiculo", "ponto")
"""The alerts page's filters: a finding kind, a vehicle, a stand (read as the queue's)."""


@router.get("/fiscal/alertas", name="web_agent_alerts", response_model=None)
async def alerts_page(
    request: Request,
    web: AgentUser,
    session: SessionDep,
    pagina: Annotated[str | None, Query(max_length=FILTER_VALUE)] = None,
    desde: Annotated[str | None, Query(max_length=FILTER_VALUE)] = None,
    tipo: Annotated[str | None, Query(max_length=FILTER_TEXT)] = None,
    veiculo: Annotated[str | None, Query(max_length=FILTER_TEXT)] = None,
    ponto: Annotated[str | None, Query(max_length=FILTER_TEXT)] = None,
) -> Response:
    """Show every alert, newest first, filtered and paged.

    Asked with ``Accept: text/event-stream``: the live stream.
    """
    if EVENT_STREAM in request.headers.get("accept", ""):
        session.close()  # the stream holds no pooled connection while it waits
        last = request.headers.get("last-event-id") or None
        return _alert_stream(request, web, last_id=last, since=_since(desde))
    page = _page_number(pagina)
    zone = _zone(request)
    params = {"tipo": tipo, "veiculo": veiculo, "ponto": ponto}
    filters, errors = parse_queue_filters(params, zone)

    def listed(page: int) -> tuple[list[dict[str, Any]], int]:
        return list_alerts(
            session=session,
            kinds=[filters.kind] if filters.kind else None,
            stand_ids=[filters.stand_id] if filters.stand_id else None,
            vehicle_part=filters.vehicle_id,  # part of a prefixo, as the queue's filter
            limit=PAGE_SIZE,
            offset=(page - 1) * PAGE_SIZE,
        )

    alerts, total = await run_in_threadpool(listed, page)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    if page > pages:  # past the end (an old link): the last page
        page = pages
        alerts, total = await run_in_threadpool(listed, page)
        pages = max(page, math.ceil(total / PAGE_SIZE))
    views = await run_in_threadpool(_alerts_with_proposals, session, alerts, zone)
    kept = {k: v.strip() for k, v in params.items() if v and v.strip() and k not in errors}
    return render(
        request,
        "fiscal/alertas.html",
        web=web,
        title="Alertas",
        status_code=422 if errors else 200,
        alerts=views,
        total=total,
        zone=zone.key,
        filtered=bool(kept),
        form={k: (params[k] or "").strip() for k in ALERT_PARAMS},
        errors=errors,
        kinds=[(k, kind_filter_name(k)) for k in KINDS],
        page=page,
        pages=pages,
        prev_url=_with_query("/fiscal/alertas", **kept, pagina=page - 1) if page > 1 else None,
        next_url=_with_query("/fiscal/alertas", **kept, pagina=page + 1) if page < pages else None,
    )


def _since(value: str | None) -> dt.datetime | None:
    try:
        return _instant(value)
    except ValueError:
        return None


def _page_number(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 100_000))
    except ValueError:
        return 1


def _replay(
    engine: Engine, *, last_id: str | None, since: dt.datetime | None
) -> list[dict[str, Any]]:
    """Return the alerts after ``last_id`` (or created after ``since``), oldest first.

    In the stream's order (``created_at``, ``alert_id``): the alerts of one batch share their
    ``created_at``, and those the page or the stream already showed are not new.
    """
    if last_id is None and since is None:
        return []
    if last_id is not None:
        where = (
            "(created_at, alert_id) > "
            "(SELECT created_at, alert_id FROM alerts WHERE alert_id = :last)"
        )
        params: dict[str, Any] = {"last": last_id, "n": REPLAY_MAX}
    else:
        where, params = "created_at > :since", {"since": since, "n": REPLAY_MAX}
    with engine.connect() as conn:
        rows = (
            conn.execute(
                text(
                    f"SELECT {ANNOUNCED} FROM alerts "  # noqa: S608
                    f"WHERE {where} ORDER BY created_at, alert_id LIMIT :n"
                ),
                params,
            )
            .mappings()
            .all()
        )
    return [alert_event(r) for r in rows if dict(r["payload"]).get("alert_id") != last_id]


def _session_alive(engine: Engine, token: str) -> bool:
    with Session(engine) as session:
        user = accounts.principal_for_token(session=session, token=token)
    return user is not None and user.role in ROLES


def _sse(alert: Mapping[str, Any], zone: ZoneInfo) -> str:
    return sse_event(alert, lambda body: alert_view(body, zone))


def _alert_stream(
    request: Request, web: WebSession, *, last_id: str | None, since: dt.datetime | None
) -> StreamingResponse:
    hub: AlertHub = request.app.state.alert_hub
    engine: Engine = request.app.state.engine
    zone = _zone(request)
    # Subscribed before the replay is read: an alert committed in between comes twice (the
    # ids sent are skipped), never not at all.
    sub = hub.subscribe({}, user_id=web.principal.user_id, token_digest=web.token_digest)

    async def events() -> AsyncIterator[str]:
        sent: set[str] = set()
        try:
            yield f"retry: {RETRY_MS}\n: conectado\n\n"
            for alert in await run_in_threadpool(_replay, engine, last_id=last_id, since=since):
                sent.add(str(alert["alert_id"]))
                yield _sse(alert, zone)
            while True:
                try:
                    alert = await asyncio.wait_for(sub.queue.get(), timeout=KEEPALIVE_S)
                except TimeoutError:
                    if not await run_in_threadpool(_session_alive, engine, web.token):
                        sub.close("sessão expirada ou revogada")
                        alert = SESSION_CLOSED
                    else:
                        yield ": keepalive\n\n"
                        continue
                if alert is SESSION_CLOSED:
                    reason = json.dumps({"reason": sub.closed}, ensure_ascii=False)
                    yield f"event: closed\ndata: {reason}\n\n"
                    return
                if stream_event(alert)[0] == "alert":
                    if str(alert["alert_id"]) in sent:
                        continue
                    sent.add(str(alert["alert_id"]))
                yield _sse(alert, zone)
        finally:
            hub.unsubscribe(sub)

    return StreamingResponse(
        events(),
        media_type=EVENT_STREAM,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


# --- evidence -------------------------------------------------------------------------------


def _ring(geom: Any) -> list[list[float]]:
    poly = max(getattr(geom, "geoms", [geom]), key=lambda g: g.area)
    return [[round(float(x), 7), round(float(y), 7)] for x, y in poly.exterior.coords]


def _coords(line: Any) -> list[list[float]]:
    return [[round(float(x), 7), round(float(y), 7)] for x, y in line]


def _geometry_layers(geom: Any) -> dict[str, Any]:
    """Layers of a finding's own geometry: its area, its place, or its line (a jump, a gap)."""
    if geom is None or geom.is_empty:
        return {}
    kind = geom.geom_type
    if kind in ("Polygon", "MultiPolygon"):
        return {"area": _ring(geom)}
    if kind in ("LineString", "MultiLineString"):
        lines = getattr(geom, "geoms", [geom])
        return {"segment": _coords([c for g in lines for c in g.coords])}
    point = shapely.point_on_surface(geom)
    return {"point": [round(point.x, 7), round(point.y, 7)]}


def _instant_key(value: Any) -> dt.datetime:
    """Return an instant to sort by (:func:`_instant`; one missing or unreadable sorts first)."""
    try:
        at = _instant(value)
    except ValueError:
        at = None
    return at or dt.datetime.min.replace(tzinfo=dt.UTC)


def fix_rows(
    details: Mapping[str, Any], zone: ZoneInfo, *, vehicle_id: str | None = None
) -> list[dict[str, Any]]:
    """Return the fixes a finding names, in time order, numbered, with their local times.

    Each with its vehicle for a finding of several (``documents.fix_vehicles``; "—": unknown),
    a vehicle a ``queue_jump`` passed said so (its fixes follow the accused's in ``details``).
    """
    owners = fix_vehicles(details, vehicle_id=vehicle_id)
    passed = {
        str(a.get("vehicle_id")) for a in details.get("ahead") or [] if isinstance(a, Mapping)
    }
    fixes = [
        (fix, owner)
        for fix, owner in zip(details.get("fixes") or [], owners, strict=True)
        if isinstance(fix, Mapping) and fix.get("lat") is not None and fix.get("lon") is not None
    ]
    fixes.sort(key=lambda pair: _instant_key(pair[0].get("timestamp")))
    rows = []
    for n, (fix, owner) in enumerate(fixes, start=1):
        meter = fix.get("meter")
        rows.append(
            {
                "n": n,
                "time": local_time(fix.get("timestamp"), zone),
                "lat": f"{float(fix['lat']):.6f}",
                "lon": f"{float(fix['lon']):.6f}",
                "meter": METER_LABELS.get(str(meter), "—") if meter else "—",
                "flag": bool(fix.get("speed_flag")),
                "vehicle": (owner or "—") + (" (à frente na fila)" if owner in passed else ""),
            }
        )
    return rows


def map_layers(
    *,
    findings: Sequence[Mapping[str, Any]],
    zone: ZoneInfo,
    track: list[Any] | None = None,
    stand: list[Any] | None = None,
    point: Any = None,
    area: list[Any] | None = None,
    geometries: list[Any] | None = None,
) -> dict[str, Any]:
    """Return the evidence map's layers for ``fiscal-mapa.js`` (``[lon, lat]`` everywhere).

    The stand's and the finding's polygons, the vehicle's track, a ``longer_route``'s lines
    (driven, matched, reference, fastest), the finding's fixes (numbered, with their local
    time) and its place; each with its legend label. Only layers with positions are listed.
    """
    layers: dict[str, Any] = {}
    if stand:
        layers["stand"] = _coords(stand)
    if area:
        layers["area"] = _coords(area)
    if track and len(track) >= 2:
        layers["track"] = _coords(track)
    if point is not None:
        layers["point"] = [round(float(point[0]), 7), round(float(point[1]), 7)]
    fixes: list[dict[str, Any]] = []
    for f in findings:
        details = f.get("details") or {}
        for key, _ in LINE_LAYERS:
            line = details.get(key)
            if line and len(line) >= 2 and key not in layers:
                layers[key] = _coords(line)
        for row in fix_rows(details, zone):
            fixes.append(
                {
                    "lon": float(row["lon"]),
                    "lat": float(row["lat"]),
                    "label": f"Posição {row['n']}: {row['time']} ({row['meter']})",
                    "short": f"{row['n']} · {row['time'][-8:]}",
                }
            )
    for geom in geometries or []:
        for key, value in _geometry_layers(geom).items():
            if key == "segment" and "driven_line" in layers:
                continue  # a detour's geometry is its driven line, drawn already
            layers.setdefault(key, value)
    if fixes:
        layers["fixes"] = fixes
    ordered = [
        {"id": key, "label": LAYER_LABELS[key], "data": layers[key]}
        for key in LAYER_ORDER
        if key in layers
    ]
    return {"layers": ordered, "labelled": len(fixes) <= LABELLED_FIXES}


def _map_context(spec: dict[str, Any]) -> dict[str, Any]:
    """Return the map's JSON (for ``data-camadas``) and its legend (the layers drawn)."""
    return {
        "map_data": json.dumps(spec, separators=(",", ":")),
        "map_legend": [{"id": x["id"], "label": x["label"]} for x in spec["layers"]],
    }


def evidence_views(findings: Sequence[Mapping[str, Any]], zone: ZoneInfo) -> list[dict[str, Any]]:
    """Return each finding's heading, measures and thresholds (pt-BR), notes and fixes."""
    out = []
    for f in findings:
        record: EvidenceFinding = {
            "finding_id": f["finding_id"],
            "kind": f["kind"],
            "started_at": f["started_at"],
            "ended_at": f["ended_at"],
            "confidence": float(f["confidence"]),
            "details": f.get("details") or {},
        }
        head, measures, thresholds = evidence_summary(record, timezone=zone.key)
        details = record["details"]
        fixes = fix_rows(details, zone, vehicle_id=f.get("vehicle_id"))
        out.append(
            {
                "finding_id": f["finding_id"],
                "href": finding_url(str(f["finding_id"])),
                "kind_label": finding_name(str(f["kind"]), details),
                "head": head,
                "measures": measures,
                "thresholds": thresholds,
                "notes": [str(n) for n in details.get("notes") or [] if n],
                "fixes": fixes[:MAX_FIX_ROWS],
                "fixes_total": len(fixes),
                "by_vehicle": any(isinstance(details.get(k), list) for k in ("stops", "ahead")),
                "started": local_time(f["started_at"], zone),
                "ended": local_time(shown_end(f["started_at"], f["ended_at"], zone), zone),
                "confidence": _percent(float(f["confidence"])),
            }
        )
    return out


# --- findings -------------------------------------------------------------------------------


def _finding_records(session: Session, finding_ids: list[str]) -> list[dict[str, Any]]:
    from db.enforcement.evidence import with_stored_meters

    frame = workflow.load_findings(session, finding_ids)
    return with_stored_meters(session, list(frame.to_dict("records")))


@router.get("/fiscal/achados/{finding_id}", name="web_agent_finding")
def finding_page(
    request: Request,
    finding_id: str,
    web: AgentUser,
    session: SessionDep,
    geradas: str | None = None,
    revisao: str | None = None,
    fora: str | None = None,
    municipio: str | None = None,
    erro: str | None = None,
) -> Response:
    """Show a finding's evidence, the proposals resting on it, and the way to generate them.

    Back from generating under ``municipio``'s rulebook, a finding still without a proposal
    says why (:func:`db.enforcement.workflow.why_not_proposed`).
    """
    from db.enforcement.evidence import stored_track
    from db.fleet.models import Vehicle
    from db.stands.models import Stand

    records = _finding_records(session, [finding_id])
    if not records:
        return error_page(
            request,
            web=web,
            status_code=404,
            title="Achado não encontrado",
            message=f"Não há achado com o identificador {finding_id}.",
        )
    finding = records[0]
    name = finding_name(finding["kind"], finding.get("details"))
    zone = _zone(request)
    stand = session.get(Stand, finding["stand_id"]) if finding.get("stand_id") else None
    shape = to_shape(stand.geometry) if stand is not None and stand.geometry is not None else None
    stand_ring = _ring(shape) if shape is not None else None
    covered = proposals_of_findings(session=session, finding_ids=[finding_id]).get(finding_id, [])
    municipalities = _municipalities()
    zones = {code: tz for code, _, tz in municipalities}
    vehicle = session.get(Vehicle, finding["vehicle_id"]) if finding.get("vehicle_id") else None
    # the prefixo's municipality (whose rulebook judges it), else the stand's
    chosen = (
        (vehicle.municipality_code if vehicle is not None else None)
        or (stand.municipality_code if stand is not None else None)
        or ""
    )
    if municipio in zones:
        chosen = municipio  # the rulebook just applied
    notice = why_not = None
    if geradas is not None:
        made = int(geradas) if fmt.digits(geradas) else 0
        left = int(revisao) if revisao and fmt.digits(revisao) else 0
        notice = fmt.plural(
            made,
            "proposta nova gerada.",
            "propostas novas geradas.",
            none="Nenhuma proposta nova gerada.",
        )
        if left:
            notice += " " + fmt.plural(
                left,
                "achado ficou para revisão e não virou proposta.",
                "achados ficaram para revisão e não viraram proposta.",
            )
        if fora and fmt.digits(fora) and int(fora):
            notice += " " + fmt.plural(
                int(fora),
                "achado de prefixo do cadastro de outro município não foi julgado",
                "achados de prefixos do cadastro de outro município não foram julgados",
            )
            notice += " por este regulamento."
        if not covered and municipio in zones:
            why_not = workflow.why_not_proposed(
                session, finding_id, municipality=municipio, timezone=zones[municipio]
            )
    return render(
        request,
        "fiscal/achado.html",
        web=web,
        title=f"Achado {name}",
        finding={
            "finding_id": finding_id,
            "kind_label": name,
            "vehicle_id": finding.get("vehicle_id"),
            "vehicles": place_vehicles(finding),
            "accused": place_vehicles(finding, key="accused"),
            "stand_id": finding.get("stand_id"),
            "stand_name": stand.name if stand is not None else None,
            "started": local_time(finding["started_at"], zone),
            "ended": local_time(shown_end(finding["started_at"], finding["ended_at"], zone), zone),
            "confidence": _percent(float(finding["confidence"])),
            "unsettled": unsettled(finding.get("details")),
        },
        evidence=evidence_views([finding], zone),
        **_map_context(
            map_layers(
                findings=[finding],
                zone=zone,
                track=stored_track(
                    session,
                    finding.get("vehicle_id"),
                    finding["started_at"].to_pydatetime(),
                    finding["ended_at"].to_pydatetime(),
                ),
                stand=stand_ring,
                geometries=[finding.get("geometry")],
            )
        ),
        proposals=[
            {"href": proposal_url(pid), "proposal_id": pid, "status": STATUS_NAMES.get(s, s)}
            for pid, s in covered
        ],
        municipalities=municipalities,
        chosen_municipality=chosen,
        back=finding_url(finding_id),
        notice=notice,
        why_not=why_not,
        why_not_municipality=next((n for c, n, _ in municipalities if c == municipio), ""),
        error=(
            "Escolha o município cujo regulamento deve ser aplicado."
            if erro == "municipio"
            else None
        ),
    )


@router.post("/fiscal/propostas/gerar", name="web_agent_generate")
def generate(
    request: Request,
    web: AgentUser,
    session: SessionDep,
    municipio: Annotated[str, Form(max_length=MUNICIPALITY_CODE)] = "",
    volta: Annotated[str, Form(max_length=MAX_NEXT_LENGTH)] = "",
    achado: Annotated[str, Form(max_length=FILTER_TEXT)] = "",
) -> Response:
    """Propose for the stored findings no proposal of the municipality covers yet.

    From a finding's page (``achado``), only that finding and its vehicle's other findings:
    an agent acting on one alert does not propose the whole municipality's.
    """
    back = safe_next(volta) or "/fiscal/propostas"
    known = {code: zone for code, _, zone in _municipalities()}
    if municipio not in known:
        return _redirect(_with_query(back.split("?")[0], erro="municipio"))
    scope = achado or None
    created, done = workflow.generate_report(
        session,
        municipality=municipio,
        timezone=known[municipio],
        actor=web.principal.username,
        with_finding=scope,
    )
    session.commit()
    elsewhere = workflow.count_of_other_municipalities(
        session, municipality=municipio, with_finding=scope
    )
    return _redirect(
        _with_query(
            back.split("?")[0],
            geradas=str(created),
            revisao=str(len(done.for_review)),
            fora=str(elsewhere),
            municipio=municipio,
        )
    )


# --- the queue ------------------------------------------------------------------------------


def _local_day_start(value: str, zone: ZoneInfo) -> dt.datetime:
    day = dt.date.fromisoformat(value)
    return dt.datetime.combine(day, dt.time(), tzinfo=zone)


def bad_date(value: str, said: str) -> str:
    """Say why ``value`` is no date: a day the calendar lacks (2026-02-31), or its form."""
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return f"{said}: '{value}' não existe no calendário."
    return f"{said}: '{value[:20]}'; use o formato aaaa-mm-dd (ou escolha no calendário)."


def parse_queue_filters(
    params: Mapping[str, str | None], zone: ZoneInfo
) -> tuple[QueueFilters, dict[str, str]]:
    """Read the queue's form: the filters, and a pt-BR error per field given a bad value.

    ``situacao`` absent means the proposals still to review (``proposta``); empty, every
    state. ``de`` and ``ate`` are local dates, both inclusive; ``confianca`` a percentage.
    """
    errors: dict[str, str] = {}
    kind = (params.get("tipo") or "").strip() or None
    if kind is not None and kind not in KINDS:
        errors["tipo"] = f"Tipo '{kind}' desconhecido; escolha um da lista."
        kind = None
    raw_status = params.get("situacao")
    status = "proposta" if raw_status is None else (raw_status.strip() or None)
    if status is not None and status not in STATUSES:
        errors["situacao"] = f"Situação '{status}' desconhecida; escolha uma da lista."
        status = None
    stand = (params.get("ponto") or "").strip()[:64] or None
    vehicle = (params.get("veiculo") or "").strip()[:64] or None
    since = until = None
    for name, label in (("de", "inicial"), ("ate", "final")):
        value = (params.get(name) or "").strip()
        if not value:
            continue
        try:
            start = _local_day_start(value, zone)
        except ValueError:
            errors[name] = bad_date(value, f"Data {label} inválida")
            continue
        if name == "de":
            since = start
        elif start.date() == dt.date.max:  # its next day is out of the calendar
            errors[name] = f"Data {label} inválida: '{value[:20]}'; use uma data até 30/12/9999."
        else:
            until = start + dt.timedelta(days=1)
    if since is not None and until is not None and until <= since:
        errors["ate"] = (
            f"A data final é anterior à inicial: até {until.date() - dt.timedelta(days=1):%d/%m/%Y}"
            f", desde {since.date():%d/%m/%Y}."
        )
        until = None
    confidence = None
    raw = (params.get("confianca") or "").strip().replace(",", ".")
    if raw:
        try:
            percent = float(raw)
        except ValueError:
            percent = math.nan
        if not 0 <= percent <= 100:
            errors["confianca"] = "Confiança mínima: um número de 0 a 100 (%)."
        else:
            confidence = percent / 100
    filters = QueueFilters(
        kind=kind,
        status=status,
        stand_id=stand,
        vehicle_id=vehicle,
        since=since,
        until=until,
        min_confidence=confidence,
    )
    return filters, errors


QUEUE_PARAMS = ("tipo", "situacao", "ponto", "veiculo", "de", "ate", "confianca")


class QueueQuery(BaseModel):
    """The queue's query parameters (read by :func:`queue_context`; each a single value)."""

    tipo: str | None = Field(None, max_length=FILTER_TEXT)
    situacao: str | None = Field(None, max_length=FILTER_TEXT)
    ponto: str | None = Field(None, max_length=FILTER_TEXT)
    veiculo: str | None = Field(None, max_length=FILTER_TEXT)
    de: str | None = Field(None, max_length=FILTER_VALUE)
    ate: str | None = Field(None, max_length=FILTER_VALUE)
    confianca: str | None = Field(None, max_length=FILTER_VALUE)
    pagina: str | None = Field(None, max_length=FILTER_VALUE)
    desde: str | None = Field(None, max_length=FILTER_VALUE)


def queue_context(
    session: Session, params: Mapping[str, str | None], zone: ZoneInfo
) -> dict[str, Any]:
    """Everything the queue page shows for its query parameters (also timed by the bench).

    ``desde`` (the field's label: "Cometida desde") stands for ``de`` when ``de`` is absent.
    """
    if not (params.get("de") or "").strip() and params.get("desde"):
        params = {**params, "de": params["desde"]}
    filters, errors = parse_queue_filters(params, zone)
    page = _page_number(params.get("pagina"))
    counts = queue_counts(session=session, filters=filters)
    total = queue_total(counts, filters)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    page = min(page, pages)
    rows = queue_page(
        session=session, filters=filters, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE
    )
    names = queue_names(session=session, rows=rows)
    kept = {k: params.get(k) for k in QUEUE_PARAMS if params.get(k) is not None}
    if "situacao" not in kept:
        kept["situacao"] = "proposta"

    def link(**change: Any) -> str:
        merged = {**kept, **change}
        query = urlencode({k: v for k, v in merged.items() if v is not None})
        return f"/fiscal/propostas?{query}"

    return {
        "rows": [
            {
                "href": proposal_url(r.proposal_id),
                "proposal_id": r.proposal_id,
                "kind": r.kind,
                "kind_label": names[r.proposal_id],
                "status": r.status,
                "status_label": STATUS_NAMES.get(r.status, r.status),
                "vehicle_id": r.vehicle_id or "—",
                "stand_id": r.stand_id or "—",
                "provision": r.provision,
                "gravity": r.gravity,
                "when": local_time(r.committed_at, zone, seconds=False),
                "confidence": _percent(r.confidence),
                "auto_number": r.auto_number,
                "reincidence": r.reincidence_count,
            }
            for r in rows
        ],
        "total": total,
        "page": page,
        "pages": pages,
        "first_index": (page - 1) * PAGE_SIZE + 1 if rows else 0,
        "last_index": (page - 1) * PAGE_SIZE + len(rows),
        "prev_url": link(pagina=page - 1) if page > 1 else None,
        "next_url": link(pagina=page + 1) if page < pages else None,
        "status_facets": [
            (s, STATUS_NAMES[s], counts["status"].get(s, 0), link(situacao=s, pagina=None))
            for s in STATUSES
        ],
        "status_all": (sum(counts["status"].values()), link(situacao="", pagina=None)),
        "kind_facets": [
            (k, kind_name(k), counts["kind"][k], link(tipo=k, pagina=None))
            for k in KINDS
            if counts["kind"].get(k)
        ],
        "kind_all": (sum(counts["kind"].values()), link(tipo=None, pagina=None)),
        "form": {k: (params.get(k) or "") for k in QUEUE_PARAMS}
        | {"situacao": kept["situacao"] or ""},
        "filters": filters,
        "errors": errors,
        "kinds": [(k, kind_filter_name(k)) for k in KINDS],
        "statuses": [(s, STATUS_NAMES[s]) for s in STATUSES],
    }


@router.get("/fiscal/propostas", name="web_agent_queue")
def queue(
    request: Request,
    web: AgentUser,
    session: SessionDep,
    query: Annotated[QueueQuery, Query()],
) -> Response:
    """Show the proposals queue: filters, counts per status and kind, pages, keyboard triage."""
    context = queue_context(session, query.model_dump(), _zone(request))
    return render(
        request,
        "fiscal/fila.html",
        web=web,
        title="Propostas de autuação",
        status_code=422 if context["errors"] else 200,
        **context,
    )


# --- one proposal ---------------------------------------------------------------------------


def _sections(document: Any) -> dict[str, list[tuple[str, str]]]:
    """Return the document's field table by section (``enforcement.documents``' labels)."""
    try:
        rows = document_fields(document, kind="notificacao")
    except DocumentError:
        rows = []
    out: dict[str, list[tuple[str, str]]] = {}
    for section, label, value in rows:
        out.setdefault(section, []).append((label, value))
    return out


def proposal_context(
    session: Session, proposal_id: str, *, form_values: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Everything the proposal page shows (raises ProposalNotFoundError)."""
    from db.enforcement.evidence import document_for

    p = workflow.get_proposal(session, proposal_id)
    doc = document_for(session, proposal_id)
    record = doc["proposal"]
    zone = ZoneInfo(doc["timezone"])
    book, rule = workflow.rule_of(p)
    sections = _sections(doc)
    keep = ("Infração", "Penalidade e medida administrativa", "Prazos")
    shown = {
        name: [(label, value) for label, value in rows if label != "Descrição do dispositivo"]
        for name, rows in sections.items()
        if name in keep
    }
    geometry = doc["geometry"]
    allowed = _offered(p)
    priors = [
        {
            "auto_number": x.get("auto_number") or "sem número",
            "date": local_time(x.get("committed_at"), zone, seconds=False),
            "status": STATUS_NAMES.get(str(x.get("status")), x.get("status") or "—"),
            "href": proposal_url(x["proposal_id"]) if x.get("proposal_id") else None,
        }
        for x in record.get("reincidence_priors") or []
    ]
    history = [
        {
            "at": local_time(h["at"], zone),
            "actor": fmt.actor_label(str(h["actor"])),
            "action": fmt.ACTIONS.get(str(h["action"]), h["action"]),
            "to": STATUS_NAMES.get(str(h.get("to")), h.get("to") or ""),
            "reason": "; ".join(
                x
                for x in (
                    h.get("reason") or h.get("exception_answer") or "",
                    _period_note(h.get("period_ended_on")),
                    _step_note(h, zone),
                )
                if x
            ),
            "auto_number": h.get("auto_number") or "",
        }
        for h in workflow.proposal_history(session, proposal_id)
    ]
    exception = record.get("exception") or None
    return {
        "p": {
            "proposal_id": p.proposal_id,
            "kind_label": findings_name(p.kind, [f.get("details") for f in doc["findings"]]),
            "status": p.status,
            "status_label": STATUS_NAMES.get(p.status, p.status),
            "vehicle_id": p.vehicle_id or "—",
            "stand_id": record.get("stand_id"),
            "place": doc["place"].get("text"),
            "municipality": place_municipality(doc["place"]),
            "provision": p.provision,
            "law": record.get("law"),
            "excerpt": p.excerpt,
            "gravity": p.gravity,
            "auto_number": p.auto_number,
            "when": local_time(p.committed_at, zone),
            "until": local_time(shown_end(p.committed_at, p.committed_until, zone), zone),
            "confidence": _percent(p.confidence),
            "note": record.get("note"),
            "citation_uncertain": record.get("citation_uncertain"),
            "dismissed_reason": p.dismissed_reason,
            "period_ended_on": _day((p.document or {}).get("final_period_ended_on")),
            "dates": [
                (label, at.astimezone(zone).strftime("%d/%m/%Y"))
                for label, at in (
                    ("Auto lavrado em", p.confirmed_at),
                    ("Notificação entregue em", p.notified_at),
                    ("Defesa protocolada em", p.defence_filed_at),
                    ("Defesa decidida em", p.decided_at),
                    ("Decisão notificada em", p.decision_notified_at),
                )
                if at is not None
            ],
            "timezone": zone.key,
        },
        "sections": shown,
        "exception": exception,
        "exception_open": exception is not None and not exception.get("answer"),
        "rule_exception": rule.exception,
        "limit_outside_law": limit_outside_law(book, rule),
        "pontuacao_choices": list(rule.pontuacao_choices),
        "priors": priors,
        "history": history,
        "evidence": evidence_views(doc["findings"], zone),
        **_map_context(
            map_layers(
                findings=doc["findings"],
                zone=zone,
                track=list(geometry.get("track") or []),
                stand=list(geometry.get("stand") or []) or None,
                point=geometry.get("point"),
                area=list(geometry.get("area") or []) or None,
            )
        ),
        "allowed": allowed,
        "form_ids": list(STEP_OF_FORM),
        "documents": [
            (kind, TITLES[kind], f"{proposal_url(proposal_id)}/documentos/{kind}")
            for kind in DOCUMENT_KINDS
            if p.status != "descartada"
            and (kind == "auto" or (p.status != "proposta" and has_penalty({"status": p.status})))
        ],
        "no_auto": NO_AUTO if p.status == "descartada" else None,
        "min_grounds": workflow.MIN_GROUNDS_CHARS,
        "min_exception_answer": workflow.MIN_ANSWER_CHARS,
        "max_text": MAX_TEXT,
        "draft": is_draft({"status": p.status, "auto_number": p.auto_number}),
        "period_end": _period_end_form(p, zone),
        "decision_unnotified": _appeal_waits_for_delivery(p),
        "step_dates": _step_date_forms(p, _workflow_zone(p, zone)),
        "values": dict(form_values or {}),
        "errors": {},
    }


def limit_outside_law(book: Rulebook, rule: Rule) -> str | None:
    """Name (pt-BR) the limit a rule is judged by that its rulebook's law does not fix, if any.

    Such a proposal comes from a run given the limit (the regulator's choice; ``pontual
    rulebooks`` says how): the page says so in words, not in command-line flags.
    """
    limit = unset_limit(book, rule)
    return None if limit is None else LABELS.get(limit, limit)


def _day(value: Any) -> str:
    """Return an ISO date as ``dd/mm/aaaa`` ('' for none)."""
    return fmt.iso_date(value) if value else ""


def _period_note(value: Any) -> str:
    day = _day(value)
    return f"prazo encerrado em {day} (data informada pelo agente, lei municipal)" if day else ""


def _period_end_form(p: Any, zone: ZoneInfo) -> dict[str, Any] | None:
    """Return the final decision's date field where the rulebook fixes no period, else None."""
    if "finalizar" not in _allowed(p.status) or not workflow.needs_period_end(p):
        return None
    appeal = p.status == "defesa_indeferida" and p.decided_at is not None
    start = p.decided_at if appeal else p.notified_at
    first = start.astimezone(zone).date() if start is not None else None
    yesterday = dt.datetime.now(zone).date() - dt.timedelta(days=1)
    return {
        # began today: no day before today can be its end yet (the form would take no date)
        "waits": first is not None and first > yesterday,
        "label": (
            "Data em que terminou o prazo de recurso (ou em que o recurso foi decidido)"
            if appeal
            else "Data em que terminou o prazo de defesa (e o de recurso, se houver)"
        ),
        "min": first.isoformat() if first is not None else "",
        "max": yesterday.isoformat(),
        "start": _day(first.isoformat()) if first is not None else "",
        "start_label": "da decisão da defesa" if appeal else "da notificação",
    }


def _allowed(status: str) -> set[str]:
    return {f for f, step in STEP_OF_FORM.items() if status in workflow.TRANSITIONS[step]}


def _counts_from_decision_notification(p: Any) -> bool:
    """Tell whether a period of ``p`` counts from the delivery of the decision (its law's)."""
    return any(
        (d or {}).get("from") == "decision_notification" for d in (p.deadlines or {}).values()
    )


def _appeal_waits_for_delivery(p: Any) -> bool:
    """Tell whether the appeal of ``p`` counts from the decision's delivery, not yet recorded.

    Without a defence, not where the law then counts it from the defence period's end.
    """
    appeal = (p.deadlines or {}).get("appeal") or {}
    return (
        appeal.get("from") == "decision_notification"
        and p.decision_notified_at is None
        and (p.status == "defesa_indeferida" or not appeal.get("without_defence_from"))
    )


def _offered(p: Any) -> set[str]:
    """Return the forms the page offers: the steps allowed in its state.

    The decision's delivery only where a period counts from it, while it is not recorded and,
    without a defence, once the defence period has ended.
    """
    offered = _allowed(p.status)
    defence_due = ((p.deadlines or {}).get("defence") or {}).get("due")
    if (
        p.decision_notified_at is not None
        or not _counts_from_decision_notification(p)
        or (
            p.status == "notificada"
            and (
                not defence_due or dt.datetime.now(dt.UTC) <= dt.datetime.fromisoformat(defence_due)
            )
        )
    ):
        offered.discard("notificar-decisao")
    return offered


def _step_note(entry: Mapping[str, Any], zone: ZoneInfo) -> str:
    """Say the date a step was taken when it was recorded on another day (audit ``step_at``)."""
    if not entry.get("step_at"):
        return ""
    taken = dt.datetime.fromisoformat(str(entry["step_at"])).astimezone(zone).date()
    recorded = dt.datetime.fromisoformat(str(entry["at"])).astimezone(zone).date()
    return "" if taken == recorded else f"passo de {taken:%d/%m/%Y}"


def _workflow_zone(p: Any, fallback: ZoneInfo) -> ZoneInfo:
    """Return the zone the workflow dates ``p``'s steps in (its rulebook's state's)."""
    try:
        book, _ = workflow.rule_of(p)
    except TransitionError:  # the rule left the rulebook: the step itself is refused
        return fallback
    return ZoneInfo(UF_TIMEZONES.get(book.uf, DEFAULT_TIMEZONE))


def _step_date_forms(p: Any, zone: ZoneInfo) -> dict[str, dict[str, Any]]:
    """Return the date field of each dated step the page offers: names, labels, limits."""
    today = dt.datetime.now(zone).date()
    latest = workflow.latest_fact(p)
    first = latest[0].astimezone(zone).date() if latest is not None else None
    return {
        form: {
            "name": name,
            "time_name": time_name,
            "label": label,
            "time_label": time_label,
            "default": today.isoformat(),
            "max": today.isoformat(),
            "min": first.isoformat() if first is not None else "",
            "after": (
                f"{workflow.with_preposition('de', latest[1])} ({first:%d/%m/%Y})"
                if latest and first
                else ""
            ),
            "timezone": zone.key,
        }
        for form, (name, time_name, label, time_label) in STEP_DATES.items()
        if form in _offered(p)
    }


def step_instant(
    day: dt.date,
    time: dt.time | None,
    *,
    zone: ZoneInfo,
    after: dt.datetime | None,
    now: dt.datetime,
) -> dt.datetime:
    """Return the instant of a step the agent dated ``day`` (local), at ``time`` when given.

    Periods count in whole days from the step's local date (``due_at``: the start day
    excluded), so the hour only orders the steps. Without a time the step is at noon, moved
    to the earlier fact's instant (``after``) when that fact is later the same day, and to
    ``now`` when ``day`` is today and noon is still to come: a step given only its date is
    neither before the earlier step nor in the future. A given time is kept as typed (the
    workflow refuses it if out of order).
    """
    if time is not None:
        return dt.datetime.combine(day, time, tzinfo=zone)
    at = dt.datetime.combine(day, STEP_NOON, tzinfo=zone)
    if after is not None and after.astimezone(zone).date() == day:
        at = max(at, after)
    if now.astimezone(zone).date() == day:
        at = min(at, now)
    return at


def _read_day(text: str) -> dt.date:
    """Read a date as a date field sends it (``aaaa-mm-dd``) or as typed (``dd/mm/aaaa``)."""
    if "/" in text:
        return dt.datetime.strptime(text, "%d/%m/%Y").date()  # noqa: DTZ007 (a calendar day)
    return dt.date.fromisoformat(text)


def _step_date(
    session: Session,
    proposal_id: str,
    form: str,
    *,
    day_text: str,
    time_text: str,
    fallback: ZoneInfo,
) -> tuple[dt.datetime | None, dict[str, str]]:
    """Read a dated step's date and time fields: the step's instant, or the fields' errors.

    The date is required (the form says so: a step dated by the click would start a period
    from a day the agent never gave). A date out of the registry's range is refused here (the
    workflow would not say it in the agent's words); its order against the earlier steps, and
    a future date, are the workflow's to refuse.
    """
    name, time_name, label, time_label = STEP_DATES[form]
    day_text, time_text = day_text.strip(), time_text.strip()
    errors: dict[str, str] = {}
    day: dt.date | None = None
    time: dt.time | None = None
    if day_text:
        try:
            day = _read_day(day_text)
        except ValueError:
            shaped = re.fullmatch(r"\d{1,2}/\d{1,2}/\d{4}|\d{4}-\d{2}-\d{2}", day_text)
            errors[name] = (
                f"{label} inválida: '{day_text[:20]}' não existe no calendário."
                if shaped
                else f"{label} inválida: '{day_text[:20]}'; use o formato dd/mm/aaaa."
            )
    elif time_text:
        errors[name] = f"{label}: informe a data (a hora sozinha não basta)."
    else:
        errors[name] = f"{label}: informe a data em que o passo foi dado (obrigatória)."
    if time_text:
        try:
            time = dt.time.fromisoformat(time_text)
        except ValueError:
            errors[time_name] = f"{time_label} inválida: '{time_text[:20]}'; use o formato hh:mm."
    if errors or day is None:
        return None, errors
    try:
        p = workflow.get_proposal(session, proposal_id)
    except ProposalNotFoundError:
        return None, {}  # the step answers 404
    zone = _workflow_zone(p, fallback)
    now = dt.datetime.now(zone)
    if day < REGISTRY_DATE_MIN or day > registry_date_max(now.date()):
        errors[name] = (
            f"{label} fora do intervalo aceito ({day:%d/%m/%Y}): informe a data em que o passo "
            f"foi dado, de {REGISTRY_DATE_MIN:%d/%m/%Y} até hoje."
        )
        return None, errors
    latest = workflow.latest_fact(p)
    after = latest[0] if latest is not None else None
    return step_instant(day, time, zone=zone, after=after, now=now), {}


def _not_found(request: Request, web: WebSession, proposal_id: str) -> Response:
    return error_page(
        request,
        web=web,
        status_code=404,
        title="Proposta não encontrada",
        message=f"Não há proposta com o identificador {proposal_id}.",
    )


def _proposal_page(
    request: Request,
    web: WebSession,
    session: Session,
    proposal_id: str,
    *,
    status_code: int = 200,
    notice: str | None = None,
    errors: Mapping[str, str] | None = None,
    values: Mapping[str, str] | None = None,
) -> Response:
    try:
        context = proposal_context(session, proposal_id, form_values=values)
    except ProposalNotFoundError:
        return _not_found(request, web, proposal_id)
    context["errors"] = dict(errors or {})
    return render(
        request,
        "fiscal/proposta.html",
        web=web,
        title=f"Proposta {context['p']['kind_label']} — {context['p']['vehicle_id']}",
        status_code=status_code,
        notice=notice,
        **context,
    )


@router.get("/fiscal/propostas/{proposal_id}", name="web_agent_proposal")
def proposal_page(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    feito: str | None = None,
) -> Response:
    """Show a proposal with its evidence and the workflow's steps as forms."""
    notice = None
    if feito in DONE_NOTICES:
        try:
            auto = workflow.get_proposal(session, proposal_id).auto_number
        except ProposalNotFoundError:
            return _not_found(request, web, proposal_id)
        notice = DONE_NOTICES[feito].format(auto=auto or "")
    return _proposal_page(request, web, session, proposal_id, notice=notice)


def _step(
    request: Request,
    web: WebSession,
    session: Session,
    proposal_id: str,
    *,
    form: str,
    run: Callable[[], Any],
    values: Mapping[str, str],
    checks: Mapping[str, str] | None = None,
    review_field: str | None = None,
    date_field: str | None = None,
) -> Response:
    """Run one step of the workflow and answer: 303 to the page, or the page with the error.

    ``checks`` are the form's own errors (field → pt-BR message) found before the workflow
    runs: then nothing runs. A missing answer or reason is 422, a step out of order 409 (said
    first: an answer does not matter to a step that cannot happen); the proposal is left as it
    was in both. A value the workflow refuses (``ReviewDataError``) is said on ``review_field``
    when given, else on the form; the step's date refused (out of order, future) on
    ``date_field``.
    """
    try:
        status = workflow.get_proposal(session, proposal_id).status
    except ProposalNotFoundError:
        return _not_found(request, web, proposal_id)
    if status not in workflow.TRANSITIONS[STEP_OF_FORM[form]]:
        checks = None  # the workflow refuses the step itself (409)
    if checks:
        session.rollback()
        return _proposal_page(
            request, web, session, proposal_id, status_code=422, errors=checks, values=values
        )
    try:
        run()
    except ProposalNotFoundError:
        session.rollback()
        return _not_found(request, web, proposal_id)
    except ReviewDataError as exc:
        session.rollback()
        message = str(exc)
        field = date_field if date_field and message.startswith(STEP_DATE_ERRORS) else None
        errors = {field or review_field or form: _sentence(message)}
        return _proposal_page(
            request, web, session, proposal_id, status_code=422, errors=errors, values=values
        )
    except TransitionError as exc:
        session.rollback()
        errors = {form: _sentence(str(exc))}
        return _proposal_page(
            request, web, session, proposal_id, status_code=409, errors=errors, values=values
        )
    session.commit()
    return _redirect(_with_query(proposal_url(proposal_id), feito=form))


def _sentence(message: str) -> str:
    message = message.strip()
    return (message[:1].upper() + message[1:]).rstrip(".") + "."


def _text_field(value: str, *, label: str, minimum: int) -> str | None:
    """Return the pt-BR error of a free-text answer too short, or None.

    Its longest length is the form's (:data:`TextBox`: the 422 page).
    """
    if len(value.strip()) < minimum:
        return f"{label}: escreva ao menos {minimum} caracteres."
    if not workflow.is_sentence(value, minimum):
        return f"{label}: escreva uma frase, com ao menos duas palavras."
    return None


@router.post("/fiscal/propostas/{proposal_id}/confirmar", name="web_agent_confirm")
def confirm(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    resposta_excecao: TextBox = "",
    pontuacao: Annotated[str, Form(max_length=MAX_CHOICE)] = "",
) -> Response:
    """Confirm: the agent issues the auto, answering the rule's exception and its pontuação."""
    values = {"resposta_excecao": resposta_excecao, "pontuacao": pontuacao}
    checks: dict[str, str] = {}
    try:
        _, rule = workflow.rule_of(workflow.get_proposal(session, proposal_id))
    except ProposalNotFoundError:
        return _not_found(request, web, proposal_id)
    except TransitionError:
        rule = None
    if rule is not None and rule.exception is not None:
        problem = _text_field(
            resposta_excecao,
            label="Resposta à exceção do dispositivo",
            minimum=workflow.MIN_ANSWER_CHARS,
        )
        if problem:
            checks["resposta_excecao"] = (
                f"Responda à exceção do {rule.exception.provision} "
                f"(“{rule.exception.excerpt}”) antes de confirmar: {rule.exception.question} "
                f"Escreva por que ela não se aplica (uma frase, com ao menos duas palavras e "
                f"{workflow.MIN_ANSWER_CHARS} caracteres). Se a exceção se aplica, descarte a "
                "proposta."
            )
    if rule is not None and rule.pontuacao_choices and pontuacao not in rule.pontuacao_choices:
        checks["pontuacao"] = (
            "Escolha sobre quem recai a pontuação: "
            + " ou ".join(rule.pontuacao_choices)
            + f" ({rule.provision}: o texto deixa a escolha ao agente, conforme o caso)."
        )
    return _step(
        request,
        web,
        session,
        proposal_id,
        form="confirmar",
        values=values,
        checks=checks,
        run=lambda: workflow.confirm(
            session,
            proposal_id,
            agent_id=web.principal.username,
            exception_answer=resposta_excecao.strip() or None,
            pontuacao=pontuacao or None,
        ),
    )


@router.post("/fiscal/propostas/{proposal_id}/descartar", name="web_agent_dismiss")
def dismiss(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    motivo: TextBox = "",
) -> Response:
    """Dismiss the proposal, with the agent's reason (required, a sentence)."""
    problem = _text_field(motivo, label="Motivo do descarte", minimum=workflow.MIN_GROUNDS_CHARS)
    if problem:
        problem += (
            " O descarte é uma decisão registrada na auditoria: diga por que a proposta não "
            "procede."
        )
    return _step(
        request,
        web,
        session,
        proposal_id,
        form="descartar",
        values={"motivo": motivo},
        checks={"motivo": problem} if problem else None,
        run=lambda: workflow.dismiss(
            session, proposal_id, agent_id=web.principal.username, reason=motivo.strip()
        ),
    )


DateField = Annotated[str, Form(max_length=FILTER_VALUE)]
"""A step's date (``aaaa-mm-dd``) or time (``hh:mm``) field."""


def _dated_step(
    request: Request,
    web: WebSession,
    session: Session,
    proposal_id: str,
    *,
    form: str,
    day: str,
    time: str,
    run: Callable[[dt.datetime | None], Any],
    values: Mapping[str, str] | None = None,
    checks: Mapping[str, str] | None = None,
    review_field: str | None = None,
) -> Response:
    """Run a step the agent dates (:data:`STEP_DATES`): read its date and time, then :func:`_step`.

    A refusal of the date is said on the date field, as is any other refusal unless
    ``review_field`` names another field.
    """
    name, time_name, _, _ = STEP_DATES[form]
    at, date_checks = _step_date(
        session, proposal_id, form, day_text=day, time_text=time, fallback=_zone(request)
    )
    return _step(
        request,
        web,
        session,
        proposal_id,
        form=form,
        values={**(values or {}), name: day, time_name: time},
        checks={**date_checks, **(checks or {})},
        review_field=review_field or name,
        date_field=name,
        run=lambda: run(at),
    )


@router.post("/fiscal/propostas/{proposal_id}/notificar", name="web_agent_notify")
def notify(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    data_entrega: DateField = "",
    hora_entrega: DateField = "",
) -> Response:
    """Record the delivery of the notificação de penalidade on the date the agent gives.

    The defence period counts from that local date (``data_entrega``; ``hora_entrega``
    optional; the date is required).
    """
    return _dated_step(
        request,
        web,
        session,
        proposal_id,
        form="notificar",
        day=data_entrega,
        time=hora_entrega,
        run=lambda at: workflow.notify(session, proposal_id, actor=web.principal.username, at=at),
    )


@router.post("/fiscal/propostas/{proposal_id}/defesa", name="web_agent_defence")
def defence(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    data_defesa: DateField = "",
    hora_defesa: DateField = "",
) -> Response:
    """Record a defence filed within its period, on the date of its protocol.

    ``data_defesa`` (``hora_defesa`` optional; the date is required).
    """
    return _dated_step(
        request,
        web,
        session,
        proposal_id,
        form="defesa",
        day=data_defesa,
        time=hora_defesa,
        run=lambda at: workflow.file_defence(
            session, proposal_id, actor=web.principal.username, at=at
        ),
    )


@router.post("/fiscal/propostas/{proposal_id}/decidir", name="web_agent_decide")
def decide(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    decisao: Annotated[str, Form(max_length=MAX_CHOICE)] = "",
    fundamentacao: TextBox = "",
    data_decisao: DateField = "",
    hora_decisao: DateField = "",
) -> Response:
    """Decide the defence: accepted (deferida) or rejected (indeferida), with the grounds.

    Dated ``data_decisao`` (``hora_decisao`` optional; the date required): a period of
    appeal counts from it.
    """
    checks: dict[str, str] = {}
    if decisao not in ("deferida", "indeferida"):
        checks["decisao"] = "Escolha a decisão: defesa deferida ou indeferida."
    problem = _text_field(
        fundamentacao, label="Fundamentação da decisão", minimum=workflow.MIN_GROUNDS_CHARS
    )
    if problem:
        checks["fundamentacao_decisao"] = problem
    return _dated_step(
        request,
        web,
        session,
        proposal_id,
        form="decidir",
        day=data_decisao,
        time=hora_decisao,
        values={"decisao": decisao, "fundamentacao_decisao": fundamentacao},
        checks=checks,
        run=lambda at: workflow.decide_defence(
            session,
            proposal_id,
            agent_id=web.principal.username,
            accepted=decisao == "deferida",
            reason=fundamentacao.strip(),
            at=at,
        ),
    )


@router.post("/fiscal/propostas/{proposal_id}/notificar-decisao", name="web_agent_notify_decision")
def notify_decision(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    data_notificacao_decisao: DateField = "",
    hora_notificacao_decisao: DateField = "",
) -> Response:
    """Record the delivery of the decision on the defence (the penalty) to the accused.

    Where the law counts the appeal (and the payment) from it, they count from that local date
    (``data_notificacao_decisao``; ``hora_notificacao_decisao`` optional; the date required).
    """
    return _dated_step(
        request,
        web,
        session,
        proposal_id,
        form="notificar-decisao",
        day=data_notificacao_decisao,
        time=hora_notificacao_decisao,
        run=lambda at: workflow.notify_decision(
            session, proposal_id, actor=web.principal.username, at=at
        ),
    )


@router.post("/fiscal/propostas/{proposal_id}/finalizar", name="web_agent_finalize")
def finalize(
    request: Request,
    proposal_id: str,
    web: AgentUser,
    session: SessionDep,
    fundamentacao: TextBox = "",
    fim_prazo: Annotated[str, Form(max_length=40)] = "",
    data_final: DateField = "",
    hora_final: DateField = "",
) -> Response:
    """Record the final decision (no administrative appeal left), with its grounds.

    Where the rulebook fixes no defence period, also the date it ended (``fim_prazo``,
    required: the municipality's law sets it, outside the rulebook). Dated ``data_final``
    (``hora_final`` optional; the date required).
    """
    checks: dict[str, str] = {}
    problem = _text_field(fundamentacao, label="Fundamentação", minimum=workflow.MIN_GROUNDS_CHARS)
    if problem:
        checks["fundamentacao_final"] = problem
    try:
        needs_date = workflow.needs_period_end(workflow.get_proposal(session, proposal_id))
    except ProposalNotFoundError:
        return _not_found(request, web, proposal_id)
    ended: dt.date | None = None
    raw = fim_prazo.strip()
    if needs_date and not raw:
        checks["fim_prazo"] = (
            "Informe a data em que o prazo terminou: o regulamento não fixa os prazos de defesa "
            "e de recurso, que estão na lei do município."
        )
    elif needs_date:
        try:
            ended = dt.date.fromisoformat(raw)
        except ValueError:
            checks["fim_prazo"] = bad_date(raw, "Data inválida")
    return _dated_step(
        request,
        web,
        session,
        proposal_id,
        form="finalizar",
        day=data_final,
        time=hora_final,
        values={"fundamentacao_final": fundamentacao, "fim_prazo": fim_prazo},
        checks=checks,
        review_field="fim_prazo" if needs_date else "finalizar",
        run=lambda at: workflow.finalize(
            session,
            proposal_id,
            agent_id=web.principal.username,
            reason=fundamentacao.strip(),
            period_ended_on=ended,
            at=at,
        ),
    )


# --- documents ------------------------------------------------------------------------------


@router.get("/fiscal/propostas/{proposal_id}/documentos/{documento}", name="web_agent_document")
def document(
    request: Request,
    proposal_id: str,
    documento: str,
    web: AgentUser,
    session: SessionDep,
    formato: str = "html",
) -> Response:
    """Show the auto de infração (or notificação) as a page, or as PDF (``?formato=pdf``).

    It shows the plate and the holder's name when the registry has them: each delivery is
    written to the audit log (who, which fields, which proposal) before it leaves.
    """
    from db.enforcement.evidence import document_for

    if documento not in DOCUMENT_KINDS or formato not in ("html", "pdf"):
        return error_page(
            request,
            web=web,
            status_code=404,
            title="Documento não encontrado",
            message=(
                f"Documento '{documento[:40]}' em '{formato[:10]}' não existe; há: "
                + ", ".join(f"{k} (html ou pdf)" for k in DOCUMENT_KINDS)
                + "."
            ),
        )
    try:
        doc = document_for(session, proposal_id)
        fields = document_fields(doc, kind=documento)  # a dismissed proposal: DocumentError
    except ProposalNotFoundError:
        return _not_found(request, web, proposal_id)
    except (DocumentError, TransitionError) as exc:
        setattr(request.state, BACK_STATE, proposal_url(proposal_id))  # the way back: its page
        return error_page(
            request,
            web=web,
            status_code=409,
            title="Documento indisponível",
            message=_sentence(str(exc)),
        )
    personal = [f for f in DOCUMENT_PERSONAL_FIELDS if doc["vehicle"].get(f)]
    if personal:
        record_personal_data_access(
            session=session,
            actor=web.principal.actor,
            entity="proposal_documents",
            ids=[proposal_id],
            fields=personal,
            route=request.url.path,
        )
        session.commit()  # audited before the document leaves
    title = TITLES[documento]
    number = doc["proposal"].get("auto_number")
    if formato == "pdf":
        name = f"{documento}-{number or proposal_id}.pdf"
        return Response(
            render_pdf(doc, kind=documento),
            media_type="application/pdf",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
    sections: dict[str, list[tuple[str, str]]] = {}
    for section, label, value in fields:
        sections.setdefault(section, []).append((label, value))
    zone = ZoneInfo(doc["timezone"])
    return render(
        request,
        "fiscal/documento.html",
        web=web,
        title=f"{title} {number or '(minuta)'}",
        kind=documento,
        doc_title=title,
        number=number,
        proposal_id=proposal_id,
        proposal_href=proposal_url(proposal_id),
        pdf_href=f"{request.url.path}?formato=pdf",
        banner=banner(doc),
        authority=f"Prefeitura Municipal de {doc['place'].get('municipality_name')}",
        sections=sections,
        map_svg=Markup(render_map_svg(doc, width=640.0, height=400.0)),  # noqa: S704 (escaped)
        map_caption=MAP_CAPTION,
        evidence=evidence_views(doc["findings"], zone),
    )
