"""The maps run under the Content-Security-Policy the API sends with its HTML pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from map_factories import T0, make_pings, make_stands, overlay_labels

from api.headers import HTML_CSP
from maps.citizen import citizen_map

pytestmark = pytest.mark.browser

FLEET = pd.DataFrame({"vehicle_id": ["ACC-1"], "plate": ["IXA1A11"], "accessible": [True]})


@pytest.fixture
def served_page() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A 127.0.0.1 server answering the pages put in the dict, with the API's HTML CSP."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Security-Policy", HTML_CSP)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()


def test_citizen_map_runs_under_the_csp(browser: object, served_page: tuple) -> None:
    """The citizen map's inlined Leaflet and scripts run: no CSP violation, layers ready."""
    base, pages = served_page
    fmap = citizen_map(
        make_stands(),
        make_pings([("ACC-1", 59, -30.02771, -51.22872, "free")]),
        FLEET,
        at=T0 + pd.Timedelta(minutes=60),
        tiles=None,
    )
    pages["/map"] = fmap.get_root().render().encode()
    context = browser.new_context()  # type: ignore[attr-defined]
    try:
        context.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith(base) else route.abort()
            ),
        )
        page = context.new_page()
        violations: list[str] = []
        page.on(
            "console",
            lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
        )
        page.goto(base + "/map")
        page.wait_for_function("window.PontualMaps && PontualMaps.ready", timeout=15000)
        labels = overlay_labels(page)
    finally:
        context.close()
    assert violations == []
    assert "Táxis acessíveis livres agora (1)" in labels
