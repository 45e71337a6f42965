"""Táxi acessível perto de você (``/acessivel``) against a real ``pontual serve``: a citizen on a
phone finds a free accessible taxi from their location, with the public API's rules (the
public grid, no plate or vehicle id), the same answer for two points of one cell, the
fallbacks (a stand of the list, a tap on the map), and the public API's rate limit.

The module seeds stand AC1 and, through ``/api/v1/pings``, a free accessible taxi inside it and
a free taxi that is not accessible, beside it; and two municipalities of their own (45 stands in
one, 3 in the other) for the city choice, the search by name or address and the pages of an
answer.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from api_factories import DEVICE_SINCE
from playwright.sync_api import expect
from sqlalchemy import Engine
from web_helpers import assert_accessible, horizontal_overflow_px, save_screenshot

from api.web.citizen import distance_text

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AC_STAND = (-30.0700, -51.1700)
TAXI_AT = (-30.070012, -51.170034)  # exact fix of the accessible taxi, inside AC1
CITIZEN = (-30.0673, -51.1700)  # ≈ 300 m north of the stand


def _device(web_engine: Engine, *, accessible: bool, plate: str) -> tuple[str, str]:
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    vehicle_id = f"AC-{secrets.token_hex(3).upper()}"
    with session_scope(web_engine) as session:
        session.add(
            Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id, plate=plate, accessible=accessible)
        )
        session.flush()
        _, token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
        )
    return vehicle_id, token


def _post(url: str, token: str, at: tuple[float, float]) -> None:
    from api.routes.public import published_instant

    now = published_instant()  # the instant the public answers describe
    pings = [
        {"timestamp": (now - dt.timedelta(seconds=s)).isoformat(), "lat": at[0], "lon": at[1],
         "meter": "free"}
        for s in (30, 5)
    ]  # fmt: skip
    answer = httpx.post(
        f"{url}/api/v1/pings",
        json={"pings": pings},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert {r["status"] for r in answer.json()["results"]} == {"accepted"}


@pytest.fixture(scope="module")
def taxis(web_server: Any, web_engine: Engine) -> dict[str, str]:
    """Stand AC1; a free accessible taxi in it and a free ordinary taxi beside it (fixes of
    the last 30 s). Returns their vehicle ids and plates."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from db.engine import session_scope
    from db.stands.models import Stand

    square = Point(AC_STAND[1], AC_STAND[0]).buffer(0.0004, cap_style="square")
    with session_scope(web_engine) as session:
        session.add(
            Stand(
                stand_id="AC1", name="Ponto Acessível Teste", capacity=2,
                geometry=from_shape(MultiPolygon([square]), srid=4326),
            )
        )  # fmt: skip
    accessible, token = _device(web_engine, accessible=True, plate="ACX9Z99")
    ordinary, other = _device(web_engine, accessible=False, plate="ORD1N42")
    _post(web_server.url, token, TAXI_AT)
    _post(web_server.url, other, (TAXI_AT[0] + 0.0002, TAXI_AT[1]))
    return {"accessible": accessible, "ordinary": ordinary}


def _public_taxis(url: str, at: tuple[float, float]) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{url}/api/v1/public/accessible-taxis",
        params={"lat": at[0], "lon": at[1], "radius_m": 1000},
        timeout=30,
    )
    assert answer.status_code == 200
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def _same_cell_point(at: tuple[float, float]) -> tuple[float, float]:
    """Another point of ``at``'s cell of the public grid, ≈ 25 m away."""
    from api.routes.public import CELL_RESOLUTION
    from geo.h3 import latlng_to_cells

    other = (at[0] + 0.0002, at[1] + 0.0001)
    cells = latlng_to_cells(
        np.array([at[0], other[0]]), np.array([at[1], other[1]]), resolution=CELL_RESOLUTION
    )
    assert cells[0] == cells[1]
    return other


