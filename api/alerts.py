"""Live alerts in the server: detection on ingest, LISTEN/NOTIFY fan-out, webhook delivery.

Detection
    :func:`detect_on_ingest` runs :func:`engines.live.process_fixes` on queued fixes inside
    a savepoint of the caller's transaction: the detector states, the findings, the alerts and
    their ``NOTIFY`` commit together with the queue's update, so an alert is never announced for
    a fix that is not durable. A detector failure rolls back to the savepoint and is raised: the
    live worker (:mod:`api.live_worker`) keeps the fixes and records a dead letter.
Fan-out
    Each server process holds one :class:`AlertHub`: one psycopg async connection that
    ``LISTEN`` on ``pontual_alerts`` (reconnecting with backoff), reads each announced alert
    and hands it to the in-process subscribers (SSE and WebSocket clients) whose filters match.
    An alert announced again (a provisional one settled or withdrawn, ``revision`` ≥ 1) reaches
    them as a :data:`REVISION` event (:func:`stream_event`).
    Whichever process committed the alert, every process hears the NOTIFY. The same
    connection listens on ``pontual_sessions`` (:data:`api.accounts.SESSIONS_CHANNEL`): a
    logout, a disabled account, a password or role change closes that session's streams.
Webhooks
    A delivery worker per process (:func:`deliver_due`, woken by each NOTIFY and every few
    seconds) claims due ``webhook_deliveries`` rows with ``FOR UPDATE SKIP LOCKED``, POSTs the
    alert as JSON with ``X-Pontual-Signature: sha256=<hex HMAC-SHA256 of the body with the
    webhook's secret>`` (stored encrypted, :mod:`api.crypto`), ``X-Pontual-Alert-Id`` and
    ``X-Pontual-Alert-Revision`` (a settled or withdrawn alert is sent again, one more), and
    in the same transaction marks the row ``delivered`` after a 2xx, or schedules the next
    attempt after ``backoff_s · 2^(attempts − 1)`` (at most one hour), ``failed`` after
    ``max_attempts``.
    The row lock is held during the POST, so two workers never send the same (webhook, alert);
    only a crash between the receiver's 2xx and the COMMIT can repeat a delivery, which the
    receiver can recognise by ``X-Pontual-Alert-Id`` and ``X-Pontual-Alert-Revision``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import logging
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import psycopg
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.orm import Session

from api.accounts import SESSIONS_CHANNEL
from api.queries import prefixo_part
from api.settings import Settings, get_settings
from engines.live import CHANNEL, REVISED, alert_matches, process_fixes

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Pontual-Signature"
ALERT_ID_HEADER = "X-Pontual-Alert-Id"
REVISION_HEADER = "X-Pontual-Alert-Revision"
REVISION = "revision"
"""Stream event of an alert announced again: settled, or withdrawn (``details.withdrawn``)."""
_REVISED = "__revised__"
QUEUE_SIZE = 1000
POLL_S = 5.0
MAX_BACKOFF_S = 3600.0
_RECONNECT_S = (0.5, 1.0, 2.0, 5.0, 10.0)
_STOP_WAIT_S = 10.0


# --- detection on ingest -------------------------------------------------------------------


def detect_on_ingest(
    conn: Connection, pings: pd.DataFrame, *, settings: Settings | None = None
) -> list[dict[str, Any]]:
    """Run the live detectors on fixes just stored in ``conn``'s transaction (in a savepoint).

    Parameters
    ----------
    conn : sqlalchemy.engine.Connection
        A connection inside its transaction (the caller commits).
    pings : pandas.DataFrame
        Stored fixes (validated pings frame).
    settings : Settings, optional
        Throttle window and time zone; default :func:`api.settings.get_settings`.

    Returns
    -------
    list of dict
        The finding records completed (see :func:`engines.live.process_fixes`).

    Raises
    ------
    Exception
        Whatever the detectors raised, after rolling back to the savepoint (the caller's
        transaction stays usable, unless the connection itself failed).
    """
    if pings.empty:
        return []
    settings = settings or get_settings()
    # The session works in a SAVEPOINT of conn's transaction: its commit releases the
    # savepoint (the caller's COMMIT makes it durable); leaving it uncommitted on an error
    # rolls back to it.
    with Session(bind=conn, join_transaction_mode="create_savepoint") as session:
        try:
            found = process_fixes(
                session,
                pings,
                throttle_s=settings.alert_throttle_s,
                timezone=settings.timezone,
            )
        except BaseException:
            session.rollback()  # back to the savepoint; conn's transaction goes on
            raise
        session.commit()
    return found


# --- reading alerts --------------------------------------------------------------------------


ANNOUNCED = "payload, created_at, repeat_count, revision"
"""The ``alerts`` columns :func:`alert_event` reads."""


def alert_event(row: Mapping[str, Any] | RowMapping) -> dict[str, Any]:
    """Return an alert as it is announced, from its :data:`ANNOUNCED` columns."""
    created = row["created_at"]
    return {
        **dict(row["payload"]),
        "created_at": created.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"),
        "repeat_count": int(row["repeat_count"]),
        "revision": int(row["revision"]),
    }


def stream_event(alert: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Return a queued alert as its stream event's name and JSON.

    The name is ``alert``, or :data:`REVISION` for an alert announced again.
    """
    data = dict(alert)
    return (REVISION if data.pop(_REVISED, False) else "alert"), data


