"""The authorisation matrix: every route of the app × every kind of caller, allowed or denied.

The route list comes from the app itself, so a new route without an entry here fails
``test_every_route_has_an_entry``. Callers: ``public`` (no credentials), ``device`` (a device
token), and one user per role. Denied means 401 (no or wrong kind of credentials) or 403 (role
not allowed); allowed means anything but 401/403 (a 404 or 422 on the dummy input is fine: the
caller got past the checks). WebSocket routes (no HTTP method) are tested where they are
defined.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from api_factories import ROLES, bearer
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import create_app
from api.settings import Settings

CALLERS = ("public", "device", *ROLES)
ALL = frozenset(CALLERS)
USERS = frozenset(ROLES)
ADMIN = frozenset({"admin"})
REVIEWERS = frozenset({"admin", "agent"})
REGISTRY = frozenset({"admin", "planner", "agent"})
DEVICE = frozenset({"device"})
PLANNERS = frozenset({"admin", "planner"})
SUPERVISORS = frozenset({"admin", "supervisor"})

MATRIX: dict[tuple[str, str], frozenset[str]] = {
    ("GET", "/openapi.json"): ALL,
    ("GET", "/docs"): ALL,
    ("GET", "/docs/oauth2-redirect"): ALL,
    ("GET", "/docs/assets/{name}"): ALL,
    ("GET", "/health"): ALL,
    ("GET", "/ready"): ALL,
    ("POST", "/api/v1/auth/token"): ALL,
    ("GET", "/api/v1/auth/me"): USERS,
    ("POST", "/api/v1/auth/logout"): USERS,
    ("POST", "/api/v1/pings"): DEVICE,
    ("GET", "/osmand"): DEVICE,
    ("POST", "/osmand"): DEVICE,
    ("GET", "/osmand/"): DEVICE,  # the same address typed with a final slash
    ("POST", "/osmand/"): DEVICE,
    ("GET", "/api/v1/drivers"): ADMIN,
    ("POST", "/api/v1/drivers"): ADMIN,
    ("GET", "/api/v1/drivers/{driver_id}"): ADMIN,
    ("PATCH", "/api/v1/drivers/{driver_id}"): ADMIN,
    ("PATCH", "/api/v1/drivers/{driver_id}/periods/{period_id}"): ADMIN,
    ("PATCH", "/api/v1/drivers/{driver_id}/links/{link_id}"): ADMIN,
    ("POST", "/api/v1/drivers/{driver_id}/periods"): ADMIN,
    ("POST", "/api/v1/drivers/{driver_id}/links"): ADMIN,
    ("GET", "/api/v1/stands"): USERS,
    ("GET", "/api/v1/stands/{stand_id}"): USERS,
    ("POST", "/api/v1/stands"): ADMIN,
    ("PATCH", "/api/v1/stands/{stand_id}"): ADMIN,
    ("POST", "/api/v1/stands/{stand_id}/retire"): ADMIN,
    ("GET", "/api/v1/stands/{stand_id}/licences"): USERS,
    ("POST", "/api/v1/stands/{stand_id}/licences"): ADMIN,
    ("POST", "/api/v1/stands/{stand_id}/licences/{vehicle_id}/end"): ADMIN,
    ("POST", "/api/v1/stands/{stand_id}/exclusions"): ADMIN,
    ("GET", "/api/v1/stands/{stand_id}/supervisors"): frozenset({"admin", "agent", "supervisor"}),
    ("POST", "/api/v1/stands/{stand_id}/supervisors"): ADMIN,
    ("GET", "/api/v1/stands/{stand_id}/suspensions"): frozenset({"admin", "agent"}),
    ("POST", "/api/v1/stands/{stand_id}/suspensions"): ADMIN,
    ("POST", "/api/v1/stands/{stand_id}/supervisors/{supervisor_id}/homologate"): ADMIN,
    ("GET", "/api/v1/stands/{stand_id}/occupancy"): frozenset({"admin", "agent", "supervisor"}),
    ("GET", "/api/v1/vehicles"): REGISTRY,
    ("GET", "/api/v1/vehicles/{vehicle_id}"): REGISTRY,
    ("PATCH", "/api/v1/vehicles/{vehicle_id}"): ADMIN,
    ("GET", "/api/v1/findings"): REVIEWERS,
    ("GET", "/api/v1/findings/{finding_id}"): REVIEWERS,
    ("GET", "/api/v1/maps/overview"): REGISTRY,
    ("GET", "/api/v1/maps/findings"): REVIEWERS,
    ("GET", "/api/v1/maps/stands"): frozenset({"admin", "planner", "supervisor"}),
    ("GET", "/api/v1/maps/planner"): frozenset({"admin", "planner"}),
    ("GET", "/api/v1/maps/citizen"): ALL,
    ("GET", "/api/v1/public/accessible-taxis"): ALL,
    ("GET", "/api/v1/public/stands"): ALL,
    ("GET", "/api/v1/proposals"): REVIEWERS,
    ("GET", "/api/v1/proposals/deadlines"): REVIEWERS,
    ("POST", "/api/v1/proposals/generate"): REVIEWERS,
    ("GET", "/api/v1/proposals/{proposal_id}"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/confirm"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/dismiss"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/notify"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/defence"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/decision"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/decision-notification"): REVIEWERS,
    ("POST", "/api/v1/proposals/{proposal_id}/finalize"): REVIEWERS,
    ("GET", "/api/v1/proposals/{proposal_id}/documents/{kind}"): REVIEWERS,
    ("GET", "/api/v1/alerts"): REVIEWERS,
    ("GET", "/api/v1/alerts/stream"): REVIEWERS,
    ("GET", "/api/v1/webhooks"): ADMIN,
    ("POST", "/api/v1/webhooks"): ADMIN,
    ("DELETE", "/api/v1/webhooks/{webhook_id}"): ADMIN,
    ("GET", "/api/v1/planning/{municipality}"): PLANNERS,
    ("GET", "/api/v1/supervision/stands"): SUPERVISORS,
    ("GET", "/api/v1/supervision/stands/{stand_id}/occupancy"): SUPERVISORS,
    ("GET", "/api/v1/supervision/stands/{stand_id}/intruders"): SUPERVISORS,
    ("GET", "/api/v1/supervision/stands/{stand_id}/presence"): SUPERVISORS,
    ("GET", "/api/v1/supervision/stands/{stand_id}/licensees"): SUPERVISORS,
}

# Path parameters: readers get seeded records (the supervisor's own stand); writers get ids
# that do not exist, so an allowed write is a harmless 404.
READ_IDS = {
    "stand_id": "S1",
    "vehicle_id": "V1",
    "finding_id": "F1",
    "proposal_id": "P-NONE",
    "municipality": "1100205",
    "name": "swagger-ui.css",
}
WRITE_IDS = {
    "stand_id": "MATRIX-NONE",
    "proposal_id": "P-NONE",
    "webhook_id": "999999",
    "supervisor_id": "999999",
    "period_id": "999999",
    "link_id": "999999",
    "vehicle_id": "MATRIX-NONE",
}
QUERIES = {
    "/api/v1/public/accessible-taxis": "?lat=-30.03&lon=-51.23&radius_m=500",
    "/api/v1/public/stands": "?lat=-30.03&lon=-51.23&radius_m=500",
    "/osmand": "?lat=0&lon=0&timestamp=1700000000",
    "/osmand/": "?lat=0&lon=0&timestamp=1700000000",
    # an endless event stream: a malformed filter makes an allowed caller's answer a 422
    "/api/v1/alerts/stream": "?bbox=x",
}


def app_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Return every (method, path) of the API (HEAD left out: it mirrors GET; the console's
    pages left out)."""
    from fastapi.routing import iter_route_contexts

    found = set()
    for route in iter_route_contexts(app.routes):
        if (getattr(route.endpoint, "__module__", "") or "").startswith("api.web."):
            continue  # the web console's pages: tests/web/test_authorization.py
        for method in route.methods or ():
            if method != "HEAD":
                found.add((method, route.path))
    return sorted(found)


