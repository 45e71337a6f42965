"""Tests of api.routes.supervision: the supervisor's own stands, and nothing of the others."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from api_factories import bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

DAY = "2024-03-04"
T0 = dt.datetime(2024, 3, 4, 12, 0, tzinfo=dt.UTC)  # 09:00 in Porto Alegre
S1 = (-30.0277, -51.2287)  # centre of the seeded stand S1 (supervisor's)
SUP_STAND = (-30.2000, -51.1000)  # a stand of this module only, far from the seeded ones
URL = "/api/v1/supervision/stands"


def _insert_fixes(conn: object, vehicle: str, at: tuple[float, float], times: list) -> None:
    for ts in times:
        conn.execute(  # type: ignore[attr-defined]
            text(
                "INSERT INTO fixes (vehicle_id, ts, lat, lon, geom, meter, speed_flag, source) "
                "VALUES (:v, :ts, :lat, :lon, ST_Point(:lon, :lat, 4326), 'free', false, 'test') "
                "ON CONFLICT DO NOTHING"
            ),
            {"v": vehicle, "ts": ts, "lat": at[0], "lon": at[1]},
        )


@pytest.fixture(scope="module")
def tracks(seeded: dict, api_engine: Engine) -> Iterator[None]:
    """On 2024-03-04, V1 (licensed) and SUP-X (not) wait at S1; now, SUP-Y waits at SUP1."""
    from geoalchemy2.shape import from_shape
    from shapely.geometry import MultiPolygon, Point

    from db.engine import session_scope
    from db.stands.models import Stand

    square = Point(SUP_STAND[1], SUP_STAND[0]).buffer(0.0004, cap_style="square")
    with session_scope(api_engine) as session:
        if session.get(Stand, "SUP1") is None:
            session.add(
                Stand(
                    stand_id="SUP1", name="Ponto Supervisão", capacity=1, kind="fixo",
                    geometry=from_shape(MultiPolygon([square]), srid=4326),
                )
            )  # fmt: skip
        conn = session.connection()
        minutes = [T0 + dt.timedelta(minutes=m) for m in range(0, 30)]
        _insert_fixes(conn, "V1", S1, minutes)
        _insert_fixes(conn, "SUP-X", S1, minutes[5:20])
        now = dt.datetime.now(dt.UTC)
        _insert_fixes(
            conn, "SUP-Y", SUP_STAND, [now - dt.timedelta(seconds=s) for s in (600, 300, 5)]
        )
        _insert_fixes(conn, "SUP-Z", SUP_STAND, [now - dt.timedelta(seconds=s) for s in (200, 5)])
    yield


def _get(client: TestClient, seeded: dict, role: str, path: str) -> object:
    return client.get(URL + path, headers=bearer(seeded["tokens"][role]))


class TestMyStands:
    def test_supervisor_lists_only_own_stands(self, client: TestClient, seeded: dict) -> None:
        """A supervisor's list is S1 with its licensee count; an admin's has every stand."""
        body = _get(client, seeded, "supervisor", "").json()  # type: ignore[attr-defined]
        assert [(s["stand_id"], s["licensees"]) for s in body["data"]] == [("S1", 1)]
        admin = _get(client, seeded, "admin", "").json()  # type: ignore[attr-defined]
        assert {"S1", "S2"} <= {s["stand_id"] for s in admin["data"]}


class TestStandQueue:
    def test_queue_now_with_overflow(self, client: TestClient, seeded: dict, tracks: None) -> None:
        """SUP1 (1 space) has SUP-Y then SUP-Z now: overflow, both without licence."""
        body = _get(client, seeded, "admin", "/SUP1/occupancy").json()  # type: ignore[attr-defined]
        assert [(v["position"], v["vehicle_id"]) for v in body["vehicles"]] == [
            (1, "SUP-Y"), (2, "SUP-Z"),
        ]  # fmt: skip
        assert (body["overflow"], body["intruders"], body["capacity"]) == (True, 2, 1)

    def test_other_stand_forbidden(self, client: TestClient, seeded: dict, tracks: None) -> None:
        """The supervisor of S1 gets 403 for SUP1 and S2, on every route; unknown is 404."""
        for stand in ("SUP1", "S2"):
            for route in ("occupancy", "intruders", "presence", "licensees"):
                response = _get(client, seeded, "supervisor", f"/{stand}/{route}")
                assert response.status_code == 403, (stand, route)  # type: ignore[attr-defined]
        assert _get(client, seeded, "admin", "/NOPE/occupancy").status_code == 404  # type: ignore[attr-defined]


class TestStandIntruders:
    def test_intruder_visit(self, client: TestClient, seeded: dict, tracks: None) -> None:
        """On 2024-03-04 SUP-X is S1's only intruder; the licensed V1 is not."""
        response = _get(client, seeded, "supervisor", f"/S1/intruders?start={DAY}&end={DAY}")
        body = response.json()  # type: ignore[attr-defined]
        assert [v["vehicle_id"] for v in body["data"]] == ["SUP-X"]
        assert body["data"][0]["dwell_s"] == 14 * 60

    def test_bad_period(self, client: TestClient, seeded: dict) -> None:
        """An inverted or too long period is 422."""
        for query in ("?start=2024-03-05&end=2024-03-04", "?start=2024-01-01&end=2024-12-31"):
            response = _get(client, seeded, "supervisor", f"/S1/intruders{query}")
            assert response.status_code == 422  # type: ignore[attr-defined]

    def test_days_beyond_what_pandas_holds(self, client: TestClient, seeded: dict) -> None:
        """Days in year 9999 or 0001 are 422, never 500, on every view taking a period."""
        for view in ("intruders", "presence"):
            for query in ("?start=9999-12-30&end=9999-12-31", "?start=0001-01-01&end=0001-01-02"):
                response = _get(client, seeded, "supervisor", f"/S1/{view}{query}")
                assert response.status_code == 422, (view, query)  # type: ignore[attr-defined]

    def test_a_bare_number_is_not_a_day(self, client: TestClient, seeded: dict) -> None:
        """A number is not read as Unix time (1709510400 is 2024-03-04 00:00 UTC): 422."""
        response = _get(client, seeded, "supervisor", "/S1/intruders?start=1709510400")
        assert response.status_code == 422  # type: ignore[attr-defined]
        assert "AAAA-MM-DD" in response.text  # type: ignore[attr-defined]


