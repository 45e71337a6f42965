"""Tests of api.routes.planning: the plan with the registry's active fleet, planners and admins."""

from __future__ import annotations

import datetime as dt

import pytest
from api_factories import bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine

AS_OF = dt.date(2025, 6, 1)


@pytest.fixture(scope="module")
def pinto_bandeira_fleet(api_engine: Engine, seeded: dict) -> None:
    """Five Pinto Bandeira taxis: four active (one accessible, one from 2018), one suspended."""
    from db.engine import session_scope
    from db.fleet.models import Municipality, Vehicle, VehicleStatusPeriod

    with session_scope(api_engine) as session:
        if session.get(Municipality, "4314548") is None:
            session.add(Municipality(code="4314548", name="Pinto Bandeira", uf="RS"))
            session.flush()
        years = {"PB-1": 2022, "PB-2": 2018, "PB-3": 2024, "PB-4": 2023, "PB-5": 2021}
        for vid, year in years.items():
            session.add(
                Vehicle(
                    vehicle_id=vid,
                    prefixo=vid,
                    municipality_code="4314548",
                    year=year,
                    accessible=vid == "PB-1",
                )
            )
        session.flush()
        for vid in years:
            status = "suspended" if vid == "PB-5" else "active"
            session.add(
                VehicleStatusPeriod(vehicle_id=vid, status=status, valid_from=dt.date(2024, 1, 1))
            )


class TestGetPlan:
    def test_planner_gets_the_figures(
        self, client: TestClient, seeded: dict, pinto_bandeira_fleet: None
    ) -> None:
        """Pinto Bandeira: 4 allowed (2,723 / 600), 4 active in the registry, one too old."""
        response = client.get(
            f"/api/v1/planning/4314548?as_of={AS_OF}",
            headers=bearer(seeded["tokens"]["planner"]),
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["population"], body["fleet_min"], body["fleet_max"]) == (2723, 4, 4)
        assert body["fleet_current"] == 4
        assert body["accessible_current"] == 1
        assert body["fleet_gap"]["status"] == "within"
        assert [v["vehicle_id"] for v in body["vehicles"]["over_age"]] == ["PB-2"]

    def test_the_registry_holds_no_fretamento_fleet(
        self, client: TestClient, seeded: dict, pinto_bandeira_fleet: None
    ) -> None:
        """A fretamento plan does not judge the registry's taxis: its fleet is unknown, no
        vehicle is listed as over age or missing an accessible one."""
        response = client.get(
            f"/api/v1/planning/4314548?as_of={AS_OF}&service=fretamento",
            headers=bearer(seeded["tokens"]["planner"]),
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["fleet_current"], body["accessible_current"]) == (None, None)
        vehicles = body["vehicles"]
        assert (vehicles["checked"], vehicles["over_age"], vehicles["inspection"]) == (0, [], [])

    def test_estimate_year(self, client: TestClient, seeded: dict) -> None:
        """year=2024 uses the IBGE estimate (Porto Velho 514,873 → 736–1029)."""
        response = client.get(
            "/api/v1/planning/1100205?year=2024", headers=bearer(seeded["tokens"]["admin"])
        )
        body = response.json()
        assert (body["population"], body["fleet_min"], body["fleet_max"]) == (514873, 736, 1029)
        assert body["fleet_current"] is None

    def test_unknown_code_is_404(self, client: TestClient, seeded: dict) -> None:
        """A code that is not an IBGE municipality is a 404 with a pt-BR message."""
        response = client.get(
            "/api/v1/planning/9999999", headers=bearer(seeded["tokens"]["planner"])
        )
        assert response.status_code == 404
        assert "não encontrado" in response.json()["error"]["message"]

    @pytest.mark.parametrize("as_of", ["1900-01-01", "2099-12-31"])
    def test_a_date_outside_the_registry_is_422(
        self, client: TestClient, seeded: dict, as_of: str
    ) -> None:
        """A reference date the registry cannot hold (1900: today's fleet was 'active' then)
        is refused, naming the range."""
        response = client.get(
            f"/api/v1/planning/1100205?as_of={as_of}", headers=bearer(seeded["tokens"]["planner"])
        )
        assert response.status_code == 422
        assert "esperado uma data entre 1990-01-01 e" in response.json()["error"]["message"]

    def test_agent_is_403(self, client: TestClient, seeded: dict) -> None:
        """Enforcement agents do not get the planning figures."""
        response = client.get("/api/v1/planning/1100205", headers=bearer(seeded["tokens"]["agent"]))
        assert response.status_code == 403

    def test_no_rule_says_so(self, client: TestClient, seeded: dict) -> None:
        """Porto Alegre's taxi decree has no sizing rule: the answer says no rule is configured."""
        response = client.get(
            "/api/v1/planning/4314902", headers=bearer(seeded["tokens"]["planner"])
        )
        body = response.json()
        assert response.status_code == 200
        assert body["rule"] is None and body["fleet_min"] is None
        assert "nenhuma regra de planejamento configurada" in body["rule_message"]
