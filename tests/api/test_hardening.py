"""Hardening of the HTTP API: rate-limit buckets, forwarded headers, security headers, secrets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_factories import PASSWORD, SECRET_KEY, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.main import create_app
from api.settings import Settings

PUBLIC = ("/api/v1/public/stands", {"lat": -30.0, "lon": -51.0, "radius_m": 100})


def _client(api_engine: Engine, *, peer: str = "203.0.113.7", **settings: Any) -> TestClient:
    app = create_app(engine=api_engine, settings=Settings(secret_key=SECRET_KEY, **settings))
    return TestClient(app, raise_server_exceptions=False, client=(peer, 50000))


def _login(client: TestClient, **headers: str) -> int:
    form = {"username": "u_agent", "password": PASSWORD}
    return client.post("/api/v1/auth/token", data=form, headers=headers).status_code


def _public(client: TestClient, **headers: str) -> int:
    return client.get(PUBLIC[0], params=PUBLIC[1], headers=headers).status_code


class TestLoginBucket:
    def test_public_traffic_cannot_lock_staff_out(self, api_engine: Engine, seeded: dict) -> None:
        """With the public quota of an IP spent, a login from it still succeeds."""
        with _client(api_engine, public_rate_limit_per_min=2, login_rate_limit_per_min=5) as c:
            assert [_public(c) for _ in range(3)] == [200, 200, 429]
            assert _login(c) == 200

    def test_logins_have_their_own_limit(self, api_engine: Engine, seeded: dict) -> None:
        """Logins beyond their per-IP quota get 429 with Retry-After; public queries go on."""
        with _client(api_engine, public_rate_limit_per_min=5, login_rate_limit_per_min=2) as c:
            assert [_login(c) for _ in range(3)] == [200, 200, 429]
            last = c.post("/api/v1/auth/token", data={"username": "x", "password": "y"})
            assert last.status_code == 429 and int(last.headers["Retry-After"]) >= 1
            assert _public(c) == 200


class TestForwardedFor:
    def test_ignored_without_trusted_proxies(self, api_engine: Engine) -> None:
        """A spoofed X-Forwarded-For does not buy a fresh bucket."""
        with _client(api_engine, public_rate_limit_per_min=2) as c:
            codes = [_public(c, **{"X-Forwarded-For": f"198.51.100.{k}"}) for k in range(3)]
        assert codes == [200, 200, 429]

    def test_believed_from_a_trusted_proxy(self, api_engine: Engine) -> None:
        """Behind a configured proxy each forwarded client has its own bucket, and what a
        client writes left of the proxy's entry cannot change it."""
        settings = {"public_rate_limit_per_min": 2, "trusted_proxies": "10.0.0.0/8"}
        with _client(api_engine, peer="10.0.0.5", **settings) as c:
            first = [_public(c, **{"X-Forwarded-For": "198.51.100.1"}) for _ in range(3)]
            other = _public(c, **{"X-Forwarded-For": "198.51.100.2"})
            spoof = _public(c, **{"X-Forwarded-For": "1.2.3.4, 198.51.100.1"})
        assert first == [200, 200, 429]
        assert other == 200
        assert spoof == 429

    def test_bad_setting_is_refused(self) -> None:
        """A trusted proxy that is not an IP or network is refused with its name."""
        with pytest.raises(ValueError, match="'proxy.example' não é um IP"):
            Settings(trusted_proxies="10.0.0.1, proxy.example")


