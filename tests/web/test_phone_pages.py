"""The console on a phone (390×844) and a desktop (1366×768): the evidence map keeps its
markers clear of its controls and out of the tab order, the stands list is paged and slides
sideways, the alerts' filter buttons share a row, a time field is drawn like a date field.

Screenshots go to ``test-artifacts/`` (``web-phone-*.png``).
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine, delete
from web_fiscal import (
    PB,
    SEEDED_FINDING_ID,
    TIMEZONE,
    boarding_finding,
    longer_route_finding,
    store_and_propose,
)
from web_helpers import assert_accessible, horizontal_overflow_px, save_screenshot

pytestmark = pytest.mark.browser

PHONE: dict[str, Any] = {"width": 390, "height": 844, "is_mobile": True, "has_touch": True}
DESKTOP: dict[str, Any] = {"width": 1366, "height": 768}
N_FIXES = 80
"""Fixes of the long detour (as many as a real longer-route finding carries)."""
N_STANDS = 442
"""Stands of the paged list (as many as Porto Alegre's registry)."""
STAND_PREFIX = "PGX"

Box = dict[str, float]


def _overlap(a: Box, b: Box) -> bool:
    """Whether two bounding boxes share any area."""
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def _boxes(locator: Any) -> list[Box]:
    return [box for box in (item.bounding_box() for item in locator.all()) if box is not None]


def _settled_map(page: Any) -> None:
    """Wait for the evidence map's markers and background (its attribution comes with it)."""
    expect(page.locator("#mapa .fix-marker").first).to_be_attached()
    page.wait_for_function(
        "() => document.querySelector('#mapa').getAttribute('data-mapa-base') === 'true'"
    )
    # two frames: a new framing after the attribution grew is drawn
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


@pytest.fixture(scope="module")
def long_finding(web_engine: Engine) -> str:
    """A detour with :data:`N_FIXES` fixes along its driven line (north, east, south)."""
    started = dt.datetime(2026, 11, 24, 17, 0, tzinfo=dt.UTC)
    finding = longer_route_finding(
        vehicle_id=f"PH{secrets.token_hex(3).upper()}", started_at=started
    )
    line = finding["details"]["driven_line"]
    legs = len(line) - 1
    fixes = []
    for i in range(N_FIXES):
        at = i * legs / (N_FIXES - 1)
        k = min(int(at), legs - 1)
        t = at - k
        (x0, y0), (x1, y1) = line[k], line[k + 1]
        fixes.append(
            {
                "timestamp": (started + dt.timedelta(seconds=4 * i)).isoformat(),
                "lon": x0 + (x1 - x0) * t,
                "lat": y0 + (y1 - y0) * t,
                "meter": "occupied",
            }
        )
    finding["details"]["fixes"] = fixes
    finding["details"]["n_fixes"] = N_FIXES
    store_and_propose(web_engine, [finding])
    return str(finding["finding_id"])


@pytest.fixture(scope="module")
def stand_finding(web_engine: Engine) -> str:
    """A boarding at the seeded stand: the stand, two fixes and the finding's place."""
    finding = boarding_finding(
        vehicle_id=f"PH{secrets.token_hex(3).upper()}",
        stand_id="S1",
        started_at=dt.datetime(2026, 11, 24, 13, 0, tzinfo=dt.UTC),
    )
    store_and_propose(web_engine, [finding])
    return str(finding["finding_id"])


class TestEvidenceMap:
    @pytest.mark.parametrize("which", ["seeded", "long", "stand"])
    def test_no_marker_is_under_a_control_on_a_phone(
        self,
        open_page: Callable[..., Any],
        login: Callable[..., Any],
        long_finding: str,
        stand_finding: str,
        which: str,
    ) -> None:
        """On a phone every fix and place marker lies inside the map and clear of the zoom
        buttons and the attribution (bounding boxes compared)."""
        finding = {"seeded": SEEDED_FINDING_ID, "long": long_finding, "stand": stand_finding}
        phone = open_page(**PHONE)
        login(phone, "agent")
        phone.goto(f"/fiscal/achados/{finding[which]}")
        _settled_map(phone)
        area = phone.locator("#mapa").bounding_box()
        controls = _boxes(phone.locator("#mapa .leaflet-control"))
        markers = _boxes(phone.locator("#mapa .fix-marker, #mapa .point-marker"))
        expected = {"seeded": 7, "long": N_FIXES, "stand": 3}[which]
        assert len(markers) == expected
        assert area is not None and len(controls) == 2  # zoom, attribution
        zoom = phone.locator("#mapa .leaflet-control-zoom").bounding_box()
        assert zoom is not None and zoom["width"] > 20
        for marker in markers:
            assert area["x"] <= marker["x"] <= area["x"] + area["width"] - marker["width"]
            assert area["y"] <= marker["y"] <= area["y"] + area["height"] - marker["height"]
            for control in controls:
                assert not _overlap(marker, control), (marker, control)
        if which == "long":
            save_screenshot(phone, "web-phone-achado-mapa.png", element=phone.locator("#mapa"))

    def test_fix_markers_are_not_tab_stops_and_the_table_has_them(
        self, page: Any, login: Callable[..., Any], long_finding: str
    ) -> None:
        """The map is one Tab stop: from it, Tab goes to the zoom buttons and then past the
        map, never to a marker; the markers are hidden from screen readers, and the table of
        fixes holds every one (number, time, meter). The caption speaks to touch too."""
        login(page, "agent")
        page.goto(f"/fiscal/achados/{long_finding}")
        _settled_map(page)
        markers = page.locator("#mapa .fix-marker")
        expect(markers).to_have_count(N_FIXES)
        for marker in markers.all():
            expect(marker).to_have_attribute("tabindex", "-1")
            expect(marker).to_have_attribute("aria-hidden", "true")
        page.locator("#mapa").focus()
        reached = []
        for _ in range(4):
            page.keyboard.press("Tab")
            reached.append(
                page.evaluate(
                    "() => { const e = document.activeElement;"
                    " return [e.tagName.toLowerCase(), e.getAttribute('aria-label') || '',"
                    " !!e.closest('#mapa')]; }"
                )
            )
        assert reached[:2] == [["a", "Aproximar", True], ["a", "Afastar", True]], reached
        assert not any(in_map for _, _, in_map in reached[2:]), reached
        rows = page.locator("details.fixes table tbody tr")
        expect(rows).to_have_count(N_FIXES)
        expect(rows.nth(2)).to_contain_text("Ocupado")
        expect(page.locator("#mapa-legenda-titulo")).to_contain_text(
            "toque ou passe o cursor sobre uma posição"
        )

    @pytest.mark.parametrize("size", ["phone", "desktop"])
    def test_finding_page_passes_axe(
        self, open_page: Callable[..., Any], login: Callable[..., Any], long_finding: str, size: str
    ) -> None:
        """The finding page of the long detour passes axe on a phone and on a desktop."""
        view = open_page(**(PHONE if size == "phone" else DESKTOP))
        login(view, "agent")
        view.goto(f"/fiscal/achados/{long_finding}")
        _settled_map(view)
        assert horizontal_overflow_px(view) == 0
        assert_accessible(view)


@pytest.fixture(scope="module")
def many_stands(web_engine: Engine) -> Iterator[str]:
    """:data:`N_STANDS` stands without an area, ids ``PGX0`` to ``PGX441``; removed after."""
    from db.engine import session_scope
    from db.stands.models import Stand

    with session_scope(web_engine) as session:
        session.add_all(
            Stand(
                stand_id=f"{STAND_PREFIX}{k}",
                name=f"Ponto Paginado da Avenida Comprida {k}",
                kind="fixo",
                capacity=k % 9,
            )
            for k in range(N_STANDS)
        )
    yield STAND_PREFIX
    with session_scope(web_engine) as session:
        session.execute(delete(Stand).where(Stand.stand_id.like(f"{STAND_PREFIX}%")))


class TestStandsList:
    def test_a_phone_pages_the_list_and_reaches_every_column(
        self, open_page: Callable[..., Any], login: Callable[..., Any], many_stands: str
    ) -> None:
        """442 stands: page 1 of 9 with 50 rows, Próxima opens page 2 (PGX50 first, natural
        order); the table slides inside its focusable region (the page does not), and every
        column's header is in the viewport or comes into it by that slide."""
        phone = open_page(**PHONE)
        login(phone, "admin")
        phone.goto(f"/admin/pontos?q={many_stands}")
        table = phone.locator("table.data--stands")
        expect(table.locator("caption")).to_have_text("442 pontos com “PGX”; página 1 de 9")
        expect(table.locator("tbody tr")).to_have_count(50)
        pager = phone.get_by_role("navigation", name="Páginas")
        expect(pager).to_contain_text("Página 1 de 9")
        assert horizontal_overflow_px(phone) == 0
        wrap = phone.get_by_role("region", name="Pontos de táxi (tabela)")
        expect(wrap).to_have_attribute("tabindex", "0")
        view_width = PHONE["width"]
        headers = table.locator("thead th")
        expect(headers).to_have_count(6)
        names = headers.all_inner_texts()
        assert names == ["Ponto", "Nome", "Tipo", "Vagas", "Licenças vigentes", "Situação"]
        wrap_box = wrap.bounding_box()
        assert wrap_box is not None
        hidden = []
        for k in range(6):
            box = headers.nth(k).bounding_box()
            assert box is not None
            if box["x"] + box["width"] > view_width:
                hidden.append(k)
        if hidden:  # cut by the viewport: the region slides them into view
            assert wrap.evaluate("e => getComputedStyle(e).overflowX") in ("auto", "scroll")
            wrap.focus()
            for _ in range(12):
                phone.keyboard.press("ArrowRight")
            # Chromium animates a keyboard scroll: wait for it to move (a busy machine lags)
            handle = wrap.element_handle()
            phone.wait_for_function("e => e.scrollLeft > 0", arg=handle, timeout=10_000)
            wrap.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
            for k in hidden:
                box = headers.nth(k).bounding_box()
                assert box is not None
                assert box["x"] >= wrap_box["x"] - 1, names[k]
                assert box["x"] + box["width"] <= wrap_box["x"] + wrap_box["width"] + 1, names[k]
        save_screenshot(phone, "web-phone-pontos.png")
        with phone.expect_navigation():
            pager.get_by_role("link", name="Próxima").click()
        assert "pagina=2" in phone.url
        expect(pager).to_contain_text("Página 2 de 9")
        expect(table.locator("tbody tr").first.locator("th")).to_have_text("PGX50")
        expect(table.locator("tbody tr")).to_have_count(50)

    def test_a_page_past_the_last_shows_the_last(
        self, page: Any, login: Callable[..., Any], many_stands: str
    ) -> None:
        """An old link to page 99 of 9 shows page 9 (its 42 stands), not an empty table."""
        login(page, "admin")
        page.goto(f"/admin/pontos?q={many_stands}&pagina=99")
        expect(page.get_by_role("navigation", name="Páginas")).to_contain_text("Página 9 de 9")
        expect(page.locator("table.data--stands tbody tr")).to_have_count(N_STANDS - 8 * 50)

    @pytest.mark.parametrize("size", ["phone", "desktop"])
    def test_stands_list_passes_axe(
        self, open_page: Callable[..., Any], login: Callable[..., Any], many_stands: str, size: str
    ) -> None:
        """The paged stands list passes axe on a phone and on a desktop."""
        view = open_page(**(PHONE if size == "phone" else DESKTOP))
        login(view, "admin")
        view.goto(f"/admin/pontos?q={many_stands}")
        expect(view.locator("table.data--stands tbody tr")).to_have_count(50)
        assert horizontal_overflow_px(view) == 0
        assert_accessible(view)


class TestAlertFilters:
    def test_the_buttons_share_one_row_on_a_desktop(
        self, open_page: Callable[..., Any], login: Callable[..., Any]
    ) -> None:
        """Filtrar and Limpar have the same top, side by side, on the row of the fields."""
        view = open_page(**DESKTOP)
        login(view, "agent")
        view.goto("/fiscal/alertas")
        form = view.get_by_role("form", name="Filtros dos alertas")
        go = form.get_by_role("button", name="Filtrar").bounding_box()
        clear = form.get_by_role("link", name="Limpar").bounding_box()
        field = form.get_by_label("Ponto (código)").bounding_box()
        assert go is not None and clear is not None and field is not None
        assert abs(go["y"] - clear["y"]) < 1
        assert go["x"] + go["width"] <= clear["x"]
        assert abs((go["y"] + go["height"]) - (field["y"] + field["height"])) < 2
        assert_accessible(view)
        save_screenshot(view, "web-phone-alertas-desktop.png")

    def test_on_a_phone_the_buttons_follow_the_fields(
        self, open_page: Callable[..., Any], login: Callable[..., Any]
    ) -> None:
        """On a phone the two buttons share a row under the last field, inside the viewport."""
        phone = open_page(**PHONE)
        login(phone, "agent")
        phone.goto("/fiscal/alertas")
        form = phone.get_by_role("form", name="Filtros dos alertas")
        go = form.get_by_role("button", name="Filtrar").bounding_box()
        clear = form.get_by_role("link", name="Limpar").bounding_box()
        field = form.get_by_label("Ponto (código)").bounding_box()
        assert go is not None and clear is not None and field is not None
        assert abs(go["y"] - clear["y"]) < 1
        assert go["y"] >= field["y"] + field["height"]
        assert clear["x"] + clear["width"] <= PHONE["width"]
        assert go["height"] >= 44 and clear["height"] >= 44  # touch targets
        assert horizontal_overflow_px(phone) == 0
        assert_accessible(phone)


def test_a_time_field_is_drawn_like_a_date_field(
    open_page: Callable[..., Any], login: Callable[..., Any], web_engine: Engine
) -> None:
    """On the proposal page the delivery time looks like the delivery date: the same height,
    border, corners, padding and width (not the browser's plain field)."""
    from db.enforcement import workflow
    from db.engine import session_scope

    issued = dt.datetime.now(ZoneInfo(TIMEZONE)).replace(
        hour=10, minute=0, second=0, microsecond=0
    ) - dt.timedelta(days=10)
    finding = longer_route_finding(
        vehicle_id=f"PH{secrets.token_hex(3).upper()}",
        started_at=(issued - dt.timedelta(days=1)).astimezone(dt.UTC),
    )
    proposal = store_and_propose(web_engine, [finding], municipality=PB)[finding["finding_id"]]
    with session_scope(web_engine) as session:
        workflow.confirm(
            session,
            proposal,
            agent_id="outro",
            at=issued,
            exception_answer="O passageiro não autorizou o trajeto mais longo; reclamou.",
        )
    for size in (DESKTOP, PHONE):
        view = open_page(**size)
        login(view, "agent")
        view.goto(f"/fiscal/propostas/{proposal}")
        looks = (
            "e => { const s = getComputedStyle(e); return [s.minHeight, s.borderTopWidth,"
            " s.borderTopColor, s.borderTopLeftRadius, s.paddingLeft, s.fontSize,"
            " e.getBoundingClientRect().width]; }"
        )
        date = view.locator("#notificar input[type=date]").evaluate(looks)
        time = view.locator("#notificar input[type=time]").evaluate(looks)
        assert time == date
        assert_accessible(view)
