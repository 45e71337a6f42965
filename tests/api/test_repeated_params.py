"""A query or form parameter sent twice where the route takes one value: 422, nothing run.

Before: FastAPI kept the last value (``?status=a&status=b`` listed ``b``; two ``username``
fields logged in as the second) without a word. List parameters (``?kind=a&kind=b``) may
still repeat (:func:`api.deps.single_values`). A query parameter an API route does not declare
is refused too: a misspelt filter would be ignored, the answer unfiltered.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import pytest
from api_factories import PASSWORD, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.deps import single_value_params


def _error(answer: object) -> dict[str, object]:
    body = answer.json()  # type: ignore[attr-defined]
    return dict(body["error"])


class TestUnknownQuery:
    @pytest.mark.parametrize(
        ("path", "name", "accepted"),
        [
            ("/api/v1/findings?vehicle=SIM-1082", "vehicle", "vehicle_id"),
            ("/api/v1/alerts?stand=2&limit=5", "stand", "stand_id"),
            ("/api/v1/public/stands?limti=1", "limti", "radius_m"),
        ],
    )
    def test_a_misspelt_filter_is_422_naming_it_and_the_accepted(
        self, client: TestClient, seeded: dict[str, Any], path: str, name: str, accepted: str
    ) -> None:
        """A filter the route does not have (``vehicle`` for ``vehicle_id``) would be ignored
        and the answer come unfiltered, as if filtered: 422 naming it and what is accepted."""
        answer = client.get(path, headers=bearer(seeded["tokens"]["agent"]))
        assert answer.status_code == 422
        (error,) = _error(answer)["errors"]  # type: ignore[misc]
        assert error["loc"] == ["query", name]
        assert error["msg"].startswith("parâmetro desconhecido nesta rota; aceitos: ")
        assert accepted in error["msg"]

    def test_declared_filters_and_console_pages_are_not_refused(
        self, client: TestClient, seeded: dict[str, Any]
    ) -> None:
        """The declared names pass; a console page's query is not the API's contract."""
        ok = client.get(
            "/api/v1/findings?vehicle_id=SIM-1082&limit=5",
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert ok.status_code == 200
        assert client.get("/entrar?qualquer=1").status_code == 200


class TestQuery:
    def test_repeated_single_value_is_422_naming_it(
        self, client: TestClient, seeded: dict[str, Any]
    ) -> None:
        """``?status=proposta&status=confirmada`` on the proposals: 422, 'status' named, pt-BR."""
        answer = client.get(
            "/api/v1/proposals?status=proposta&status=confirmada",
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert answer.status_code == 422
        error = _error(answer)
        assert error["code"] == "invalid_request"
        assert "'status': enviado 2 vezes; este parâmetro aceita um só valor" in str(
            error["message"]
        )
        assert error["errors"] == [
            {
                "loc": ["query", "status"],
                "msg": "enviado 2 vezes; este parâmetro aceita um só valor",
                "type": "value_error",
            }
        ]

    def test_same_value_twice_is_refused_too(
        self, client: TestClient, seeded: dict[str, Any]
    ) -> None:
        """Even twice the same value: the request is ambiguous in form, refused."""
        answer = client.get(
            "/api/v1/proposals?limit=5&limit=5", headers=bearer(seeded["tokens"]["agent"])
        )
        assert answer.status_code == 422
        assert "'limit'" in str(_error(answer)["message"])

    def test_once_each_is_accepted(self, client: TestClient, seeded: dict[str, Any]) -> None:
        """Each parameter once (the control of the tests above): 200."""
        answer = client.get(
            "/api/v1/proposals?status=proposta&limit=5", headers=bearer(seeded["tokens"]["agent"])
        )
        assert answer.status_code == 200

    def test_public_route_too(self, client: TestClient) -> None:
        """The citizens' search with two latitudes: 422 naming 'lat'."""
        answer = client.get("/api/v1/public/stands?lat=-30.02&lat=-30.03&lon=-51.22&radius_m=500")
        assert answer.status_code == 422
        assert "'lat'" in str(_error(answer)["message"])

    def test_declared_list_may_repeat(self, client: TestClient, seeded: dict[str, Any]) -> None:
        """``kind`` is a list on the alerts: repeated it is two kinds, 200."""
        answer = client.get(
            "/api/v1/alerts?kind=tracking_gap&kind=longer_route",
            headers=bearer(seeded["tokens"]["agent"]),
        )
        assert answer.status_code == 200

    def test_undeclared_parameter_is_refused_as_unknown_not_as_repeated(
        self, client: TestClient, seeded: dict[str, Any]
    ) -> None:
        """A parameter the API route does not read is unknown, however often it is sent."""
        answer = client.get(
            "/api/v1/proposals?outro=1&outro=2", headers=bearer(seeded["tokens"]["agent"])
        )
        assert answer.status_code == 422
        (error,) = _error(answer)["errors"]  # type: ignore[misc]
        assert error["msg"].startswith("parâmetro desconhecido nesta rota")