def _phone(open_page: Callable, at: tuple[float, float] | None) -> Any:
    options: dict[str, Any] = {"is_mobile": True, "has_touch": True, "locale": "pt-BR"}
    if at is not None:
        options |= {
            "geolocation": {"latitude": at[0], "longitude": at[1]},
            "permissions": ["geolocation"],
        }
    return open_page(width=390, height=844, **options)


class TestFromMyLocation:
    def test_citizen_on_a_phone_finds_an_accessible_taxi(
        self, open_page: Callable, web_server: Any, taxis: dict[str, str]
    ) -> None:
        """From the location granted to the page: the accessible taxi with the public API's
        snapped distance; no plate, no vehicle id, no exact position; no sideways scroll. The
        position leaves the browser rounded to 0.001° (the server and its logs never see the
        exact one)."""
        phone = _phone(open_page, CITIZEN)
        sent: list[str] = []
        phone.on("request", lambda r: sent.append(r.url) if "/resultados" in r.url else None)
        phone.goto("/acessivel")
        phone.get_by_role("button", name="Usar a minha localização").tap()
        first = phone.locator(".result--taxi").first
        first.wait_for(state="visible", timeout=20_000)
        assert sent and all("lat=-30.067&lon=-51.170&" in url for url in sent), sent
        expected = _public_taxis(web_server.url, CITIZEN)
        assert expected and expected[0]["distance_m"] in (300, 400)  # ≈ 300 m, cells apart
        items = phone.locator(".result--taxi")
        assert items.count() == len(expected)
        for k, taxi in enumerate(expected):
            text = items.nth(k).inner_text()
            assert f"Área {taxi['index']}: {taxi['count']} táxi" in text
            assert f"Centro da área a cerca de {taxi['distance_m']} m;" in text
            assert items.nth(k).get_attribute("data-lat") == f"{taxi['position']['lat']}"
        assert phone.locator("#resultados h2").inner_text() == "Perto da sua localização"
        expect(phone.locator("#busca-estado")).to_contain_text("táxi")
        html = phone.content()
        for secret in ("ACX9Z99", "ORD1N42", taxis["accessible"], taxis["ordinary"],
                       f"{TAXI_AT[0]:.6f}", f"{TAXI_AT[1]:.6f}"):  # fmt: skip
            assert secret not in html
        assert horizontal_overflow_px(phone) == 0
        button = phone.get_by_role("button", name="Buscar perto deste ponto").bounding_box()
        assert button is not None and button["height"] >= 44  # a large touch target
        assert_accessible(phone)
        save_screenshot(phone, "web-acessivel-phone.png")

    def test_the_address_keeps_the_search(
        self, open_page: Callable, web_server: Any, taxis: dict[str, str]
    ) -> None:
        """After a search the address is the search (rounded position): reloaded, bookmarked
        or shared, it opens with the same results (it stayed "/acessivel", an empty form)."""
        phone = _phone(open_page, CITIZEN)
        phone.goto("/acessivel")
        phone.get_by_role("button", name="Usar a minha localização").tap()
        phone.locator(".result--taxi").first.wait_for(state="visible", timeout=20_000)
        assert "/acessivel?lat=-30.067&lon=-51.170&" in phone.url
        shown = phone.locator(".result--taxi").all_inner_texts()
        phone.reload()
        phone.locator(".result--taxi").first.wait_for(state="visible", timeout=20_000)
        assert phone.locator(".result--taxi").all_inner_texts() == shown

    def test_two_points_of_one_cell_get_the_same_answer(
        self, open_page: Callable, web_server: Any, taxis: dict[str, str]
    ) -> None:
        """Two phones ≈ 25 m apart in one cell of the public grid see the same results, and
        the fragment and the page answer them byte for byte alike."""
        other = _same_cell_point(CITIZEN)
        seen = []
        for at in (CITIZEN, other):
            phone = _phone(open_page, at)
            phone.goto("/acessivel")
            phone.get_by_role("button", name="Usar a minha localização").click()
            phone.locator(".result--taxi").first.wait_for(state="visible", timeout=20_000)
            seen.append(phone.locator("#resultados").inner_html())
        assert seen[0] == seen[1]
        for path in ("/acessivel/resultados", "/acessivel"):
            answers = [
                httpx.get(f"{web_server.url}{path}", params={"lat": a[0], "lon": a[1]}).text
                for a in (CITIZEN, other)
            ]
            assert answers[0] == answers[1], path
            assert "Área 1: 1 táxi acessível livre" in answers[0]


