"""The staff's maps from the console's menu, in a browser: the session opens them (no token to
paste), on the offline basemap (no request to a tile server), in Portuguese."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from web_helpers import assert_accessible, save_screenshot

pytestmark = pytest.mark.browser


def _layers(page: Any) -> list[dict[str, Any]]:
    spec = page.locator('script[type="application/json"]').first.inner_text()
    return list(json.loads(spec)["layers"])


def _open_from_menu(page: Any, login: Callable, role: str, link: str, path: str) -> None:
    """Log in as ``role``, follow ``link`` of the nav bar to ``path``; wait for the basemap."""
    login(page, role)
    nav = page.get_by_role("navigation", name="Navegação principal")
    with page.expect_navigation():
        nav.get_by_role("link", name=link).click()
    assert page.url.endswith(path)
    expect(page.locator(".leaflet-container")).to_have_attribute(
        "data-mapa-base", "true", timeout=30_000
    )


def test_supervisor_opens_the_stand_map_from_the_menu(page: Any, login: Callable) -> None:
    """ "Mapa dos pontos" in the supervisor's nav: their stand only, the offline basemap beneath
    it (any request off the server fails the test), the page in pt-BR and accessible."""
    _open_from_menu(page, login, "supervisor", "Mapa dos pontos", "/api/v1/maps/stands")
    assert page.locator("html").get_attribute("lang") == "pt-BR"
    icon = page.locator("link[rel=icon]").get_attribute("href")  # not /favicon.ico: a 404
    assert icon is not None and icon.startswith("/static/img/favicon.svg")
    assert _layers(page)[0]["props"]["stand_id"] == ["S1"]
    assert_accessible(page)


def test_agent_opens_the_findings_map_from_the_menu(page: Any, login: Callable) -> None:
    """ "Mapa de achados" in the agent's nav opens the enforcement map over the basemap; the
    map page, without the console's menu, has a link back, clear of the zoom buttons."""
    _open_from_menu(page, login, "agent", "Mapa de achados", "/api/v1/maps/findings")
    back = page.get_by_role("link", name="← Voltar ao Pontual")
    link, zoom = back.bounding_box(), page.locator(".leaflet-control-zoom").bounding_box()
    assert link is not None and zoom is not None
    assert link["x"] >= zoom["x"] + zoom["width"]
    save_screenshot(page, "web-mapa-achados-voltar.png")
    with page.expect_navigation():
        back.click()
    assert page.url.endswith("/fiscal")


def test_session_roles_and_the_api_answers(web_client: Callable, anon_client: httpx.Client) -> None:
    """The session cookie is held to the map's roles (a planner gets no findings map); without
    a session or token the API's 401 stands, and a bad token is not rescued by a session."""
    planner = web_client("planner")
    assert planner.get("/api/v1/maps/stands").status_code == 200
    assert planner.get("/api/v1/maps/findings").status_code == 403
    assert anon_client.get("/api/v1/maps/stands").status_code == 401
    bad = planner.get("/api/v1/maps/stands", headers={"Authorization": "Bearer nada"})
    assert bad.status_code == 401
