"""Tests of api.routes.drivers: admin only, personal data audited, changes audited."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
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
        (stored,) = response.json()["links"]
        assert {k: v for k, v in stored.items() if k != "link_id"} == {
            "vehicle_id": "V1",
            "role": "titular",
            "valid_from": "2024-01-01",
            "valid_until": None,
        }
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


def _vehicle(engine: Engine, municipality: str | None = None) -> str:
    vehicle_id = f"VD-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        if municipality is not None:
            conn.execute(
                text(
                    "INSERT INTO municipalities (code, name, uf) VALUES (:m, 'M', 'RO') "
                    "ON CONFLICT DO NOTHING"
                ),
                {"m": municipality},
            )
        conn.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code) VALUES (:v, :v, :m)"
            ),
            {"v": vehicle_id, "m": municipality},
        )
    return vehicle_id


def _changes(engine: Engine, entity_id: str, entity: str) -> list[dict[str, Any]]:
    """The audit rows of changes (not reads) of one record, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT action, details FROM audit_log WHERE entity_id = :d AND entity = :e "
                "AND action <> 'read_personal_data' ORDER BY entry_id"
            ),
            {"d": entity_id, "e": entity},
        ).all()
    return [{"action": a, **d} for a, d in rows]


@pytest.fixture
def admin(seeded: dict) -> dict[str, str]:
    """The admin's Authorization header."""
    return bearer(seeded["tokens"]["admin"])


def _fields(response: Any) -> list[str]:
    """The fields named by a 422's validation errors."""
    return [str(e["loc"][-1]) for e in response.json()["error"].get("errors", [])]