class TestFallbacks:
    def test_location_refused_then_a_stand_from_the_list(
        self, open_page: Callable, web_server: Any, taxis: dict[str, str]
    ) -> None:
        """Without permission the page says so and offers the fallbacks; the stand list,
        used with the keyboard, finds the taxi at the stand."""
        phone = _phone(open_page, None)
        phone.goto("/acessivel?municipio=nenhum")  # AC1 has no municipality in the registry
        phone.get_by_role("button", name="Usar a minha localização").click()
        expect(phone.locator("#busca-estado")).to_contain_text(
            "Toque no mapa ou escolha um ponto de táxi da lista", timeout=20_000
        )
        phone.get_by_label("Perto de um ponto de táxi").select_option("AC1")
        phone.get_by_role("button", name="Buscar perto deste ponto").focus()
        phone.keyboard.press("Enter")
        heading = phone.locator("#resultados h2")
        expect(heading).to_have_text("Perto de Ponto Acessível Teste (ponto nº AC1)")
        expect(heading).to_be_focused()
        stand = phone.locator(".result--stand", has_text="Ponto Acessível Teste")
        assert "Táxis acessíveis livres: 1 no ponto" in stand.inner_text()
        nearest = _public_taxis(web_server.url, AC_STAND)[0]["distance_m"]
        expected = f"Centro da área a {distance_text(nearest)};"
        assert expected in phone.locator(".result--taxi").first.inner_text()

    def test_a_new_distance_searches_again(
        self, open_page: Callable, taxis: dict[str, str]
    ) -> None:
        """After a search, choosing another distance answers for it at once (the results said
        "até 1 km" under "5 km" until the button was pressed again); the focus stays on the
        list."""
        phone = _phone(open_page, None)
        phone.goto("/acessivel?municipio=nenhum")
        phone.get_by_label("Perto de um ponto de táxi").select_option("AC1")
        phone.get_by_role("button", name="Buscar perto deste ponto").click()
        expect(phone.locator("#resultados h2")).to_contain_text("AC1", timeout=20_000)
        before = phone.locator("#resultados").inner_text()
        distance = phone.get_by_label("Distância máxima")
        distance.focus()
        distance.select_option("5000")
        expect(phone.locator("#resultados")).to_contain_text("5 km", timeout=20_000)
        assert "5 km" not in before
        expect(distance).to_be_focused()

    def test_tap_on_the_map(self, open_page: Callable, taxis: dict[str, str]) -> None:
        """A tap on the map searches near that place."""
        phone = _phone(open_page, None)
        phone.goto("/acessivel")
        box = phone.locator("#mapa-cidadao")
        box.wait_for(state="visible")
        box.tap(position={"x": 60, "y": 60})
        expect(phone.locator("#resultados h2")).to_have_text(
            "Perto do local escolhido no mapa", timeout=20_000
        )

    def test_a_fleet_that_sends_no_position_is_said(
        self, web_server: Any, web_engine: Engine, taxis: dict[str, str]
    ) -> None:
        """No free accessible taxi seen within the window, and none sending any position in
        it: the answer says since which day (not the hour of one tracker's last fix), instead
        of only "none free"; at the widest distance it
        does not ask for a wider one. Under the usual window the taxi is seen, nothing said."""
        import time

        from sqlalchemy.orm import Session

        from api.settings import Settings
        from api.web.citizen import nearby, radii

        time.sleep(1.5)  # the taxi's fixes are older than the one-second window below
        # Another accessible taxi sends now, occupied: the page tells nothing of it (only free
        # fixes up to the published instant count, as on the map).
        _, token = _device(web_engine, accessible=True, plate="OCP0A00")
        now = dt.datetime.now(dt.UTC)
        sent = httpx.post(
            f"{web_server.url}/api/v1/pings",
            json={
                "pings": [
                    {
                        "timestamp": now.isoformat(),
                        "lat": TAXI_AT[0],
                        "lon": TAXI_AT[1],
                        "meter": "occupied",
                    }
                ]
            },  # fmt: skip
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert sent.json()["accepted"] == 1, sent.text
        short = Settings(public_recent_fix_s=1, live_worker=False)
        widest = max(radii(short))
        with Session(web_engine) as session:
            quiet = nearby(session, short, lat=TAXI_AT[0], lon=TAXI_AT[1], radius_m=widest,
                           origin="daqui")  # fmt: skip
            usual = nearby(session, Settings(live_worker=False), lat=TAXI_AT[0], lon=TAXI_AT[1],
                           radius_m=1000, origin="daqui")  # fmt: skip
        assert quiet["n_taxis"] == 0 and quiet["widest"] and quiet["silent"]
        assert re.fullmatch(r"\d{2}/\d{2}/\d{4}", quiet["silent_since"])  # no hour: privacy
        assert usual["n_taxis"] == 1 and usual["silent_since"] is None and not usual["widest"]

    def test_without_scripts_the_stand_form_works(
        self, web_server: Any, taxis: dict[str, str]
    ) -> None:
        """A plain GET with the stand (what the form sends without scripts) answers in the page."""
        html = httpx.get(f"{web_server.url}/acessivel", params={"ponto": "AC1"}).text
        assert "Perto de Ponto Acessível Teste (ponto nº AC1)" in html
        assert "Área 1: 1 táxi acessível livre" in html
        assert '<option value="AC1" data-lat=' in html and " selected>" in html

    @pytest.mark.parametrize(
        ("query", "message"),
        [
            ({"lat": "abc", "lon": "-51"}, "(lat &#39;abc&#39; não é um número)"),
            ({"lat": "\u0663\u0660", "lon": "-51"}, "não é um número"),  # Arabic-Indic "30"
            ({"lat": "\uff13\uff10", "lon": "-51"}, "não é um número"),  # full-width "30"
            ({"lat": "-95", "lon": "-51"}, "(lat &#39;-95&#39; fora de -90 a 90)"),
            (
                {"lat": "-30", "lon": "-51", "raio": "123"},
                "A distância &#39;123&#39; não é uma das opções: escolha uma de 500 m, 1 km",
            ),
            ({"ponto": "NAO-EXISTE"}, "&#39;NAO-EXISTE&#39; não existe ou não está mais ativo"),
        ],
    )
    def test_bad_search_is_said(self, web_server: Any, query: dict[str, str], message: str) -> None:
        """A bad coordinate, distance or stand: 422 and a pt-BR alert, page and fragment."""
        for path in ("/acessivel", "/acessivel/resultados"):
            answer = httpx.get(f"{web_server.url}{path}", params=query)
            assert answer.status_code == 422, path
            assert message in answer.text and 'role="alert"' in answer.text, path

    def test_a_decimal_comma_is_read(self, web_server: Any, taxis: dict[str, str]) -> None:
        """ "-30,03" as typed in Brazil is the coordinate, not an error."""
        comma = {"lat": "-30,0277", "lon": "-51,2287", "origem": "mapa"}
        dot = {"lat": "-30.0277", "lon": "-51.2287", "origem": "mapa"}
        answers = [
            httpx.get(f"{web_server.url}/acessivel/resultados", params=q) for q in (comma, dot)
        ]
        assert [a.status_code for a in answers] == [200, 200]
        assert answers[0].text == answers[1].text

    def test_no_stand_near_is_not_offered(self, web_server: Any) -> None:
        """Far from every stand and taxi the answer suggests a wider distance, not "one of the
        stands below" above "no stand within 500 m"."""
        far = {"lat": "-33.5", "lon": "-48.5", "raio": "500", "origem": "mapa"}
        text = httpx.get(f"{web_server.url}/acessivel/resultados", params=far).text
        assert "Nenhum ponto de táxi até 500 m." in text
        assert "Tente uma distância maior." in text and "pontos abaixo" not in text

    @pytest.mark.parametrize(
        "query",
        [{"ponto": "AC1\x00"}, {"ponto": "\x00"}, {"lat": "-30\x00", "lon": "-51"}],
    )
    def test_nul_character_is_said_in_the_page(
        self, web_server: Any, query: dict[str, str]
    ) -> None:
        """A NUL character in the search: the HTML page (or fragment), 422, a pt-BR alert;
        not the API's JSON error."""
        for path in ("/acessivel", "/acessivel/resultados"):
            answer = httpx.get(f"{web_server.url}{path}", params=query)
            assert answer.status_code == 422, path
            assert answer.headers["content-type"].startswith("text/html"), path
            assert 'role="alert"' in answer.text, path
            assert "caractere nulo" in answer.text or "&#39;lat&#39; era" in answer.text, path

    def test_a_nul_in_the_search_text_is_refused_not_echoed(self, web_server: Any) -> None:
        """``busca=ab\\0cd``: 422 saying so, and the NUL is written back nowhere in the page."""
        answer = httpx.get(f"{web_server.url}/acessivel", params={"busca": "ab\x00cd"})
        assert answer.status_code == 422
        assert "&#39;busca&#39; contém um caractere nulo" in answer.text
        assert "\x00" not in answer.text and "\ufffd" not in answer.text


class TestRateLimit:
    def test_pages_share_the_public_api_limit(self, web_engine: Engine) -> None:
        """With a limit of 3 a minute, an API call and two searches use it up: the next page
        is a pt-BR 429 with Retry-After, and so is the next API call."""
        import warnings

        from starlette.exceptions import StarletteDeprecationWarning

        from api.main import create_app
        from api.settings import Settings

        with warnings.catch_warnings():  # httpx, not httpx2, under the test client (as tests/api)
            warnings.simplefilter("ignore", StarletteDeprecationWarning)
            from fastapi.testclient import TestClient
        settings = Settings(public_rate_limit_per_min=3, live_worker=False)
        client = TestClient(create_app(engine=web_engine, settings=settings))
        point = {"lat": CITIZEN[0], "lon": CITIZEN[1]}
        assert client.get("/api/v1/public/stands", params=point).status_code == 200
        assert client.get("/acessivel/resultados", params=point).status_code == 200
        assert client.get("/acessivel", params=point).status_code == 200
        limited = client.get("/acessivel", params=point)
        assert limited.status_code == 429
        assert int(limited.headers["Retry-After"]) >= 1
        assert "Muitas buscas deste endereço em pouco tempo" in limited.text
        assert client.get("/acessivel/resultados", params=point).status_code == 429
        assert client.get("/api/v1/public/stands", params=point).status_code == 429

    def test_throttled_search_costs_no_query(self, web_engine: Engine) -> None:
        """Over the limit, the page and the fragment answer 429 without asking the database."""
        import warnings

        from sqlalchemy import event
        from starlette.exceptions import StarletteDeprecationWarning

        from api.main import create_app
        from api.settings import Settings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StarletteDeprecationWarning)
            from fastapi.testclient import TestClient
        settings = Settings(public_rate_limit_per_min=1, live_worker=False)
        client = TestClient(create_app(engine=web_engine, settings=settings))
        queries: list[str] = []

        def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            queries.append(statement)

        assert client.get("/acessivel", params={"ponto": "S1"}).status_code == 200
        event.listen(web_engine, "before_cursor_execute", count)
        try:
            page = client.get("/acessivel", params={"ponto": "S1"})
            fragment = client.get("/acessivel/resultados", params={"ponto": "S1"})
        finally:
            event.remove(web_engine, "before_cursor_execute", count)
        assert (page.status_code, fragment.status_code) == (429, 429)
        assert "Muitas buscas deste endereço em pouco tempo" in page.text
        assert queries == []


