"""Tests of api.routes.public: citizen endpoints, no personal data, coarse positions, rate limit."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from api_factories import DEVICE_SINCE, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.main import create_app
from api.routes.public import published_instant
from api.settings import Settings
from geo.h3 import cell_polygons, latlng_to_cells, snap_to_cell_centres

# Every personal or identifying value of the seeded registry and fixes.
PERSONAL = (
    "V1",
    "V2",
    "V3",
    "ABC1D23",
    "XYZ9K87",
    "QWE4R56",
    "Maria",
    "12345678901",
    "99999-0000",
    "D-77",
)
EXACT_LAT, EXACT_LON = -30.02771234, -51.22874321


@pytest.fixture
def free_accessible_taxis(client: TestClient, seeded: dict, api_engine: Engine) -> Iterator[None]:
    """V1 (accessible) free at an exact spot inside S1 a minute before the published instant,
    with a driver id; the fix is removed afterwards (the session's other tests count who is at
    S1)."""
    fix = {
        "timestamp": (published_instant() - dt.timedelta(seconds=61)).isoformat(),
        "lat": EXACT_LAT,
        "lon": EXACT_LON,
        "meter": "free",
        "driver_id": "D-77",
    }
    sent = client.post(
        "/api/v1/pings", json={"pings": [fix]}, headers=bearer(seeded["device_token"])
    )
    assert sent.json()["accepted"] == 1, sent.text
    yield
    with api_engine.begin() as conn:
        conn.execute(
            text("DELETE FROM fixes WHERE vehicle_id = 'V1' AND lat = :lat AND lon = :lon"),
            {"lat": EXACT_LAT, "lon": EXACT_LON},
        )


def _no_personal_data(payload: object) -> None:
    dumped = json.dumps(payload, ensure_ascii=False)
    for value in PERSONAL:
        assert value not in dumped, value
    assert str(EXACT_LAT)[:9] not in dumped


class TestAccessibleTaxis:
    def test_free_accessible_taxi_found_coarsely(
        self, client: TestClient, free_accessible_taxis: None
    ) -> None:
        """The free accessible taxi is counted in its ≈ 0.7 km² area; no identity, no cell of
        its own (the area of its ≈ 120 m cell's centre)."""
        response = client.get(
            "/api/v1/public/accessible-taxis",
            params={"lat": -30.03, "lon": -51.23, "radius_m": 2000},
        )
        assert response.status_code == 200
        body = response.json()
        assert body["count"] >= 1
        area = body["data"][0]
        assert set(area) == {"index", "cell", "position", "distance_m", "count", "last_seen_min"}
        _, flat, flon = snap_to_cell_centres([EXACT_LAT], [EXACT_LON], resolution=10)
        cells, lat, lon = snap_to_cell_centres(flat, flon, resolution=8)
        assert area["cell"] == format(int(cells[0]), "x")
        assert area["position"] == {"lat": round(lat[0], 6), "lon": round(lon[0], 6)}
        assert area["count"] >= 1
        assert area["distance_m"] % 100 == 0
        assert area["last_seen_min"] % 5 == 0
        assert body["cell_resolution"] == 8
        assert body["taxis"] >= area["count"]
        _no_personal_data(body)

    def test_radius_over_limit_is_422(self, client: TestClient) -> None:
        """A radius above the configured maximum is refused."""
        response = client.get(
            "/api/v1/public/accessible-taxis", params={"lat": -30, "lon": -51, "radius_m": 1e9}
        )
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"
        just_over = client.get(
            "/api/v1/public/accessible-taxis",
            params={"lat": -30, "lon": -51, "radius_m": "5000.0000001"},
        )
        assert "radius_m 5000.0000001 acima do máximo de 5000 m" in just_over.text


class TestStandsNear:
    def test_stands_with_accessible_supply(
        self, client: TestClient, free_accessible_taxis: None
    ) -> None:
        """S1 is listed with the free accessible taxi at it; nothing personal."""
        body = client.get(
            "/api/v1/public/stands", params={"lat": -30.0277, "lon": -51.2287, "radius_m": 500}
        ).json()
        s1 = next(s for s in body["data"] if s["stand_id"] == "S1")
        assert s1["accessible_free_at_stand"] >= 1
        assert "phone" not in s1
        _no_personal_data(body)


class TestPublicRateLimit:
    def test_429_with_retry_after(self, api_engine: object) -> None:
        """Over the per-IP limit the answer is 429 with Retry-After."""
        app = create_app(engine=api_engine, settings=Settings(public_rate_limit_per_min=2))  # type: ignore[arg-type]
        with TestClient(app, raise_server_exceptions=False) as c:
            params = {"lat": -30.0, "lon": -51.0, "radius_m": 100}
            codes = [c.get("/api/v1/public/stands", params=params).status_code for _ in range(3)]
            last = c.get("/api/v1/public/stands", params=params)
        assert codes == [200, 200, 429]
        assert last.status_code == 429
        assert int(last.headers["Retry-After"]) >= 1
        assert last.json()["error"]["code"] == "rate_limited"


# --- the privacy grid: a binary-search attack on radius_m ------------------------------------

TARGET = (-29.6800, -51.4000)
"""An area of its own (40 km from the other tests' taxis): only the test's taxi is there."""
ANCHORS_M = ((2500.0, 0.0), (0.0, 2600.0), (-1800.0, -1900.0))
"""Anchor points of the attack, (north, east) metres from the target."""
M_PER_DEG = 111_195.0
COS_LAT = float(np.cos(np.radians(TARGET[0])))


def _offset(lat: float, lon: float, north_m: float, east_m: float) -> tuple[float, float]:
    return (
        lat + north_m / M_PER_DEG,
        lon + east_m / (M_PER_DEG * np.cos(np.radians(lat))),
    )


def _same_cell_pair() -> tuple[tuple[float, float], tuple[float, float], float]:
    """Two positions near opposite vertices of the target's cell, and their distance (m)."""
    cell = latlng_to_cells([TARGET[0]], [TARGET[1]], resolution=10)
    hexagon = cell_polygons(cell)[0]
    (clon, clat), ring = hexagon.centroid.coords[0], hexagon.exterior.coords
    a = (clat + 0.85 * (ring[0][1] - clat), clon + 0.85 * (ring[0][0] - clon))
    b = (clat + 0.85 * (ring[3][1] - clat), clon + 0.85 * (ring[3][0] - clon))
    both = latlng_to_cells([a[0], b[0]], [a[1], b[1]], resolution=10)
    assert (both == cell[0]).all()  # the premise: one cell
    gap_m = float(np.hypot((a[0] - b[0]) * M_PER_DEG, (a[1] - b[1]) * M_PER_DEG * COS_LAT))
    return a, b, gap_m


@pytest.fixture
def lone_taxi(client: TestClient, api_engine: Any) -> Iterator[Any]:
    """A fresh accessible taxi with a device, and a stand whose 500 m circle cuts its cell.

    Yields ``move(lat, lon)``, which sends a newer free fix at that exact position.
    """
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point
    from sqlalchemy import text

    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle
    from db.stands.models import Stand

    vehicle_id = f"PRIV{secrets.token_hex(3).upper()}"
    stand_id = f"PRIV-{vehicle_id}"
    a, b, _ = _same_cell_pair()
    # A stand 500 m from the midpoint of a and b, on their line: the circle passes between.
    mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
    north, east = (b[0] - a[0]) * M_PER_DEG, (b[1] - a[1]) * M_PER_DEG * COS_LAT
    unit = np.array([north, east]) / np.hypot(north, east)
    slat, slon = _offset(*mid, *(unit * 500.0))
    with session_scope(api_engine) as session:
        session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id, accessible=True))
        poly = Point(slon, slat).buffer(0.00005, cap_style="square")
        session.add(
            Stand(
                stand_id=stand_id,
                name="Ponto Privado",
                geometry=from_shape(MultiPolygon([poly]), srid=4326),
            )
        )
        session.flush()
        _, token = accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
        )
    sent = {"n": 0}

    def move(lat: float, lon: float) -> None:
        sent["n"] += 1
        at = published_instant() - dt.timedelta(seconds=120 - sent["n"])
        fix = {"timestamp": at.isoformat(), "lat": lat, "lon": lon, "meter": "free"}
        response = client.post("/api/v1/pings", json={"pings": [fix]}, headers=bearer(token))
        assert response.json()["accepted"] == 1, response.text

    yield move
    with session_scope(api_engine) as session:
        session.execute(text("DELETE FROM stands WHERE stand_id = :s"), {"s": stand_id})
        session.execute(
            text("UPDATE vehicles SET accessible = false WHERE vehicle_id = :v"), {"v": vehicle_id}
        )