class TestStandPresence:
    def test_licensee_presence(self, client: TestClient, seeded: dict, tracks: None) -> None:
        """V1 operated and was present at S1 on the day; the intruder is not a licensee."""
        response = _get(client, seeded, "supervisor", f"/S1/presence?start={DAY}&end={DAY}")
        body = response.json()  # type: ignore[attr-defined]
        assert [(d["vehicle_id"], d["operated"], d["present"]) for d in body["days"]] == [
            ("V1", True, True)
        ]
        assert body["summary"][0]["days_present"] == 1
        assert "first_seen_lat" not in body["days"][0]


class TestStandLicensees:
    def test_contacts_audited(self, client: TestClient, seeded: dict, api_engine: Engine) -> None:
        """S1's list has V1's holder with phone; the read is in the audit log."""
        response = _get(client, seeded, "supervisor", "/S1/licensees")
        body = response.json()  # type: ignore[attr-defined]
        assert [(p["vehicle_id"], p["role"], p["name"], p["phone"]) for p in body["data"]] == [
            ("V1", "autorizatario", "Maria da Silva", "51 99999-0000")
        ]
        with api_engine.connect() as conn:
            entry = conn.execute(
                text("SELECT actor, entity, details FROM audit_log WHERE action = "
                     "'read_personal_data' AND entity = 'stand_licensees' ORDER BY entry_id DESC")
            ).first()  # fmt: skip
        assert entry is not None and entry.actor == "user:u_supervisor"
        assert entry.details["ids"] == ["V1"] and entry.details["route"].endswith("/S1/licensees")
