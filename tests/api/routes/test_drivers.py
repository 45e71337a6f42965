"""Tests of api.routes.drivers: admin only, personal data audited, changes audited."""

from __future__ import annotations

import uuid

from api_factories import bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text


def _driver(engine: Engine) -> str:
    driver_id = f"DRV-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO drivers (driver_id, name, synthetic) VALUES (:d, :n, true)"),
            {"d": driver_id, "n": "Condutor Fictício"},
        )
    return driver_id


def _audit(engine: Engine, entity_id: str) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT action, entity FROM audit_log WHERE entity_id = :d "
                "OR details::text LIKE :like ORDER BY entry_id"
            ),
            {"d": entity_id, "like": f"%{entity_id}%"},
        ).all()
    return [(a, e) for a, e in rows]


class TestDrivers:
    def test_admin_reads_a_driver_audited(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """An admin gets the driver; the read of personal data is audited first."""
        driver_id = _driver(api_engine)
        response = client.get(
            f"/api/v1/drivers/{driver_id}", headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 200
        body = response.json()
        assert body["name"] == "Condutor Fictício" and body["synthetic"] is True
        assert ("read_personal_data", "drivers") in _audit(api_engine, driver_id)

    def test_agent_is_refused(self, client: TestClient, seeded: dict, api_engine: Engine) -> None:
        """Only admins read or change the registry of drivers."""
        driver_id = _driver(api_engine)
        response = client.get(
            f"/api/v1/drivers/{driver_id}", headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 403

    def test_period_and_link_are_recorded_and_audited(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A suspension period and a link to V1 are stored, returned and audited."""
        driver_id = _driver(api_engine)
        admin = bearer(seeded["tokens"]["admin"])
        period = {"document": "ictp", "status": "suspensa", "valid_from": "2024-03-01"}
        response = client.post(f"/api/v1/drivers/{driver_id}/periods", json=period, headers=admin)
        assert response.status_code == 201, response.text
        assert response.json()["periods"][0]["status"] == "suspensa"
        link = {"vehicle_id": "V1", "role": "titular", "valid_from": "2024-01-01"}
        response = client.post(f"/api/v1/drivers/{driver_id}/links", json=link, headers=admin)
        assert response.status_code == 201, response.text
        assert response.json()["links"] == [
            {"vehicle_id": "V1", "role": "titular", "valid_from": "2024-01-01", "valid_until": None}
        ]
        actions = _audit(api_engine, driver_id)
        assert ("create", "driver_document_periods") in actions
        assert ("create", "driver_assignments") in actions

    def test_overlapping_period_and_bad_values_are_422(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """An overlapping period, an unknown status or vehicle: 422 naming the problem."""
        driver_id = _driver(api_engine)
        admin = bearer(seeded["tokens"]["admin"])
        url = f"/api/v1/drivers/{driver_id}/periods"
        first = {"document": "cnh", "status": "suspensa", "valid_from": "2024-03-01"}
        assert client.post(url, json=first, headers=admin).status_code == 201
        again = client.post(url, json=first | {"valid_from": "2024-05-01"}, headers=admin)
        assert again.status_code == 422 and "sobrepõe" in again.text
        bad = client.post(url, json=first | {"status": "vencida"}, headers=admin)
        assert bad.status_code == 422
        link = {"vehicle_id": "NOPE", "role": "auxiliar", "valid_from": "2024-01-01"}
        response = client.post(f"/api/v1/drivers/{driver_id}/links", json=link, headers=admin)
        assert response.status_code == 422 and "NOPE" in response.text

    def test_unknown_driver_is_404(self, client: TestClient, seeded: dict) -> None:
        """Reading a driver not in the registry is 404."""
        response = client.get("/api/v1/drivers/NOBODY", headers=bearer(seeded["tokens"]["admin"]))
        assert response.status_code == 404
