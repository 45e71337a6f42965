"""Live alerts for enforcement (agents and admins) and webhooks (admins).

- ``GET /api/v1/alerts``: recent alerts, newest first, paged.
- ``GET /api/v1/alerts/stream``: Server-Sent Events (``Authorization: Bearer <token>``). Each
  alert is an ``event: alert`` with ``id: <alert_id>`` and the alert JSON as ``data``; an alert
  announced again (a provisional one settled, or withdrawn: ``details.withdrawn``) is an
  ``event: revision`` with its JSON (``revision`` ≥ 1) and no ``id``; a comment
  line ``: conectado`` opens the stream and ``: keepalive`` follows every 15 s of silence.
- ``WS /api/v1/alerts/ws``: WebSocket; the token goes in the ``Authorization`` header, the
  ``token`` query parameter or, when both are absent, in the first message (``{"token":
  "..."}``, sent at once: within 1 s; a browser cannot set headers on a WebSocket). The server
  answers ``{"type": "subscribed", ...}``, then sends ``{"type": "alert", "alert": {...}}``
  messages (``"type": "revision"`` for an alert announced again). Close codes: 4401 (no or
  bad token, or the session ended), 4403 (role), 4422 (bad filter).

Both streams end when their session does: logout, account disabled, password or role changed
(announced by the revocation, :data:`api.accounts.SESSIONS_CHANNEL`), or the token found
expired or revoked at a keepalive (every 15 s of silence). SSE sends ``event: closed`` first.

Filters (query parameters of the three, all optional, all must pass): ``kind`` (repeated or
comma-separated finding kinds), ``bbox`` (``min_lon,min_lat,max_lon,max_lat``: the alert's
geometry must intersect it), ``stand_id`` (repeated or comma-separated; alerts of those stands).

Webhooks (admin): ``POST /api/v1/webhooks`` (``url``, ``secret``, ``filters``), ``GET``, and
``DELETE /api/v1/webhooks/{id}``, which deactivates (rows are never deleted). Deliveries are
signed and retried as :mod:`api.alerts` describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from api import accounts
from api._errors import InvalidRequestError, NotFoundError
from api.accounts import Principal
from api.alerts import (
    SESSION_CLOSED,
    AlertHub,
    Subscription,
    alerts_lifespan,
    list_alerts,
    sse_event,
    stream_event,
)
from api.deps import BearerToken, SessionDep, SettingsDep, require_roles
from api.schemas import StrictBody, error_responses
from api.security import token_digest
from tracking.detectors.findings import KINDS

router = APIRouter(prefix="/api/v1", lifespan=alerts_lifespan)

ROLES = ("agent", "admin")
Reviewer = Annotated[Principal, Depends(require_roles(*ROLES))]
Admin = Annotated[Principal, Depends(require_roles("admin"))]
KEEPALIVE_S = 15.0
WS_AUTH_TIMEOUT_S = 1.0
"""A WebSocket with no token in its handshake must send it as its first message this soon."""
_ERRORS = error_responses(401, 403, 422, 503)

KindsQuery = Annotated[
    list[str] | None,
    Query(description="Tipos de achado (repetido ou separado por vírgulas)"),
]
BboxQuery = Annotated[
    str | None, Query(description="Área: min_lon,min_lat,max_lon,max_lat (WGS84)")
]
StandsQuery = Annotated[
    list[str] | None, Query(description="Pontos (stand_id; repetido ou separado por vírgulas)")
]


class AlertFilters(BaseModel):
    """Which alerts a subscriber or webhook receives (empty: all).

    An unknown filter is refused: dropped, it would leave the webhook receiving every alert.
    """

    model_config = ConfigDict(extra="forbid")

    kinds: list[str] = Field(default_factory=list)
    bbox: list[float] | None = Field(None, description="[min_lon, min_lat, max_lon, max_lat]")
    stand_ids: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _known_filters(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                msg = (
                    f"filtro {unknown[0]!r} desconhecido; esperado um de "
                    f"{', '.join(cls.model_fields)}"
                )
                raise ValueError(msg)
        return data

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, kinds: list[str]) -> list[str]:
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            msg = f"tipo de achado {bad[0]!r} desconhecido; esperado um de {', '.join(KINDS)}"
            raise ValueError(msg)
        return kinds

    @field_validator("bbox")
    @classmethod
    def _valid_bbox(cls, bbox: list[float] | None) -> list[float] | None:
        if bbox is None:
            return None
        check_bbox(bbox)
        return bbox


class AlertPublic(BaseModel):
    """An alert: its finding's facts, a point and bounds, and how many recurrences it folds."""

    alert_id: str
    finding_id: str
    kind: str
    vehicle_id: str | None
    stand_id: str | None
    started_at: str
    ended_at: str
    confidence: float
    point: list[float] | None
    bbox: list[float] | None
    details: dict[str, Any]
    created_at: str
    repeat_count: int
    revision: int


