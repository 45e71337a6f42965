"""Tests of api.routes.public: citizen endpoints, no personal data, coarse positions, rate limit."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from api_factories import bearer
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

# Every personal or identifying value of the seeded registry and fixes.
PERSONAL = (
    "V1",
    "V2",
    "V3",
    "ABC1D23",
    "XYZ9K87",
    "QWE4R56",
    "Maria",
    "12345678901",
    "99999-0000",
    "D-77",
)
EXACT_LAT, EXACT_LON = -30.02771234, -51.22874321


@pytest.fixture
def free_accessible_taxis(client: TestClient, seeded: dict) -> None:
    """V1 (accessible) free at an exact spot inside S1 one minute ago, with a driver id."""
    fix = {
        "timestamp": (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=61)).isoformat(),
        "lat": EXACT_LAT,
        "lon": EXACT_LON,
        "meter": "free",
        "driver_id": "D-77",
    }
    sent = client.post(
        "/api/v1/pings", json={"pings": [fix]}, headers=bearer(seeded["device_token"])
    )
    assert sent.json()["accepted"] == 1, sent.text


def _no_personal_data(payload: object) -> None:
    dumped = json.dumps(payload, ensure_ascii=False)
    for value in PERSONAL:
        assert value not in dumped, value
    assert str(EXACT_LAT)[:9] not in dumped


class TestAccessibleTaxis:
    def test_free_accessible_taxi_found_coarsely(
        self, client: TestClient, free_accessible_taxis: None
    ) -> None:
        """The free accessible taxi is listed with a coarse position and no identity."""
        response = client.get(
            "/api/v1/public/accessible-taxis",
            params={"lat": -30.03, "lon": -51.23, "radius_m": 2000},
        )
        assert response.status_code == 200
        body = response.json()
        assert body["count"] >= 1
        taxi = body["data"][0]
        assert set(taxi) == {"index", "position", "distance_m", "last_seen_min"}
        assert taxi["position"] == {"lat": -30.028, "lon": -51.229}
        assert taxi["distance_m"] % 100 == 0
        _no_personal_data(body)

    def test_radius_over_limit_is_422(self, client: TestClient) -> None:
        """A radius above the configured maximum is refused."""
        response = client.get(
            "/api/v1/public/accessible-taxis", params={"lat": -30, "lon": -51, "radius_m": 1e9}
        )
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"


class TestStandsNear:
    def test_stands_with_accessible_supply(
        self, client: TestClient, free_accessible_taxis: None
    ) -> None:
        """S1 is listed with the free accessible taxi at it; nothing personal."""
        body = client.get(
            "/api/v1/public/stands", params={"lat": -30.0277, "lon": -51.2287, "radius_m": 500}
        ).json()
        s1 = next(s for s in body["data"] if s["stand_id"] == "S1")
        assert s1["accessible_free_at_stand"] >= 1
        assert "phone" not in s1
        _no_personal_data(body)


class TestPublicRateLimit:
    def test_429_with_retry_after(self, api_engine: object) -> None:
        """Over the per-IP limit the answer is 429 with Retry-After."""
        app = create_app(engine=api_engine, settings=Settings(public_rate_limit_per_min=2))  # type: ignore[arg-type]
        with TestClient(app, raise_server_exceptions=False) as c:
            params = {"lat": -30.0, "lon": -51.0, "radius_m": 100}
            codes = [c.get("/api/v1/public/stands", params=params).status_code for _ in range(3)]
            last = c.get("/api/v1/public/stands", params=params)
        assert codes == [200, 200, 429]
        assert last.status_code == 429
        assert int(last.headers["Retry-After"]) >= 1
        assert last.json()["error"]["code"] == "rate_limited"
