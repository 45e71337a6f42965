"""Pages of the maps in the session's headless Chromium (``browser``, tests/conftest.py), with no
network: only file:// pages load."""

from __future__ import annotations

from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# ``browser``: the session's headless Chromium, in tests/conftest.py.

TILE_HOSTS = ("tile.openstreetmap.org",)


def _is_error(message) -> bool:
    """A console error, except the browser's own report of a tile that could not load."""
    if message.type != "error":
        return False
    url = (message.location or {}).get("url", "")
    return not (message.text.startswith("Failed to load resource") and _is_tile(url))


def _is_tile(url: str) -> bool:
    return any(host in url for host in TILE_HOSTS)


def _describe(message) -> str:
    return f"{message.text} ({(message.location or {}).get('url', '')})"


@pytest.fixture
def open_map(browser, request):
    """Open an HTML file offline; return (page, console errors, failed request URLs)."""
    contexts = []

    def _open(path: Path):
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        contexts.append(context)
        # No network: anything that is not the local file is aborted (tiles included).
        context.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file://") else route.abort()
            ),
        )
        page = context.new_page()
        errors: list[str] = []
        failed: list[str] = []
        page.on("console", lambda m: errors.append(_describe(m)) if _is_error(m) else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        return page, errors, failed

    yield _open
    ARTIFACTS.mkdir(exist_ok=True)
    for context in contexts:
        for k, page in enumerate(context.pages):
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{k}.png"))
        context.close()
