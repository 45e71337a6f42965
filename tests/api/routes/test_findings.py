"""Tests of api.routes.findings: GeoJSON findings for agents and admins."""

from __future__ import annotations

from api_factories import bearer
from fastapi.testclient import TestClient


class TestListFindings:
    def test_filter_by_kind_and_vehicle(self, client: TestClient, seeded: dict) -> None:
        """Filters by kind and vehicle select the seeded finding; another kind selects none."""
        headers = bearer(seeded["tokens"]["agent"])
        body = client.get(
            "/api/v1/findings?kind=tracking_gap&vehicle_id=V1", headers=headers
        ).json()
        # live detection on ingest may add findings of V1 from other tests' fixes
        f1 = next(f for f in body["features"] if f["id"] == "F1")
        assert f1["geometry"]["type"] == "Point"
        assert {f["properties"]["kind"] for f in body["features"]} == {"tracking_gap"}
        assert {f["properties"]["vehicle_id"] for f in body["features"]} == {"V1"}
        none = client.get("/api/v1/findings?kind=queue_jump", headers=headers).json()
        assert none["count"] == 0

    def test_naive_period_is_422(self, client: TestClient, seeded: dict) -> None:
        """A period bound without a UTC offset is refused."""
        response = client.get(
            "/api/v1/findings?since=2024-01-01T00:00:00", headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 422

    def test_a_bare_number_is_not_an_instant(self, client: TestClient, seeded: dict) -> None:
        """A number is not read as Unix time: 422 naming ISO 8601."""
        response = client.get(
            "/api/v1/findings?since=1709510400", headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 422
        assert "ISO 8601" in response.text

    def test_inverted_period_is_422(self, client: TestClient, seeded: dict) -> None:
        """A period whose start comes after its end is refused, as supervision's periods are."""
        response = client.get(
            "/api/v1/findings",
            params={"since": "2024-03-05T00:00:00Z", "until": "2024-03-04T00:00:00Z"},
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert response.status_code == 422
        assert "período invertido" in response.json()["error"]["message"]

    def test_instant_period_is_accepted(self, client: TestClient, seeded: dict) -> None:
        """``since`` equal to ``until`` asks for the findings overlapping that instant."""
        response = client.get(
            "/api/v1/findings",
            params={"since": "2024-03-04T00:00:00Z", "until": "2024-03-04T00:00:00Z"},
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert response.status_code == 200


class TestGetFinding:
    def test_detail_and_404(self, client: TestClient, seeded: dict) -> None:
        """One finding with its details; an unknown id is 404."""
        headers = bearer(seeded["tokens"]["admin"])
        assert client.get("/api/v1/findings/F1", headers=headers).json()["properties"][
            "details"
        ] == {"gap_s": 3600, "still": False, "after_ride": False}
        assert client.get("/api/v1/findings/NOPE", headers=headers).status_code == 404