class TestForm:
    def test_two_usernames_issue_no_token(self, client: TestClient, seeded: dict[str, Any]) -> None:
        """The token form with two ``username`` fields (both valid users): 422, no token."""
        answer = client.post(
            "/api/v1/auth/token",
            data={"username": ["u_planner", "u_admin"], "password": PASSWORD},
        )
        assert answer.status_code == 422
        error = _error(answer)
        assert "'username': enviado 2 vezes; este campo aceita um só valor" in str(error["message"])
        assert "access_token" not in answer.text

    def test_one_username_logs_in(self, client: TestClient, seeded: dict[str, Any]) -> None:
        """The same form with one ``username`` (the control): a token."""
        answer = client.post(
            "/api/v1/auth/token", data={"username": "u_planner", "password": PASSWORD}
        )
        assert answer.status_code == 200 and answer.json()["access_token"]

    def test_osmand_fix_with_two_latitudes_is_not_stored(
        self, client: TestClient, seeded: dict[str, Any], api_engine: Engine
    ) -> None:
        """An OsmAnd fix whose query repeats ``lat``: no fix stored at its time; quarantined
        with both values and answered 200 (a 422 would make the device resend it for ever)."""
        unix_s = int(time.time()) - 1800
        query = (
            f"id={seeded['device_token']}&timestamp={unix_s}&lat=-30.0277&lat=-30.5&lon=-51.2287"
        )
        answer = client.post(f"/osmand?{query}")
        assert answer.status_code == 200
        assert answer.headers["X-Pontual-Rejected"] == "malformed_request"
        with api_engine.connect() as conn:
            stored = conn.execute(
                text(
                    "SELECT count(*) FROM fixes WHERE vehicle_id = 'V1' AND ts = to_timestamp(:t)"
                ),
                {"t": unix_s},
            ).scalar_one()
        assert stored == 0


def _route(module: str, path: str, method: str) -> Any:
    """The route of ``module``'s router at ``path`` answering ``method``."""
    router = importlib.import_module(module).router
    return next(r for r in router.routes if r.path == path and method in getattr(r, "methods", ()))


class TestDeclaredParams:
    @pytest.mark.parametrize(
        ("module", "path", "method", "query", "form"),
        [
            ("api.routes.proposals", "/api/v1/proposals", "GET", {"status", "limit"}, set()),
            ("api.routes.auth", "/api/v1/auth/token", "POST", set(), {"username", "password"}),
            ("api.web.agent", "/fiscal/propostas", "GET", {"situacao", "veiculo", "pagina"}, set()),
            (
                "api.web.agent",
                "/fiscal/propostas/{proposal_id}/descartar",
                "POST",
                set(),
                {"motivo"},
            ),
        ],
    )
    def test_single_values_are_found(
        self, module: str, path: str, method: str, query: set[str], form: set[str]
    ) -> None:
        """The route's single-valued parameters, through dependencies and query models."""
        single_query, single_form = single_value_params(_route(module, path, method).dependant)
        assert query <= single_query
        assert form <= single_form

    def test_list_parameters_are_left_out(self) -> None:
        """The alerts' ``kind`` and ``stand_id`` (lists) are not among them; ``bbox`` is."""
        route = _route("api.routes.alerts", "/api/v1/alerts", "GET")
        single_query, _ = single_value_params(route.dependant)
        assert "bbox" in single_query
        assert not {"kind", "stand_id"} & single_query
