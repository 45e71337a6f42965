"""Tests of live alerts end to end: HTTP ingest → finding → NOTIFY → SSE/WebSocket/webhook.

Two app instances (each with its own engine, LISTEN connection and webhook worker) run under
uvicorn on 127.0.0.1; fixes go to one, subscribers listen on both, so an alert that reaches the
other instance crossed PostgreSQL's LISTEN/NOTIFY. Webhook receivers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import io
import json
import queue
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
import uvicorn
from api_factories import DEVICE_SINCE, SECRET_KEY, bearer, suspend_until_today
from fastapi.testclient import TestClient
from pypdf import PdfReader
from sqlalchemy import Engine, text
from websockets.sync.client import connect as ws_connect

from api.alerts import AlertHub, signature

# How long a test waits for an alert to exist: a deadline, not a latency target (the POST → SSE
# lag is measured by bench/bench_http_ingest.py); a loaded CI machine can take seconds.
ALERT_WAIT_S = 30.0
BARRED = "operating_while_barred"


# --- servers and clients ---------------------------------------------------------------------


class Server:
    """A uvicorn server of one app instance, in a thread, on a free 127.0.0.1 port."""

    def __init__(self, app: Any) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.app = app

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        hub: AlertHub = self.app.state.alert_hub
        while not hub.listening.is_set():  # LISTEN is on: no NOTIFY can be missed from now
            assert time.monotonic() < deadline, "LISTEN did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


@pytest.fixture(scope="module")
def servers(api_database_url: str) -> Iterator[tuple[Server, Server]]:
    """Two app instances on the API test database, each with its own engine."""
    from api.main import create_app
    from api.settings import Settings
    from db.engine import make_engine

    settings = Settings(
        webhook_backoff_s=0.3, webhook_max_attempts=4, webhook_timeout_s=2, secret_key=SECRET_KEY
    )
    engines = [make_engine(api_database_url) for _ in range(2)]
    try:
        with (
            Server(create_app(engine=engines[0], settings=settings)) as a,
            Server(create_app(engine=engines[1], settings=settings)) as b,
        ):
            yield a, b
    finally:
        for engine in engines:
            engine.dispose()


@pytest.fixture
def vehicle(api_engine: Engine) -> tuple[str, str]:
    """A fresh registered vehicle and its device token: (vehicle_id, token)."""
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    vehicle_id = f"AL{secrets.token_hex(3).upper()}"
    with session_scope(api_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id))
        session.flush()
        _, token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
        )
    return vehicle_id, token


class SseClient:
    """Reads an SSE stream in a thread; events land in ``events`` with their arrival time."""

    def __init__(self, url: str, token: str, **params: Any) -> None:
        self.events: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.ready = threading.Event()
        self.ended = threading.Event()  # the server closed the stream
        self.status: int | None = None
        self._stop = False
        self._args = (url + "/api/v1/alerts/stream", bearer(token), params)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        url, headers, params = self._args
        try:
            with httpx.stream(
                "GET", url, headers=headers, params=params, timeout=httpx.Timeout(5, read=30)
            ) as response:
                self.status = response.status_code
                data, event, ident = None, "message", None
                for line in response.iter_lines():
                    if line.startswith(": conectado"):
                        self.ready.set()
                    elif line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("id: "):
                        ident = line[4:]
                    elif line.startswith("data: "):
                        data = json.loads(line[6:])
                    elif line == "" and data is not None:
                        self.events.put((time.monotonic(), {**data, "_event": event, "_id": ident}))
                        data, event, ident = None, "message", None
                    if self._stop:
                        return
            self.ended.set()
        except httpx.HTTPError:
            pass
        finally:
            self.ready.set()

    def __enter__(self) -> SseClient:
        self.thread.start()
        assert self.ready.wait(10), "SSE stream did not open"
        assert self.status == 200
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True  # the thread ends at the next line (keepalive) or at teardown

    def alerts_for(
        self, vehicle_id: str, timeout_s: float, *, until: int | None = None
    ) -> list[tuple[float, dict]]:
        """The vehicle's alerts that arrive within `timeout_s`, or as soon as `until` have."""
        out, deadline = [], time.monotonic() + timeout_s
        while time.monotonic() < deadline and (until is None or len(out) < until):
            try:
                at, event = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if event.get("vehicle_id") == vehicle_id:
                out.append((at, event))
        return out


