"""Failed logins are throttled per account too, not only per address.

Before: an attacker with one address per guess (here through a trusted proxy's
``X-Forwarded-For``) had every password checked (25 of 25; 200 of 200 in the audit). Now at
most ``login_failures_per_account`` wrong passwords per window reach the check, whatever the
addresses, and the account then refuses even the right password with the IP throttle's 429.
The key is the normalised name, whether or not the account exists.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import pytest
from api_factories import PASSWORD, SECRET_KEY
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import create_app
from api.ratelimit import RateLimiter
from api.settings import Settings

TOKEN_URL = "/api/v1/auth/token"
PROXY = "10.0.0.5"


def _app(api_engine: Engine, **settings: Any) -> FastAPI:
    """An app behind a trusted proxy: each ``X-Forwarded-For`` is a client address."""
    values = {"secret_key": SECRET_KEY, "trusted_proxies": "10.0.0.0/8"} | settings
    return create_app(engine=api_engine, settings=Settings(**values))


def _client(app: FastAPI) -> TestClient:
    return TestClient(app, raise_server_exceptions=False, client=(PROXY, 50000))


def _login(client: TestClient, username: str, password: str, address: str) -> httpx.Response:
    data = {"username": username, "password": password}
    return client.post(TOKEN_URL, data=data, headers={"X-Forwarded-For": address})


def _address(k: int) -> str:
    return f"198.51.{k // 250}.{k % 250 + 1}"


@pytest.fixture
def victim(api_engine: Engine) -> str:
    """A new agent account (password PASSWORD); its name."""
    from api import accounts
    from db.engine import session_scope

    username = f"vitima_{secrets.token_hex(4)}"
    with session_scope(api_engine) as session:
        accounts.create_user(session=session, username=username, password=PASSWORD, role="agent")
    return username


class TestAccountThrottle:
    def test_many_addresses_get_the_account_quota_only(
        self, api_engine: Engine, victim: str
    ) -> None:
        """25 wrong passwords from 25 addresses: 10 are checked (401), then 429 with
        Retry-After; the right password is then refused too."""
        with _client(_app(api_engine)) as client:
            answers = [_login(client, victim, f"chute-{k}", _address(k)) for k in range(25)]
            right = _login(client, victim, PASSWORD, _address(99))
        assert [a.status_code for a in answers] == [401] * 10 + [429] * 15
        assert right.status_code == 429
        assert right.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(right.headers["Retry-After"]) <= 900
        assert "access_token" not in right.text

    def test_unknown_name_is_throttled_alike(self, api_engine: Engine, victim: str) -> None:
        """An unknown name gets the same answers as an existing one (nothing tells them apart)."""
        with _client(_app(api_engine, login_failures_per_account=3)) as client:
            codes = {
                name: [
                    (a.status_code, a.json()["error"]["code"])
                    for a in (_login(client, name, "errada-1", _address(k)) for k in range(5))
                ]
                for name in (victim, f"ninguem_{secrets.token_hex(4)}")
            }
        assert codes[victim] == [(401, "invalid_credentials")] * 3 + [(429, "rate_limited")] * 2
        assert len(set(map(tuple, codes.values()))) == 1

    def test_same_message_as_the_address_throttle(self, api_engine: Engine, victim: str) -> None:
        """The account's 429 says what the address's 429 says (only the delay may differ)."""
        app = _app(api_engine, login_failures_per_account=1, login_rate_limit_per_min=1)
        with _client(app) as client:
            _login(client, victim, "errada-1", _address(1))
            by_account = _login(client, victim, PASSWORD, _address(2)).json()["error"]
            by_address = _login(client, "outra", PASSWORD, _address(1)).json()["error"]
        assert by_account["code"] == by_address["code"] == "rate_limited"
        assert by_account["message"].split(" em ")[0] == by_address["message"].split(" em ")[0]
        assert by_account["message"].startswith("muitas tentativas de entrada")

    def test_name_is_normalised(self, api_engine: Engine, victim: str) -> None:
        """Case and surrounding blanks do not buy a fresh quota."""
        spellings = [victim, victim.upper(), f"  {victim} ", victim.title()]
        with _client(_app(api_engine, login_failures_per_account=3)) as client:
            codes = [_login(client, s, "errada-1", _address(k)).status_code
                     for k, s in enumerate(spellings)]  # fmt: skip
        assert codes == [401, 401, 401, 429]

    def test_success_neither_counts_nor_clears(self, api_engine: Engine, victim: str) -> None:
        """Good logins do not use the quota, and do not reset the failures of others."""
        with _client(_app(api_engine, login_failures_per_account=3)) as client:
            failures = [_login(client, victim, "errada-1", _address(k)) for k in range(2)]
            good = [_login(client, victim, PASSWORD, _address(10 + k)) for k in range(5)]
            last_failure = _login(client, victim, "errada-1", _address(20))
            refused = _login(client, victim, PASSWORD, _address(21))
        assert [a.status_code for a in failures] == [401, 401]
        assert [a.status_code for a in good] == [200] * 5
        assert last_failure.status_code == 401
        assert refused.status_code == 429

    def test_concurrent_guesses_cannot_overrun_the_quota(
        self, api_engine: Engine, victim: str
    ) -> None:
        """40 guesses at once from 40 addresses: still at most the quota (5) are checked."""
        app = _app(api_engine, login_failures_per_account=5, trusted_proxies="127.0.0.1")

        async def burst() -> list[int]:
            transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
            async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
                answers = await asyncio.gather(
                    *(
                        client.post(
                            TOKEN_URL,
                            data={"username": victim, "password": f"chute-{k}"},
                            headers={"X-Forwarded-For": _address(k)},
                        )
                        for k in range(40)
                    )
                )
            return [a.status_code for a in answers]

        codes = asyncio.run(burst())
        assert sorted(codes) == [401] * 5 + [429] * 35


class TestRateLimiterUndo:
    def test_undo_gives_back_one_hit_of_the_window(self) -> None:
        """``undo`` returns one counted hit; the window still ends at its time."""
        now = [0.0]
        limiter = RateLimiter(limit=2, window_s=900, clock=lambda: now[0])
        assert limiter.hit("k") is None and limiter.hit("k") is None
        assert limiter.hit("k") == 900
        limiter.undo("k")
        now[0] = 100.0
        assert limiter.hit("k") is None
        assert limiter.hit("k") == 800
        now[0] = 900.0
        assert limiter.hit("k") is None

    def test_undo_of_an_unknown_key_does_nothing(self) -> None:
        """Nothing counted, nothing given back (no negative count)."""
        limiter = RateLimiter(limit=1, window_s=60, clock=lambda: 0.0)
        limiter.undo("k")
        assert limiter.hit("k") is None
        assert limiter.hit("k") == 60


class TestFamiliarAddress:
    def test_guesses_from_elsewhere_do_not_lock_the_owner_out_of_their_address(
        self, api_engine: Engine, victim: str
    ) -> None:
        """The owner logged in from A; 20 guesses from other addresses spend the account's
        quota (a new address, even with the right password, gets 429), but A still logs in.
        A's own failures have their own quota of the same size."""
        with _client(_app(api_engine, login_failures_per_account=3)) as client:
            home = _address(1)
            assert _login(client, victim, PASSWORD, home).status_code == 200
            guesses = [_login(client, victim, f"chute-{k}", _address(100 + k)) for k in range(20)]
            elsewhere = _login(client, victim, PASSWORD, _address(99))
            owner = _login(client, victim, PASSWORD, home)
            typos = [_login(client, victim, "errada-1", home).status_code for _ in range(4)]
        assert [g.status_code for g in guesses] == [401] * 3 + [429] * 17
        assert elsewhere.status_code == 429
        assert owner.status_code == 200 and "access_token" in owner.text
        assert typos == [401, 401, 401, 429]
