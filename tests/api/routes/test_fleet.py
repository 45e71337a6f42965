"""Tests of api.routes.fleet: vehicles, personal data only to admin/agent and audited."""

from __future__ import annotations

from api_factories import bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text


def _audit_count(engine: Engine, actor: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM audit_log WHERE actor = :a "
                    "AND action = 'read_personal_data'"
                ),
                {"a": actor},
            ).scalar_one()
        )


class TestListVehicles:
    def test_planner_gets_no_personal_data(self, client: TestClient, seeded: dict) -> None:
        """Without include_personal no plate or holder is in the answer."""
        response = client.get("/api/v1/vehicles", headers=bearer(seeded["tokens"]["planner"]))
        assert response.status_code == 200
        assert "ABC1D23" not in response.text
        assert "Maria" not in response.text
        v1 = next(v for v in response.json()["data"] if v["vehicle_id"] == "V1")
        assert v1["accessible"] is True
        assert v1["stand_ids"] == ["S1"]

    def test_planner_asking_personal_data_is_403(self, client: TestClient, seeded: dict) -> None:
        """A planner may not ask for personal data."""
        response = client.get(
            "/api/v1/vehicles?include_personal=true", headers=bearer(seeded["tokens"]["planner"])
        )
        assert response.status_code == 403

    def test_agent_gets_personal_data_audited(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """An agent gets plates and holders, and the read is written to the audit log."""
        before = _audit_count(api_engine, "user:u_agent")
        response = client.get(
            "/api/v1/vehicles?include_personal=true", headers=bearer(seeded["tokens"]["agent"])
        )
        assert response.status_code == 200
        v1 = next(v for v in response.json()["data"] if v["vehicle_id"] == "V1")
        assert v1["plate"] == "ABC1D23"
        assert v1["holder"]["cpf"] == "12345678901"
        assert _audit_count(api_engine, "user:u_agent") == before + 1

    def test_vehicle_documents_with_the_substituted_plate_as_personal_data(
        self, client: TestClient, seeded: dict
    ) -> None:
        """Documents and category are shown to a planner; the substituted plate only to an
        agent asking for personal data."""
        response = client.get("/api/v1/vehicles", headers=bearer(seeded["tokens"]["planner"]))
        v3 = next(v for v in response.json()["data"] if v["vehicle_id"] == "V3")
        assert (v3["substitution_since"], v3["service_category"]) == ("2024-03-01", "aeroporto")
        assert "JKL7M89" not in response.text
        response = client.get(
            "/api/v1/vehicles?include_personal=true", headers=bearer(seeded["tokens"]["agent"])
        )
        v3 = next(v for v in response.json()["data"] if v["vehicle_id"] == "V3")
        assert v3["substituted_plate"] == "JKL7M89"


class TestGetVehicle:
    def test_admin_detail_audited_and_404(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """An admin's personal read of one vehicle is audited; an unknown vehicle is 404."""
        headers = bearer(seeded["tokens"]["admin"])
        before = _audit_count(api_engine, "user:u_admin")
        one = client.get("/api/v1/vehicles/V1?include_personal=true", headers=headers)
        assert one.json()["holder"]["name"] == "Maria da Silva"
        assert _audit_count(api_engine, "user:u_admin") == before + 1
        assert client.get("/api/v1/vehicles/NOPE", headers=headers).status_code == 404
