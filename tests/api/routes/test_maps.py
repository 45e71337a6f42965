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


def _spec(html: str) -> dict:
    """The layers spec that the page hands to PontualMaps.render."""
    import json

    return json.loads(
        html.split('type="application/json"')[1].split(">", 1)[1].split("</script>")[0]
    )


class TestStandMap:
    def test_supervisor_sees_own_stands_with_queue(
        self, client: TestClient, seeded: dict, api_engine
    ) -> None:
        """A supervisor gets the stand map of their stand only, with who is there now."""
        import datetime as dt

        from sqlalchemy import text

        now = dt.datetime.now(dt.UTC)
        with api_engine.begin() as conn:
            for minutes in (20, 10, 1):
                conn.execute(
                    text(
                        "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, "
                        "source) VALUES ('V2', :ts, -30.0277, -51.2287, "
                        "ST_SetSRID(ST_MakePoint(-51.2287, -30.0277), 4326), 'free', false, "
                        "'test-maps') ON CONFLICT DO NOTHING"
                    ),
                    {"ts": now - dt.timedelta(minutes=minutes)},
                )
        try:
            response = client.get(
                "/api/v1/maps/stands", headers=bearer(seeded["tokens"]["supervisor"])
            )
        finally:
            with api_engine.begin() as conn:
                conn.execute(text("DELETE FROM fixes WHERE source = 'test-maps'"))
        assert response.status_code == 200
        props = _spec(response.text)["layers"][0]["props"]
        assert props["stand_id"] == ["S1"]
        assert props["n_present"] == [1]
        assert props["intruders"] == [1]  # V2 has no licence for S1
        assert props["licensees"][0][0][0] == "V1"


class TestPlannerMap:
    def test_planner_yes_supervisor_no(self, client: TestClient, seeded: dict) -> None:
        """Planners get the planner map; supervisors do not."""
        ok = client.get("/api/v1/maps/planner", headers=bearer(seeded["tokens"]["planner"]))
        assert ok.status_code == 200
        assert "Ponto Matriz" in ok.text
        denied = client.get("/api/v1/maps/planner", headers=bearer(seeded["tokens"]["supervisor"]))
        assert denied.status_code == 403


class TestCitizenMap:
    def test_public_without_personal_data(self, client: TestClient, seeded: dict) -> None:
        """Anyone gets the citizen map; no plate, prefixo or holder is in it."""
        response = client.get("/api/v1/maps/citizen")
        assert response.status_code == 200
        for secret in ("ABC1D23", "XYZ9K87", "QWE4R56", "Maria da Silva", '"V1"'):
            assert secret not in response.text
        labels = [layer["label"] for layer in _spec(response.text)["layers"]]
        assert labels[-1].startswith("Táxis acessíveis livres agora")

    def test_a_shared_links_tracking_tags_do_not_break_it(self, client: TestClient) -> None:
        """A link shared on a social network comes back with ``?fbclid=…`` or ``?utm_…``: the
        page answers, as the console's pages do (it was a JSON 422)."""
        response = client.get("/api/v1/maps/citizen?fbclid=IwAR0abc&utm_source=whatsapp")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/html")


class TestMapWithoutSession:
    def test_a_browser_is_sent_to_the_login(self, client: TestClient) -> None:
        """A bookmarked map opened with the session ended goes to the login with the map kept
        to come back to (it was a JSON 401); a client without a browser's Accept keeps the
        401 of the API."""
        page = client.get(
            "/api/v1/maps/stands?dias=7", headers={"Accept": "text/html"}, follow_redirects=False
        )
        assert page.status_code == 303
        assert page.headers["location"] == "/entrar?next=%2Fapi%2Fv1%2Fmaps%2Fstands%3Fdias%3D7"
        assert client.get("/api/v1/maps/stands").status_code == 401