class TestSecurityHeaders:
    @pytest.mark.parametrize(
        ("path", "auth"),
        [
            ("/health", None),
            ("/api/v1/public/stands?lat=-30&lon=-51&radius_m=100", None),
            ("/api/v1/maps/citizen", None),
            ("/docs", None),
            ("/nao-existe", None),
            ("/api/v1/auth/me", None),
            ("/api/v1/auth/me", "agent"),
            ("/api/v1/vehicles/V1?include_personal=true", "admin"),
            ("/api/v1/maps/overview", "planner"),
        ],
    )
    def test_on_every_answer(
        self, client: TestClient, seeded: dict, path: str, auth: str | None
    ) -> None:
        """nosniff, no framing, no referrer and a CSP on every answer (HTML: the maps' own);
        no-store on everything that is not public."""
        headers = bearer(seeded["tokens"][auth]) if auth else {}
        response = client.get(path, headers=headers)
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        csp = response.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in csp
        if response.headers["content-type"].startswith("text/html"):
            assert "script-src 'self' 'unsafe-inline'" in csp
        else:
            assert csp.startswith("default-src 'none'")
        public = path.startswith(("/health", "/api/v1/public", "/api/v1/maps/citizen", "/docs"))
        assert (response.headers.get("Cache-Control") == "no-store") is not public

    def test_event_stream_is_not_stored(self, client: TestClient, seeded: dict) -> None:
        """The alert stream's answer (here its 422) is no-store like any authenticated one."""
        response = client.get(
            "/api/v1/alerts/stream?bbox=x", headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 422
        assert response.headers["Cache-Control"] == "no-store"


@pytest.fixture
def webhook_ids(api_engine: Engine) -> Iterator[list[int]]:
    """Webhooks made by a test, deactivated at the end."""
    ids: list[int] = []
    yield ids
    with api_engine.begin() as conn:
        conn.execute(
            text("UPDATE webhooks SET active = false WHERE webhook_id = ANY(:i)"), {"i": ids}
        )


class TestWebhookSecrets:
    def test_stored_encrypted_and_recoverable(
        self, client: TestClient, seeded: dict, api_engine: Engine, webhook_ids: list[int]
    ) -> None:
        """The secret is stored as a Fernet token, never in clear, and decrypts to itself."""
        from api.crypto import PREFIX, decrypt_secret

        secret = "segredo-de-teste-0123456789"
        created = client.post(
            "/api/v1/webhooks",
            json={"url": "http://127.0.0.1:9/x", "secret": secret},
            headers=bearer(seeded["tokens"]["admin"]),
        )
        assert created.status_code == 201
        webhook_ids.append(created.json()["webhook_id"])
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT secret FROM webhooks WHERE webhook_id = :w"),
                {"w": webhook_ids[0]},
            ).scalar_one()
        assert secret not in stored and stored.startswith(PREFIX)
        assert decrypt_secret(stored, settings=Settings(secret_key=SECRET_KEY)) == secret
        with pytest.raises(Exception, match="outra chave"):
            decrypt_secret(stored, settings=Settings(secret_key=_other_key()))

    def test_secrets_in_clear_are_encrypted(
        self, api_engine: Engine, webhook_ids: list[int]
    ) -> None:
        """A secret an older version stored in clear is encrypted in place; still readable."""
        from api.crypto import PREFIX, decrypt_secret, encrypt_stored_secrets

        with api_engine.begin() as conn:
            webhook_ids.append(
                conn.execute(
                    text(
                        "INSERT INTO webhooks (url, secret, filters) "
                        "VALUES ('http://127.0.0.1:9/y', 'antigo-em-claro-123', '{}') "
                        "RETURNING webhook_id"
                    )
                ).scalar_one()
            )
        settings = Settings(secret_key=SECRET_KEY)
        assert encrypt_stored_secrets(api_engine, settings=settings) >= 1
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT secret FROM webhooks WHERE webhook_id = :w"),
                {"w": webhook_ids[0]},
            ).scalar_one()
        assert stored.startswith(PREFIX)
        assert decrypt_secret(stored, settings=settings) == "antigo-em-claro-123"

    def test_key_file_made_private_once(self, tmp_path: Path) -> None:
        """Without PONTUAL_SECRET_KEY the key is a 0600 file of the data dir, made once."""
        from api.crypto import KEY_FILE, decrypt_secret, encrypt_secret

        settings = Settings(data_dir=tmp_path, secret_key=None)
        stored = encrypt_secret("s" * 20, settings=settings)
        key = tmp_path / KEY_FILE
        assert oct(os.stat(key).st_mode & 0o777) == "0o600"
        assert decrypt_secret(stored, settings=Settings(data_dir=tmp_path)) == "s" * 20


def _other_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()
