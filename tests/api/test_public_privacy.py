"""Public accessible taxis are counts per coarse area: polling cannot find a trip's ends.

Before, each free accessible taxi was listed with its ≈ 120 m cell and its age in minutes:
polling showed the cell where a taxi vanished (the pickup) and where it came back (the
drop-off). Now a response lists areas (H3 resolution 8, ≈ 0.7 km²) with a count and an age
rounded down to 5 minutes, and nothing per taxi.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from api_factories import DEVICE_SINCE, bearer
from fastapi.testclient import TestClient

from api.routes.public import published_instant
from geo.h3 import cells_to_strings, latlng_to_cells, snap_to_cell_centres

HOME = (-29.7500, -51.1500)
"""An area of its own (tens of km from the other tests' taxis)."""
M_PER_DEG = 111_195.0
AREA_FIELDS = {"index", "cell", "position", "distance_m", "count", "last_seen_min"}
PER_TAXI = {"vehicle_id", "prefixo", "plate", "driver_id", "taxi", "id", "ts", "timestamp"}


def _area_of(lat: float, lon: float) -> str:
    _, flat, flon = snap_to_cell_centres([lat], [lon], resolution=10)
    cells, _, _ = snap_to_cell_centres(flat, flon, resolution=8)
    return str(cells_to_strings(cells)[0])


def _two_far_points_in_one_area() -> tuple[tuple[float, float], tuple[float, float]]:
    """Two points ≈ 300 m apart, in different ≈ 120 m cells but the same coarse area."""
    cells, clat, clon = snap_to_cell_centres([HOME[0]], [HOME[1]], resolution=8)
    east = 150.0 / (M_PER_DEG * np.cos(np.radians(clat[0])))
    a, b = (float(clat[0]), float(clon[0]) - east), (float(clat[0]), float(clon[0]) + east)
    fine = latlng_to_cells([a[0], b[0]], [a[1], b[1]], resolution=10)
    assert fine[0] != fine[1]  # the premise: distinct fine cells, one area
    assert _area_of(*a) == _area_of(*b) == format(int(cells[0]), "x")
    return a, b


@pytest.fixture
def taxis(client: TestClient, api_engine: Any) -> Iterator[Callable[..., None]]:
    """Two fresh accessible taxis with devices; yields ``move(k, lat, lon, age_s)``."""
    from sqlalchemy import text

    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    ids = [f"PRIVA{secrets.token_hex(3).upper()}" for _ in range(2)]
    tokens = []
    with session_scope(api_engine) as session:
        for vehicle_id in ids:
            session.add(Vehicle(vehicle_id=vehicle_id, prefixo=vehicle_id, accessible=True))
        session.flush()
        for vehicle_id in ids:
            tokens.append(
                accounts.create_device(
                    session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle_id
                )[1]
            )
    sent = {"n": 0}

    def move(k: int, lat: float, lon: float, age_s: float = 60.0, meter: str = "free") -> None:
        sent["n"] += 1  # a newer fix each time, whatever the age asked
        # ages from the instant the answers describe (api.routes.public.published_instant)
        at = published_instant() - dt.timedelta(seconds=age_s - sent["n"] * 1e-3)
        fix = {"timestamp": at.isoformat(), "lat": lat, "lon": lon, "meter": meter}
        response = client.post("/api/v1/pings", json={"pings": [fix]}, headers=bearer(tokens[k]))
        assert response.json()["accepted"] == 1, response.text

    yield move
    with session_scope(api_engine) as session:
        session.execute(
            text("UPDATE vehicles SET accessible = false WHERE vehicle_id = ANY(:v)"), {"v": ids}
        )


def _near_home(client: TestClient) -> dict[str, Any]:
    response = client.get(
        "/api/v1/public/accessible-taxis",
        params={"lat": HOME[0], "lon": HOME[1], "radius_m": 3000},
    )
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


class TestCoarseAreas:
    def test_two_taxis_in_one_area_are_one_count(
        self, client: TestClient, taxis: Callable[..., None]
    ) -> None:
        """Two taxis 300 m apart in one area: one entry counting 2, at resolution 8, with
        nothing per taxi; ages rounded down to 5 minutes (3 and 7 min → 0)."""
        a, b = _two_far_points_in_one_area()
        taxis(0, *a, age_s=7 * 60)
        taxis(1, *b, age_s=3 * 60)
        body = _near_home(client)
        assert body["cell_resolution"] == 8
        assert body["age_step_min"] == 5
        assert body["count"] == 1
        assert body["taxis"] == 2
        (area,) = body["data"]
        assert set(area) == AREA_FIELDS
        assert not PER_TAXI & set(area)
        assert area["cell"] == _area_of(*a)
        assert area["count"] == 2
        assert area["last_seen_min"] == 0
        cells, lat, lon = snap_to_cell_centres([a[0]], [a[1]], resolution=8)
        assert area["position"] == {"lat": round(lat[0], 6), "lon": round(lon[0], 6)}

    def test_ages_are_five_minute_buckets(
        self, client: TestClient, taxis: Callable[..., None]
    ) -> None:
        """A lone taxi seen 7 min ago shows as 5 min; 9 min as 5; never the exact minute."""
        a, _ = _two_far_points_in_one_area()
        taxis(0, *a, age_s=7 * 60 + 10)
        assert _near_home(client)["data"][0]["last_seen_min"] == 5
        taxis(0, *a, age_s=9 * 60 + 10)
        assert _near_home(client)["data"][0]["last_seen_min"] == 5

    def test_where_a_taxi_stops_in_its_area_is_not_recoverable(
        self, client: TestClient, taxis: Callable[..., None]
    ) -> None:
        """A taxi dropping a passenger at one end of its area or at the other (300 m apart,
        distinct ≈ 120 m cells): identical answers from several search points and radii."""
        a, b = _two_far_points_in_one_area()

        def answers() -> list[Any]:
            out = []
            for dlat in (-0.01, 0.0, 0.004):
                for radius in (500, 1000, 2500):
                    out.append(
                        client.get(
                            "/api/v1/public/accessible-taxis",
                            params={"lat": HOME[0] + dlat, "lon": HOME[1], "radius_m": radius},
                        ).json()
                    )
            return out

        taxis(0, *a, age_s=60)
        first = answers()
        taxis(0, *b, age_s=60)
        second = answers()
        assert any(body["count"] for body in first)
        assert first == second

    def test_occupied_taxi_vanishes_from_its_area_count_only(
        self, client: TestClient, taxis: Callable[..., None]
    ) -> None:
        """With two taxis in one area, one taking a passenger only lowers the area's count."""
        a, b = _two_far_points_in_one_area()
        taxis(0, *a, age_s=60)
        taxis(1, *b, age_s=60)
        before = _near_home(client)
        taxis(0, *a, age_s=30, meter="occupied")
        after = _near_home(client)
        assert [d["count"] for d in before["data"]] == [2]
        assert [d["count"] for d in after["data"]] == [1]
        assert before["data"][0]["cell"] == after["data"][0]["cell"]