def sse_event(alert: Mapping[str, Any], view: Callable[[dict[str, Any]], Any] | None = None) -> str:
    """Return a queued alert as a Server-Sent Event (its JSON, or ``view`` of it).

    A new alert carries ``id: <alert_id>``; a revision none, so the browser's
    ``Last-Event-ID`` stays on the last new alert (the replay after a reconnection).
    """
    name, body = stream_event(alert)
    data = json.dumps(view(body) if view else body, ensure_ascii=False, separators=(",", ":"))
    ident = f"id: {body['alert_id']}\n" if name == "alert" else ""
    return f"{ident}event: {name}\ndata: {data}\n\n"


def fetch_alert(engine: Engine, alert_id: str) -> dict[str, Any] | None:
    """Return an alert as it is announced (:func:`alert_event`), or None."""
    with engine.connect() as conn:
        row = (
            conn.execute(
                text(f"SELECT {ANNOUNCED} FROM alerts WHERE alert_id = :a"),  # noqa: S608
                {"a": alert_id},
            )
            .mappings()
            .one_or_none()
        )
    return None if row is None else alert_event(row)


def list_alerts(
    *,
    session: Session,
    kinds: list[str] | None = None,
    stand_ids: list[str] | None = None,
    bbox: tuple[float, float, float, float] | None = None,
    vehicle_id: str | None = None,
    vehicle_part: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """Return recent alerts (newest first) matching the filters, and how many match in all.

    ``vehicle_id`` is one vehicle; ``vehicle_part`` any vehicle whose id contains it, case
    ignored (the console's filter: "4227" finds SIM-4227).
    """
    where = ["true"]
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if kinds:
        where.append("kind = ANY(:kinds)")
        params["kinds"] = kinds
    if stand_ids:
        where.append("stand_id = ANY(:stands)")
        params["stands"] = stand_ids
    if vehicle_id:
        where.append("vehicle_id = :vehicle")
        params["vehicle"] = vehicle_id
    if vehicle_part:
        cond, more = prefixo_part("vehicle_id", vehicle_part)
        where.append(cond)
        params.update(more)
    if bbox:
        where.append("geometry && ST_MakeEnvelope(:x0, :y0, :x1, :y1, 4326)")
        params.update(dict(zip(("x0", "y0", "x1", "y1"), bbox, strict=True)))
    cond = " AND ".join(where)
    total = session.execute(text(f"SELECT count(*) FROM alerts WHERE {cond}"), params).scalar_one()  # noqa: S608
    rows = session.execute(
        text(
            f"SELECT {ANNOUNCED} FROM alerts "  # noqa: S608
            f"WHERE {cond} ORDER BY created_at DESC, alert_id LIMIT :limit OFFSET :offset"
        ),
        params,
    ).mappings()
    return [alert_event(r) for r in rows], int(total)


# --- fan-out -------------------------------------------------------------------------------


SESSION_CLOSED: dict[str, Any] = {"type": "session_closed"}
"""Put in a subscriber's queue (compared by identity) when its session ends: the stream closes."""


@dataclass(eq=False)
class Subscription:
    """One in-process subscriber: its filters, whose session it is, the queue of its alerts.

    ``closed`` is the reason once the session was revoked (the stream then ends).
    """

    filters: dict[str, Any]
    queue: asyncio.Queue[dict[str, Any]] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_SIZE)
    )
    dropped: int = 0
    user_id: int | None = None
    token_digest: str | None = None
    closed: str | None = None

    def close(self, reason: str) -> None:
        """End the subscription: nothing more is delivered, the stream reads the sentinel."""
        if self.closed is not None:
            return
        self.closed = reason
        while True:
            try:
                self.queue.put_nowait(SESSION_CLOSED)
                return
            except asyncio.QueueFull:
                self.queue.get_nowait()  # a full queue: the oldest alert gives way


