"""The public stands search says when it lists only the nearest stands (its limit).

Before: with more stands in the radius than the limit (200), the answer listed 200 with
``count: 200`` and nothing telling that more stands were there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text

from api.routes.public import MAX_STANDS

AT = (-10.0, -40.0)
"""A place no other test's stands are near."""
PREFIX = "TRUNC"


@pytest.fixture(scope="module")
def many_stands(api_engine: Engine) -> Iterator[int]:
    """More stands than the limit within 5 km of :data:`AT` (a grid 200 m apart); removed after."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from db.engine import session_scope
    from db.stands.models import Stand

    n = MAX_STANDS + 25
    with session_scope(api_engine) as session:
        for k in range(n):
            lat, lon = AT[0] + (k // 15) * 0.002, AT[1] + (k % 15) * 0.002
            shape = Point(lon, lat).buffer(0.0002, cap_style="square")
            geometry = from_shape(MultiPolygon([shape]), srid=4326)
            session.add(Stand(stand_id=f"{PREFIX}{k:03d}", name=f"Ponto {k}", geometry=geometry))
    yield n
    with api_engine.begin() as conn:
        conn.execute(text("DELETE FROM stands WHERE stand_id LIKE :p"), {"p": f"{PREFIX}%"})


def _stands(client: Any, radius_m: float) -> dict[str, Any]:
    params = {"lat": AT[0], "lon": AT[1], "radius_m": radius_m}
    answer = client.get("/api/v1/public/stands", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


class TestStandsNear:
    def test_more_than_the_limit_is_said(self, client: Any, many_stands: int) -> None:
        """225 stands within 5 km: the nearest 200, ``truncated`` true and the ``limit`` given."""
        body = _stands(client, 5000)
        assert (body["count"], body["limit"], body["truncated"]) == (MAX_STANDS, MAX_STANDS, True)
        assert len(body["data"]) == MAX_STANDS
        distances = [s["distance_m"] for s in body["data"]]
        assert distances == sorted(distances)

    def test_within_the_limit_is_not_truncated(self, client: Any, many_stands: int) -> None:
        """A radius holding fewer stands than the limit lists them all, ``truncated`` false."""
        body = _stands(client, 300)
        assert 0 < body["count"] < MAX_STANDS and body["truncated"] is False
