"""Device ingest at its edges: extreme and old instants, strict types, exact microseconds.

``POST /api/v1/pings`` answers row by row and ``/osmand`` answers 200 for a fix that can never be
accepted (kept in ``rejected_fixes`` with its reason): neither is ever a 500.
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from api_factories import DEVICE_SINCE, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

EXTREME = [
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "1600-01-01T00:00:00+00:00",
    "1677-09-20T00:00:00Z",
    "1677-09-21T00:12:43Z",
    "2262-04-12T00:00:00Z",
]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@pytest.fixture(scope="module")
def edge(api_engine: Engine, seeded: dict) -> dict[str, str]:
    """Two vehicles of this module's own (EDGE1, EDGE2) and their device tokens.

    Their recent fixes stay away from the seeded vehicles, whose latest positions other tests
    read (the public finder, the stand queue).
    """
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    tokens = {}
    with session_scope(api_engine) as session:
        for vehicle in ("EDGE1", "EDGE2"):
            if session.get(Vehicle, vehicle) is None:
                session.add(Vehicle(vehicle_id=vehicle, prefixo=vehicle))
                session.flush()
            tokens[vehicle] = accounts.create_device(
                session=session, registered_at=DEVICE_SINCE, vehicle_id=vehicle
            )[1]
    return tokens


def _post(client: TestClient, token: str, pings: list[dict]) -> dict:
    answer = client.post("/api/v1/pings", json={"pings": pings}, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _rejected_reasons(engine: Engine, source_like: str, marker: str) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT reason FROM rejected_fixes WHERE source LIKE :s "
                    "AND raw->>'driver_id' = :m ORDER BY rejected_id"
                ),
                {"s": source_like, "m": marker},
            ).scalars()
        )


class TestExtremeInstants:
    @pytest.mark.parametrize("timestamp", EXTREME)
    def test_batch_rejects_row_never_500(
        self, client: TestClient, edge: dict[str, str], timestamp: str
    ) -> None:
        """An instant pandas cannot hold is a rejected row (unparseable), not a 500."""
        body = _post(
            client,
            edge["EDGE1"],
            [{"timestamp": timestamp, "lat": -30.03, "lon": -51.22}],
        )
        assert body["results"] == [
            {"row": 1, "status": "rejected", "reason": "unparseable_timestamp"}
        ]

    @pytest.mark.parametrize("timestamp", [*EXTREME, "99999999999999999", "-11676096000", "1e30"])
    def test_osmand_answers_200_and_keeps_the_reason(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine, timestamp: str
    ) -> None:
        """OsmAnd: 200 (the device's queue moves on), the fix kept rejected with its reason."""
        marker = f"x{random.randrange(10**9)}"
        answer = client.get(
            "/osmand",
            params={
                "id": edge["EDGE1"],
                "lat": "-30.03",
                "lon": "-51.22",
                "timestamp": timestamp,
                "driver_id": marker,
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Pontual-Rejected"] == "unparseable_timestamp"
        assert _rejected_reasons(api_engine, "osmand:%", marker) == ["unparseable_timestamp"]


class TestLiveWindow:
    def test_old_and_future_fixes_are_rejected(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """Older than 7 days or beyond now + 5 min: rejected with a reason, no partition made."""
        now = _now()
        old = [now - dt.timedelta(days=d) for d in (8, 30, 365 * 3)]
        rows = [{"timestamp": t.isoformat(), "lat": -30.03, "lon": -51.22} for t in old]
        rows.append({"timestamp": (now + dt.timedelta(minutes=10)).isoformat(), "lat": -30.03,
                     "lon": -51.22})  # fmt: skip
        rows.append({"timestamp": (now - dt.timedelta(days=6)).isoformat(), "lat": -30.031,
                     "lon": -51.22})  # fmt: skip
        body = _post(client, edge["EDGE1"], rows)
        reasons = [r["reason"] for r in body["results"]]
        assert reasons == [*["too_old_timestamp"] * 3, "future_timestamp", None]
        assert body["accepted"] == 1
        with api_engine.connect() as conn:
            names = set(
                conn.execute(
                    text(
                        "SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                        "ON c.oid = i.inhrelid WHERE i.inhparent = 'fixes'::regclass"
                    )
                ).scalars()
            )
        for t in old:
            assert not any(t.strftime("%Y%m%d") in n for n in names), t

    def test_file_import_keeps_history(self, tmp_path, run_pontual, api_database_url) -> None:
        """``pontual import pings`` stores a fix of three years ago (no live window)."""
        then = (_now() - dt.timedelta(days=3 * 365)).replace(microsecond=0)
        csv = tmp_path / "old.csv"
        csv.write_text(f"vehicle_id,timestamp,lat,lon\nHIST1,{then.isoformat()},-30.03,-51.22\n")
        done = run_pontual("import", "pings", str(csv), DATABASE_URL=api_database_url)
        assert done.returncode == 0, done.stderr
        assert "gravados: 1" in done.stdout

    def test_fixes_before_the_device_are_not_its_vehicles(
        self, client: TestClient, api_engine: Engine
    ) -> None:
        """A tracker moved from another car flushes that car's buffer: refused, kept, not stored.

        Only beyond the clock skew allowed (5 min): a fix 2 min before the registration is kept.
        """
        from api import accounts
        from db.engine import session_scope
        from db.fleet.models import Vehicle

        registered = _now() - dt.timedelta(hours=1)
        with session_scope(api_engine) as session:
            if session.get(Vehicle, "EDGE3") is None:
                session.add(Vehicle(vehicle_id="EDGE3", prefixo="EDGE3"))
                session.flush()
            device, token = accounts.create_device(
                session=session, vehicle_id="EDGE3", registered_at=registered
            )
            device_id = device.device_id
        marker = f"b{random.randrange(10**9)}"
        instants = [registered - dt.timedelta(minutes=m) for m in (90, 6, 2, -10)]
        rows = [
            {
                "timestamp": t.isoformat(),
                "lat": -30.03 - i / 1e4,
                "lon": -51.22,
                "driver_id": marker,
            }
            for i, t in enumerate(instants)
        ]
        body = _post(client, token, rows)
        assert [r["reason"] for r in body["results"]] == [*["before_device"] * 2, None, None]
        assert _rejected_reasons(api_engine, "api:%", marker) == ["before_device"] * 2
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT count(*) FROM fixes WHERE vehicle_id = 'EDGE3' AND driver_id = :m"),
                {"m": marker},
            ).scalar_one()
        assert stored == 2
        answer = client.get(
            "/osmand",
            params={
                "id": token,
                "lat": "-30.04",
                "lon": "-51.22",
                "timestamp": str(int((registered - dt.timedelta(days=1)).timestamp())),
                "driver_id": marker,
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Pontual-Rejected"] == "before_device"
        assert _rejected_reasons(api_engine, f"osmand:device:{device_id}", marker) == [
            "before_device"
        ]


class TestStrictTypes:
    def test_bool_and_non_finite_are_rejected_rows(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """``lat: true`` is an invalid coordinate (never 1.0); NaN and Infinity too."""
        t = (_now() - dt.timedelta(minutes=50)).isoformat()
        raw = (
            '{"pings": ['
            f'{{"timestamp": "{t}", "lat": true, "lon": -51.22}},'
            f'{{"timestamp": "{t}", "lat": NaN, "lon": -51.22}},'
            f'{{"timestamp": "{t}", "lat": -30.03, "lon": Infinity}},'
            f'{{"timestamp": "{t}", "lat": -30.03, "lon": -51.22, "speed_kmh": false}}'
            "]}"
        )
        answer = client.post(
            "/api/v1/pings",
            content=raw,
            headers=bearer(edge["EDGE1"]) | {"Content-Type": "application/json"},
        )
        assert answer.status_code == 200, answer.text
        assert [r["reason"] for r in answer.json()["results"]] == [
            "invalid_coordinates",
            "invalid_coordinates",
            "invalid_coordinates",
            "invalid_speed",
        ]

    def test_long_identifiers_are_rejected_rows(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """A driver_id over 64 characters is ``invalid_text`` and kept in the quarantine."""
        t = (_now() - dt.timedelta(minutes=40)).isoformat()
        body = _post(
            client,
            edge["EDGE1"],
            [
                {"timestamp": t, "lat": -30.03, "lon": -51.22, "driver_id": "D" * 65},
                {"timestamp": t, "lat": -30.03, "lon": -51.22, "driver_id": "D" * 64},
            ],
        )
        assert [r["status"] for r in body["results"]] == ["rejected", "accepted"]
        assert body["results"][0]["reason"] == "invalid_text"


class TestExactMicroseconds:
    def test_random_fractional_instants_round_trip(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """Fractional Unix seconds (JSON numbers, JSON text, OsmAnd text) are stored exactly."""
        rng = random.Random(12)
        base = int(_now().timestamp()) - 5 * 86_400
        micros = sorted({base * 10**6 + rng.randrange(4 * 86_400 * 10**6) for _ in range(600)})
        texts = [f"{us // 10**6}.{us % 10**6:06d}" for us in micros]
        number_rows = [
            {"vehicle_id": "EDGE1", "timestamp": float(t), "lat": -30.03, "lon": -51.22,
             "driver_id": "us-exact"}
            for t in texts[:300]
        ]  # fmt: skip
        text_rows = [
            {"timestamp": t, "lat": -30.03, "lon": -51.22, "driver_id": "us-exact"}
            for t in texts[300:550]
        ]
        assert _post(client, edge["EDGE1"], number_rows)["accepted"] == 300
        assert _post(client, edge["EDGE2"], text_rows)["accepted"] == 250
        for t in texts[550:]:
            answer = client.get(
                "/osmand",
                params={"id": edge["EDGE1"], "timestamp": t, "lat": "-30.03",
                        "lon": "-51.22", "driver_id": "us-exact"},
            )  # fmt: skip
            assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        with api_engine.connect() as conn:
            stored = conn.execute(
                text(
                    "SELECT (extract(epoch FROM ts) * 1000000)::int8 FROM fixes "
                    "WHERE driver_id = 'us-exact' ORDER BY ts"
                )
            ).scalars()
            assert list(stored) == micros


TRACCAR_JSON = [  # bodies of OsmAndProtocolDecoderTest.testDecodeJson (traccar/traccar)
    '{"location":{"timestamp":"2025-06-15T13:45:12.862Z","coords":{"latitude":37.4219983,'
    '"longitude":-122.084,"accuracy":5,"speed":0,"heading":-1,"altitude":5},"is_moving":false,'
    '"odometer":0,"event":"motionchange","battery":{"level":1,"is_charging":false},'
    '"activity":{"type":"still"},"extras":{},"_":"&id=48241179&lat=37.4219983&lon=-122.084'
    '&timestamp=2025-06-15T13:45:12.862Z&"},"device_id":"48241179"}',
    '{"location":{"extras":{},"mock":true,"coords":{"speed_accuracy":-1,"speed":-1,'
    '"longitude":-122.406417,"ellipsoidal_altitude":0,"floor":null,"heading_accuracy":-1,'
    '"latitude":37.785834000000001,"accuracy":5,"altitude_accuracy":-1,"altitude":0,'
    '"heading":-1},"is_moving":false,"age":188,"odometer":0,'
    '"uuid":"2FB04C65-99CF-42AB-8DD3-EBCB4B108BF8","event":"motionchange","battery":{"level":-1,'
    '"is_charging":false},"activity":{"type":"unknown","confidence":100},'
    '"timestamp":"2025-05-09T04:11:30.579Z"},"device_id":"658765"}',
    '{"location":{"event":"motionchange","is_moving":false,'
    '"uuid":"0e9a2473-a9a7-4c00-997b-fb97d2154e75","timestamp":"2021-07-21T08:06:34.444Z",'
    '"odometer":0,"coords":{"latitude":-6.1148096,"longitude":106.6837015,"accuracy":3.8,'
    '"speed":18.67,"speed_accuracy":0.26,"heading":63,"heading_accuracy":0.28,"altitude":35.7,'
    '"altitude_accuracy":3.8},"activity":{"type":"still","confidence":100},'
    '"battery":{"is_charging":false,"level":0.79},"extras":{}},"device_id":"8737767034"}',
]
TRACCAR_QUERIES = [  # from OsmAndProtocolDecoderTest.testDecodeQuery, id replaced per test
    "lat=42.06288&lon=-88.23412&timestamp=2016-01-27T18%3A55%3A47Z&hdop=6.0&altitude=224.0"
    "&speed=0.0",
    "lat=42.06288&lon=-88.23412&timestamp=1442068686579&hdop=6.0&altitude=224.0&speed=0.0",
    "lat=49.60688&lon=6.15788&timestamp=2014-06-04+09%3A10%3A11&altitude=384.7&speed=0.0",
    "timestamp=1377177267&lat=60.0&lon=30.0&speed=0.0&bearing=0.0&altitude=0&hdop=0.0",
    "timestamp=1377177267&location=60.0,30.0",
    "timestamp=1504763810&lat=40.7232948571&lon=-74.0061408571&bearing=7.19889788244&speed=40"
    "&ignition=true&rpm=933&fuel=24",
]


def _fix(engine: Engine, vehicle: str, ts: dt.datetime) -> dict | None:
    with engine.connect() as conn:
        row = (
            conn.execute(
                text(
                    "SELECT ts, lat, lon, speed_kmh, heading_deg, accuracy_m, ts_origin, source "
                    "FROM fixes WHERE vehicle_id = :v AND ts = :t"
                ),
                {"v": vehicle, "t": ts},
            )
            .mappings()
            .one_or_none()
        )
    return None if row is None else dict(row)


class TestTraccarClient:
    @pytest.mark.parametrize("body", TRACCAR_JSON)
    def test_json_bodies_of_traccars_tests_are_answered_200(
        self, client: TestClient, edge: dict[str, str], body: str
    ) -> None:
        """Traccar Client 9's JSON (its own tests' bodies): 200, kept as too old (2021-2025)."""
        data = json.loads(body)
        data["device_id"] = edge["EDGE1"]
        answer = client.post("/osmand", json=data)
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Pontual-Rejected"] == "too_old_timestamp"

    def test_json_body_is_stored_with_units(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """A current Traccar Client 9 fix is stored: speed m/s → km/h, heading −1 unknown."""
        data = json.loads(TRACCAR_JSON[2])
        when = (_now() - dt.timedelta(minutes=30)).replace(microsecond=444000)
        data["device_id"] = edge["EDGE1"]
        data["location"]["timestamp"] = when.isoformat().replace("+00:00", "Z")
        data["location"]["coords"] |= {"latitude": -30.03, "longitude": -51.22, "heading": -1}
        answer = client.post("/osmand", json=data)
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        fix = _fix(api_engine, "EDGE1", when)
        assert fix is not None
        assert fix["speed_kmh"] == pytest.approx(18.67 * 3.6)
        assert fix["heading_deg"] is None and fix["accuracy_m"] == 3.8
        assert fix["ts_origin"] is None

    def test_json_batch_of_locations(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """``location`` as a list (batch sync): each one stored."""
        when = _now().replace(microsecond=0) - dt.timedelta(minutes=25)
        locations = [
            {"timestamp": (when + dt.timedelta(seconds=s)).isoformat(),
             "coords": {"latitude": -30.03, "longitude": -51.221, "speed": 1, "heading": 10,
                        "accuracy": 4}}
            for s in (0, 10, 20)
        ]  # fmt: skip
        answer = client.post("/osmand", json={"device_id": edge["EDGE1"], "location": locations})
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        assert all(_fix(api_engine, "EDGE1", when + dt.timedelta(seconds=s)) for s in (0, 10, 20))

    @pytest.mark.parametrize("query", TRACCAR_QUERIES)
    def test_queries_of_traccars_tests_are_answered_200(
        self, client: TestClient, edge: dict[str, str], query: str
    ) -> None:
        """The query forms of Traccar's tests: 200 (their dates are years old: kept as such)."""
        answer = client.post(f"/osmand?id={edge['EDGE1']}&{query}")
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Pontual-Rejected"] == "too_old_timestamp"

    def test_naive_timestamp_is_utc_and_recorded(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """``timestamp=2014-06-04 09:10:11`` form: read as UTC, ``ts_origin = naive_utc``."""
        when = _now().replace(microsecond=0) - dt.timedelta(minutes=20)
        naive = when.strftime("%Y-%m-%d+%H%%3A%M%%3A%S")
        answer = client.post(
            f"/osmand?lat=-30.03&lon=-51.222&timestamp={naive}&altitude=384.7&speed=0.0"
            f"&id={edge['EDGE1']}"
        )
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        fix = _fix(api_engine, "EDGE1", when)
        assert fix is not None and fix["ts_origin"] == "naive_utc"

    def test_missing_timestamp_is_the_receive_time(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """No ``timestamp`` (Traccar's test query with ``deviceid``): dated on receipt."""
        before = _now()
        answer = client.get(
            "/osmand?lat=-30.04&lon=-51.23&speed=0.0&heading=0.0&vacc=0&hacc=0&altitude=0"
            f"&deviceid={edge['EDGE1']}"
        )
        after = _now()
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        with api_engine.connect() as conn:
            ts, origin = conn.execute(
                text(
                    "SELECT ts, ts_origin FROM fixes WHERE vehicle_id = 'EDGE1' AND lat = -30.04 "
                    "AND lon = -51.23"
                )
            ).one()
        assert before <= ts <= after and origin == "received"

    def test_unknown_device_is_401_and_malformed_body_200(
        self, client: TestClient, edge: dict[str, str], api_engine: Engine
    ) -> None:
        """Only an unknown token is an error; a known device's malformed body is kept, 200."""
        assert client.post("/osmand", json=json.loads(TRACCAR_JSON[0])).status_code == 401
        answer = client.post(
            f"/osmand?id={edge['EDGE1']}",
            content=b'{"location": ',
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 200
        assert answer.headers["X-Pontual-Rejected"] == "malformed_request"
        with api_engine.connect() as conn:
            raw = conn.execute(
                text(
                    "SELECT raw FROM rejected_fixes WHERE reason = 'malformed_request' "
                    "ORDER BY rejected_id DESC LIMIT 1"
                )
            ).scalar_one()
        assert raw["body"] == '{"location": '


class TestBatchLimit:
    def test_batch_over_the_limit_is_422(self, client: TestClient, edge: dict[str, str]) -> None:
        """1,001 rows (limit 1,000) are refused whole, naming the limit; nothing is stored."""
        t = (_now() - dt.timedelta(minutes=5)).isoformat()
        rows = [{"timestamp": t, "lat": -30.03, "lon": -51.22}] * 1001
        answer = client.post("/api/v1/pings", json={"pings": rows}, headers=bearer(edge["EDGE1"]))
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "batch_too_large"
