"""Fixtures of the HTTP API tests: a database of their own (the app commits), an app, a client.

The app commits what it is sent (that is the point of an acknowledged write), so these tests do
not share the suite's database: they get a fresh migrated one, dropped at the end.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from api_factories import DEVICE_SINCE, PASSWORD, ROLES, SECRET_KEY
from factories import migrated_database
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
    with migrated_database(database_url, prefix="pontual_api") as url:
        yield url


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

    settings = Settings(
        public_rate_limit_per_min=10_000, login_rate_limit_per_min=10_000, secret_key=SECRET_KEY
    )
    return create_app(engine=api_engine, settings=settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    """A test client of the app (errors come back as responses, never raised)."""
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def seeded(api_engine: Engine) -> dict[str, object]:
    """Registry, stands, licences, a finding, a device and one user per role in the API database.

    Returns a dict: ``tokens`` (role → bearer token), ``device_token`` (of vehicle V1),
    ``other_device_token`` (of V2).
    """
    import datetime as dt

    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from api import accounts
    from db.enforcement.models import Finding
    from db.engine import session_scope
    from db.fleet.models import PermitHolder, Vehicle
    from db.stands.models import ParkingLicence, Stand

    def square(lat: float, lon: float) -> object:
        poly = Point(lon, lat).buffer(0.0004, cap_style="square")
        return from_shape(MultiPolygon([poly]), srid=4326)

    with session_scope(api_engine) as session:
        session.add_all(
            [
                Stand(
                    stand_id="S1",
                    name="Ponto Matriz",
                    capacity=3,
                    geometry=square(-30.0277, -51.2287),
                    phone="51 3333-0000",
                ),
                Stand(
                    stand_id="S2",
                    name="Ponto Rodoviária",
                    capacity=5,
                    geometry=square(-30.0200, -51.2200),
                ),
            ]
        )
        holder = PermitHolder(name="Maria da Silva", cpf="12345678901", phone="51 99999-0000")
        session.add(holder)
        session.flush()
        session.add_all(
            [
                Vehicle(
                    vehicle_id="V1",
                    prefixo="V1",
                    plate="ABC1D23",
                    accessible=True,
                    holder_id=holder.holder_id,
                ),
                Vehicle(vehicle_id="V2", prefixo="V2", plate="XYZ9K87", accessible=False),
                Vehicle(
                    vehicle_id="V3",
                    prefixo="V3",
                    plate="QWE4R56",
                    accessible=True,
                    substitution_since=dt.date(2024, 3, 1),
                    substituted_plate="JKL7M89",
                    service_category="aeroporto",
                ),
            ]
        )
        session.flush()
        session.add(ParkingLicence(vehicle_id="V1", stand_id="S1"))
        now = dt.datetime.now(dt.UTC)
        session.add(
            Finding(
                finding_id="F1",
                kind="tracking_gap",
                vehicle_id="V1",
                stand_id=None,
                started_at=now - dt.timedelta(hours=2),
                ended_at=now - dt.timedelta(hours=1),
                confidence=0.9,
                details={"gap_s": 3600, "still": False, "after_ride": False},
                geometry=from_shape(Point(-51.2287, -30.0277), srid=4326),
            )
        )
        tokens = {}
        for role in ROLES:
            user = accounts.create_user(
                session=session,
                username=f"u_{role}",
                password=PASSWORD,
                role=role,
                full_name=f"Pessoa {role}",
                stand_ids=["S1"] if role == "supervisor" else (),
            )
            tokens[role], _ = accounts.issue_token(session=session, user=user, ttl_s=3600)
        _, device_token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id="V1"
        )
        _, other_device_token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id="V2"
        )
    return {
        "tokens": tokens,
        "device_token": device_token,
        "other_device_token": other_device_token,
    }
