"""Fixtures of the HTTP API tests: a database of their own (the app commits), an app, a client.

The app commits what it is sent (that is the point of an acknowledged write), so these tests do
not share the suite's database: they get a fresh migrated one, dropped at the end.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from sqlalchemy import Engine
from starlette.exceptions import StarletteDeprecationWarning

# Starlette 1.x prefers the httpx2 package for its test client; the lock has httpx, which still
# works. Import it once here, with that one warning silenced (test modules then get the cached
# module).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient


@pytest.fixture(scope="session")
def api_database_url(database_url: str) -> Iterator[str]:
    """URL of a fresh, migrated database for the API tests (dropped at the end)."""
    from db.engine import create_database, drop_database, parse_url
    from db.migrate import upgrade

    name = f"pontual_api_{secrets.token_hex(4)}"
    url = parse_url(database_url).set(database=name).render_as_string(hide_password=False)
    create_database(url)
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(url)


@pytest.fixture(scope="session")
def api_engine(api_database_url: str) -> Iterator[Engine]:
    """Engine on the API tests' database."""
    from db.engine import make_engine

    engine = make_engine(api_database_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def app(api_engine: Engine) -> FastAPI:
    """The application on the API tests' database, with test settings."""
    from api.main import create_app
    from api.settings import Settings

    return create_app(engine=api_engine, settings=Settings(public_rate_limit_per_min=10_000))


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    """A test client of the app (errors come back as responses, never raised)."""
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