class AlertsPublic(BaseModel):
    """A page of alerts and the total count of the filter."""

    data: list[AlertPublic]
    count: int


def check_webhook_url(url: str) -> str:
    """Return ``url`` stripped if it can receive webhooks, or raise ValueError (pt-BR).

    An ``http``/``https`` URL with a host, a port from 1 to 65535 if any, no blank or control
    character, and no ``user:password@`` (``GET /api/v1/webhooks`` shows the URL: a credential
    in it would be echoed).
    """
    url = url.strip()
    if not url or any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
        msg = "URL inválida: sem espaços nem caracteres de controle"
        raise ValueError(msg)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:  # "http://[::1" (bracket left open), "http://h:99999", "http://h:x"
        msg = f"URL inválida: {url[:80]!r} (host ou porta malformados; porta de 1 a 65535)"
        raise ValueError(msg) from None
    if parts.scheme not in ("http", "https"):
        msg = f"esquema de URL {parts.scheme!r} não aceito; esperado http ou https"
        raise ValueError(msg)
    if not parts.hostname:
        msg = "URL sem host; esperado http(s)://host[:porta]/caminho"
        raise ValueError(msg)
    if port == 0:
        msg = "porta 0 na URL; esperado de 1 a 65535"
        raise ValueError(msg)
    if parts.username is not None or parts.password is not None:
        msg = (
            "URL com usuário ou senha (usuario:senha@) não aceita: ela seria exibida na lista "
            "de webhooks; autentique o receptor pelo segredo (assinatura X-Pontual-Signature)"
        )
        raise ValueError(msg)
    try:
        urllib.request.Request(url, method="POST")  # noqa: S310 - as the delivery builds it
    except ValueError:
        msg = f"URL inválida: {url[:80]!r}"
        raise ValueError(msg) from None
    return url


class WebhookCreate(StrictBody):
    """A receiver of alerts: an http(s) URL, the HMAC secret, optional filters (no other field)."""

    url: Annotated[str, AfterValidator(check_webhook_url)] = Field(max_length=2000)
    secret: str = Field(min_length=16, max_length=256)
    filters: AlertFilters = Field(default_factory=lambda: AlertFilters(bbox=None))


class WebhookPublic(BaseModel):
    """A configured webhook (the secret is never returned)."""

    webhook_id: int
    url: str
    filters: AlertFilters
    active: bool
    created_at: str


class WebhooksPublic(BaseModel):
    """Every webhook, active or not."""

    data: list[WebhookPublic]
    count: int


def check_bbox(bbox: list[float]) -> tuple[float, float, float, float]:
    """Return a valid ``(min_lon, min_lat, max_lon, max_lat)`` or raise ValueError (pt-BR)."""
    if len(bbox) != 4:
        msg = f"bbox com {len(bbox)} números; esperado min_lon,min_lat,max_lon,max_lat"
        raise ValueError(msg)
    x0, y0, x1, y1 = (float(v) for v in bbox)
    if not (-180 <= x0 <= x1 <= 180 and -90 <= y0 <= y1 <= 90):
        msg = "bbox fora de ordem ou dos limites WGS84: min_lon ≤ max_lon, min_lat ≤ max_lat"
        raise ValueError(msg)
    return x0, y0, x1, y1


def _coordinate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"bbox: {text.strip()[:20]!r} não é um número; use min_lon,min_lat,max_lon,max_lat"
        raise ValueError(msg) from None
    if not math.isfinite(value):
        msg = f"bbox: {text.strip()[:20]!r} não é um número finito"
        raise ValueError(msg)
    return value


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def parse_filters(
    kind: list[str] | None, bbox: str | None, stand_id: list[str] | None
) -> AlertFilters:
    """Build filters from query parameters; raise InvalidRequestError (422) when malformed."""
    try:
        box = None if not bbox else [_coordinate(v) for v in bbox.split(",")]
        return AlertFilters(kinds=_split(kind), bbox=box, stand_ids=_split(stand_id))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        errors = getattr(exc, "errors", None)
        msg = str(errors()[0]["msg"]) if callable(errors) else str(exc)
        raise InvalidRequestError(
            msg.removeprefix("Value error, "), code="invalid_filter"
        ) from None