def test_desktop_screenshot(page: Any, taxis: dict[str, str]) -> None:
    """The page on a desktop with an answer passes axe (screenshot for the README)."""
    page.goto("/acessivel?ponto=AC1")
    page.locator(".result--taxi").first.wait_for(state="visible")
    assert_accessible(page)
    save_screenshot(page, "web-acessivel.png")


# --- the city, the search by name or address, the pages of an answer ----------------------

BIG, SMALL = "4399001", "4399002"  # test-only IBGE-like codes
BIG_AT = (-29.9000, -51.0000)  # the big city's stands: a 9 x 5 grid ≈ 220 m apart
SMALL_AT = (-29.5000, -50.5000)
N_BIG = 45


@pytest.fixture(scope="module")
def cities(web_engine: Engine) -> Iterator[dict[str, Any]]:
    """Municipalities "Cidade Grande Teste" (45 stands, one "Praça São João" on "Avenida
    Acentuação", one "Árvore Alta") and "Vila Pequena Teste" (3 stands "Ponto Pequeno N");
    removed afterwards (the big one would be every later page's default municipality)."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point
    from sqlalchemy import text

    from db.engine import session_scope
    from db.stands.models import Stand

    def square(lat: float, lon: float) -> Any:
        shape = Point(lon, lat).buffer(0.0003, cap_style="square")
        return from_shape(MultiPolygon([shape]), srid=4326)

    with session_scope(web_engine) as session:
        session.execute(
            text(
                "INSERT INTO municipalities (code, name, uf, timezone) VALUES "
                "(:b, 'Cidade Grande Teste', 'RS', 'America/Sao_Paulo'), "
                "(:s, 'Vila Pequena Teste', 'RS', 'America/Sao_Paulo') ON CONFLICT DO NOTHING"
            ),
            {"b": BIG, "s": SMALL},
        )
        for k in range(N_BIG):
            lat, lon = BIG_AT[0] + (k // 9) * 0.002, BIG_AT[1] + (k % 9) * 0.002
            name, address = f"Ponto Grande {k:02d}", f"Rua Teste, {k}"
            if k == 7:
                name, address = "Praça São João", "Avenida Acentuação, 10"
            if k == 8:
                name = "Árvore Alta"
            session.add(
                Stand(stand_id=f"CG{k:02d}", name=name, address=address,
                      municipality_code=BIG, geometry=square(lat, lon))
            )  # fmt: skip
        for k in range(3):
            session.add(
                Stand(stand_id=f"VP{k}", name=f"Ponto Pequeno {k}", municipality_code=SMALL,
                      geometry=square(SMALL_AT[0] + k * 0.002, SMALL_AT[1]))
            )  # fmt: skip
    with web_engine.connect() as conn:
        default = conn.execute(
            text(
                "SELECT coalesce(municipality_code, 'nenhum') FROM stands "
                "WHERE retired_at IS NULL AND geometry IS NOT NULL "
                "GROUP BY municipality_code ORDER BY count(*) DESC LIMIT 1"
            )
        ).scalar_one()
    yield {"default": default}
    with web_engine.begin() as conn:
        conn.execute(
            text("DELETE FROM stands WHERE municipality_code IN (:b, :s)"), {"b": BIG, "s": SMALL}
        )
        conn.execute(
            text("DELETE FROM municipalities WHERE code IN (:b, :s)"), {"b": BIG, "s": SMALL}
        )


def _options(page: Any) -> list[str]:
    values: list[str] = page.locator("#ponto option").evaluate_all(
        "options => options.map(o => o.value).filter(v => v)"
    )
    return values


class TestCity:
    def test_default_is_the_city_with_most_stands(
        self, page: Any, cities: dict[str, Any], taxis: dict[str, str]
    ) -> None:
        """Without a choice, the city with most stands is selected and its stands alone are
        listed (and drawn on the map)."""
        page.goto("/acessivel")
        assert page.locator("#municipio").input_value() == cities["default"]
        if cities["default"] == BIG:
            assert sorted(_options(page)) == [f"CG{k:02d}" for k in range(N_BIG)]

    def test_the_map_is_one_tab_stop(self, page: Any, cities: dict[str, Any]) -> None:
        """Tab goes over the map (its zoom and its pane) in a few presses, not through one stop
        per stand marker: the list of stands beside it is the keyboard's way to choose one."""
        page.goto(f"/acessivel?municipio={BIG}")
        markers = page.locator("#mapa-cidadao path.leaflet-interactive")
        expect(markers).to_have_count(N_BIG)
        page.locator("#mapa-cidadao").focus()
        inside = 0
        for _ in range(N_BIG):
            page.keyboard.press("Tab")
            if not page.evaluate("!!document.activeElement.closest('#mapa-cidadao')"):
                break
            inside += 1
        assert inside <= 3, f"{inside} Tab stops inside the map"

    def test_switching_city(self, page: Any, cities: dict[str, Any]) -> None:
        """Choosing a city with the form lists that city's stands only, and says how many."""
        page.goto("/acessivel")
        page.get_by_label("Cidade", exact=True).select_option(
            label="Vila Pequena Teste (RS) (3 pontos)"
        )
        page.get_by_role("button", name="Mostrar os pontos").click()
        page.wait_for_url("**/acessivel?municipio=4399002*")
        assert sorted(_options(page)) == ["VP0", "VP1", "VP2"]
        expect(page.locator("#pontos-achados")).to_have_text(
            "3 pontos de táxi em Vila Pequena Teste (RS), na lista e no mapa abaixo."
        )
        page.get_by_label("Cidade", exact=True).select_option(BIG)
        page.get_by_role("button", name="Mostrar os pontos").click()
        page.wait_for_url("**/acessivel?municipio=4399001*")
        options = _options(page)
        assert len(options) == N_BIG and not any(o.startswith("VP") for o in options)
        assert page.locator(".leaflet-interactive").count() >= N_BIG  # the city's markers
        assert_accessible(page)

    def test_unknown_city_is_said(self, web_server: Any, cities: dict[str, Any]) -> None:
        """A city that is not in the list: 422 and a pt-BR alert."""
        answer = httpx.get(f"{web_server.url}/acessivel", params={"municipio": "9999999"})
        assert answer.status_code == 422
        assert "escolha uma cidade da lista" in answer.text and 'role="alert"' in answer.text


