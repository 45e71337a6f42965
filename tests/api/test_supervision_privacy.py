"""The supervisor's presence table tells whether a licensee operated, not when nor where.

A supervisor de ponto is a fellow driver. Before: ``/api/v1/supervision/stands/{id}/presence``
gave each licensee's first and last fix of every day anywhere in the city (``first_seen_at``,
``last_seen_at``), i.e. every colleague's working hours over up to 92 days; habitual absence
(POA decree art. 49) needs only whether the vehicle operated and its time at the stand.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest
from api_factories import bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

DAY = "2023-07-12"
S1 = (-30.0277, -51.2287)  # centre of the seeded stand S1, V1's licensed stand
AWAY = (-30.1000, -51.1500)  # far from every stand
EARLY = dt.datetime(2023, 7, 12, 9, 7, 13, tzinfo=dt.UTC)  # 06:07:13 in Porto Alegre
LATE = dt.datetime(2023, 7, 13, 1, 53, 41, tzinfo=dt.UTC)  # 22:53:41 in Porto Alegre
AT_STAND = [dt.datetime(2023, 7, 12, 15, m, tzinfo=dt.UTC) for m in range(20)]


def _insert(conn: object, at: tuple[float, float], times: list[dt.datetime]) -> None:
    for ts in times:
        conn.execute(  # type: ignore[attr-defined]
            text(
                "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, source) "
                "VALUES ('V1', :ts, :lat, :lon, ST_Point(:lon, :lat, 4326), 'free', false, "
                "'test') ON CONFLICT DO NOTHING"
            ),
            {"ts": ts, "lat": at[0], "lon": at[1]},
        )


@pytest.fixture(scope="module")
def working_day(seeded: dict, api_engine: Engine) -> Iterator[None]:
    """V1 drives from 06:07 to 22:53 local, 20 minutes of it at S1 (removed after)."""
    with api_engine.begin() as conn:
        _insert(conn, AWAY, [EARLY, LATE])
        _insert(conn, S1, AT_STAND)
    yield
    with api_engine.begin() as conn:
        conn.execute(
            text("DELETE FROM fixes WHERE vehicle_id = 'V1' AND ts BETWEEN :a AND :b"),
            {"a": EARLY, "b": LATE},
        )


def _presence(client: TestClient, seeded: dict, role: str) -> dict:
    response = client.get(
        f"/api/v1/supervision/stands/S1/presence?start={DAY}&end={DAY}",
        headers=bearer(seeded["tokens"][role]),
    )
    assert response.status_code == 200, response.text
    body: dict = response.json()
    return body


class TestStandPresence:
    @pytest.mark.parametrize("role", ["supervisor", "admin"])
    def test_no_first_or_last_sighting(
        self, client: TestClient, seeded: dict, working_day: None, role: str
    ) -> None:
        """V1 operated and was at S1 for 20 minutes; its first and last fix of the day (away
        from the stand) appear nowhere in the answer, nor any ``*_seen_*`` field."""
        body = _presence(client, seeded, role)
        (day,) = body["days"]
        assert (day["vehicle_id"], day["operated"], day["present"]) == ("V1", True, True)
        assert day["presence_s"] == 19 * 60 and day["n_visits"] == 1
        assert not [k for k in day if "seen" in k]
        text_ = json.dumps(body)
        for instant in (EARLY, LATE):
            assert instant.strftime("%H:%M:%S") not in text_

    def test_openapi_has_no_sighting_fields(self, client: TestClient) -> None:
        """The published schema of a presence day has no first/last-seen field."""
        schema = client.get("/openapi.json").json()["components"]["schemas"]["PresenceDay"]
        assert not [k for k in schema["properties"] if "seen" in k]
