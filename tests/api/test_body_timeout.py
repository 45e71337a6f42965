"""A request body that stops arriving is answered 408 after ``body_read_timeout_s``.

uvicorn has no body timeout: a client that sent its headers and part of a body, then went
quiet, held a connection and a task of ``pontual serve`` for as long as it liked. Over loopback
against ``pontual serve`` (timeout 1 s), raw sockets that stall get a 408 and a closed
connection; a slow but steady upload and an open event stream are not cut. In process: the one
INFO line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from api_factories import SECRET_KEY, LiveServer, bearer
from sqlalchemy import Engine

TIMEOUT_S = 1.0
ANSWER_WITHIN_S = 10.0
"""How long a test waits for the answer to a stalled body (before the fix: none, ever)."""
FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def server(api_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``pontual serve`` on the API tests' database, body read timeout 1 s."""
    log = tmp_path_factory.mktemp("body-timeout") / "serve.log"
    with LiveServer(api_database_url, log, PONTUAL_BODY_READ_TIMEOUT_S=str(TIMEOUT_S)) as live:
        yield live


def _head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(
    sock: socket.socket, *, within_s: float = ANSWER_WITHIN_S
) -> tuple[int, dict[str, str], bytes]:
    """Read one answer (status, headers, body); fail if none comes within ``within_s``."""
    sock.settimeout(within_s)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            part = sock.recv(65536)
            if not part:
                pytest.fail(f"connection closed without an answer: {data!r}")
            data += part
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:])}
        while len(body) < int(headers.get("content-length", "0")):
            part = sock.recv(65536)
            if not part:
                break
            body += part
    except TimeoutError:
        pytest.fail(f"no answer within {within_s} s (the server still waits for the body)")
    return int(lines[0].split()[1]), headers, body


def _closed_by_server(sock: socket.socket, *, within_s: float = 5.0) -> bool:
    sock.settimeout(within_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


class TestStalledBody:
    @pytest.mark.parametrize(
        ("path", "content_type", "sent", "answer_type"),
        [
            ("/api/v1/auth/token", FORM, b"username=a&pass", "application/json"),
            ("/osmand", "application/json", b'{"location": {"coo', "application/json"),
            ("/api/v1/auth/token", FORM, b"", "application/json"),  # headers only
            ("/entrar", FORM, b"username=a&pass", "text/html"),  # the console: its page
        ],
    )
    def test_partial_body_then_silence_is_408(
        self, server: LiveServer, path: str, content_type: str, sent: bytes, answer_type: str
    ) -> None:
        """Part of a declared body, then nothing: 408 after the timeout, pt-BR, connection
        closed."""
        headers = {"Content-Type": content_type, "Content-Length": "200"}
        if answer_type == "text/html":
            headers["Accept"] = "text/html,application/xhtml+xml"
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_head("POST", path, headers) + sent)
            started = time.monotonic()
            status, answer_headers, body = _answer(sock)
            took = time.monotonic() - started
            assert status == 408, body
            assert TIMEOUT_S * 0.9 <= took < TIMEOUT_S + 5
            assert answer_headers["content-type"].startswith(answer_type)
            assert answer_headers.get("connection") == "close"
            if answer_type == "application/json":
                error = json.loads(body)["error"]
                assert error["code"] == "request_timeout"
                assert "corpo da requisição" in error["message"]
            else:
                assert "Envio interrompido" in body.decode()
            assert _closed_by_server(sock)

    def test_chunked_body_that_stops_is_408(self, server: LiveServer) -> None:
        """A chunked body whose next chunk never comes: 408 too."""
        headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_head("POST", "/osmand", headers) + b'5\r\n{"loc\r\n')
            status, _, body = _answer(sock)
        assert status == 408, body
        assert json.loads(body)["error"]["code"] == "request_timeout"

    def test_slow_steady_upload_is_not_cut(self, server: LiveServer) -> None:
        """A body sent in 6 pieces 0.6 s apart (3 s in all, three times the timeout) is read
        whole and answered as usual."""
        body = b"username=ninguem-lento&password=" + b"x" * 28
        pieces = [body[k : k + 10] for k in range(0, len(body), 10)]
        headers = {"Content-Type": FORM, "Content-Length": str(len(body))}
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_head("POST", "/api/v1/auth/token", headers))
            for piece in pieces:
                time.sleep(0.6)
                sock.sendall(piece)
            status, _, answer = _answer(sock)
        assert len(pieces) == 6
        assert status == 401, answer
        assert json.loads(answer)["error"]["code"] == "invalid_credentials"

    def test_open_event_stream_is_not_cut(self, server: LiveServer, seeded: dict) -> None:
        """An alert stream (no body, an endless answer) stays open three times the timeout."""
        headers = bearer(seeded["tokens"]["agent"]) | {"Accept": "text/event-stream"}
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(_head("GET", "/api/v1/alerts/stream", headers))
            sock.settimeout(ANSWER_WITHIN_S)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            time.sleep(3 * TIMEOUT_S)
            assert not _closed_by_server(sock, within_s=0.5)

    def test_server_serves_on(self, server: LiveServer) -> None:
        """After the stalled clients, a normal request is answered at once."""
        import httpx

        assert httpx.get(server.url + "/health", timeout=5).status_code == 200