def _iso(minutes_ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).isoformat()


def _fix(minutes_ago: float, meter: str = "occupied", lon: float = -51.2287) -> dict[str, Any]:
    return {"timestamp": _iso(minutes_ago), "lat": -30.0277, "lon": lon, "meter": meter}


def post_fix(server: Server, token: str, fix: dict[str, Any]) -> None:
    response = httpx.post(
        server.url + "/api/v1/pings", json={"pings": [fix]}, headers=bearer(token), timeout=10
    )
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 1


def start_gap(server: Server, token: str) -> None:
    """An occupied fix 25 minutes ago: the next occupied fix completes a tracking gap."""
    post_fix(server, token, _fix(25))


def complete_gap(server: Server, token: str) -> float:
    """An occupied fix 5 minutes ago, 6 km east (a 20-min silence in service, driven through);
    return when it was sent."""
    sent = time.monotonic()
    post_fix(server, token, _fix(5, lon=-51.2287 + 0.0623))
    return sent


# --- end to end ------------------------------------------------------------------------------


class TestAlertsEndToEnd:
    def test_sse_subscribers_of_both_processes_get_the_alert(
        self, servers: tuple[Server, Server], seeded: dict, vehicle: tuple[str, str]
    ) -> None:
        """A fix ingested over HTTP on A completes a gap; SSE clients on A and B get it once."""
        a, b = servers
        vehicle_id, token = vehicle
        agent, admin = seeded["tokens"]["agent"], seeded["tokens"]["admin"]
        start_gap(a, token)
        with SseClient(a.url, agent) as on_a, SseClient(b.url, admin) as on_b:
            sent = complete_gap(a, token)
            got = []
            for sub in (on_a, on_b):
                first = sub.alerts_for(vehicle_id, ALERT_WAIT_S, until=1)
                got.append(first + sub.alerts_for(vehicle_id, 0.3))  # and no second
        for arrivals in got:
            assert len(arrivals) == 1
            at, alert = arrivals[0]
            assert alert["kind"] == "tracking_gap"
            assert alert["alert_id"] == f"alert-{alert['finding_id']}"
            assert at > sent

    def test_websocket_subscriber_gets_the_alert(
        self, servers: tuple[Server, Server], seeded: dict, vehicle: tuple[str, str]
    ) -> None:
        """A WebSocket client (token as first message) on B receives the alert of A's ingest."""
        a, b = servers
        vehicle_id, token = vehicle
        start_gap(a, token)
        with ws_connect(f"ws://127.0.0.1:{b.port}/api/v1/alerts/ws?kind=tracking_gap") as ws:
            ws.send(json.dumps({"token": seeded["tokens"]["agent"]}))
            assert json.loads(ws.recv(timeout=5))["type"] == "subscribed"
            sent = complete_gap(a, token)
            deadline = sent + ALERT_WAIT_S
            while True:
                message = json.loads(ws.recv(timeout=max(0.01, deadline - time.monotonic())))
                if message["alert"]["vehicle_id"] == vehicle_id:
                    break
            assert message["type"] == "alert"
            assert message["alert"]["kind"] == "tracking_gap"

    def test_filters_by_kind_area_and_stand(
        self, servers: tuple[Server, Server], seeded: dict, vehicle: tuple[str, str]
    ) -> None:
        """Only subscribers whose kind, bbox and stand filters match get the alert."""
        a, b = servers
        vehicle_id, token = vehicle
        agent = seeded["tokens"]["agent"]
        start_gap(a, token)
        with (
            SseClient(b.url, agent, kind="tracking_gap", bbox="-51.3,-30.1,-51.2,-30.0") as hit,
            SseClient(b.url, agent, kind="gps_anomaly,flag2_misuse") as other_kind,
            SseClient(b.url, agent, bbox="-43.3,-23.0,-43.1,-22.8") as elsewhere,
            SseClient(b.url, agent, stand_id="S1") as at_stand,
        ):
            complete_gap(a, token)
            assert len(hit.alerts_for(vehicle_id, ALERT_WAIT_S, until=1)) == 1
            assert hit.alerts_for(vehicle_id, 0.3) == []  # once
            assert other_kind.alerts_for(vehicle_id, 0.3) == []
            assert elsewhere.alerts_for(vehicle_id, 0.1) == []
            assert at_stand.alerts_for(vehicle_id, 0.1) == []  # a gap belongs to no stand

    def test_webhook_signed_retried_after_500_and_delivered_once(
        self,
        servers: tuple[Server, Server],
        seeded: dict,
        vehicle: tuple[str, str],
        api_engine: Engine,
    ) -> None:
        """The receiver answers 500 then 200: two signed POSTs, one delivery, never a third."""
        a, _ = servers
        vehicle_id, token = vehicle
        secret = secrets.token_hex(16)
        with Receiver(fail_first=1) as receiver:
            created = httpx.post(
                a.url + "/api/v1/webhooks",
                json={
                    "url": receiver.url,
                    "secret": secret,
                    "filters": {"kinds": ["tracking_gap"], "bbox": [-51.3, -30.1, -51.2, -30.0]},
                },
                headers=bearer(seeded["tokens"]["admin"]),
                timeout=10,
            )
            assert created.status_code == 201, created.text
            webhook_id = created.json()["webhook_id"]
            try:
                start_gap(a, token)
                complete_gap(a, token)
                mine = receiver.wait_for(vehicle_id, count=2, timeout_s=10)
                time.sleep(1.5)  # both processes' workers had time to send it again: none did
                mine = receiver.requests_for(vehicle_id)
            finally:
                httpx.delete(
                    f"{a.url}/api/v1/webhooks/{webhook_id}",
                    headers=bearer(seeded["tokens"]["admin"]),
                    timeout=10,
                )
        assert [status for status, _, _ in mine] == [500, 200]
        for _, headers, body in mine:
            assert headers["x-pontual-signature"] == signature(secret, body)
            expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            assert headers["x-pontual-signature"] == f"sha256={expected}"
            assert headers["x-pontual-alert-id"] == json.loads(body)["alert_id"]
        with api_engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT status, attempts, delivered_at IS NOT NULL FROM webhook_deliveries "
                    "WHERE webhook_id = :w"
                ),
                {"w": webhook_id},
            ).one()
        assert tuple(row) == ("delivered", 2, True)

    def test_a_provisional_alert_is_announced_again_when_its_day_closes(
        self,
        servers: tuple[Server, Server],
        seeded: dict,
        vehicle: tuple[str, str],
        api_engine: Engine,
    ) -> None:
        """A suspended taxi's ride yesterday is alerted as provisional; today's first fix closes
        the day and settles it: the SSE stream gets a ``revision`` event without an id, the
        WebSocket a ``revision`` message, and the webhook the alert again with revision 1."""
        a, b = servers
        vehicle_id, token = vehicle
        today = suspend_until_today(api_engine, vehicle_id)
        zone = ZoneInfo("America/Sao_Paulo")
        noon = dt.datetime.combine(today - dt.timedelta(days=1), dt.time(12), tzinfo=zone)
        ride = [
            {
                "timestamp": (noon + dt.timedelta(minutes=k)).isoformat(),
                "lat": -30.0277,
                "lon": -51.2287 + 0.004 * k,
                "meter": "occupied",
            }
            for k in range(6)
        ]
        secret = secrets.token_hex(16)
        admin = bearer(seeded["tokens"]["admin"])
        with Receiver(fail_first=0) as receiver:
            created = httpx.post(
                a.url + "/api/v1/webhooks",
                json={"url": receiver.url, "secret": secret, "filters": {"kinds": [BARRED]}},
                headers=admin,
                timeout=10,
            )
            assert created.status_code == 201, created.text
            webhook_id = created.json()["webhook_id"]
            try:
                with (
                    SseClient(b.url, seeded["tokens"]["agent"], kind=BARRED) as sse,
                    ws_connect(f"ws://127.0.0.1:{b.port}/api/v1/alerts/ws?kind={BARRED}") as ws,
                ):
                    ws.send(json.dumps({"token": seeded["tokens"]["agent"]}))
                    assert json.loads(ws.recv(timeout=5))["type"] == "subscribed"
                    for fix in ride:
                        post_fix(a, token, fix)
                    ((_, first),) = sse.alerts_for(vehicle_id, ALERT_WAIT_S, until=1)
                    assert first["_event"] == "alert" and first["_id"] == first["alert_id"]
                    assert first["details"]["provisional"] is True and first["revision"] == 0
                    receiver.wait_for(vehicle_id, count=1, timeout_s=10)
                    post_fix(a, token, _fix(1, meter="free"))  # today: yesterday is closed
                    ((_, again),) = sse.alerts_for(vehicle_id, ALERT_WAIT_S, until=1)
                    messages = [json.loads(ws.recv(timeout=ALERT_WAIT_S)) for _ in range(2)]
                    mine = receiver.wait_for(vehicle_id, count=2, timeout_s=10)
            finally:
                httpx.delete(f"{a.url}/api/v1/webhooks/{webhook_id}", headers=admin, timeout=10)
        assert again["_event"] == "revision" and again["_id"] is None  # Last-Event-ID kept
        assert again["alert_id"] == first["alert_id"] and again["revision"] == 1
        assert "provisional" not in again["details"]
        assert [(m["type"], m["alert"]["revision"]) for m in messages] == [
            ("alert", 0),
            ("revision", 1),
        ]
        assert [h["x-pontual-alert-revision"] for _, h, _ in mine] == ["0", "1"]
        bodies = [json.loads(body) for _, _, body in mine]
        assert [b["revision"] for b in bodies] == [0, 1]
        assert bodies[0]["details"]["provisional"] is True
        assert "provisional" not in bodies[1]["details"]