def _listed(client: TestClient, lat: float, lon: float, radius_m: float) -> bool:
    body = client.get(
        "/api/v1/public/accessible-taxis", params={"lat": lat, "lon": lon, "radius_m": radius_m}
    ).json()
    return body["count"] > 0


def _attack(client: TestClient) -> tuple[float, float]:
    """Binary-search radius_m from three anchors, then trilaterate: the attacker's estimate."""
    distances = []
    for north, east in ANCHORS_M:
        lat, lon = _offset(*TARGET, north, east)
        low, high = 0.0, 5000.0
        while high - low > 0.01:  # the smallest radius that still lists the taxi
            mid = (low + high) / 2
            low, high = (low, mid) if _listed(client, lat, lon, mid) else (mid, high)
        distances.append(high)
    # Plane around the target (metres): |p - a_i|² = d_i²; subtract the first equation.
    anchors = np.array(ANCHORS_M)
    d = np.array(distances)
    lhs = 2 * (anchors[1:] - anchors[0])
    rhs = (d[0] ** 2 - d[1:] ** 2) + (anchors[1:] ** 2).sum(axis=1) - (anchors[0] ** 2).sum()
    north, east = np.linalg.solve(lhs, rhs)
    return _offset(*TARGET, float(north), float(east))


def _error_m(estimate: tuple[float, float], truth: tuple[float, float]) -> float:
    north = (estimate[0] - truth[0]) * M_PER_DEG
    east = (estimate[1] - truth[1]) * M_PER_DEG * COS_LAT
    return float(np.hypot(north, east))


