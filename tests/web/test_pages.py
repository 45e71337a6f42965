"""The console in headless Chromium: logins, every page's title and accessibility (axe-core),
the phone viewport, the keyboard, and the screenshots of the README.

Screenshots go to ``test-artifacts/``; with ``PONTUAL_UPDATE_SCREENSHOTS=1`` also to
``docs/screenshots/`` (the committed ones).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from web_helpers import (
    WEB_PASSWORD,
    WEB_USERS,
    assert_accessible,
    horizontal_overflow_px,
    save_screenshot,
)
from web_pages import PAGES, Page, role_for

from api.web.auth import SESSION_COOKIE
from api.web.nav import LANDING, NAV

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
BROWSED = [
    p for p in PAGES if p.method == "GET" and p.allowed is not None and p.browse and p.document
]


def _check_page(page: Any) -> None:
    """A title "<page> — Pontual", one h1, and no serious or critical axe violation."""
    assert page.title().endswith(" — Pontual") and len(page.title()) > len(" — Pontual")
    assert page.locator("h1").count() == 1
    assert_accessible(page)


class TestLogin:
    @pytest.mark.parametrize("role", sorted(WEB_USERS))
    def test_each_role_logs_in_and_lands_on_its_page(
        self, page: Any, login: Callable, role: str
    ) -> None:
        """Through the form: the role's page, the user and role in the header, the role's nav,
        an HttpOnly session cookie that scripts cannot read."""
        login(page, role)
        assert page.url.endswith(LANDING[role])
        header = page.get_by_role("banner")
        assert WEB_USERS[role] in header.inner_text()
        nav = page.get_by_role("navigation", name="Navegação principal")
        assert [a.inner_text() for a in nav.get_by_role("link").all()] == [
            item.label for item in NAV[role]
        ]
        assert nav.locator("[aria-current=page]").count() == 1
        cookie = next(c for c in page.context.cookies() if c["name"] == SESSION_COOKIE)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
        assert SESSION_COOKIE not in page.evaluate("document.cookie")

    def test_bad_password_shows_the_error_and_keeps_the_name(self, page: Any) -> None:
        """A wrong password: the pt-BR alert, the username kept, fields marked invalid."""
        page.goto("/entrar")
        page.get_by_label("Usuário").fill(WEB_USERS["agent"])
        page.get_by_label("Senha").fill("senha-errada-1")
        page.get_by_role("button", name="Entrar").click()
        alert = page.get_by_role("alert")
        assert alert.inner_text() == "Usuário ou senha incorretos, ou conta desativada."
        assert page.get_by_label("Usuário").input_value() == WEB_USERS["agent"]
        assert page.get_by_label("Senha").get_attribute("aria-invalid") == "true"
        assert not [c for c in page.context.cookies() if c["name"] == SESSION_COOKIE]
        _check_page(page)

    def test_logout_button_ends_the_session(self, page: Any, login: Callable) -> None:
        """ "Sair" in the header: back to the login with a notice; the role page asks to log in."""
        login(page, "planner")
        page.get_by_role("button", name="Sair").click()
        page.wait_for_url("**/entrar?aviso=saiu")
        assert "Você saiu" in page.get_by_role("status").inner_text()
        page.goto("/planejamento")
        assert page.url.endswith("/entrar?next=%2Fplanejamento")

    def test_keyboard_only_login(self, page: Any) -> None:
        """Tab reaches the skip link first; the form is filled and sent with the keyboard; the
        focused field shows a visible focus ring."""
        page.goto("/entrar")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Pular para o conteúdo"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "conteudo"
        page.keyboard.press("Tab")  # the first field of the content
        assert page.evaluate("document.activeElement.id") == "username"
        ring = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert ring != "none"
        page.keyboard.type(WEB_USERS["supervisor"])
        page.keyboard.press("Tab")
        page.keyboard.type(WEB_PASSWORD)
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url.endswith("/supervisao")


class TestEveryPage:
    def test_login_page(self, page: Any) -> None:
        """The login page: title, h1, labelled fields, accessible."""
        page.goto("/entrar")
        assert page.title() == "Entrar — Pontual"
        _check_page(page)

    @pytest.mark.parametrize("row", BROWSED, ids=lambda p: p.id)
    def test_page_has_a_title_and_is_accessible(
        self, page: Any, login: Callable, row: Page
    ) -> None:
        """Opened by its area's role: a title, one h1, no serious/critical axe violation."""
        role = role_for(row)
        if role is not None:
            login(page, role)
        page.goto(row.request_url())
        assert page.url.endswith(row.request_url())
        _check_page(page)

    @pytest.mark.parametrize("role", sorted(WEB_USERS))
    def test_landing_page_of_each_role_is_accessible(
        self, page: Any, login: Callable, role: str
    ) -> None:
        """Each role's landing page, with its own header and nav, passes axe."""
        login(page, role)
        _check_page(page)

    def test_error_pages_are_accessible(self, page: Any, login: Callable) -> None:
        """The 403 page (an agent on /admin) and the 404 page pass axe."""
        login(page, "agent")
        response = page.goto("/admin")
        assert response.status == 403
        assert page.title() == "Acesso negado — Pontual"
        _check_page(page)
        response = page.goto("/nao-existe")
        assert response.status == 404
        _check_page(page)


