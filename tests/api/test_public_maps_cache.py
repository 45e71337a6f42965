"""The public citizen map: cached render, Cache-Control, no third-party tiles; the basemap's
degenerate boxes; Cache-Control of the public API."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from api_factories import SECRET_KEY
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.main import CITIZEN_MAP_TTL_S, create_app
from api.settings import Settings


def _app(engine: Engine, **settings: object) -> FastAPI:
    return create_app(
        engine=engine,
        settings=Settings(
            public_rate_limit_per_min=10_000,
            login_rate_limit_per_min=10_000,
            secret_key=SECRET_KEY,
            **settings,  # type: ignore[arg-type]
        ),
    )


@pytest.fixture
def fresh_client(api_engine: Engine, seeded: dict) -> Iterator[TestClient]:
    """A client of a new app (an empty page cache), no tile server configured."""
    with TestClient(_app(api_engine, tiles_url=""), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the renders of the citizen map (``renders["n"]``)."""
    import maps.citizen

    calls = {"n": 0}
    real = maps.citizen.citizen_map

    def counting(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(maps.citizen, "citizen_map", counting)
    return calls


class TestCitizenMapCache:
    def test_second_request_within_ttl_is_not_rendered_again(
        self, fresh_client: TestClient, renders: dict[str, int]
    ) -> None:
        """Two requests in the TTL: one render, the same page, a public max-age."""
        first = fresh_client.get("/api/v1/maps/citizen")
        second = fresh_client.get("/api/v1/maps/citizen")
        assert first.status_code == second.status_code == 200
        assert renders["n"] == 1
        assert first.text == second.text
        for response in (first, second):
            control = response.headers["Cache-Control"]
            assert control.startswith("public, max-age=")
            assert 1 <= int(control.rsplit("=", 1)[1]) <= CITIZEN_MAP_TTL_S

    def test_concurrent_cold_requests_render_once(
        self, fresh_client: TestClient, renders: dict[str, int]
    ) -> None:
        """Requests arriving while the page renders wait for that render."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:
            codes = list(
                pool.map(lambda _: fresh_client.get("/api/v1/maps/citizen").status_code, range(8))
            )
        assert codes == [200] * 8
        assert renders["n"] == 1


class TestCitizenMapTiles:
    def test_no_third_party_tiles_without_a_tile_setting(self, fresh_client: TestClient) -> None:
        """Without PONTUAL_TILES_URL: the offline basemap of this server, no tile host at all;
        the CSP allows images from this server only."""
        response = fresh_client.get("/api/v1/maps/citizen")
        assert response.status_code == 200
        page = response.text
        assert "openstreetmap.org" not in page
        assert "L.tileLayer(" not in re.sub(r"PontualMapaBase[\s\S]*?\}\)\(\);", "", page)
        assert 'name="pontual-mapa-base" content="/mapa-base.geojson"' in page
        assert re.search(r"PontualMapaBase\.add\(map_[0-9a-f]+\);", page)
        csp = response.headers["Content-Security-Policy"]
        assert "img-src 'self' data: blob:;" in csp
        assert "https:" not in csp

    def test_configured_tiles_are_used_and_allowed(self, api_engine: Engine, seeded: dict) -> None:
        """With a tile server configured, the map draws it and the CSP allows its origin."""
        app = _app(api_engine, tiles_url="https://tiles.example.org/{z}/{x}/{y}.png")
        with TestClient(app, raise_server_exceptions=False) as c:
            response = c.get("/api/v1/maps/citizen")
        assert response.status_code == 200
        assert "https://tiles.example.org/{z}/{x}/{y}.png" in response.text
        assert "openstreetmap.org" not in response.text
        assert "https://tiles.example.org;" in response.headers["Content-Security-Policy"]


class TestBasemapBox:
    @pytest.mark.parametrize("bbox", ["0,0,5e-324,5e-324", "-51.2,-30.0,-51.199999,-29.999999"])
    def test_degenerate_box_is_422_naming_bbox(self, client: TestClient, bbox: str) -> None:
        """A box too small to snap is a 422 naming bbox, not a 500 (ZeroDivisionError)."""
        response = client.get("/mapa-base.geojson", params={"bbox": bbox})
        assert response.status_code == 422, response.text
        message = response.json()["error"]["message"]
        assert "bbox" in message
        assert "pequena" in message

    def test_small_box_still_answered(self, client: TestClient) -> None:
        """A street-sized box is answered."""
        response = client.get(
            "/mapa-base.geojson", params={"bbox": "-51.23,-30.03,-51.229,-30.029"}
        )
        assert response.status_code == 200


class TestPublicApiCacheControl:
    @pytest.mark.parametrize("path", ["/api/v1/public/accessible-taxis", "/api/v1/public/stands"])
    def test_public_answers_are_cacheable(self, client: TestClient, path: str) -> None:
        """Public answers carry a short public max-age."""
        response = client.get(path, params={"lat": -30.03, "lon": -51.23, "radius_m": 1000})
        assert response.status_code == 200
        assert response.headers["Cache-Control"] == "public, max-age=30"