class Receiver:
    """A webhook receiver on 127.0.0.1 that fails its first ``fail_first`` requests with 500."""

    def __init__(self, *, fail_first: int) -> None:
        self.requests: list[tuple[int, dict[str, str], bytes]] = []
        self.fail_first = fail_first
        received = self.requests
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = 500 if len(received) < outer.fail_first else 200
                received.append((status, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    def requests_for(self, vehicle_id: str) -> list[tuple[int, dict[str, str], bytes]]:
        return [r for r in self.requests if json.loads(r[2])["vehicle_id"] == vehicle_id]

    def wait_for(
        self, vehicle_id: str, *, count: int, timeout_s: float
    ) -> list[tuple[int, dict[str, str], bytes]]:
        deadline = time.monotonic() + timeout_s
        while len(self.requests_for(vehicle_id)) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.requests_for(vehicle_id)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --- routes through the test client ----------------------------------------------------------


class TestGetAlerts:
    def test_lists_recent_alerts_with_filters(
        self, client: TestClient, seeded: dict, vehicle: tuple[str, str]
    ) -> None:
        """Ingested gap → listed for its kind and area; not for another kind, area or stand."""
        vehicle_id, token = vehicle
        for minutes_ago in (25, 5):
            response = client.post(
                "/api/v1/pings",
                json={"pings": [{**_fix(minutes_ago), "vehicle_id": vehicle_id}]},
                headers=bearer(token),
            )
            assert response.json()["accepted"] == 1
        headers = bearer(seeded["tokens"]["agent"])

        def listed(**params: Any) -> list[dict[str, Any]]:
            response = client.get(
                "/api/v1/alerts", params={"vehicle_id": vehicle_id, **params}, headers=headers
            )
            assert response.status_code == 200, response.text
            return response.json()["data"]

        deadline = time.monotonic() + ALERT_WAIT_S  # the live worker runs after the COMMIT
        while not (found := listed(kind="tracking_gap")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert found == listed(kind="tracking_gap", bbox="-51.3,-30.1,-51.2,-30.0")
        (alert,) = found
        assert alert["repeat_count"] == 0 and alert["created_at"].endswith("Z")
        assert listed(kind="gps_anomaly") == []
        assert listed(bbox="-43.3,-23.0,-43.1,-22.8") == []
        assert listed(stand_id="S1") == []

    @pytest.mark.parametrize(
        ("params", "code"),
        [
            ({"kind": "speeding"}, "invalid_filter"),
            ({"bbox": "1,2,3"}, "invalid_filter"),
            ({"bbox": "10,0,-10,5"}, "invalid_filter"),
            ({"limit": 0}, None),
        ],
    )
    def test_bad_filters_are_422(
        self, client: TestClient, seeded: dict, params: dict, code: str | None
    ) -> None:
        """Malformed filters answer 422 with the error body."""
        response = client.get(
            "/api/v1/alerts", params=params, headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 422
        if code:
            assert response.json()["error"]["code"] == code

    @pytest.mark.parametrize("bbox", ["a,b,c,d", "1,2,3,", "1,2,inf,4"])
    def test_a_bbox_that_is_not_numbers_is_said_in_pt_br(
        self, client: TestClient, seeded: dict, bbox: str
    ) -> None:
        """Python's "could not convert string to float" never reaches the user."""
        response = client.get(
            "/api/v1/alerts", params={"bbox": bbox}, headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 422
        message = response.json()["error"]["message"]
        assert message.startswith("bbox: ") and "número" in message, message

    @pytest.mark.parametrize("path", ["/api/v1/alerts", "/api/v1/alerts/stream"])
    def test_only_agents_and_admins(self, client: TestClient, seeded: dict, path: str) -> None:
        """Planners and supervisors get 403; no token gets 401."""
        for role in ("planner", "supervisor"):
            response = client.get(path, headers=bearer(seeded["tokens"][role]))
            assert response.status_code == 403
        assert client.get(path).status_code == 401


REVOCATIONS = ("logout", "disable", "password", "role")


@pytest.fixture
def fresh_agent(api_engine: Engine) -> tuple[str, str]:
    """A new agent account and a token of it: (username, token)."""
    from api import accounts
    from db.engine import session_scope

    username = f"ag_{secrets.token_hex(4)}"
    with session_scope(api_engine) as session:
        user = accounts.create_user(
            session=session, username=username, password="senha-longa-1", role="agent"
        )
        token, _ = accounts.issue_token(session=session, user=user, ttl_s=600)
    return username, token


def _revoke(how: str, server: Server, api_engine: Engine, username: str, token: str) -> None:
    """End the session as an admin or the user would: HTTP logout or the CLI's account calls."""
    from api import accounts
    from db.engine import session_scope

    if how == "logout":
        response = httpx.post(server.url + "/api/v1/auth/logout", headers=bearer(token))
        assert response.status_code == 204
        return
    with session_scope(api_engine) as session:
        if how == "disable":
            accounts.disable_user(session=session, username=username)
        elif how == "password":
            accounts.set_password(session=session, username=username, password="outra-senha-2")
        else:
            accounts.set_role(session=session, username=username, role="planner")


class TestStreamsEndWithTheSession:
    @pytest.mark.parametrize("how", REVOCATIONS)
    def test_sse_and_websocket_close_and_get_no_later_alert(
        self,
        servers: tuple[Server, Server],
        seeded: dict,
        vehicle: tuple[str, str],
        fresh_agent: tuple[str, str],
        api_engine: Engine,
        how: str,
    ) -> None:
        """After logout, disable, password or role change, the user's SSE stream (event
        'closed') and WebSocket (4401) end, and the next alert reaches only a live session."""
        from websockets.exceptions import ConnectionClosed

        a, b = servers
        vehicle_id, device = vehicle
        username, token = fresh_agent
        with (
            SseClient(b.url, token, kind="tracking_gap") as sse,
            SseClient(b.url, seeded["tokens"]["admin"], kind="tracking_gap") as control,
            ws_connect(f"ws://127.0.0.1:{b.port}/api/v1/alerts/ws?kind=tracking_gap") as ws,
        ):
            ws.send(json.dumps({"token": token}))
            assert json.loads(ws.recv(timeout=5))["type"] == "subscribed"
            _revoke(how, a, api_engine, username, token)
            assert sse.ended.wait(5), "SSE stream still open"
            closed_events = [e for _, e in list(sse.events.queue) if "reason" in e]
            assert closed_events and "sessão" in closed_events[0]["reason"]
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    ws.recv(timeout=5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
            start_gap(a, device)
            complete_gap(a, device)
            assert control.alerts_for(vehicle_id, timeout_s=ALERT_WAIT_S, until=1)
        assert sse.alerts_for(vehicle_id, timeout_s=0.2) == []


class TestAlertsWebsocket:
    def test_unauthenticated_is_closed_at_once(self, client: TestClient) -> None:
        """A WebSocket that sends no token is closed with 4401 within the 1 s allowance."""
        from starlette.websockets import WebSocketDisconnect

        from api.routes.alerts import WS_AUTH_TIMEOUT_S

        assert WS_AUTH_TIMEOUT_S <= 1.0
        started = time.monotonic()
        with (
            client.websocket_connect("/api/v1/alerts/ws") as ws,
            pytest.raises(WebSocketDisconnect) as closed,
        ):
            ws.receive_json()
        assert closed.value.code == 4401
        assert time.monotonic() - started < 5.0

    def test_header_token_subscribes(self, client: TestClient, seeded: dict) -> None:
        """A token in the Authorization header of the handshake subscribes at once."""
        headers = bearer(seeded["tokens"]["agent"])
        with client.websocket_connect("/api/v1/alerts/ws", headers=headers) as ws:
            assert ws.receive_json()["type"] == "subscribed"

    def test_refuses_bad_token_and_role(self, client: TestClient, seeded: dict) -> None:
        """No valid token closes with 4401; a planner's token with 4403."""
        from starlette.websockets import WebSocketDisconnect

        for token, code in (("nope", 4401), (seeded["tokens"]["planner"], 4403)):
            with client.websocket_connect(f"/api/v1/alerts/ws?token={token}") as ws:
                with pytest.raises(WebSocketDisconnect) as closed:
                    ws.receive_json()
                assert closed.value.code == code

    def test_query_token_subscribes(self, client: TestClient, seeded: dict) -> None:
        """A token in the query string subscribes with the parsed filters."""
        token = seeded["tokens"]["admin"]
        with client.websocket_connect(f"/api/v1/alerts/ws?token={token}&stand_id=S1,S2") as ws:
            message = ws.receive_json()
        assert message["type"] == "subscribed"
        assert message["filters"]["stand_ids"] == ["S1", "S2"]


class TestWebhooks:
    def test_create_list_deactivate(self, client: TestClient, seeded: dict) -> None:
        """Admin creates (201, no secret echoed), lists, deactivates (row kept, inactive)."""
        headers = bearer(seeded["tokens"]["admin"])
        created = client.post(
            "/api/v1/webhooks",
            json={"url": "http://127.0.0.1:9/x", "secret": "s" * 16, "filters": {}},
            headers=headers,
        )
        assert created.status_code == 201, created.text
        body = created.json()
        assert "secret" not in body and body["active"] is True
        gone = client.delete(f"/api/v1/webhooks/{body['webhook_id']}", headers=headers)
        assert gone.status_code == 200 and gone.json()["active"] is False
        listed = client.get("/api/v1/webhooks", headers=headers).json()["data"]
        mine = [w for w in listed if w["webhook_id"] == body["webhook_id"]]
        assert mine and mine[0]["active"] is False
        assert client.delete("/api/v1/webhooks/999999", headers=headers).status_code == 404

    @pytest.mark.parametrize(
        "payload",
        [
            {"url": "ftp://127.0.0.1/x", "secret": "s" * 16},
            {"url": "http://127.0.0.1/x", "secret": "short"},
            {"url": "http://127.0.0.1/x", "secret": "s" * 16, "filters": {"kinds": ["x"]}},
            {"url": "http://127.0.0.1/x", "secret": "s" * 16, "filters": {"bbox": [1, 2]}},
            {"url": "http://127.0.0.1/x", "secret": "s" * 16, "filtros": {"kinds": ["x"]}},
        ],
    )
    def test_invalid_webhook_is_422(self, client: TestClient, seeded: dict, payload: dict) -> None:
        """A non-http URL, a short secret, an unknown kind, a bad bbox or an unknown field
        (a misspelled ``filters`` would leave the webhook receiving every alert) is refused."""
        response = client.post(
            "/api/v1/webhooks", json=payload, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 422

    @pytest.mark.parametrize(
        ("url", "said"),
        [
            ("http://[::1", "host ou porta malformados"),
            ("http://127.0.0.1:99999/x", "porta de 1 a 65535"),
            ("http://127.0.0.1:0/x", "porta 0"),
            ("http://127.0.0.1:porta/x", "host ou porta malformados"),
            ("http:///x", "URL sem host"),
            ("http://:8080/x", "URL sem host"),
            ("http://user:senha@127.0.0.1/x", "usuário ou senha"),
            ("https://token@127.0.0.1/x", "usuário ou senha"),
            ("http://127.0.0.1/a\tb", "sem espaços"),
            ("javascript://127.0.0.1/x", "esperado http ou https"),
        ],
    )
    def test_url_that_cannot_be_delivered_is_422(
        self, client: TestClient, seeded: dict, url: str, said: str
    ) -> None:
        """A URL urllib cannot send to, or holding credentials, is refused in pt-BR."""
        response = client.post(
            "/api/v1/webhooks",
            json={"url": url, "secret": "0123456789abcdef"},
            headers=bearer(seeded["tokens"]["admin"]),
        )
        assert response.status_code == 422, response.text
        assert said in response.json()["error"]["message"]

    def test_ipv6_url_is_accepted(self, client: TestClient, seeded: dict) -> None:
        """A well-formed IPv6 literal with a port is a valid receiver."""
        headers = bearer(seeded["tokens"]["admin"])
        response = client.post(
            "/api/v1/webhooks",
            json={"url": " http://[::1]:9/x ", "secret": "0123456789abcdef"},
            headers=headers,
        )
        assert response.status_code == 201, response.text
        assert response.json()["url"] == "http://[::1]:9/x"
        client.delete(f"/api/v1/webhooks/{response.json()['webhook_id']}", headers=headers)

    @pytest.mark.parametrize(
        ("filters", "said"),
        [
            ({"kind": ["unlicensed_stand_use"]}, "filtro 'kind' desconhecido"),
            ({"stands": ["S1"]}, "filtro 'stands' desconhecido"),
            ({"kinds": ["nope"]}, "tipo de achado 'nope' desconhecido"),
        ],
    )
    def test_unknown_filter_or_kind_is_422(
        self, client: TestClient, seeded: dict, filters: dict, said: str
    ) -> None:
        """An unknown filter or kind is refused: dropped, the webhook would get every alert."""
        response = client.post(
            "/api/v1/webhooks",
            json={"url": "http://127.0.0.1:9/x", "secret": "0123456789abcdef", "filters": filters},
            headers=bearer(seeded["tokens"]["admin"]),
        )
        assert response.status_code == 422, response.text
        assert said in response.json()["error"]["message"]

    def test_admin_only(self, client: TestClient, seeded: dict) -> None:
        """Agents may not configure webhooks."""
        response = client.get("/api/v1/webhooks", headers=bearer(seeded["tokens"]["agent"]))
        assert response.status_code == 403


class TestAlertHub:
    def test_publish_reaches_matching_subscribers_only(self, api_engine: Engine) -> None:
        """An alert is queued for subscribers whose filters match, not for the others."""

        async def scenario() -> tuple[int, int, int]:
            hub = AlertHub(api_engine)
            hit = hub.subscribe({"kinds": ["tracking_gap"]})
            miss = hub.subscribe({"stand_ids": ["S9"]})
            n = hub.publish({"kind": "tracking_gap", "stand_id": None, "bbox": None})
            hub.unsubscribe(hit)
            hub.publish({"kind": "tracking_gap", "stand_id": None, "bbox": None})
            return n, hit.queue.qsize(), miss.queue.qsize()

        assert asyncio.run(scenario()) == (1, 1, 0)


class TestDetectOnIngest:
    def test_detector_failure_keeps_the_fixes(
        self,
        client: TestClient,
        vehicle: tuple[str, str],
        api_engine: Engine,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """A failing detector (in the live worker) is logged and rolled back; the fix is stored."""
        import api.alerts

        def broken(*args: object, **kwargs: object) -> list[dict[str, Any]]:
            msg = "detector quebrado"
            raise RuntimeError(msg)

        monkeypatch.setattr(api.alerts, "process_fixes", broken)
        vehicle_id, token = vehicle
        response = client.post("/api/v1/pings", json={"pings": [_fix(3)]}, headers=bearer(token))
        assert response.status_code == 200 and response.json()["accepted"] == 1
        deadline = time.monotonic() + ALERT_WAIT_S  # the live worker runs after the COMMIT
        while "detecção ao vivo falhou" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "detecção ao vivo falhou" in caplog.text
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT count(*) FROM fixes WHERE vehicle_id = :v"), {"v": vehicle_id}
            ).scalar_one()
        assert stored == 1


# --- issue #6 end to end: fix → alert → confirmation → auto de infração ------------------


class TestFixToAuto:
    def test_fix_alert_confirm_pdf(self, servers, seeded, vehicle) -> None:
        """HTTP fix → tracking gap → SSE alert → proposal (POA art. 58 IX) confirmed by the
        agent → PDF with prefixo, place, date, irregularity, provision, auto number and agent."""
        a, _ = servers
        vehicle_id, token = vehicle
        agent = seeded["tokens"]["agent"]
        auth = bearer(agent)

        start_gap(a, token)
        with SseClient(a.url, agent, kind="tracking_gap") as sub:
            sent = complete_gap(a, token)
            ((at, alert),) = sub.alerts_for(vehicle_id, ALERT_WAIT_S, until=1)
        assert at > sent

        with httpx.Client(base_url=a.url, headers=auth, timeout=30) as http:
            done = http.post("/api/v1/proposals/generate", json={"municipality": "4314902"})
            assert done.status_code == 200, done.text
            listed = http.get("/api/v1/proposals", params={"vehicle_id": vehicle_id}).json()
            (proposal,) = [p for p in listed["data"] if p["kind"] == "tracking_gap"]
            detail = http.get(f"/api/v1/proposals/{proposal['proposal_id']}").json()
            assert detail["finding_ids"] == [alert["finding_id"]]
            assert detail["provision"] == "art. 58, IX" and detail["gravity"] == "grave"

            confirmed = http.post(f"/api/v1/proposals/{proposal['proposal_id']}/confirm", json={})
            assert confirmed.status_code == 200, confirmed.text
            auto_number = confirmed.json()["auto_number"]

            pdf = http.get(f"/api/v1/proposals/{proposal['proposal_id']}/documents/auto")
            assert pdf.status_code == 200
        text = " ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf.content)).pages)
        for field in (auto_number, vehicle_id, "art. 58", "u_agent", "Porto Alegre"):
            assert field in text, field
