"""A burst of public requests cannot starve device ingest nor the liveness probe.

The app runs in-process (ASGI, its own event loop and 40-thread pool) on the production pool
(10 + 30 connections, 10 s timeout). Before the fix, ~200 concurrent public requests held
every connection while waiting for a thread to serialize their answer: public answers and a
device's ``POST /api/v1/pings`` waited for the pool's 10 s timeout (503
``database_unavailable``), and ``/health`` (a thread-pool handler) waited as long.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_factories import DEVICE_SINCE, SECRET_KEY, bearer
from fastapi import FastAPI

BURST = 200
PUBLIC_URL = "/api/v1/public/accessible-taxis?lat=-30.03&lon=-51.23&radius_m=5000"
POOL_TIMEOUT_S = 10.0
PROBES_AT_S = (0.05, 0.2, 0.4, 1.0, 2.0)
"""When a device's ingest and a liveness probe are sent, from the burst's start."""


@pytest.fixture
def device_token(api_engine: Any) -> str:
    """A device of a vehicle of its own (not accessible: other tests' public answers unchanged)."""
    import secrets

    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    vehicle_id = f"LOAD{secrets.token_hex(3).upper()}"
    with session_scope(api_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id, accessible=False))
        session.flush()
        _, token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
        )
    return str(token)


@pytest.fixture
def production_app(api_database_url: str, seeded: dict) -> Iterator[FastAPI]:
    """An app with its own engine sized as in production (``pontual serve``)."""
    from api.main import create_app
    from api.settings import Settings

    settings = Settings(
        public_rate_limit_per_min=100_000,
        login_rate_limit_per_min=10_000,
        secret_key=SECRET_KEY,
    )
    app = create_app(database_url=api_database_url, settings=settings)
    yield app
    app.state.engine.dispose()


async def _timed(client: httpx.AsyncClient, method: str, url: str, **kw: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    response = await client.request(method, url, **kw)
    return response, time.perf_counter() - start


async def _burst(app: FastAPI, device_token: str) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    async with httpx.AsyncClient(transport=transport, base_url="http://pontual", timeout=60) as c:
        fix = {
            "timestamp": dt.datetime.now(dt.UTC).isoformat(),
            "lat": -30.0500,  # away from the seeded stands
            "lon": -51.2000,
            "meter": "free",
        }
        warm = await c.post("/api/v1/pings", json={"pings": [fix]}, headers=bearer(device_token))
        assert warm.status_code == 200, warm.text

        async def probe(at_s: float) -> tuple[Any, Any]:
            await asyncio.sleep(at_s)
            sent = fix | {"timestamp": dt.datetime.now(dt.UTC).isoformat()}
            ingest = _timed(c, "POST", "/api/v1/pings", json={"pings": [sent]}, headers=auth)
            return await asyncio.gather(ingest, _timed(c, "GET", "/health"))

        auth = bearer(device_token)
        public = [asyncio.create_task(_timed(c, "GET", PUBLIC_URL)) for _ in range(BURST)]
        probes = [asyncio.create_task(probe(at)) for at in PROBES_AT_S]
        done = await asyncio.gather(*probes)
        return {
            "public": await asyncio.gather(*public),
            "ingest": [i for i, _ in done],
            "health": [h for _, h in done],
        }


def test_public_burst_does_not_starve_ingest_or_health(
    production_app: FastAPI, device_token: str
) -> None:
    """200 concurrent public requests: a device's ingest and /health answer within 2 s all
    along; no public request waits for the pool's timeout, the refused get a pt-BR 503."""
    out = asyncio.run(_burst(production_app, device_token))
    codes: dict[int, int] = {}
    for response, _ in out["public"]:
        codes[response.status_code] = codes.get(response.status_code, 0) + 1
    slowest = max(seconds for _, seconds in out["public"])
    ingest_s = max(seconds for _, seconds in out["ingest"])
    health_s = max(seconds for _, seconds in out["health"])
    print(
        f"\npublic: {codes}, slowest {slowest:.2f} s; ingest: slowest {ingest_s:.2f} s; "
        f"health: slowest {health_s:.2f} s"
    )
    for ingest, _ in out["ingest"]:
        assert ingest.status_code == 200, ingest.text
        assert ingest.json()["accepted"] == 1
    assert all(health.status_code == 200 for health, _ in out["health"])
    assert ingest_s < 2.0
    assert health_s < 2.0
    assert slowest < POOL_TIMEOUT_S / 2
    assert set(codes) <= {200, 503}
    assert codes.get(200, 0) >= BURST // 2
    for response, _ in out["public"]:
        if response.status_code == 503:
            assert response.json()["error"]["code"] == "server_busy"
            assert response.headers["Retry-After"] == "1"
            assert "tente novamente" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "url", [PUBLIC_URL, "/acessivel", "/acessivel/resultados?lat=-30.03&lon=-51.22"]
)
def test_public_gate_refuses_at_once_when_full(production_app: FastAPI, url: str) -> None:
    """With every public slot taken and no room to wait, a public request is a 503 at once:
    the API's and the citizen page's (their queries share the public gate's few slots)."""
    gate = production_app.state.public_db

    async def main() -> tuple[httpx.Response, float]:
        transport = httpx.ASGITransport(app=production_app, client=("127.0.0.1", 5001))
        async with httpx.AsyncClient(transport=transport, base_url="http://pontual") as c:
            saved = gate.in_use, gate.queue
            gate.in_use, gate.queue = gate.slots, 0
            try:
                return await _timed(c, "GET", url)
            finally:
                gate.in_use, gate.queue = saved

    response, seconds = asyncio.run(main())
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "server_busy"
    assert response.headers["Retry-After"] == "1"
    assert seconds < 1.0


def test_health_is_async() -> None:
    """/health is answered on the event loop: no thread hop, no database."""
    import inspect

    from api.routes.health import health

    assert inspect.iscoroutinefunction(health)
