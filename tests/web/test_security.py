"""Headers and markup of the console's answers: strict CSP, no-store, cached static files,
pt-BR error pages, and a web session that is part of the API's revocation."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

import httpx
import pytest
from web_helpers import ServeProcess
from web_pages import PAGES, role_for

from api.headers import WEB_CSP
from api.web.auth import SESSION_COOKIE, csrf_token_for
from api.web.templating import static_url

GET_ROUTES = [p for p in PAGES if p.method == "GET" and p.allowed is not None]
GET_PAGES = [p for p in GET_ROUTES if p.document]
INLINE = (
    re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE),  # a script without src
    re.compile(r"<style\b", re.IGNORECASE),
    re.compile(r"\sstyle\s*=", re.IGNORECASE),
    re.compile(r"\son[a-z]+\s*=", re.IGNORECASE),  # onclick=… and friends
    re.compile(r"javascript:", re.IGNORECASE),
)


@pytest.fixture
def as_role(web_client: Callable[..., httpx.Client], anon_client: httpx.Client) -> Callable:
    """Return ``client(role or None)``: a logged-in client, or the anonymous one."""

    def client(role: str | None) -> httpx.Client:
        return anon_client if role is None else web_client(role)

    return client


def _pages_to_check(as_role: Callable) -> Iterator[tuple[str, httpx.Response]]:
    for page in GET_PAGES:
        yield page.id, as_role(role_for(page)).get(page.request_url())
    yield "login", as_role(None).get("/entrar")
    yield "403", as_role("planner").get("/admin")
    yield "404", as_role(None).get("/nao-existe", headers={"Accept": "text/html"})


def test_pages_have_the_strict_csp_and_no_inline_code(as_role: Callable) -> None:
    """Every page: CSP = WEB_CSP (no 'unsafe-inline', no other origin); the HTML has no inline
    script, style, event handler or javascript: URL."""
    assert "unsafe" not in WEB_CSP and "https:" not in WEB_CSP
    for name, response in _pages_to_check(as_role):
        assert response.headers["content-type"].startswith("text/html"), name
        assert response.headers["content-security-policy"] == WEB_CSP, name
        for pattern in INLINE:
            assert not pattern.search(response.text), (name, pattern.pattern)


def test_pages_are_never_stored(as_role: Callable) -> None:
    """Every page, the login's included (its CSRF token), fragment and download:
    Cache-Control: no-store."""
    for name, response in _pages_to_check(as_role):
        assert response.headers["cache-control"] == "no-store", name
    for page in GET_ROUTES:
        response = as_role(role_for(page)).get(page.request_url())
        assert response.headers["cache-control"] == "no-store", page.id


def test_page_titles_name_the_page_and_the_site(as_role: Callable) -> None:
    """Every page has one <title> "<page> — Pontual" in its head (an SVG chart's own <title>s
    aside) and one <h1>."""
    for name, response in _pages_to_check(as_role):
        head = response.text.split("</head>", 1)[0]
        titles = re.findall(r"<title>([^<]+)</title>", head)
        assert len(titles) == 1 and titles[0].endswith(" — Pontual"), name
        assert len(re.findall(r"<h1\b", response.text)) == 1, name


class TestStatic:
    def test_versioned_files_are_cached_for_a_year(self, anon_client: httpx.Client) -> None:
        """/static/…?v=<hash>: public, a year, immutable; the CSS is served as text/css."""
        response = anon_client.get(static_url("css/pontual.css"))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/css")
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"

    def test_unversioned_files_are_cached_for_an_hour(self, anon_client: httpx.Client) -> None:
        """/static/… without ?v=: public, an hour (never no-store)."""
        response = anon_client.get("/static/css/pontual.css")
        assert response.status_code == 200
        assert response.headers["cache-control"] == "public, max-age=3600"

    def test_leaflet_of_the_maps_is_served(self, anon_client: httpx.Client) -> None:
        """The maps' vendored Leaflet is reachable for the pages: /static/leaflet/leaflet.js."""
        response = anon_client.get(static_url("leaflet/leaflet.js"))
        assert response.status_code == 200
        assert "javascript" in response.headers["content-type"]
        assert "Leaflet" in response.text[:500]

    def test_missing_file_is_404(self, anon_client: httpx.Client) -> None:
        """A file that is in no static folder: 404."""
        assert anon_client.get("/static/css/nada.css").status_code == 404

    def test_static_url_of_a_missing_file_fails(self) -> None:
        """A template naming a missing static file fails loudly."""
        with pytest.raises(FileNotFoundError, match="nao-existe.css"):
            static_url("css/nao-existe.css")


class TestErrors:
    def test_unknown_page_is_a_pt_br_page_for_a_browser(self, anon_client: httpx.Client) -> None:
        """A browser asking for a page that does not exist gets a 404 page in pt-BR."""
        response = anon_client.get("/nao-existe", headers={"Accept": "text/html"})
        assert response.status_code == 404
        assert "Página não encontrada" in response.text

    def test_unknown_page_keeps_a_logged_in_users_menu(self, web_client: Callable) -> None:
        """Logged in, a page that does not exist keeps the header (menu, "Sair") and leads back
        to the user's own start page, not to the login."""
        response = web_client("agent").get("/fiscal/nao-existe", headers={"Accept": "text/html"})
        assert response.status_code == 404 and "Página não encontrada" in response.text
        assert "Sair" in response.text and "Voltar à sua página inicial" in response.text
        assert 'href="/entrar"' not in response.text

    @pytest.mark.parametrize(
        ("path", "accept"),
        [("/api/v1/nao-existe", "text/html"), ("/nao-existe", "application/json")],
    )
    def test_api_and_programs_keep_json_errors(
        self, anon_client: httpx.Client, path: str, accept: str
    ) -> None:
        """The JSON API's paths, and clients not asking for HTML, keep the JSON error."""
        response = anon_client.get(path, headers={"Accept": accept})
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


def test_serve_prints_the_console_address(web_server: ServeProcess) -> None:
    """`pontual serve` names the console's address when it starts."""
    assert f"Console web: {web_server.url}/" in web_server.log()


class TestSessionAndApi:
    def test_the_api_ignores_the_session_cookie(self, web_client: Callable) -> None:
        """The JSON API authenticates by bearer only: the cookie alone gets 401 (so the API
        needs no CSRF protection)."""
        client = web_client("agent")
        assert client.get("/api/v1/auth/me").status_code == 401

    def test_logout_closes_the_alert_stream_of_the_session(
        self, web_server: ServeProcess, web_client: Callable, make_user: Callable
    ) -> None:
        """The web session is an API token: its live alert stream ends (event: closed) when the
        user logs out of the console."""
        client = web_client(make_user("agent"))
        token = client.cookies.get(SESSION_COOKIE)
        assert token
        lines: list[str] = []
        opened = threading.Event()

        def read() -> None:
            with httpx.stream(
                "GET",
                web_server.url + "/api/v1/alerts/stream",
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx.Timeout(10, read=40),
            ) as stream:
                for line in stream.iter_lines():
                    lines.append(line)
                    opened.set()
                    if line.startswith("event: closed"):
                        return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert opened.wait(20), "the stream did not open"
        response = client.post("/sair", data={"csrf_token": csrf_token_for(token)})
        assert response.status_code == 303
        reader.join(40)
        assert not reader.is_alive(), f"the stream is still open: {lines}"
        assert "event: closed" in lines