def _hub(app: Any) -> AlertHub:
    hub: AlertHub = app.state.alert_hub
    return hub


@router.get("/alerts", response_model=AlertsPublic, responses=_ERRORS, tags=["alertas"])
def get_alerts(
    user: Reviewer,
    session: SessionDep,
    kind: KindsQuery = None,
    bbox: BboxQuery = None,
    stand_id: StandsQuery = None,
    vehicle_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Any:
    """Alertas recentes (mais novos primeiro), filtrados por tipo, área, ponto e veículo."""
    f = parse_filters(kind, bbox, stand_id)
    data, count = list_alerts(
        session=session,
        kinds=f.kinds or None,
        stand_ids=f.stand_ids or None,
        bbox=None if f.bbox is None else check_bbox(f.bbox),
        vehicle_id=vehicle_id,
        limit=limit,
        offset=offset,
    )
    return {"data": data, "count": count}


@router.get(
    "/alerts/stream",
    responses={**_ERRORS, 200: {"content": {"text/event-stream": {}}}},
    response_class=StreamingResponse,
    tags=["alertas"],
)
async def stream_alerts(
    request: Request,
    user: Reviewer,
    token: BearerToken,
    kind: KindsQuery = None,
    bbox: BboxQuery = None,
    stand_id: StandsQuery = None,
) -> StreamingResponse:
    """Alertas ao vivo por Server-Sent Events (`Authorization: Bearer <token>`).

    O fluxo termina (evento `closed`) no logout, na desativação da conta e na troca de senha
    ou de papel.
    """
    hub = _hub(request.app)
    engine = request.app.state.engine
    sub = hub.subscribe(
        parse_filters(kind, bbox, stand_id).model_dump(),
        user_id=user.user_id,
        token_digest=token_digest(token or ""),
    )

    async def events() -> AsyncIterator[str]:
        try:
            yield ": conectado\n\n"
            while True:
                alert = await _next_alert(sub, engine, token or "")
                if alert is None:
                    yield ": keepalive\n\n"
                    continue
                if alert is SESSION_CLOSED:
                    yield f"event: closed\ndata: {json.dumps({'reason': sub.closed})}\n\n"
                    return
                yield sse_event(alert)
        finally:
            hub.unsubscribe(sub)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _principal(engine: Engine, token: str) -> Principal | None:
    with Session(engine) as session:
        return accounts.principal_for_token(session=session, token=token)


async def _next_alert(sub: Subscription, engine: Engine, token: str) -> dict[str, Any] | None:
    """Wait for the next alert; None after :data:`KEEPALIVE_S` of silence.

    :data:`~api.alerts.SESSION_CLOSED` when the session ended: announced by its revocation, or
    found at a silence (the token expired, or a revocation was missed while the hub's LISTEN
    connection was down).
    """
    try:
        return await asyncio.wait_for(sub.queue.get(), timeout=KEEPALIVE_S)
    except TimeoutError:
        user = await run_in_threadpool(_principal, engine, token)
        if user is None or user.role not in ROLES:
            sub.close("sessão expirada ou revogada")
            return SESSION_CLOSED
        return None


async def _ws_token(websocket: WebSocket, token: str | None) -> str | None:
    if token:
        return token
    header = websocket.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip() or None
    try:
        first = await asyncio.wait_for(websocket.receive_text(), timeout=WS_AUTH_TIMEOUT_S)
        value = json.loads(first).get("token")
    except (TimeoutError, ValueError, AttributeError, WebSocketDisconnect):
        return None
    return value if isinstance(value, str) and value else None


@router.websocket("/alerts/ws")
async def alerts_websocket(
    websocket: WebSocket,
    token: str | None = None,
    kind: KindsQuery = None,
    bbox: BboxQuery = None,
    stand_id: StandsQuery = None,
) -> None:
    """Alertas ao vivo por WebSocket (token no cabeçalho, no parâmetro `token` ou na 1ª mensagem).

    Sem token em 1 s, a conexão é fechada com 4401.
    """
    await websocket.accept()
    raw = await _ws_token(websocket, token)
    user = (
        None
        if raw is None
        else await run_in_threadpool(_principal, websocket.app.state.engine, raw)
    )
    if user is None or raw is None:
        await websocket.close(code=4401, reason="token inválido, expirado ou ausente")
        return
    if user.role not in ROLES:
        await websocket.close(code=4403, reason=f"o papel '{user.role}' não recebe alertas")
        return
    try:
        filters = parse_filters(kind, bbox, stand_id)
    except InvalidRequestError as exc:
        await websocket.close(code=4422, reason=exc.message[:120])
        return
    hub = _hub(websocket.app)
    sub = hub.subscribe(filters.model_dump(), user_id=user.user_id, token_digest=token_digest(raw))
    engine = websocket.app.state.engine

    async def drain() -> None:  # ends when the client leaves
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.receive_text()

    async def forward() -> None:
        while True:
            alert = await _next_alert(sub, engine, raw)
            if alert is SESSION_CLOSED:
                await websocket.close(code=4401, reason=(sub.closed or "")[:120])
                return
            if alert is not None:
                name, body = stream_event(alert)
                await websocket.send_json({"type": name, "alert": body})

    try:
        await websocket.send_json({"type": "subscribed", "filters": filters.model_dump()})
        tasks = [asyncio.create_task(drain()), asyncio.create_task(forward())]
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for task in (*done, *pending):
            with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
                await task
    except WebSocketDisconnect:
        pass
    finally:
        hub.unsubscribe(sub)


# --- webhooks ------------------------------------------------------------------------------


def _webhook(row: Any) -> dict[str, Any]:
    return {
        "webhook_id": int(row["webhook_id"]),
        "url": row["url"],
        "filters": row["filters"] or {},
        "active": bool(row["active"]),
        "created_at": row["created_at"].isoformat(),
    }


_WEBHOOK_COLUMNS = "webhook_id, url, filters, active, created_at"


@router.post(
    "/webhooks",
    response_model=WebhookPublic,
    status_code=201,
    responses=_ERRORS,
    tags=["webhooks"],
)
def create_webhook(
    body: WebhookCreate, user: Admin, session: SessionDep, settings: SettingsDep
) -> Any:
    """Cadastra um webhook: cada alerta que passa nos filtros é enviado por POST, assinado.

    O segredo é guardado cifrado (chave `PONTUAL_SECRET_KEY` ou `secret.key`) e nunca devolvido.
    """
    from sqlalchemy import bindparam
    from sqlalchemy.dialects.postgresql import JSONB

    from api.crypto import encrypt_secret

    row = (
        session.execute(
            text(
                "INSERT INTO webhooks (url, secret, filters) VALUES (:u, :s, :f) "
                f"RETURNING {_WEBHOOK_COLUMNS}"
            ).bindparams(bindparam("f", type_=JSONB)),
            {
                "u": body.url,
                "s": encrypt_secret(body.secret, settings=settings),
                "f": body.filters.model_dump(),
            },
        )
        .mappings()
        .one()
    )
    session.commit()
    return _webhook(row)


@router.get("/webhooks", response_model=WebhooksPublic, responses=_ERRORS, tags=["webhooks"])
def get_webhooks(user: Admin, session: SessionDep) -> Any:
    """Lista os webhooks, ativos e desativados (o segredo nunca é devolvido)."""
    rows = session.execute(
        text(f"SELECT {_WEBHOOK_COLUMNS} FROM webhooks ORDER BY webhook_id")  # noqa: S608
    ).mappings()
    data = [_webhook(r) for r in rows]
    return {"data": data, "count": len(data)}


@router.delete(
    "/webhooks/{webhook_id}",
    response_model=WebhookPublic,
    responses=error_responses(401, 403, 404, 422, 503),
    tags=["webhooks"],
)
def deactivate_webhook(webhook_id: int, user: Admin, session: SessionDep) -> Any:
    """Desativa um webhook (o registro e suas entregas são mantidos)."""
    row = (
        session.execute(
            text(
                "UPDATE webhooks SET active = false WHERE webhook_id = :w "  # noqa: S608
                f"RETURNING {_WEBHOOK_COLUMNS}"
            ),
            {"w": webhook_id},
        )
        .mappings()
        .one_or_none()
    )
    if row is None:
        msg = f"webhook {webhook_id} não existe"
        raise NotFoundError(msg)
    session.commit()
    return _webhook(row)
