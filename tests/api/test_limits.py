"""Request limits: a body over ``max_body_bytes`` is refused (413) before the server reads it.

Over loopback against ``pontual serve``: a fix with a 200 MB ``driver_id``, declared with its
length or streamed in chunks without one, gets 413 and the server's peak resident memory
(``VmHWM``, reset through ``/proc/<pid>/clear_refs`` first) does not grow by anything near the
body's size.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_factories import DEVICE_SINCE, LiveServer, bearer
from fastapi.testclient import TestClient

BODY_BYTES = 200 * 1024 * 1024
CHUNK = b"D" * (1024 * 1024)
MAX_GROWTH_BYTES = 64 * 1024 * 1024
"""Peak memory the server may add while refusing a 200 MB body (the whole body: 200 MB)."""


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    msg = f"{field} not in /proc/{pid}/status"
    raise AssertionError(msg)


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def _head(path: str, token: str, extra: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\n{extra}\r\n"
    ).encode()


def _read_response(sock: socket.socket, timeout_s: float = 30) -> tuple[int, bytes]:
    data = b""
    sock.settimeout(timeout_s)
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            break
        data += part
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        (
            int(h.split(b":")[1])
            for h in head.split(b"\r\n")
            if h.lower().startswith(b"content-length")
        ),
        0,
    )
    while len(rest) < length:
        part = sock.recv(65536)
        if not part:
            break
        rest += part
    return status, rest


def _send_until_answered(sock: socket.socket, chunks: Iterator[bytes]) -> None:
    """Send the chunks until the server answers or closes (it need not read them all)."""
    sock.setblocking(True)
    for chunk in chunks:
        try:
            sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return
        sock.settimeout(0)
        try:
            if sock.recv(1, socket.MSG_PEEK):
                return
        except BlockingIOError:
            pass
        finally:
            sock.settimeout(None)


@pytest.fixture(scope="module")
def device(api_engine: Any, seeded: dict) -> str:
    """The token of a device of this module's own vehicle (LIM1)."""
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    with session_scope(api_engine) as session:
        if session.get(Vehicle, "LIM1") is None:
            session.add(Vehicle(vehicle_id="LIM1", prefixo="LIM1"))
            session.flush()
        return accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id="LIM1"
        )[1]


@pytest.fixture(scope="module")
def server(api_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``pontual serve`` on the API tests' database."""
    log = tmp_path_factory.mktemp("limits") / "serve.log"
    with LiveServer(api_database_url, log) as live:
        yield live


class TestBodyLimit:
    def test_declared_200_mb_fix_is_refused_unread(self, server: LiveServer, device: str) -> None:
        """Content-Length of 200 MB: 413 at once; the server's peak memory stays flat."""
        prefix = (
            b'{"pings": [{"timestamp": "2026-01-01T00:00:00Z", "lat": 1, "lon": 1, "driver_id": "'
        )
        _reset_peak(server.pid)
        before = _kib(server.pid, "VmRSS")
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_head("/api/v1/pings", device, f"Content-Length: {BODY_BYTES}\r\n"))
            _send_until_answered(sock, iter([prefix, *[CHUNK] * (BODY_BYTES // len(CHUNK))]))
            status, body = _read_response(sock)
        assert status == 413
        assert json.loads(body)["error"]["code"] == "payload_too_large"
        assert _kib(server.pid, "VmHWM") - before < MAX_GROWTH_BYTES

    def test_chunked_200_mb_fix_is_cut_off(self, server: LiveServer, device: str) -> None:
        """No length, 200 MB in chunks: 413 once past the limit; peak memory stays flat."""
        prefix = (
            b'{"pings": [{"timestamp": "2026-01-01T00:00:00Z", "lat": 1, "lon": 1, "driver_id": "'
        )

        def chunked() -> Iterator[bytes]:
            for piece in [prefix, *[CHUNK] * (BODY_BYTES // len(CHUNK))]:
                yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
            yield b"0\r\n\r\n"

        _reset_peak(server.pid)
        before = _kib(server.pid, "VmRSS")
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_head("/osmand", device, "Transfer-Encoding: chunked\r\n"))
            started = time.monotonic()
            _send_until_answered(sock, chunked())
            status, body = _read_response(sock)
        assert status == 413, (status, body, time.monotonic() - started)
        assert json.loads(body)["error"]["code"] == "payload_too_large"
        assert _kib(server.pid, "VmHWM") - before < MAX_GROWTH_BYTES

    def test_small_requests_still_pass(self, server: LiveServer, device: str) -> None:
        """After the refusals, the same server stores a normal batch."""
        import datetime as dt

        import httpx

        t = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=3)).isoformat()
        answer = httpx.post(
            server.url + "/api/v1/pings",
            json={"pings": [{"timestamp": t, "lat": -30.05, "lon": -51.25}]},
            headers=bearer(device),
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json()["accepted"] == 1


class TestBodyLimitInProcess:
    @pytest.mark.parametrize("path", ["/api/v1/pings", "/osmand", "/api/v1/stands"])
    def test_over_the_limit_is_413_json(self, client: TestClient, seeded: dict, path: str) -> None:
        """A 3 MB body (limit 2 MiB) is a 413 with the JSON error body on any route."""
        body = b'{"x": "' + b"a" * (3 * 1024 * 1024) + b'"}'
        answer = client.post(
            path,
            content=body,
            headers=bearer(seeded["tokens"]["admin"]) | {"Content-Type": "application/json"},
        )
        assert answer.status_code == 413
        assert answer.json()["error"]["max_body_bytes"] == 2 * 1024 * 1024