class TestListDrivers:
    def test_search_by_name_is_audited_with_the_ids(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A search by part of the name finds the driver; the page read is audited first."""
        driver_id = _driver(api_engine)
        with api_engine.begin() as conn:
            conn.execute(
                text("UPDATE drivers SET name = :n WHERE driver_id = :d"),
                {"n": f"Fictício {driver_id}", "d": driver_id},
            )
        response = client.get("/api/v1/drivers", params={"q": driver_id.lower()}, headers=admin)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["count"] == 1 and body["data"][0]["driver_id"] == driver_id
        with api_engine.connect() as conn:
            details = conn.execute(
                text(
                    "SELECT details FROM audit_log WHERE action = 'read_personal_data' "
                    "AND entity = 'drivers' ORDER BY entry_id DESC LIMIT 1"
                )
            ).scalar_one()
        assert details["ids"] == [driver_id] and details["route"] == "/api/v1/drivers"

    def test_wildcards_in_the_search_are_literal(self, client: TestClient, admin: dict) -> None:
        """A '%' in q matches a '%' only, not every driver."""
        response = client.get("/api/v1/drivers", params={"q": "%"}, headers=admin)
        assert response.status_code == 200
        assert response.json()["count"] == 0

    @pytest.mark.parametrize("query", ["limit=0", "limit=501", "offset=-1", "municipality_code=12"])
    def test_bad_paging_or_filter_is_422(self, client: TestClient, admin: dict, query: str) -> None:
        """Out-of-range paging and a malformed IBGE code are 422 naming the parameter."""
        response = client.get(f"/api/v1/drivers?{query}", headers=admin)
        assert response.status_code == 422
        assert query.split("=")[0] in _fields(response)


class TestCreateDriver:
    def test_created_and_audited(self, client: TestClient, admin: dict, api_engine: Engine) -> None:
        """A new driver is stored as sent (category upper-case) and the creation audited."""
        driver_id = f"NEW-{uuid.uuid4().hex[:8]}"
        later = (dt.date.today() + dt.timedelta(days=365 * 5)).isoformat()
        body = {
            "driver_id": driver_id,
            "name": "Condutora Fictícia",
            "synthetic": True,
            "cnh_number": "00000000000",
            "cnh_category": "B",
            "cnh_valid_until": later,
            "ictp_valid_until": "2026-01-31",
        }
        response = client.post("/api/v1/drivers", json=body, headers=admin)
        assert response.status_code == 201, response.text
        got = response.json()
        assert got["cnh_valid_until"] == later and got["ictp_valid_until"] == "2026-01-31"
        assert got["periods"] == [] and got["links"] == []
        (entry,) = _changes(api_engine, driver_id, "drivers")
        assert entry["action"] == "create" and entry["after"]["name"] == "Condutora Fictícia"

    def test_taken_id_is_409(self, client: TestClient, admin: dict, api_engine: Engine) -> None:
        """Creating a driver whose id exists is a conflict, not an overwrite."""
        driver_id = _driver(api_engine)
        body = {"driver_id": driver_id, "name": "Outro Nome"}
        response = client.post("/api/v1/drivers", json=body, headers=admin)
        assert response.status_code == 409 and driver_id in response.text
        assert client.get(f"/api/v1/drivers/{driver_id}", headers=admin).json()["name"] == (
            "Condutor Fictício"
        )

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            ({"name": ""}, "name"),
            ({"name": None}, "name"),
            ({"cnh_category": "Z"}, "cnh_category"),
            ({"cnh_valid_until": "2019-02-30"}, "cnh_valid_until"),
            ({"cnh_valid_until": 20240101}, "cnh_valid_until"),
            ({"ictp_valid_until": "1980-01-01"}, "ictp_valid_until"),
            ({"synthetic": "sim"}, "synthetic"),
            ({"municipality_code": "43149"}, "municipality_code"),
            ({"driver_id": "a/b"}, "driver_id"),
            ({"cpf": "12345678901"}, "cpf"),
        ],
    )
    def test_bad_field_is_422_naming_it(
        self, client: TestClient, admin: dict, change: dict, field: str
    ) -> None:
        """Each bad or unknown field is refused, named in the 422, and nothing is stored."""
        driver_id = f"BAD-{uuid.uuid4().hex[:8]}"
        body = {"driver_id": driver_id, "name": "Condutor Fictício"} | change
        response = client.post("/api/v1/drivers", json=body, headers=admin)
        assert response.status_code == 422, response.text
        assert field in _fields(response)
        assert client.get(f"/api/v1/drivers/{driver_id}", headers=admin).status_code == 404

    def test_validity_beyond_ten_years_is_422(self, client: TestClient, admin: dict) -> None:
        """A CNH validity 11 years ahead is a typo (the drivers file's rule): 422."""
        far = dt.date.today().replace(day=1, year=dt.date.today().year + 11).isoformat()
        body = {"driver_id": f"FAR-{uuid.uuid4().hex[:6]}", "name": "X", "cnh_valid_until": far}
        response = client.post("/api/v1/drivers", json=body, headers=admin)
        assert response.status_code == 422 and "hoje + 10 anos" in response.text

    def test_unknown_municipality_is_422(self, client: TestClient, admin: dict) -> None:
        """A well-formed IBGE code not in the registry is refused with a pt-BR message."""
        body = {
            "driver_id": f"MUN-{uuid.uuid4().hex[:6]}",
            "name": "X",
            "municipality_code": "9999999",
        }
        response = client.post("/api/v1/drivers", json=body, headers=admin)
        assert response.status_code == 422 and "fora do cadastro" in response.text


class TestUpdateDriver:
    def test_changed_fields_are_audited_before_and_after(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A PATCH changes only what it sends; the audit keeps before, after and the reason."""
        driver_id = _driver(api_engine)
        body = {"cnh_category": "D", "ictp_valid_until": "2026-06-30", "reason": "ofício 12/2026"}
        response = client.patch(f"/api/v1/drivers/{driver_id}", json=body, headers=admin)
        assert response.status_code == 200, response.text
        got = response.json()
        assert got["cnh_category"] == "D" and got["name"] == "Condutor Fictício"
        (entry,) = _changes(api_engine, driver_id, "drivers")
        assert entry["action"] == "update" and entry["reason"] == "ofício 12/2026"
        assert entry["before"] == {"cnh_category": None, "ictp_valid_until": None}
        assert entry["after"] == {"cnh_category": "D", "ictp_valid_until": "2026-06-30"}

    def test_null_clears_an_optional_field(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """Sending null for an optional field clears it (audited)."""
        driver_id = _driver(api_engine)
        url = f"/api/v1/drivers/{driver_id}"
        client.patch(url, json={"cnh_number": "123"}, headers=admin)
        response = client.patch(url, json={"cnh_number": None}, headers=admin)
        assert response.status_code == 200 and response.json()["cnh_number"] is None
        assert _changes(api_engine, driver_id, "drivers")[-1]["before"] == {"cnh_number": "123"}

    def test_same_values_write_no_audit_row(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A PATCH that changes nothing stores nothing and writes no change to the audit."""
        driver_id = _driver(api_engine)
        body = {"name": "Condutor Fictício"}
        response = client.patch(f"/api/v1/drivers/{driver_id}", json=body, headers=admin)
        assert response.status_code == 200
        assert _changes(api_engine, driver_id, "drivers") == []

    @pytest.mark.parametrize(
        ("body", "where"),
        [
            ({"name": None}, "'name'"),
            ({"synthetic": None}, "'synthetic'"),
            ({}, "nenhum campo"),
            ({"reason": "só motivo"}, "nenhum campo"),
            ({"driver_id": "OTHER"}, "errors"),
        ],
    )
    def test_bad_patch_is_422(
        self, client: TestClient, admin: dict, api_engine: Engine, body: dict, where: str
    ) -> None:
        """A required field set to null, an empty PATCH or the id itself: 422, pt-BR."""
        driver_id = _driver(api_engine)
        response = client.patch(f"/api/v1/drivers/{driver_id}", json=body, headers=admin)
        assert response.status_code == 422 and where in response.text

    def test_unknown_driver_is_404(self, client: TestClient, admin: dict) -> None:
        """Changing a driver not in the registry is 404."""
        response = client.patch("/api/v1/drivers/NOBODY", json={"name": "X"}, headers=admin)
        assert response.status_code == 404

    def test_agent_is_refused(self, client: TestClient, seeded: dict, api_engine: Engine) -> None:
        """An agent may not change a driver (403), and nothing changes."""
        driver_id = _driver(api_engine)
        agent = bearer(seeded["tokens"]["agent"])
        response = client.patch(f"/api/v1/drivers/{driver_id}", json={"name": "X"}, headers=agent)
        assert response.status_code == 403
        assert _changes(api_engine, driver_id, "drivers") == []


def _period(client: TestClient, admin: dict, driver_id: str, **body: Any) -> int:
    url = f"/api/v1/drivers/{driver_id}/periods"
    response = client.post(
        url, json={"document": "cnh", "status": "suspensa"} | body, headers=admin
    )
    assert response.status_code == 201, response.text
    return max(p["period_id"] for p in response.json()["periods"])


class TestUpdatePeriod:
    def test_ending_a_suspension_is_audited(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """An open suspension gets its end date; the audit names the period, before and after."""
        driver_id = _driver(api_engine)
        period_id = _period(client, admin, driver_id, valid_from="2025-03-01")
        response = client.patch(
            f"/api/v1/drivers/{driver_id}/periods/{period_id}",
            json={"valid_until": "2025-03-20"},
            headers=admin,
        )
        assert response.status_code == 200, response.text
        (period,) = response.json()["periods"]
        assert period["valid_until"] == "2025-03-20" and period["valid_from"] == "2025-03-01"
        entry = _changes(api_engine, driver_id, "driver_document_periods")[-1]
        assert entry["action"] == "update" and entry["period_id"] == period_id
        assert entry["before"] == {"valid_until": None}
        assert entry["after"] == {"valid_until": "2025-03-20"}

    def test_a_mistaken_suspension_is_corrected_not_deleted(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """Correcting the status to regular keeps the period's id and dates, audited."""
        driver_id = _driver(api_engine)
        period_id = _period(client, admin, driver_id, valid_from="2025-01-01")
        response = client.patch(
            f"/api/v1/drivers/{driver_id}/periods/{period_id}",
            json={"status": "regular", "reason": "lançado no condutor errado"},
            headers=admin,
        )
        assert response.status_code == 200
        (period,) = response.json()["periods"]
        assert period["period_id"] == period_id and period["status"] == "regular"
        entry = _changes(api_engine, driver_id, "driver_document_periods")[-1]
        assert entry["before"] == {"status": "suspensa"}
        assert entry["reason"] == "lançado no condutor errado"

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ({"valid_until": "2025-07-01"}, "sobrepõe"),
            ({"valid_until": "2024-12-31"}, "antes de 'valid_from'"),
            ({"status": None}, "'status'"),
            ({"status": "vencida"}, "status"),
            ({"document": "ictp"}, "document"),
            ({"valid_until": "1989-12-31"}, "1990-01-01"),
        ],
    )
    def test_rule_breaking_change_is_422_and_stores_nothing(
        self, client: TestClient, admin: dict, api_engine: Engine, body: dict, message: str
    ) -> None:
        """Overlap, order, null status, unknown status, the document, a date out of range: 422."""
        driver_id = _driver(api_engine)
        period_id = _period(
            client, admin, driver_id, valid_from="2025-01-01", valid_until="2025-01-31"
        )
        _period(client, admin, driver_id, valid_from="2025-06-01")
        url = f"/api/v1/drivers/{driver_id}/periods/{period_id}"
        response = client.patch(url, json=body, headers=admin)
        assert response.status_code == 422 and message in response.text, response.text
        periods = client.get(f"/api/v1/drivers/{driver_id}", headers=admin).json()["periods"]
        first = next(p for p in periods if p["period_id"] == period_id)
        assert (first["valid_from"], first["valid_until"]) == ("2025-01-01", "2025-01-31")
        assert first["status"] == "suspensa"

    def test_period_of_another_driver_is_404(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A period id is looked up under its driver: another driver's is 404."""
        owner, other = _driver(api_engine), _driver(api_engine)
        period_id = _period(client, admin, owner, valid_from="2025-01-01")
        for driver_id, pid in ((other, period_id), (owner, 2**40)):
            url = f"/api/v1/drivers/{driver_id}/periods/{pid}"
            response = client.patch(url, json={"status": "regular"}, headers=admin)
            assert response.status_code == 404, response.text


class TestUpdateLink:
    def _link(
        self, client: TestClient, admin: dict, driver_id: str, vehicle_id: str, **body: Any
    ) -> int:
        url = f"/api/v1/drivers/{driver_id}/links"
        link = {"vehicle_id": vehicle_id, "role": "auxiliar", "valid_from": "2025-01-01"} | body
        response = client.post(url, json=link, headers=admin)
        assert response.status_code == 201, response.text
        return max(k["link_id"] for k in response.json()["links"])

    def test_ending_a_link_is_audited(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A link gets an end date; the audit names the link and prefixo, before and after."""
        driver_id, vehicle_id = _driver(api_engine), _vehicle(api_engine)
        link_id = self._link(client, admin, driver_id, vehicle_id)
        url = f"/api/v1/drivers/{driver_id}/links/{link_id}"
        response = client.patch(url, json={"valid_until": "2025-06-30"}, headers=admin)
        assert response.status_code == 200, response.text
        (link,) = response.json()["links"]
        assert link["valid_until"] == "2025-06-30" and link["vehicle_id"] == vehicle_id
        entry = _changes(api_engine, driver_id, "driver_assignments")[-1]
        assert entry["action"] == "update" and entry["vehicle_id"] == vehicle_id
        assert entry["before"] == {"valid_until": None}

    def test_a_new_link_ending_before_it_starts_is_422(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A new link whose end comes before its start is the form's error (it was a database
        range error, answered as a number out of range); nothing is stored."""
        driver_id, vehicle_id = _driver(api_engine), _vehicle(api_engine)
        body = {"vehicle_id": vehicle_id, "role": "titular", "valid_from": "2026-12-05",
                "valid_until": "2026-12-01"}  # fmt: skip
        response = client.post(f"/api/v1/drivers/{driver_id}/links", json=body, headers=admin)
        assert response.status_code == 422 and "antes de 'valid_from'" in response.text
        assert client.get(f"/api/v1/drivers/{driver_id}", headers=admin).json()["links"] == []

    def test_a_third_auxiliary_at_once_is_refused(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """Turning a titular into a third auxiliar of a Porto Velho prefixo breaks the legal
        cap (art. 43 § 1º): 422."""
        vehicle_id = _vehicle(api_engine, "1100205")
        for _ in range(2):
            self._link(client, admin, _driver(api_engine), vehicle_id)
        titular = _driver(api_engine)
        link_id = self._link(client, admin, titular, vehicle_id, role="titular")
        url = f"/api/v1/drivers/{titular}/links/{link_id}"
        response = client.patch(url, json={"role": "auxiliar"}, headers=admin)
        assert response.status_code == 422 and "limite é 2" in response.text
        (link,) = client.get(f"/api/v1/drivers/{titular}", headers=admin).json()["links"]
        assert link["role"] == "titular"

    def test_ending_the_other_auxiliary_makes_room(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """Once one auxiliar's link ends, a new one starting after it is accepted."""
        vehicle_id = _vehicle(api_engine, "1100205")
        first = _driver(api_engine)
        first_link = self._link(client, admin, first, vehicle_id)
        self._link(client, admin, _driver(api_engine), vehicle_id)
        url = f"/api/v1/drivers/{first}/links/{first_link}"
        assert (
            client.patch(url, json={"valid_until": "2025-03-31"}, headers=admin).status_code == 200
        )
        self._link(client, admin, _driver(api_engine), vehicle_id, valid_from="2025-04-01")

    def test_the_same_driver_twice_on_a_prefixo_is_422(
        self, client: TestClient, admin: dict, api_engine: Engine
    ) -> None:
        """A second link of the driver to the prefixo on overlapping dates is refused (as the
        links file), by POST and by moving a link's dates."""
        driver_id, vehicle_id = _driver(api_engine), _vehicle(api_engine)
        self._link(client, admin, driver_id, vehicle_id, valid_until="2025-01-31")
        later = self._link(client, admin, driver_id, vehicle_id, valid_from="2025-03-01")
        url = f"/api/v1/drivers/{driver_id}/links"
        again = {"vehicle_id": vehicle_id, "role": "titular", "valid_from": "2025-01-15"}
        response = client.post(url, json=again, headers=admin)
        assert response.status_code == 422 and "já está vinculado" in response.text
        moved = client.patch(f"{url}/{later}", json={"valid_from": "2025-01-20"}, headers=admin)
        assert moved.status_code == 422 and "já está vinculado" in moved.text

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ({"valid_from": None}, "'valid_from'"),
            ({"valid_until": "2024-12-31"}, "antes de 'valid_from'"),
            ({"role": "motorista"}, "role"),
            ({"vehicle_id": "V2"}, "vehicle_id"),
        ],
    )
    def test_bad_link_change_is_422(
        self, client: TestClient, admin: dict, api_engine: Engine, body: dict, message: str
    ) -> None:
        """A null start, an end before the start, an unknown role, another prefixo: 422."""
        driver_id, vehicle_id = _driver(api_engine), _vehicle(api_engine)
        link_id = self._link(client, admin, driver_id, vehicle_id)
        url = f"/api/v1/drivers/{driver_id}/links/{link_id}"
        response = client.patch(url, json=body, headers=admin)
        assert response.status_code == 422 and message in response.text, response.text

    def test_unknown_link_is_404(self, client: TestClient, admin: dict, api_engine: Engine) -> None:
        """A link id that is not the driver's is 404."""
        driver_id = _driver(api_engine)
        url = f"/api/v1/drivers/{driver_id}/links/999999999"
        assert (
            client.patch(url, json={"valid_until": "2025-01-01"}, headers=admin).status_code == 404
        )


class TestMessages:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            ({"name": "X", "cnh_category": "Z"}, "'cnh_category': esperado um de"),
            ({"name": "X", "synthetic": "sim"}, "'synthetic': esperado true ou false"),
            ({"name": "X", "cpf": "1"}, "'cpf': campo não permitido"),
            ({"name": "X", "cnh_valid_until": "31/12/2026"}, "'cnh_valid_until': data inválida"),
            ({}, "'name': campo obrigatório"),
        ],
    )
    def test_a_422_says_in_portuguese_which_field(
        self, client: TestClient, admin: dict, body: dict, expected: str
    ) -> None:
        """The 422's message names the field and what was expected, in pt-BR."""
        payload = {"driver_id": f"MSG-{uuid.uuid4().hex[:6]}"} | body
        response = client.post("/api/v1/drivers", json=payload, headers=admin)
        assert response.status_code == 422
        assert expected in response.json()["error"]["message"], response.text