class TestInProcess:
    def test_one_info_line_and_a_json_408(
        self, api_engine: Engine, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The app, called as uvicorn would with a body that stops: a 408 with
        ``Connection: close`` and one INFO line naming the request (no traceback)."""
        from api.main import create_app
        from api.settings import Settings

        app = create_app(
            engine=api_engine, settings=Settings(secret_key=SECRET_KEY, body_read_timeout_s=0.2)
        )
        sent: list[dict[str, Any]] = []

        async def call() -> None:
            chunks = [{"type": "http.request", "body": b"username=a", "more_body": True}]
            forever = asyncio.Event()

            async def receive() -> dict[str, Any]:
                if chunks:
                    return chunks.pop()
                await forever.wait()
                return {"type": "http.disconnect"}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            scope = {
                "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                "method": "POST", "scheme": "http", "path": "/api/v1/auth/token",
                "raw_path": b"/api/v1/auth/token", "query_string": b"", "root_path": "",
                "headers": [(b"host", b"p"), (b"content-type", FORM.encode()),
                            (b"content-length", b"100")],
                "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80), "state": {},
            }  # fmt: skip
            await asyncio.wait_for(app(scope, receive, send), 5)

        with caplog.at_level(logging.INFO, logger="api"):
            asyncio.run(call())
        start = next(m for m in sent if m["type"] == "http.response.start")
        assert start["status"] == 408
        assert (b"connection", b"close") in start["headers"]
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        assert json.loads(body)["error"]["code"] == "request_timeout"
        lines = [r for r in caplog.records if r.name.startswith("api")]
        assert len(lines) == 1
        assert lines[0].levelno == logging.INFO and not lines[0].exc_info
        assert "POST /api/v1/auth/token" in lines[0].getMessage()

    def test_chunks_within_the_timeout_are_never_cut(self, api_engine: Engine) -> None:
        """Ten chunks 0.1 s apart, timeout 0.3 s (1 s in all): the body is read whole."""
        from api.main import create_app
        from api.settings import Settings

        app = create_app(
            engine=api_engine, settings=Settings(secret_key=SECRET_KEY, body_read_timeout_s=0.3)
        )
        body = b"username=ninguem-devagar&password=" + b"y" * 36
        pieces = [body[k : k + 7] for k in range(0, len(body), 7)]
        sent: list[dict[str, Any]] = []

        async def call() -> None:
            queue = list(pieces)

            async def receive() -> dict[str, Any]:
                await asyncio.sleep(0.1)
                piece = queue.pop(0)
                return {"type": "http.request", "body": piece, "more_body": bool(queue)}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            scope = {
                "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                "method": "POST", "scheme": "http", "path": "/api/v1/auth/token",
                "raw_path": b"/api/v1/auth/token", "query_string": b"", "root_path": "",
                "headers": [(b"host", b"p"), (b"content-type", FORM.encode()),
                            (b"content-length", str(len(body)).encode())],
                "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80), "state": {},
            }  # fmt: skip
            await asyncio.wait_for(app(scope, receive, send), 10)

        asyncio.run(call())
        assert len(pieces) == 10
        start = next(m for m in sent if m["type"] == "http.response.start")
        assert start["status"] == 401


def test_serves_log_configuration_lets_the_info_line_through() -> None:
    """``pontual serve --log-level info`` logs the application's INFO lines (the root is at
    WARNING, for the libraries)."""
    import logging.config

    from api.redact import log_config

    root = logging.getLogger()
    before, handlers, root_level = logging.getLogger("api").level, root.handlers[:], root.level
    try:
        logging.config.dictConfig(log_config("info"))
        assert logging.getLogger("api.limits").isEnabledFor(logging.INFO)
        logging.config.dictConfig(log_config("warning"))
        assert not logging.getLogger("api.limits").isEnabledFor(logging.INFO)
    finally:
        logging.getLogger("api").setLevel(before)
        root.handlers[:], root.level = handlers, root_level
