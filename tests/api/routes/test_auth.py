"""Tests of api.routes.auth: login, who am I, logout."""

from __future__ import annotations

import datetime as dt

from api_factories import PASSWORD, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine


class TestLogin:
    def test_good_password_gives_a_token(self, client: TestClient, seeded: dict) -> None:
        """The right password returns a bearer token that opens /me."""
        response = client.post(
            "/api/v1/auth/token", data={"username": "u_planner", "password": PASSWORD}
        )
        assert response.status_code == 200
        body = response.json()
        assert body["token_type"] == "bearer"
        me = client.get("/api/v1/auth/me", headers=bearer(body["access_token"]))
        assert me.json() == {"username": "u_planner", "role": "planner", "stand_ids": []}

    def test_wrong_password_is_401(self, client: TestClient, seeded: dict) -> None:
        """A wrong password is a 401 'invalid_credentials'."""
        response = client.post(
            "/api/v1/auth/token", data={"username": "u_planner", "password": "errada-123"}
        )
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_credentials"

    def test_missing_form_is_422(self, client: TestClient) -> None:
        """A login without the form fields is a 422 with the error body."""
        response = client.post("/api/v1/auth/token", json={"x": 1})
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"


class TestMe:
    def test_supervisor_sees_their_stands(self, client: TestClient, seeded: dict) -> None:
        """A supervisor's /me lists their stands."""
        me = client.get("/api/v1/auth/me", headers=bearer(seeded["tokens"]["supervisor"]))
        assert me.json()["stand_ids"] == ["S1"]

    def test_expired_token_is_401(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A token past its expiry is refused with 401."""
        from api import accounts
        from db.engine import session_scope

        with session_scope(api_engine) as session:
            user = accounts.get_user(session=session, username="u_agent")
            old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
            token, _ = accounts.issue_token(session=session, user=user, ttl_s=60, now=old)
        response = client.get("/api/v1/auth/me", headers=bearer(token))
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "not_authenticated"

    def test_device_token_is_not_a_user_token(self, client: TestClient, seeded: dict) -> None:
        """A device token does not log a user in."""
        response = client.get("/api/v1/auth/me", headers=bearer(seeded["device_token"]))
        assert response.status_code == 401


class TestLogout:
    def test_revoked_token_is_401(self, client: TestClient, seeded: dict) -> None:
        """After logout the token no longer works."""
        token = client.post(
            "/api/v1/auth/token", data={"username": "u_admin", "password": PASSWORD}
        ).json()["access_token"]
        assert client.post("/api/v1/auth/logout", headers=bearer(token)).status_code == 204
        assert client.get("/api/v1/auth/me", headers=bearer(token)).status_code == 401
