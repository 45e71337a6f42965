"""The background of the console's maps (``/mapa-base.geojson``, ``static/js/mapa-base.js``):
offline by default (bundled boundaries and roads, drawn beneath the data, in the legend), the
configured tiles otherwise (their host allowed by the pages' CSP)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pydantic
import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, text
from web_helpers import save_screenshot

from api.headers import WEB_CSP

PORTO_BOX = "-8.62,41.14,-8.60,41.16"
TILES = "https://tiles.example.org/osm/{z}/{x}/{y}.png"
PORTO_STAND = "PORTO-ALAMEDA"
PORTO_AT = (41.15619, -8.59106)  # the Alameda stand of data/porto/derived/taxi_stands.csv


@pytest.fixture(scope="module")
def porto_stand(web_engine: Engine) -> Iterator[str]:
    """A stand in central Porto (inside the bundled road network), removed afterwards so the
    other modules' stand maps stay in Porto Alegre."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from db.engine import session_scope
    from db.stands.models import Stand

    square = Point(PORTO_AT[1], PORTO_AT[0]).buffer(0.0004, cap_style="square")
    with session_scope(web_engine) as session:
        session.add(
            Stand(
                stand_id=PORTO_STAND,
                name="Alameda (Porto)",
                capacity=4,
                geometry=from_shape(MultiPolygon([square]), srid=4326),
            )
        )
    yield PORTO_STAND
    with web_engine.begin() as conn:
        conn.execute(text("DELETE FROM stands WHERE stand_id = :s"), {"s": PORTO_STAND})


class TestEndpoint:
    def test_answers_geojson_of_the_box_to_anyone(self, anon_client: httpx.Client) -> None:
        """Without a session: a FeatureCollection of central Porto with both road classes,
        the box it covers (snapped, holding the asked one) and the OSM credit; no-store."""
        answer = anon_client.get("/mapa-base.geojson", params={"bbox": PORTO_BOX})
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("application/geo+json")
        assert answer.headers["cache-control"] == "no-store"
        data = answer.json()
        assert data["type"] == "FeatureCollection"
        classes = {f["properties"].get("class") for f in data["features"]}
        assert {"local", "principal"} <= classes
        west, south, east, north = data["bbox"]
        assert west <= -8.62 and south <= 41.14 and east >= -8.60 and north >= 41.16
        assert "OpenStreetMap" in data["attribution"]

    @pytest.mark.parametrize("bbox", ["", "1,2,3", "-8.6,41.2,-8.7,41.1", "-8,95,-7,96"])
    def test_refuses_a_bad_box_with_a_portuguese_message(
        self, anon_client: httpx.Client, bbox: str
    ) -> None:
        """A missing, short, inverted or out-of-range box: 422 with the API's error body."""
        answer = anon_client.get("/mapa-base.geojson", params={"bbox": bbox})
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error["code"] == "invalid_request" and error["message"].startswith("bbox:")


@pytest.mark.browser
class TestDrawn:
    def test_citizen_map_draws_the_municipality_beneath_the_stands(self, page: Any) -> None:
        """/acessivel: Porto Alegre's surface and boundary in the background pane (under the
        overlay pane), the stands above, the legend naming the background; no other host."""
        page.goto("/acessivel")
        box = page.locator("#mapa-cidadao")
        expect(box).to_have_attribute("data-mapa-base", "true", timeout=30_000)
        assert box.locator(".leaflet-mapa-base-pane path").count() >= 2
        z_base = page.eval_on_selector(
            "#mapa-cidadao .leaflet-mapa-base-pane", "e => +getComputedStyle(e).zIndex"
        )
        z_data = page.eval_on_selector(
            "#mapa-cidadao .leaflet-overlay-pane", "e => +getComputedStyle(e).zIndex"
        )
        assert z_base < z_data
        legend = page.locator("#mapa-legenda .legend")
        expect(legend.locator('[data-mapa-base-item="area"]')).to_be_visible()
        expect(legend.locator('[data-mapa-base-item="road"]')).to_be_hidden()  # no roads bundled
        assert "município e seu limite (fundo)" in legend.inner_text()
        assert "IBGE" in box.locator(".leaflet-control-attribution").inner_text()

    def test_porto_stand_map_draws_the_roads(
        self, page: Any, login: Callable, porto_stand: str
    ) -> None:
        """A stand in central Porto: the bundled roads drawn beneath it, their legend entry
        shown and OpenStreetMap credited (screenshot for docs/console.md)."""
        login(page, "admin")
        page.goto(f"/admin/pontos/{porto_stand}")
        box = page.locator("#mapa")
        expect(box).to_have_attribute("data-mapa-base", "true", timeout=30_000)
        assert box.locator(".leaflet-mapa-base-pane path").count() >= 2
        expect(page.locator('[data-mapa-base-item="road"]')).to_be_visible()
        attribution = box.locator(".leaflet-control-attribution").inner_text()
        assert "OpenStreetMap" in attribution
        save_screenshot(page, "web-mapa-base-porto.png", element=page.locator(".map-block"))

    def test_admin_stands_map_has_the_background_too(self, page: Any, login: Callable) -> None:
        """The Geoman map of /admin/pontos/novo gets the same background (one module)."""
        login(page, "admin")
        page.goto("/admin/pontos/novo")
        box = page.locator("#mapa")
        expect(box).to_have_attribute("data-mapa-base", "true", timeout=30_000)
        assert box.locator(".leaflet-mapa-base-pane path").count() >= 1
        assert "município e seu limite (fundo)" in page.locator(".legend").inner_text()


class TestTiles:
    def test_configured_tiles_are_drawn_and_allowed_by_the_csp(self, web_engine: Engine) -> None:
        """With PONTUAL_TILES_URL, a map page names the tiles to mapa-base.js, credits them in
        the legend, and its CSP allows the tile host in img-src (and nothing else more)."""
        from starlette.exceptions import StarletteDeprecationWarning

        from api.main import create_app
        from api.settings import Settings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StarletteDeprecationWarning)
            from fastapi.testclient import TestClient
        settings = Settings(tiles_url=TILES, tiles_attribution="© Exemplo", live_worker=False)
        with TestClient(create_app(engine=web_engine, settings=settings)) as client:
            answer = client.get("/acessivel")
        assert answer.status_code == 200
        csp = answer.headers["content-security-policy"]
        assert "img-src 'self' data: https://tiles.example.org;" in csp
        assert csp.replace(" https://tiles.example.org", "") == WEB_CSP
        meta = re.search(r'<meta name="pontual-mapa-base"[^>]*>', answer.text)
        assert (
            meta is not None
            and 'data-tiles="https://tiles.example.org/osm/{z}/{x}/{y}.png"' in meta.group(0)
        )
        assert "Mapa de fundo: © Exemplo" in answer.text
        assert "município e seu limite (fundo)" not in answer.text

    @pytest.mark.parametrize("url", ["ftp://x/{z}/{x}/{y}.png", "https://x.org/tiles.png"])
    def test_a_bad_tile_url_is_refused_at_start(self, url: str) -> None:
        """A URL that is not http(s) with {z}/{x}/{y}: the settings refuse it, in pt-BR."""
        from api.settings import Settings

        with pytest.raises(pydantic.ValidationError, match="PONTUAL_TILES_URL"):
            Settings(tiles_url=url)