class TestStandSearch:
    @pytest.mark.parametrize("typed", ["praca sao", "PRAÇA SÃO JOÃO", "acentuacao"])
    def test_search_ignores_case_and_accents(
        self, page: Any, cities: dict[str, Any], typed: str
    ) -> None:
        """Part of the name or of the address, in any case, with or without accents, finds
        the one stand; it comes selected, and searching near it answers."""
        page.goto(f"/acessivel?municipio={BIG}")
        page.get_by_label("Nome ou endereço do ponto (opcional)").fill(typed)
        page.get_by_role("button", name="Mostrar os pontos").click()
        page.wait_for_url("**busca=*")
        assert _options(page) == ["CG07"]
        assert page.locator("#ponto").input_value() == "CG07"
        expect(page.locator("#pontos-achados")).to_contain_text("1 ponto de táxi com")
        page.get_by_role("button", name="Buscar perto deste ponto").click()
        expect(page.locator("#resultados h2")).to_have_text(
            "Perto de Praça São João (ponto nº CG07)"
        )

    def test_stands_in_the_order_of_the_alphabet(
        self, web_server: Any, cities: dict[str, Any]
    ) -> None:
        """ "Árvore Alta" comes first, as in a dictionary (not after "Z" by its byte)."""
        html = httpx.get(f"{web_server.url}/acessivel", params={"municipio": BIG}).text
        found = re.findall(r'<option value="(CG\d\d)"', html)
        assert found[:2] == ["CG08", "CG00"] and found[-1] == "CG07"

    def test_search_excludes_other_stands_and_cities(
        self, web_server: Any, cities: dict[str, Any]
    ) -> None:
        """ "Ponto Grande 1" finds 01 and 10–19 only; "Pequeno" is not in the big city."""
        html = httpx.get(
            f"{web_server.url}/acessivel", params={"municipio": BIG, "busca": "ponto grande 1"}
        ).text
        found = sorted(set(re.findall(r'<option value="(CG\d\d)"', html)))
        assert found == [f"CG{k}" for k in range(10, 20)]
        none = httpx.get(
            f"{web_server.url}/acessivel", params={"municipio": BIG, "busca": "Pequeno"}
        ).text
        assert "Nenhum ponto de táxi com “Pequeno” em Cidade Grande Teste (RS)" in none
        assert "VP0" not in none