class TestPhone:
    def test_login_page_fits_a_phone(self, open_page: Callable) -> None:
        """At 390×844 the login page has no sideways scroll and passes axe."""
        phone = open_page(width=390, height=844, is_mobile=True, has_touch=True)
        phone.goto("/entrar")
        assert horizontal_overflow_px(phone) == 0
        _check_page(phone)

    @pytest.mark.parametrize("role", sorted(WEB_USERS))
    def test_landing_pages_fit_a_phone(
        self, open_page: Callable, login: Callable, role: str
    ) -> None:
        """At 390×844 each role's page (header, nav, Sair) has no sideways scroll."""
        phone = open_page(width=390, height=844, is_mobile=True, has_touch=True)
        login(phone, role)
        assert horizontal_overflow_px(phone) == 0


SHOTS = (
    ("web-login.png", None, "/entrar", (1280, 800)),
    ("web-login-phone.png", None, "/entrar", (390, 844)),
    ("web-supervisao-phone.png", "supervisor", "/supervisao", (390, 844)),
)


@pytest.mark.parametrize(("name", "role", "path", "size"), SHOTS, ids=[s[0] for s in SHOTS])
def test_screenshots(
    open_page: Callable,
    login: Callable,
    name: str,
    role: str | None,
    path: str,
    size: tuple[int, int],
) -> None:
    """Screenshots of the login and of landing pages (desktop and phone) are written."""
    shot = open_page(width=size[0], height=size[1])
    if role is not None:
        login(shot, role)
    shot.goto(path)
    save_screenshot(shot, name)


class TestHarness:
    def test_assert_accessible_fails_on_a_critical_violation(self, page: Any) -> None:
        """assert_accessible names the rule and the element of a serious/critical violation."""
        page.goto("/entrar")
        page.evaluate(
            "document.querySelector('main').append(Object.assign("
            "document.createElement('img'), {src: '/static/img/favicon.svg'}))"
        )
        with pytest.raises(AssertionError, match=r"image-alt \(critical\)[\s\S]*favicon"):
            assert_accessible(page)

    def test_horizontal_overflow_is_measured(self, open_page: Callable) -> None:
        """A 600 px wide element in a 390 px viewport (16 px margins) is sideways scroll."""
        phone = open_page(width=390, height=844)
        phone.goto("/entrar")
        phone.evaluate(
            "const d = document.createElement('div'); d.style.width = '600px';"
            "d.style.height = '10px'; document.querySelector('main').append(d)"
        )
        assert horizontal_overflow_px(phone) == 600 + 16 - 390


def test_every_scrolling_table_can_be_scrolled_by_keyboard() -> None:
    """A table's scroll box is a named region in the tab order (axe: scrollable-region-
    focusable): on a phone a wide table scrolls sideways, which a keyboard must reach."""
    templates = Path(__file__).resolve().parents[2] / "api" / "web" / "templates"
    boxes = [
        (path.name, tag)
        for path in templates.rglob("*.html")
        for tag in re.findall(r'<div class="table-wrap"[^>]*>', path.read_text("utf-8"))
    ]
    assert len(boxes) > 10
    for name, tag in boxes:
        assert 'tabindex="0"' in tag and 'role="region"' in tag and "aria-label=" in tag, name
