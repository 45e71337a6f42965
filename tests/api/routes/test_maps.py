"""Tests of api.routes.maps: HTML maps for the roles that may see them."""

from __future__ import annotations

from api_factories import bearer
from fastapi.testclient import TestClient


class TestOverviewMap:
    def test_planner_gets_html(self, client: TestClient, seeded: dict) -> None:
        """The overview map is a self-contained HTML page naming the stands."""
        response = client.get("/api/v1/maps/overview", headers=bearer(seeded["tokens"]["planner"]))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")
        assert "Ponto Matriz" in response.text


class TestFindingsMap:
    def test_agent_yes_planner_no(self, client: TestClient, seeded: dict) -> None:
        """Agents get the findings map; planners do not."""
        ok = client.get("/api/v1/maps/findings", headers=bearer(seeded["tokens"]["agent"]))
        assert ok.status_code == 200
        denied = client.get("/api/v1/maps/findings", headers=bearer(seeded["tokens"]["planner"]))
        assert denied.status_code == 403