class TestPages:
    def test_answer_comes_20_stands_a_page(self, page: Any, cities: dict[str, Any]) -> None:
        """Near a stand of the big city (5 km): 45 stands, 20 a page, Próxima/Anterior, each
        stand on exactly one page, nearest first; no plate anywhere."""
        page.goto(f"/acessivel?municipio={BIG}")
        page.get_by_label("Distância máxima").select_option("5000")
        page.get_by_label("Perto de um ponto de táxi").select_option("CG00")
        page.get_by_role("button", name="Buscar perto deste ponto").click()
        expect(page.locator("#resultados h3", has_text="Pontos de táxi")).to_have_text(
            f"Pontos de táxi: {N_BIG}"
        )
        seen: list[str] = []
        for first, last in ((1, 20), (21, 40), (41, 45)):
            expect(page.locator("#pontos-mostrando")).to_contain_text(
                f"Mostrando {first}–{last} de {N_BIG} pontos"
            )
            items = page.locator(".result--stand .result__id").all_inner_texts()
            assert len(items) == last - first + 1
            seen += items
            if last < N_BIG:
                page.get_by_role("link", name="Próxima página de pontos").click()
        assert page.get_by_role("link", name="Próxima página de pontos").count() == 0
        assert len(set(seen)) == N_BIG
        assert seen[0] == "(ponto nº CG00)"  # the stand searched from, at distance 0
        assert "ACX9Z99" not in page.content()
        assert_accessible(page)
        save_screenshot(page, "web-acessivel-paginas.png")
        page.get_by_role("link", name="Anterior página de pontos").click()
        expect(page.locator("#pontos-mostrando")).to_contain_text("Mostrando 21–40 de 45")
        assert page.locator("#municipio").input_value() == BIG  # the city kept

    def test_pages_without_scripts(self, web_server: Any, cities: dict[str, Any]) -> None:
        """Plain GETs: page 3 has the last 5 stands; past the last page, the last page; a
        page that is not a number (a word, a superscript digit) is said. A map point's links
        name its cell, not the point."""
        base = {"ponto": "CG00", "raio": "5000"}
        html = httpx.get(f"{web_server.url}/acessivel", params=base | {"pagina": "3"}).text
        assert "Mostrando 41–45 de 45 pontos" in html and html.count("result--stand") == 5
        beyond = httpx.get(f"{web_server.url}/acessivel", params=base | {"pagina": "9"}).text
        assert "Mostrando 41–45 de 45 pontos" in beyond
        for page in ("dois", "²", "①", "1" * 4301):  # int("²") and int of 4,301 digits fail
            bad = httpx.get(f"{web_server.url}/acessivel", params=base | {"pagina": page})
            said = f"A página &#39;{page[:20]}&#39; não existe"
            assert bad.status_code == 422 and said in bad.text, bad.status_code
        point = {"lat": "-29.900123", "lon": "-51.000456", "raio": "5000", "origem": "mapa"}
        fragment = httpx.get(f"{web_server.url}/acessivel/resultados", params=point).text
        assert "Mostrando 1–20 de" in fragment and "pagina=2" in fragment
        assert "29.900123" not in fragment and "51.000456" not in fragment
