"""Tests of api.alerts.deliver_due: one receiver's failure is its delivery's, never the batch's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

import pytest
from api_factories import SECRET_KEY
from sqlalchemy import Engine, text
from web_fiscal import store_alert

from api.alerts import deliver_due
from api.crypto import encrypt_secret
from api.settings import Settings

SETTINGS = Settings(secret_key=SECRET_KEY)


@pytest.fixture
def receiver() -> Iterator[str]:
    """A local receiver answering 204 to every POST; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def _alert(engine: Engine) -> str:
    """Store a finding and its alert; return the alert id."""
    return store_alert(engine, f"WH-{secrets.token_hex(4)}", minutes_ago=10)


def _webhook(engine: Engine, url: str, alert_id: str) -> int:
    """Store a webhook as it is in the table (unchecked) and its due delivery of ``alert_id``."""
    with engine.begin() as conn:
        webhook_id = int(
            conn.execute(
                text("INSERT INTO webhooks (url, secret) VALUES (:u, :s) RETURNING webhook_id"),
                {"u": url, "s": encrypt_secret("0123456789abcdef", settings=SETTINGS)},
            ).scalar_one()
        )
        conn.execute(
            text(  # due before any other test's delivery: this call claims it
                "INSERT INTO webhook_deliveries (webhook_id, alert_id, next_attempt_at) "
                "VALUES (:w, :a, now() - interval '10 years')"
            ),
            {"w": webhook_id, "a": alert_id},
        )
    return webhook_id


def _delivery(engine: Engine, webhook_id: int) -> tuple[str, int, str | None]:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT status, attempts, last_error FROM webhook_deliveries WHERE webhook_id = :w"
            ),
            {"w": webhook_id},
        ).one()
    return str(row[0]), int(row[1]), row[2]


def _deactivate(engine: Engine, *webhook_ids: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE webhooks SET active = false WHERE webhook_id = ANY(:ids)"),
            {"ids": list(webhook_ids)},
        )


class TestDeliverDue:
    @pytest.mark.parametrize(
        "bad_url",
        ["http://[::1", "http://127.0.0.1:99999/x", "nota url", "http://127.0.0.1/a b"],
    )
    def test_unsendable_url_fails_its_delivery_only(
        self, api_engine: Engine, receiver: str, bad_url: str
    ) -> None:
        """A URL urllib cannot build a request for is that delivery's error, retried later;
        the other webhook of the same batch is delivered."""
        alert_id = _alert(api_engine)
        bad = _webhook(api_engine, bad_url, alert_id)
        good = _webhook(api_engine, receiver, alert_id)
        try:
            deliver_due(
                api_engine, max_attempts=3, backoff_s=60.0, timeout_s=5.0, settings=SETTINGS
            )
            status, attempts, error = _delivery(api_engine, bad)
            assert (status, attempts) == ("pending", 1)
            assert error
            assert _delivery(api_engine, good) == ("delivered", 1, None)
        finally:
            _deactivate(api_engine, bad, good)
