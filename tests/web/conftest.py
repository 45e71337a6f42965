"""Fixtures of the web console tests: a real ``pontual serve``, its users, headless Chromium.

- ``web_database_url`` / ``web_engine``: a fresh migrated database of their own (dropped at
  the end), seeded with stand ``S1``, a synthetic driver ``D1``, device 1 and one user per role
  (:data:`web_helpers.WEB_USERS`, password :data:`web_helpers.WEB_PASSWORD`; the supervisor is
  linked to ``S1``).
- ``web_server``: ``pontual serve`` on 127.0.0.1 and a free port over that database (one per
  session; ``web_server.url``, ``web_server.log()``).
- ``make_user``: a new user of a role (for tests that disable or change an account).
- ``web_client``: an httpx client logged in through the login form (``web_client("agent")``).
- ``browser`` (tests/conftest.py: the session's headless Debian Chromium); ``page``: a
  1280×800 page whose ``base_url`` is the server; ``open_page(width=390, height=844)`` for
  another viewport; ``login(page, role)``.
  Every page may talk to the server only: any other request is aborted and fails the test, as
  do a CSP violation and an uncaught script error. A failing test leaves a screenshot of each of
  its pages in ``test-artifacts/``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_factories import DEVICE_SINCE
from factories import migrated_database
from sqlalchemy import Engine
from web_fiscal import seed_fiscal
from web_helpers import WEB_PASSWORD, WEB_USERS, ServeProcess, http_login
from web_helpers import login as login_page

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
STAND_ID = "S1"
"""The seeded stand (the supervisor's)."""
_counter = itertools.count(1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    """Keep each phase's report on the item (the page fixtures screenshot failed tests)."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def web_database_url(database_url: str) -> Iterator[str]:
    """URL of a fresh migrated database for the console tests (dropped at the end)."""
    with migrated_database(database_url, prefix="pontual_web") as url:
        yield url


@pytest.fixture(scope="session")
def web_engine(web_database_url: str) -> Iterator[Engine]:
    """Engine on the console tests' database, seeded (stand S1, one user per role)."""
    from db.engine import make_engine

    engine = make_engine(web_database_url)
    _seed(engine)
    try:
        yield engine
    finally:
        engine.dispose()


def _seed(engine: Engine) -> None:
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Driver
    from db.stands.models import Stand

    square = Point(-51.2287, -30.0277).buffer(0.0004, cap_style="square")
    with session_scope(engine) as session:
        session.add(
            Stand(
                stand_id=STAND_ID,
                name="Ponto Matriz",
                capacity=3,
                geometry=from_shape(MultiPolygon([square]), srid=4326),
            )
        )
        session.add(Driver(driver_id="D1", name="Condutor Fictício Um", synthetic=True))
        session.flush()
        for role, username in WEB_USERS.items():
            accounts.create_user(
                session=session,
                username=username,
                password=WEB_PASSWORD,
                role=role,
                full_name=f"Pessoa {role}",
                stand_ids=[STAND_ID] if role == "supervisor" else (),
            )
        accounts.create_device(
            session=session,
            registered_at=DEVICE_SINCE,
            vehicle_id="SEED-1",
            label="Rastreador semeado",
        )
    seed_fiscal(engine)  # the Fiscalização pages' records (tests/web_fiscal.py)


@pytest.fixture(scope="session")
def web_server(
    web_database_url: str, web_engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    """A real ``pontual serve`` on 127.0.0.1 over the seeded database (login limit lifted)."""
    folder = tmp_path_factory.mktemp("web-serve")
    server = ServeProcess(
        database_url=web_database_url, data_dir=folder, log_path=folder / "serve.log"
    )
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_user(web_engine: Engine) -> Callable[..., str]:
    """Return ``make(role, stand_ids=())``: creates a new user (password WEB_PASSWORD), its name."""
    from api import accounts
    from db.engine import session_scope

    def make(role: str, stand_ids: tuple[str, ...] = ()) -> str:
        if role == "supervisor" and not stand_ids:
            stand_ids = (STAND_ID,)
        username = f"web_{role}_{os.getpid()}_{next(_counter)}"
        with session_scope(web_engine) as session:
            accounts.create_user(
                session=session,
                username=username,
                password=WEB_PASSWORD,
                role=role,
                stand_ids=stand_ids,
            )
        return username

    return make


@pytest.fixture
def web_client(web_server: ServeProcess) -> Iterator[Callable[..., httpx.Client]]:
    """Return ``connect(role_or_username, password=WEB_PASSWORD)``: a logged-in httpx client."""
    clients: list[httpx.Client] = []

    def connect(who: str, password: str = WEB_PASSWORD) -> httpx.Client:
        client = http_login(web_server.url, WEB_USERS.get(who, who), password)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture
def anon_client(web_server: ServeProcess) -> Iterator[httpx.Client]:
    """An httpx client of the server with no session (redirects not followed)."""
    with httpx.Client(base_url=web_server.url, follow_redirects=False, timeout=30) as client:
        yield client


def _is_csp_violation(text: str) -> bool:
    return "Content Security Policy" in text or "Content-Security-Policy" in text


@pytest.fixture
def open_page(
    browser: Any, web_server: ServeProcess, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """Return ``open_page(width=1280, height=800, **context_options)``: a new page on the server.

    Requests to any other origin are aborted; they, CSP violations and uncaught script errors
    fail the test at teardown.
    """
    contexts: list[Any] = []
    problems: list[str] = []

    def route(route: Any) -> None:
        if route.request.url.startswith(web_server.url + "/"):
            route.continue_()
        else:
            problems.append(f"request outside the server: {route.request.url}")
            route.abort()

    def open_(width: int = 1280, height: int = 800, **options: Any) -> Any:
        options.setdefault("locale", "pt-BR")  # the users' browsers: dates as dd/mm/aaaa
        context = browser.new_context(
            base_url=web_server.url, viewport={"width": width, "height": height}, **options
        )
        contexts.append(context)
        context.route("**/*", route)
        page = context.new_page()
        page.on(
            "console",
            lambda m: problems.append(f"CSP: {m.text}") if _is_csp_violation(m.text) else None,
        )
        page.on("pageerror", lambda e: problems.append(f"script error: {e}"))
        return page

    yield open_
    failed = getattr(request.node, "report_call", None)
    if failed is not None and failed.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        for c, context in enumerate(contexts):
            for k, page in enumerate(context.pages):
                page.screenshot(path=str(ARTIFACTS / f"web-{request.node.name}-{c}-{k}.png"))
    for context in contexts:
        context.close()
    assert not problems, "\n".join(problems)


@pytest.fixture
def page(open_page: Callable[..., Any]) -> Any:
    """A 1280×800 page whose relative URLs go to the server (``page.goto("/entrar")``)."""
    return open_page()


@pytest.fixture
def login() -> Callable[..., Any]:
    """Return ``login(page, role_or_username, password=…)`` (:func:`web_helpers.login`)."""
    return login_page