def _every_app_route() -> list[tuple[str, str]]:
    app = create_app(database_url="postgresql://u:p@127.0.0.1:1/none", settings=Settings())
    return app_routes(app)


ROUTES = _every_app_route()


@pytest.fixture(scope="module")
def fresh_token(seeded: dict, api_engine: Engine) -> Iterator[object]:
    """Issue a new token for a role at each call (logout revokes the one it is given)."""
    from api import accounts
    from db.engine import session_scope

    def issue(role: str) -> str:
        with session_scope(api_engine) as session:
            user = accounts.get_user(session=session, username=f"u_{role}")
            token, _ = accounts.issue_token(session=session, user=user, ttl_s=600)
        return token

    yield issue


def _request(
    client: TestClient, method: str, path: str, caller: str, seeded: dict, fresh_token: object
) -> int:
    ids = READ_IDS if method == "GET" else WRITE_IDS
    url = re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "X"), path) + QUERIES.get(path, "")
    headers: dict[str, str] = {}
    if caller == "device":
        headers = bearer(seeded["device_token"])
        if path.startswith("/osmand"):
            url += f"&id={seeded['device_token']}"
    elif caller != "public":
        headers = bearer(fresh_token(caller))  # type: ignore[operator]
    if method == "GET":
        response = client.get(url, headers=headers)
    elif path == "/api/v1/pings":
        response = client.post(url, json={"pings": []}, headers=headers)
    elif path.startswith("/osmand"):
        response = client.post(url, headers=headers)
    else:
        response = client.request(method, url, json={}, headers=headers)
    assert response.status_code < 500, (method, path, caller, response.text)
    return response.status_code


class TestAppRoutes:
    def test_every_route_has_an_entry(self) -> None:
        """Every route of the app is in the matrix, and the matrix names no stale route."""
        assert set(ROUTES) - set(MATRIX) == set(), "routes without a matrix entry"
        assert set(MATRIX) - set(ROUTES) == set(), "matrix entries without a route"

    @pytest.mark.parametrize(("method", "path"), ROUTES)
    def test_route_allows_and_denies_as_designed(
        self, client: TestClient, seeded: dict, fresh_token: object, method: str, path: str
    ) -> None:
        """Each caller is let through or refused (401/403) exactly as the matrix says."""
        allowed = MATRIX.get((method, path), frozenset())
        outcome = {}
        for caller in CALLERS:
            status = _request(client, method, path, caller, seeded, fresh_token)
            outcome[caller] = status not in (401, 403)
        assert outcome == {c: c in allowed for c in CALLERS}