def conninfo(engine: Engine) -> str:
    """Return the libpq URL of an engine's database (for the LISTEN connection)."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


class AlertHub:
    """The process's LISTEN connection and its subscribers (one per app instance)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.subscribers: set[Subscription] = set()
        self.listening = asyncio.Event()
        self.wake = asyncio.Event()

    def subscribe(
        self,
        filters: Mapping[str, Any],
        *,
        user_id: int | None = None,
        token_digest: str | None = None,
    ) -> Subscription:
        """Register a subscriber; alerts matching ``filters`` reach its queue.

        ``user_id`` and ``token_digest`` name its session: a revocation of either
        (:data:`api.accounts.SESSIONS_CHANNEL`) closes it.
        """
        sub = Subscription(filters=dict(filters), user_id=user_id, token_digest=token_digest)
        self.subscribers.add(sub)
        return sub

    def close_sessions(self, payload: str) -> int:
        """Close the subscriptions of a revoked session (``user:<id>`` or ``token:<digest>``)."""
        kind, _, value = payload.partition(":")
        n = 0
        for sub in list(self.subscribers):
            if (kind == "user" and str(sub.user_id) == value) or (
                kind == "token" and sub.token_digest == value
            ):
                sub.close("sessão encerrada (logout, conta desativada, senha ou papel alterado)")
                self.subscribers.discard(sub)
                n += 1
        return n

    def unsubscribe(self, sub: Subscription) -> None:
        """Forget a subscriber."""
        self.subscribers.discard(sub)

    def publish(self, alert: Mapping[str, Any]) -> int:
        """Hand an alert to the matching subscribers; return how many got it."""
        n = 0
        for sub in list(self.subscribers):
            if sub.closed is None and alert_matches(sub.filters, alert):
                try:
                    sub.queue.put_nowait(dict(alert))
                    n += 1
                except asyncio.QueueFull:
                    sub.dropped += 1
        return n

    async def _announced(self, payload: str) -> None:
        self.wake.set()
        if not self.subscribers:
            return
        alert_id = payload.removeprefix(REVISED)
        alert = await asyncio.to_thread(fetch_alert, self.engine, alert_id)
        if alert is not None:
            self.publish(alert | {_REVISED: True} if alert_id != payload else alert)

    async def listen(self) -> None:
        """LISTEN on the alerts channel until cancelled, reconnecting after failures."""
        failures = 0
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    conninfo(self.engine), autocommit=True, connect_timeout=5
                )
            except psycopg.Error as exc:
                delay = _RECONNECT_S[min(failures, len(_RECONNECT_S) - 1)]
                if failures == 0:
                    log.warning("LISTEN de alertas sem conexão (%s); nova tentativa", exc)
                failures += 1
                await asyncio.sleep(delay)
                continue
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
                await conn.execute(f"LISTEN {SESSIONS_CHANNEL}")
                failures = 0
                self.listening.set()
                self.wake.set()  # deliveries may have been queued while disconnected
                async for note in conn.notifies():
                    # In commit order: a session revoked before an alert never receives it.
                    if note.channel == SESSIONS_CHANNEL:
                        self.close_sessions(note.payload)
                    else:
                        await self._announced(note.payload)
            except psycopg.Error as exc:
                log.warning("LISTEN de alertas interrompido (%s); reconectando", exc)
            finally:
                self.listening.clear()
                with contextlib.suppress(psycopg.Error):
                    await conn.close()
            await asyncio.sleep(_RECONNECT_S[0])


# --- webhooks ------------------------------------------------------------------------------


