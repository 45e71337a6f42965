"""Who may open which console page: every row of ``web_pages.PAGES`` × anonymous and each role.

Allowed: 200 for a GET (or, for a POST with the CSRF token, anything but a refusal); another
role: the 403 page in pt-BR; anonymous: 303 to the login (a GET keeps the page in ``next``).
Every POST is also sent by each allowed role without the session's CSRF token: 403 page.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from web_helpers import WEB_USERS, http_login
from web_pages import ANONYMOUS, CALLERS, PAGES, Page

from api.web.auth import SESSION_COOKIE, csrf_token_for

MATRIX = [p for p in PAGES if p.allowed is not None]


def web_routes() -> set[tuple[str, str]]:
    """Every (method, path) served by the console's modules (``api.web.*``), HEAD left out."""
    from fastapi.routing import iter_route_contexts

    from api.main import create_app
    from api.settings import Settings

    app = create_app(database_url="postgresql://u:p@127.0.0.1:1/none", settings=Settings())
    found = set()
    for route in iter_route_contexts(app.routes):
        module = getattr(route.endpoint, "__module__", "") or ""
        if module.startswith("api.web."):
            found |= {(m, route.path) for m in route.methods or () if m != "HEAD"}
    return found


def test_every_web_route_has_a_row() -> None:
    """Each route of api/web is in PAGES, and PAGES names no route that does not exist."""
    rows = {(p.method, p.path) for p in PAGES}
    routes = web_routes()
    assert routes - rows == set(), "console routes without a row in tests/web_pages.py"
    assert rows - routes == set(), "rows of tests/web_pages.py without a route"


@pytest.fixture(scope="module")
def callers(web_server: object) -> Iterator[dict[str, httpx.Client]]:
    """An httpx client per caller: anonymous and one logged-in user per role."""
    url = web_server.url  # type: ignore[attr-defined]
    clients = {ANONYMOUS: httpx.Client(base_url=url, follow_redirects=False, timeout=30)}
    clients |= {role: http_login(url, name) for role, name in WEB_USERS.items()}
    yield clients
    for client in clients.values():
        client.close()


def _send(client: httpx.Client, page: Page, *, csrf: bool) -> httpx.Response:
    if page.method == "GET":
        return client.get(page.request_url())
    data = dict(page.form)
    token = client.cookies.get(SESSION_COOKIE)
    if csrf and token:
        data["csrf_token"] = csrf_token_for(token)
    return client.request(page.method, page.request_url(), data=data)


@pytest.mark.parametrize("page", MATRIX, ids=lambda p: p.id)
def test_page_allows_and_refuses_as_designed(page: Page, callers: dict[str, httpx.Client]) -> None:
    """Allowed callers get through; other roles get the pt-BR 403 page; anonymous visitors
    go to the login, a GET keeping the page as ``next``."""
    assert page.allowed is not None
    for caller in CALLERS:
        response = _send(callers[caller], page, csrf=True)
        where = f"{page.id} as {caller}: {response.status_code}"
        if caller in page.allowed:
            if page.method == "GET":
                assert response.status_code == 200, where
            else:
                assert response.status_code not in (401, 403), where
                assert not response.headers.get("location", "").startswith("/entrar"), where
                if caller != ANONYMOUS:  # the same form without the session's CSRF token
                    refused = _send(callers[caller], page, csrf=False)
                    assert refused.status_code == 403, where
                    assert "Formulário recusado" in refused.text, where
        elif caller == ANONYMOUS:
            assert response.status_code == 303, where
            target = urlsplit(response.headers["location"])
            assert target.path == "/entrar", where
            if page.method == "GET":
                assert parse_qs(target.query)["next"] == [page.request_url()], where
        else:
            assert response.status_code == 403, where
            assert "Acesso negado" in response.text, where
            assert "não tem acesso a esta página" in response.text, where


def test_matrix_has_pages_of_every_area() -> None:
    """The matrix covers the landing page of each role (a guard against an empty table)."""
    from api.web.nav import LANDING

    gets = {p.path for p in MATRIX if p.method == "GET"}
    assert set(LANDING.values()) <= gets
