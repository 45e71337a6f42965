"""The citizen page says it shows the nearest stands only when the public search is cut.

Before: with 225 stands within 5 km, /acessivel said "Mostrando 1–20 de 200 pontos", as if
there were 200.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text

from api.routes.public import MAX_STANDS

with warnings.catch_warnings():  # httpx, not httpx2, under the test client (as tests/api)
    from starlette.exceptions import StarletteDeprecationWarning

    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

AT = (-10.0, -40.0)
"""A place no other test's stands are near."""
PREFIX = "TRUNC"


@pytest.fixture(scope="module")
def client(web_engine: Engine) -> Iterator[TestClient]:
    """The app in process on the console's database, more stands than the limit near :data:`AT`
    (removed after)."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from api.main import create_app
    from api.settings import Settings
    from db.engine import session_scope
    from db.stands.models import Stand

    with session_scope(web_engine) as session:
        for k in range(MAX_STANDS + 25):
            lat, lon = AT[0] + (k // 15) * 0.002, AT[1] + (k % 15) * 0.002
            shape = Point(lon, lat).buffer(0.0002, cap_style="square")
            geometry = from_shape(MultiPolygon([shape]), srid=4326)
            session.add(Stand(stand_id=f"{PREFIX}{k:03d}", name=f"Ponto {k}", geometry=geometry))
    settings = Settings(public_rate_limit_per_min=10_000, live_worker=False)
    try:
        with TestClient(create_app(engine=web_engine, settings=settings)) as test_client:
            yield test_client
    finally:
        with web_engine.begin() as conn:
            conn.execute(text("DELETE FROM stands WHERE stand_id LIKE :p"), {"p": f"{PREFIX}%"})


def _results(client: Any, radius_m: int) -> str:
    point = {"lat": str(AT[0]), "lon": str(AT[1]), "raio": str(radius_m), "origem": "mapa"}
    answer = client.get("/acessivel/resultados", params=point)
    assert answer.status_code == 200, answer.text
    return str(answer.text)


class TestCitizenPage:
    def test_cut_answer_says_the_nearest(self, client: Any) -> None:
        """225 stands within 5 km: "os 200 mais próximos", never "de 200 pontos"."""
        html = _results(client, 5000)
        assert f"Pontos de táxi: os {MAX_STANDS} mais próximos" in html
        assert f"Mostrando 1–20 dos {MAX_STANDS} pontos mais próximos" in html
        assert f"de {MAX_STANDS} pontos" not in html

    def test_whole_answer_says_the_count(self, client: Any) -> None:
        """Fewer stands than the limit: the count as before, no "mais próximos"."""
        html = _results(client, 500)
        assert "mais próximos" not in html
        assert "Pontos de táxi: " in html
