"""Helpers of the web console tests (``from web_helpers import login, assert_accessible``).

The fixtures that use them are in ``tests/web/conftest.py``: ``web_server`` (a real
``pontual serve``), ``browser``, ``page``, ``open_page``, ``login``, ``web_client``,
``make_user``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from api.web.nav import LANDING

WEB_PASSWORD = "senha-web-de-teste-123"
"""Password of every seeded console user."""
WEB_USERS = {role: f"web_{role}" for role in ("admin", "agent", "supervisor", "planner")}
"""Username of the seeded user of each role."""
ROLES = tuple(WEB_USERS)
AXE_JS = Path(__file__).resolve().parent / "web" / "vendor" / "axe-core" / "axe.min.js"
"""axe-core, vendored (tests only; see its README)."""
SECRET_KEY = "oGD3pDyBv0ofUQb3obqeq2DPmy1gxCFsbhOHGS9gBw8="
"""Fernet key of the test server (no key file in the user's data directory)."""
PONTUAL = Path(sys.executable).with_name("pontual")
START_S = 90.0
_CSRF_RE = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeProcess:
    """``pontual serve`` in a child process on 127.0.0.1; stdout and stderr go to ``log_path``."""

    def __init__(
        self,
        *,
        database_url: str,
        data_dir: Path,
        log_path: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        base = {k: v for k, v in os.environ.items() if not k.startswith("PONTUAL_")}
        base |= {
            "DATABASE_URL": database_url,
            "PONTUAL_DATA_DIR": str(data_dir),
            "PONTUAL_SECRET_KEY": SECRET_KEY,
            "PONTUAL_LOGIN_RATE_LIMIT_PER_MIN": "100000",
            "PONTUAL_PUBLIC_RATE_LIMIT_PER_MIN": "100000",
        }
        command = [str(PONTUAL), "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                env=base | (env or {}),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_healthy(self) -> None:
        """Return when ``/health`` answers 200; raise with the log if the server died."""
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                msg = f"pontual serve exited {self.process.returncode}: {self.log()}"
                raise RuntimeError(msg)
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        msg = f"pontual serve not healthy within {START_S} s: {self.log()}"
        raise RuntimeError(msg)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log(self) -> str:
        """Return what the server wrote so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def csrf_from(html: str) -> str:
    """Return the CSRF token of the first form of a page."""
    found = _CSRF_RE.search(html)
    if found is None:
        msg = "no csrf_token field in the page"
        raise AssertionError(msg)
    return found.group(1)


def http_login(base_url: str, username: str, password: str = WEB_PASSWORD) -> httpx.Client:
    """Return an httpx client logged in as ``username`` (cookies kept; redirects not followed).

    Raises AssertionError if the login is refused. Close the client when done.
    """
    client = httpx.Client(base_url=base_url, follow_redirects=False, timeout=30)
    form = client.get("/entrar")
    answer = client.post(
        "/entrar",
        data={"username": username, "password": password, "csrf_token": csrf_from(form.text)},
    )
    if answer.status_code != 303:
        client.close()
        msg = f"login of {username} refused: {answer.status_code}"
        raise AssertionError(msg)
    return client


def login(page: Any, who: str, *, password: str = WEB_PASSWORD) -> Any:
    """Log ``page`` in through the login form; return the page on the user's landing page.

    ``who`` is a role (``"agent"``: its seeded user) or a username (then ``password``). The
    page's context must have the server as ``base_url`` (the ``page`` fixtures do).
    """
    username = WEB_USERS.get(who, who)
    page.goto("/entrar")
    page.get_by_label("Usuário").fill(username)
    page.get_by_label("Senha").fill(password)
    with page.expect_navigation():
        page.get_by_role("button", name="Entrar").click()
    if who in LANDING:
        expected = LANDING[who]
        if not page.url.split("?")[0].endswith(expected):
            msg = f"{who} landed on {page.url}, expected {expected}"
            raise AssertionError(msg)
    return page


def assert_accessible(page: Any, *, impacts: tuple[str, ...] = ("serious", "critical")) -> None:
    """Run axe-core (WCAG 2.0/2.1 A and AA rules) on the page; fail on any violation of
    ``impacts``, listing each rule, its help and the elements concerned.

    The script is evaluated through the DevTools protocol, which the page's CSP does not
    restrict: nothing is added to the page's own scripts.
    """
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE_JS.read_text(encoding="utf-8") + "\n;undefined")
    violations = page.evaluate(
        """async () => {
            const result = await axe.run(document, {
                runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa',
                                                  'best-practice']},
                resultTypes: ['violations'],
            });
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => n.target.join(' ') + '  ' + n.html.slice(0, 160)),
            }));
        }"""
    )
    bad = [v for v in violations if v["impact"] in impacts]
    if bad:
        lines = [f"axe: {len(bad)} {'/'.join(impacts)} violation(s) on {page.url}"]
        for v in bad:
            lines.append(f"- {v['id']} ({v['impact']}): {v['help']}")
            lines += [f"    {node}" for node in v["nodes"][:10]]
        raise AssertionError("\n".join(lines))


def horizontal_overflow_px(page: Any) -> int:
    """Return how many CSS pixels the page is wider than its viewport (0: no sideways scroll)."""
    return int(
        page.evaluate(
            "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
            " - document.documentElement.clientWidth"
        )
    )


REPO = Path(__file__).resolve().parents[1]
ARTIFACTS_DIR = REPO / "test-artifacts"
"""Where every screenshot goes (not committed)."""
SCREENSHOTS_DIR = REPO / "docs" / "screenshots"
"""The committed ones (docs/console.md, README), with ``PONTUAL_UPDATE_SCREENSHOTS=1``."""
_MAPS_DRAWN = (
    "() => Array.from(document.querySelectorAll('.leaflet-container'))"
    ".every((m) => m.hasAttribute('data-mapa-base'))"
)


def save_screenshot(
    page: Any, name: str, *, element: Any | None = None, min_bytes: int = 5_000
) -> Path:
    """Save a full-page screenshot ``name`` once every map has its background; return its path.

    Always to ``test-artifacts/``; also to ``docs/screenshots/`` with
    ``PONTUAL_UPDATE_SCREENSHOTS=1``. ``element``: a locator to shoot instead of the page.
    Fails if a map's background never came or the image is smaller than ``min_bytes`` (a
    blank page).
    """
    page.wait_for_function(_MAPS_DRAWN, timeout=30_000)
    assert page.locator(".leaflet-container[data-mapa-base=erro]").count() == 0, name
    targets = [ARTIFACTS_DIR / name]
    if os.environ.get("PONTUAL_UPDATE_SCREENSHOTS") == "1":
        targets.append(SCREENSHOTS_DIR / name)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        if element is not None:
            element.screenshot(path=str(target))
        else:
            page.screenshot(path=str(target), full_page=True)
        assert target.stat().st_size > min_bytes, target
    return targets[0]