def _answers(client: TestClient) -> list[Any]:
    """Answers to a fixed set of public queries around the target (ages left out)."""
    out = []
    for north, east in ((0, 0), (40, -30), (300, 300), *ANCHORS_M):
        lat, lon = _offset(*TARGET, north, east)
        for radius in (50, 120, 260.5, 999, 2700, 5000):
            params = {"lat": lat, "lon": lon, "radius_m": radius}
            taxis = client.get("/api/v1/public/accessible-taxis", params=params).json()
            for taxi in taxis["data"]:
                taxi.pop("last_seen_min")
            stands = client.get("/api/v1/public/stands", params=params).json()
            out.append(
                (params, taxis, [s for s in stands["data"] if s["stand_id"].startswith("PRIV")])
            )
    return out


class TestPublishedInstant:
    def test_answers_describe_the_fleet_at_whole_five_minutes(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A fix after the published instant waits for the next window: polling cannot time a
        pickup or a drop-off closer than five minutes."""
        from sqlalchemy.orm import Session

        from api.routes.public import free_taxi_cells

        at = published_instant(dt.datetime(2026, 12, 7, 10, 44, 59, 999, tzinfo=dt.UTC))
        assert at == dt.datetime(2026, 12, 7, 10, 40, tzinfo=dt.UTC)
        window = published_instant()
        lat, lon = -30.0312345, -51.2234567
        fix = {"timestamp": (window + dt.timedelta(seconds=1)).isoformat(), "lat": lat,
               "lon": lon, "meter": "free"}  # fmt: skip
        sent = client.post(
            "/api/v1/pings", json={"pings": [fix]}, headers=bearer(seeded["device_token"])
        )
        assert sent.json()["accepted"] == 1, sent.text
        try:
            with Session(api_engine) as session:
                seen = {
                    w: free_taxi_cells(session, recent_s=600, now=w)[3]
                    for w in (window, window + dt.timedelta(minutes=5))
                }
            later = fix["timestamp"]
            assert all(ts.isoformat() != later for ts in seen[window])
            assert any(ts.isoformat() == later for ts in seen[window + dt.timedelta(minutes=5)])
        finally:
            with api_engine.begin() as conn:
                conn.execute(
                    text("DELETE FROM fixes WHERE vehicle_id = 'V1' AND lat = :lat"), {"lat": lat}
                )


class TestPrivacyGrid:
    def test_binary_search_attack_learns_no_more_than_the_cell(
        self, client: TestClient, lone_taxi: Any
    ) -> None:
        """The radius attack gives one estimate for two positions ~120 m apart in one cell,
        so it misses one of them by at least half that; it found them to 0.01 m before."""
        a, b, gap_m = _same_cell_pair()
        lone_taxi(*a)
        estimate_a = _attack(client)
        lone_taxi(*b)
        estimate_b = _attack(client)
        assert _error_m(estimate_a, estimate_b) < 1.0  # the attacker cannot tell them apart
        worst = max(_error_m(estimate_a, a), _error_m(estimate_b, b))
        assert gap_m > 100.0
        assert worst >= gap_m / 2 - 1.0

    def test_answers_identical_for_two_positions_in_one_cell(
        self, client: TestClient, lone_taxi: Any
    ) -> None:
        """Every answer (taxis, distances, a stand's supply whose 500 m circle passes between
        the two positions) is the same wherever the taxi is in its cell."""
        a, b, _ = _same_cell_pair()
        lone_taxi(*a)
        first = _answers(client)
        lone_taxi(*b)
        second = _answers(client)
        assert any(taxis["count"] for _, taxis, _ in first)  # the taxi is seen at all
        assert any(stands for *_, stands in first)
        assert first == second
