"""Tests of api.routes.pings: JSON batch ingest, answered per row, idempotent, durable."""

from __future__ import annotations

import datetime as dt

from api_factories import bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text


def _iso(minutes_ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).isoformat()


def _stored(engine: Engine, vehicle_id: str, since: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM fixes WHERE vehicle_id = :v AND ts >= :t"),
                {"v": vehicle_id, "t": since},
            ).scalar_one()
        )


class TestPostPings:
    def test_same_batch_twice_is_stored_once(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """Sending a batch twice stores it once; the second answer says 'duplicate'."""
        start = _iso(300)
        batch = {
            "pings": [
                {
                    "vehicle_id": "V1",
                    "timestamp": _iso(300 - i),
                    "lat": -30.03,
                    "lon": -51.23,
                    "meter": "free",
                }
                for i in range(5)
            ]
        }
        headers = bearer(seeded["device_token"])
        first = client.post("/api/v1/pings", json=batch, headers=headers)
        assert first.status_code == 200, first.text
        assert first.json()["accepted"] == 5
        second = client.post("/api/v1/pings", json=batch, headers=headers)
        assert second.json()["duplicates"] == 5
        assert second.json()["accepted"] == 0
        assert _stored(api_engine, "V1", start) >= 5
        assert _stored(api_engine, "V1", start) == 5 + _stored(api_engine, "V1", _iso(294))

    def test_bad_rows_are_reported_and_good_rows_stored(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """Good rows are stored; each bad row comes back with its reason."""
        t0 = _iso(400)
        batch = {
            "pings": [
                {"timestamp": t0, "lat": -30.03, "lon": -51.23},
                {"timestamp": _iso(399), "lat": 0, "lon": 0},
                {"timestamp": "2024-03-04T12:00:00", "lat": -30.03, "lon": -51.23},
                {"vehicle_id": "V2", "timestamp": _iso(398), "lat": -30.03, "lon": -51.23},
                {"timestamp": _iso(397), "lat": "abc", "lon": -51.23},
                {"timestamp": _iso(396), "lat": -30.03, "lon": -51.23, "meter": "busy"},
                {"timestamp": t0, "lat": -30.03, "lon": -51.23},
            ]
        }
        response = client.post("/api/v1/pings", json=batch, headers=bearer(seeded["device_token"]))
        assert response.status_code == 200, response.text
        body = response.json()
        assert [(r["status"], r["reason"]) for r in body["results"]] == [
            ("accepted", None),
            ("rejected", "null_island"),
            ("rejected", "naive_timestamp"),
            ("rejected", "vehicle_not_allowed"),
            ("rejected", "invalid_coordinates"),
            ("rejected", "unknown_meter"),
            ("duplicate", None),
        ]
        assert _stored(api_engine, "V1", t0) - _stored(api_engine, "V1", _iso(399.5)) == 1
        with api_engine.connect() as conn:
            reasons = set(
                conn.execute(
                    text("SELECT reason FROM rejected_fixes WHERE source LIKE 'api:device:%'")
                ).scalars()
            )
        assert {"null_island", "vehicle_not_allowed", "unknown_meter"} <= reasons

    def test_user_token_cannot_send(self, client: TestClient, seeded: dict) -> None:
        """A user token is not a device token: 401."""
        response = client.post(
            "/api/v1/pings", json={"pings": []}, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 401

    def test_malformed_body_is_422(self, client: TestClient, seeded: dict) -> None:
        """A body that is not a batch is a 422 with the error body."""
        response = client.post(
            "/api/v1/pings", json={"pings": "x"}, headers=bearer(seeded["device_token"])
        )
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"
