"""Tests of api.routes.fleet: vehicles, personal data only to admin/agent and audited."""

from __future__ import annotations

import pytest
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


def _new_vehicle(engine: Engine, **columns: object) -> str:
    import uuid

    vehicle_id = f"VD-{uuid.uuid4().hex[:8]}"
    names = ", ".join(["vehicle_id", "prefixo", "plate", *columns])
    marks = ", ".join([":v", ":v", "'PLT0A00'", *(f":{k}" for k in columns)])
    with engine.begin() as conn:
        conn.execute(
            text(f"INSERT INTO vehicles ({names}) VALUES ({marks})"), {"v": vehicle_id, **columns}
        )
    return vehicle_id


def _vehicle_changes(engine: Engine, vehicle_id: str) -> list[dict]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT actor, details FROM audit_log WHERE entity = 'vehicles' "
                "AND entity_id = :v AND action = 'update' ORDER BY entry_id"
            ),
            {"v": vehicle_id},
        ).all()
    return [{"actor": a, **d} for a, d in rows]


class TestUpdateVehicleDocuments:
    def test_admin_changes_documents_audited_before_and_after(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """Year, vistoria and category change; the audit keeps before, after and the reason;
        the answer carries no plate."""
        import datetime as dt

        vehicle_id = _new_vehicle(api_engine, year=2015, last_inspection_on=dt.date(2024, 5, 2))
        body = {
            "year": 2019,
            "last_inspection_on": "2025-05-02",
            "inspection_valid_until": "2026-05-01",
            "service_category": "aeroporto",
            "reason": "laudo de vistoria 88/2025",
        }
        response = client.patch(
            f"/api/v1/vehicles/{vehicle_id}", json=body, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 200, response.text
        got = response.json()
        assert got["year"] == 2019 and got["service_category"] == "aeroporto"
        assert got["last_inspection_on"] == "2025-05-02" and got["plate"] is None
        assert "PLT0A00" not in response.text
        (entry,) = _vehicle_changes(api_engine, vehicle_id)
        assert entry["actor"] == "user:u_admin" and entry["reason"] == "laudo de vistoria 88/2025"
        assert entry["before"] == {
            "year": 2015,
            "last_inspection_on": "2024-05-02",
            "inspection_valid_until": None,
            "service_category": None,
        }
        assert entry["after"]["year"] == 2019

    def test_substitution_and_termo_are_set_and_cleared(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A provisional substitution with its plate, then the Termo recolhido and its end;
        null clears the substitution (plate first, as the fleet file's rule wants)."""
        vehicle_id = _new_vehicle(api_engine)
        admin = bearer(seeded["tokens"]["admin"])
        url = f"/api/v1/vehicles/{vehicle_id}"
        steps = [
            {"substitution_since": "2025-02-01", "substituted_plate": "OLD1A23"},
            {"termo_recolhido_since": "2025-03-01"},
            {"termo_recolhido_until": "2025-03-15"},
            {"substituted_plate": None, "substitution_since": None},
        ]
        for body in steps:
            response = client.patch(url, json=body, headers=admin)
            assert response.status_code == 200, (body, response.text)
        got = response.json()
        assert got["substitution_since"] is None
        assert (got["termo_recolhido_since"], got["termo_recolhido_until"]) == (
            "2025-03-01",
            "2025-03-15",
        )
        assert len(_vehicle_changes(api_engine, vehicle_id)) == len(steps)

    @pytest.mark.parametrize(
        ("stored", "body", "message"),
        [
            ({}, {"termo_recolhido_until": "2025-01-01"}, "sem 'termo_recolhido_since'"),
            ({}, {"substituted_plate": "OLD1A23"}, "sem 'substitution_since'"),
            (
                {"termo_recolhido_since": "2025-03-01"},
                {"termo_recolhido_until": "2025-02-01"},
                "antes de 'termo_recolhido_since'",
            ),
            (
                {"substitution_since": "2025-02-01", "substituted_plate": "OLD1A23"},
                {"substitution_since": None},
                "sem 'substitution_since'",
            ),
            ({}, {"service_category": "executivo"}, "service_category"),
            ({}, {"year": 1850}, "year"),
            ({}, {"year": "2019"}, "year"),
            ({}, {"year": 2019.0}, "year"),
            ({}, {"last_inspection_on": "1989-12-31"}, "1990-01-01"),
            ({}, {"first_registered_on": "2025-13-01"}, "first_registered_on"),
            ({}, {"alvara_valid_until": 20250101}, "alvara_valid_until"),
            ({}, {"plate": "NEW0A00"}, "plate"),
            ({}, {"accessible": True}, "accessible"),
            ({}, {}, "nenhum campo"),
        ],
    )
    def test_rule_breaking_change_is_422_and_stores_nothing(
        self,
        client: TestClient,
        seeded: dict,
        api_engine: Engine,
        stored: dict,
        body: dict,
        message: str,
    ) -> None:
        """Each rule of the fleet file and each field not editable here: 422 naming it, and
        no change is stored or audited."""
        import datetime as dt

        vehicle_id = _new_vehicle(
            api_engine,
            **{k: dt.date.fromisoformat(v) if "_s" in k else v for k, v in stored.items()},
        )
        response = client.patch(
            f"/api/v1/vehicles/{vehicle_id}", json=body, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 422 and message in response.text, response.text
        assert _vehicle_changes(api_engine, vehicle_id) == []

    def test_unknown_vehicle_is_404(self, client: TestClient, seeded: dict) -> None:
        """Editing a vehicle not in the fleet is 404."""
        response = client.patch(
            "/api/v1/vehicles/NOPE", json={"year": 2020}, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 404

    @pytest.mark.parametrize("role", ["agent", "planner", "supervisor"])
    def test_other_roles_are_refused(
        self, client: TestClient, seeded: dict, api_engine: Engine, role: str
    ) -> None:
        """Only admins edit a vehicle's documents (403 for the others; nothing changes)."""
        vehicle_id = _new_vehicle(api_engine)
        response = client.patch(
            f"/api/v1/vehicles/{vehicle_id}",
            json={"year": 2020},
            headers=bearer(seeded["tokens"][role]),
        )
        assert response.status_code == 403
        assert _vehicle_changes(api_engine, vehicle_id) == []