def signature(secret: str, body: bytes) -> str:
    """Return the ``X-Pontual-Signature`` value of a body: ``sha256=<hex HMAC>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> str | None:
    """POST; return None after a 2xx, else the error text.

    Any failure to build or send this one request (a URL stored before it was checked, a
    refused connection, a broken reply) is this delivery's error, retried as an HTTP error is:
    it never ends the batch of :func:`deliver_due`.
    """
    try:
        request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")  # noqa: S310
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except Exception as exc:  # noqa: BLE001 - one receiver's failure, never the batch's
        return f"{type(exc).__name__}: {exc}"[:500]
    return None if 200 <= status < 300 else f"HTTP {status}"


def deliver_due(
    engine: Engine,
    *,
    max_attempts: int,
    backoff_s: float,
    timeout_s: float,
    limit: int = 20,
    settings: Settings | None = None,
) -> int:
    """Attempt the due webhook deliveries once; return how many were attempted.

    Parameters
    ----------
    engine : sqlalchemy.Engine
        The database.
    max_attempts : int
        Attempts after which a delivery is ``failed``.
    backoff_s : float
        Delay before the 2nd attempt; doubled for each further one (at most one hour).
    timeout_s : float
        Timeout of each POST.
    limit : int, default 20
        Deliveries claimed per call.
    settings : Settings, optional
        The key of the stored secrets (:mod:`api.crypto`); default ``get_settings()``.
    """
    from api.crypto import SecretKeyError, decrypt_secret

    settings = settings or get_settings()
    with engine.connect() as conn, conn.begin():
        rows = (
            conn.execute(
                text(
                    "SELECT d.webhook_id, d.alert_id, d.attempts, w.url, w.secret, "
                    "a.payload, a.created_at, a.repeat_count, a.revision "
                    "FROM webhook_deliveries d "
                    "JOIN webhooks w ON w.webhook_id = d.webhook_id "
                    "JOIN alerts a ON a.alert_id = d.alert_id "
                    "WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND w.active "
                    "ORDER BY d.next_attempt_at LIMIT :n FOR UPDATE OF d SKIP LOCKED"
                ),
                {"n": limit},
            )
            .mappings()
            .all()
        )
        for row in rows:
            body = json.dumps(alert_event(row), ensure_ascii=False, separators=(",", ":")).encode()
            try:
                secret = decrypt_secret(row["secret"], settings=settings)
            except SecretKeyError as exc:
                error: str | None = str(exc)
            else:
                headers = {
                    "Content-Type": "application/json",
                    "User-Agent": "pontual-webhooks/1",
                    SIGNATURE_HEADER: signature(secret, body),
                    ALERT_ID_HEADER: row["alert_id"],
                    REVISION_HEADER: str(row["revision"]),
                }
                error = _post(row["url"], body, headers, timeout_s)
            attempts = int(row["attempts"]) + 1
            key = {"w": row["webhook_id"], "a": row["alert_id"], "n": attempts}
            if error is None:
                conn.execute(
                    text(
                        "UPDATE webhook_deliveries SET status = 'delivered', attempts = :n, "
                        "delivered_at = now(), last_error = NULL "
                        "WHERE webhook_id = :w AND alert_id = :a"
                    ),
                    key,
                )
                continue
            delay = min(MAX_BACKOFF_S, backoff_s * 2 ** (attempts - 1))
            conn.execute(
                text(
                    "UPDATE webhook_deliveries SET attempts = :n, last_error = :e, "
                    "status = CASE WHEN :n >= :max THEN 'failed' ELSE 'pending' END, "
                    "next_attempt_at = now() + make_interval(secs => :delay) "
                    "WHERE webhook_id = :w AND alert_id = :a"
                ),
                key | {"e": error, "max": max_attempts, "delay": delay},
            )
    return len(rows)


def next_due_s(engine: Engine) -> float | None:
    """Return the seconds until the next pending delivery is due (None: none pending)."""
    with engine.connect() as conn:
        value = conn.execute(
            text(
                "SELECT extract(epoch FROM min(d.next_attempt_at) - now()) "
                "FROM webhook_deliveries d JOIN webhooks w ON w.webhook_id = d.webhook_id "
                "WHERE d.status = 'pending' AND w.active"
            )
        ).scalar_one()
    return None if value is None else float(value)


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait for ``event`` at most ``timeout_s`` (asyncio.wait: cancellation never swallowed)."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout_s)
    finally:
        waiter.cancel()


async def webhook_worker(hub: AlertHub, settings: Settings) -> None:
    """Deliver webhooks until cancelled: woken by each NOTIFY or when a retry falls due.

    First encrypts any secret an older version stored in clear (:mod:`api.crypto`).
    """
    from api.crypto import encrypt_stored_secrets

    try:
        await asyncio.to_thread(encrypt_stored_secrets, hub.engine, settings=settings)
    except Exception:  # the database may be away: the next start tries again
        log.exception("cifragem dos segredos de webhook adiada")
    wait_s = 0.0
    while True:
        await wait_event(hub.wake, wait_s)  # never swallows a cancellation (wait_for can)
        hub.wake.clear()
        try:
            while await asyncio.to_thread(
                deliver_due,
                hub.engine,
                max_attempts=settings.webhook_max_attempts,
                backoff_s=settings.webhook_backoff_s,
                timeout_s=settings.webhook_timeout_s,
                settings=settings,
            ):
                pass
            due = await asyncio.to_thread(next_due_s, hub.engine)
            wait_s = POLL_S if due is None else min(POLL_S, max(0.05, due))
        except Exception:  # the database may be away: retry later
            log.exception("entrega de webhooks falhou; nova tentativa em instantes")
            wait_s = POLL_S


@contextlib.asynccontextmanager
async def alerts_lifespan(app: Any) -> AsyncIterator[None]:
    """Start the app's hub (``app.state.alert_hub``) and webhook worker; stop them at shutdown."""
    hub = AlertHub(app.state.engine)
    app.state.alert_hub = hub
    tasks = [
        asyncio.create_task(hub.listen(), name="pontual-alerts-listen"),
        asyncio.create_task(webhook_worker(hub, app.state.settings), name="pontual-webhooks"),
    ]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=_STOP_WAIT_S)  # bounded: shutdown never hangs
