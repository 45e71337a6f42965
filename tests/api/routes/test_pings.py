"""Tests of api.routes.pings: JSON batch ingest, answered per row, idempotent, durable."""

from __future__ import annotations

import datetime as dt

from api_factories import DEVICE_SINCE, bearer
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text


def _iso(minutes_ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).isoformat()


def _stored(engine: Engine, vehicle_id: str, since: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM fixes WHERE vehicle_id = :v AND ts >= :t"),
                {"v": vehicle_id, "t": since},
            ).scalar_one()
        )


class TestPostPings:
    def test_same_batch_twice_is_stored_once(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """Sending a batch twice stores it once; the second answer says 'duplicate'."""
        start = _iso(300)
        batch = {
            "pings": [
                {
                    "vehicle_id": "V1",
                    "timestamp": _iso(300 - i),
                    "lat": -30.03,
                    "lon": -51.23,
                    "meter": "free",
                }
                for i in range(5)
            ]
        }
        headers = bearer(seeded["device_token"])
        first = client.post("/api/v1/pings", json=batch, headers=headers)
        assert first.status_code == 200, first.text
        assert first.json()["accepted"] == 5
        second = client.post("/api/v1/pings", json=batch, headers=headers)
        assert second.json()["duplicates"] == 5
        assert second.json()["accepted"] == 0
        assert _stored(api_engine, "V1", start) >= 5
        assert _stored(api_engine, "V1", start) == 5 + _stored(api_engine, "V1", _iso(294))

    def test_bad_rows_are_reported_and_good_rows_stored(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """Good rows are stored; each bad row comes back with its reason."""
        t0 = _iso(400)
        batch = {
            "pings": [
                {"timestamp": t0, "lat": -30.03, "lon": -51.23},
                {"timestamp": _iso(399), "lat": 0, "lon": 0},
                {"timestamp": "2024-03-04T12:00:00", "lat": -30.03, "lon": -51.23},
                {"vehicle_id": "V2", "timestamp": _iso(398), "lat": -30.03, "lon": -51.23},
                {"timestamp": _iso(397), "lat": "abc", "lon": -51.23},
                {"timestamp": _iso(396), "lat": -30.03, "lon": -51.23, "meter": "busy"},
                {"timestamp": t0, "lat": -30.03, "lon": -51.23},
            ]
        }
        response = client.post("/api/v1/pings", json=batch, headers=bearer(seeded["device_token"]))
        assert response.status_code == 200, response.text
        body = response.json()
        assert [(r["status"], r["reason"]) for r in body["results"]] == [
            ("accepted", None),
            ("rejected", "null_island"),
            ("rejected", "naive_timestamp"),
            ("rejected", "vehicle_not_allowed"),
            ("rejected", "invalid_coordinates"),
            ("rejected", "unknown_meter"),
            ("duplicate", None),
        ]
        assert _stored(api_engine, "V1", t0) - _stored(api_engine, "V1", _iso(399.5)) == 1
        with api_engine.connect() as conn:
            reasons = set(
                conn.execute(
                    text("SELECT reason FROM rejected_fixes WHERE source LIKE 'api:device:%'")
                ).scalars()
            )
        assert {"null_island", "vehicle_not_allowed", "unknown_meter"} <= reasons

    def test_iso_basic_format_is_read_with_its_offset(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """``20261207T060130Z`` (ISO 8601's basic format) is stored at its instant; without
        an offset it is ``naive_timestamp`` as in the extended format."""
        at = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=380)).replace(microsecond=0)
        local = (at + dt.timedelta(seconds=15)).astimezone(dt.timezone(dt.timedelta(hours=-3)))
        batch = {
            "pings": [
                {"timestamp": at.strftime("%Y%m%dT%H%M%SZ"), "lat": -30.03, "lon": -51.23},
                {"timestamp": local.strftime("%Y%m%dT%H%M%S-0300"), "lat": -30.03, "lon": -51.23},
                {"timestamp": at.strftime("%Y%m%dT%H%M%S"), "lat": -30.03, "lon": -51.23},
            ]
        }
        response = client.post("/api/v1/pings", json=batch, headers=bearer(seeded["device_token"]))
        assert response.status_code == 200, response.text
        assert [(r["status"], r["reason"]) for r in response.json()["results"]] == [
            ("accepted", None),
            ("accepted", None),
            ("rejected", "naive_timestamp"),
        ]
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT ts FROM fixes WHERE vehicle_id = 'V1' AND ts BETWEEN :a AND :b"),
                {"a": at, "b": at + dt.timedelta(seconds=15)},
            ).scalars()
            assert sorted(stored) == [at, at + dt.timedelta(seconds=15)]

    def test_speed_beyond_the_physical_bound_is_rejected(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """speed_kmh 1e9, 400.5 or -2 is ``invalid_speed`` and kept in rejected_fixes; 400 is
        stored (the file import's rule, tracking.validate)."""
        speeds = [400.0, 400.5, 1e9, -2.0]
        batch = {
            "pings": [
                {"timestamp": _iso(500 - i), "lat": -30.03, "lon": -51.23, "speed_kmh": v}
                for i, v in enumerate(speeds)
            ]
        }
        answer = client.post("/api/v1/pings", json=batch, headers=bearer(seeded["device_token"]))
        assert answer.status_code == 200, answer.text
        assert [(r["status"], r["reason"]) for r in answer.json()["results"]] == [
            ("accepted", None),
            *[("rejected", "invalid_speed")] * 3,
        ]
        with api_engine.connect() as conn:
            kept = conn.execute(
                text(
                    "SELECT raw->>'speed_kmh' FROM rejected_fixes "
                    "WHERE reason = 'invalid_speed' AND raw->>'timestamp' = :t"
                ),
                {"t": batch["pings"][2]["timestamp"]},
            ).scalars()
            assert [float(v) for v in kept] == [1e9]

    def test_minus_one_is_not_measured(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """-1 for speed, heading or accuracy (Android's and Traccar Client's "not measured") is
        stored as empty, the position kept: rejecting it left holes a live gap accused."""
        fields = ("speed_kmh", "heading_deg", "accuracy_m")
        batch = {
            "pings": [
                {"timestamp": _iso(600 - i), "lat": -30.03, "lon": -51.23, name: -1}
                for i, name in enumerate(fields)
            ]
        }
        answer = client.post("/api/v1/pings", json=batch, headers=bearer(seeded["device_token"]))
        assert answer.status_code == 200, answer.text
        assert [r["status"] for r in answer.json()["results"]] == ["accepted"] * 3
        with api_engine.connect() as conn:
            stored = conn.execute(
                text(
                    "SELECT speed_kmh, heading_deg, accuracy_m FROM fixes "
                    "WHERE ts = ANY(CAST(:ts AS timestamptz[]))"
                ),
                {"ts": [p["timestamp"] for p in batch["pings"]]},
            ).all()
        assert [tuple(r) for r in stored] == [(None, None, None)] * 3

    def test_user_token_cannot_send(self, client: TestClient, seeded: dict) -> None:
        """A user token is not a device token: 401."""
        response = client.post(
            "/api/v1/pings", json={"pings": []}, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 401

    def test_malformed_body_is_422(self, client: TestClient, seeded: dict) -> None:
        """A body that is not a batch is a 422 with the error body."""
        response = client.post(
            "/api/v1/pings", json={"pings": "x"}, headers=bearer(seeded["device_token"])
        )
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"


class TestDeviceTokenCache:
    def test_revoked_device_is_refused_within_the_delay(self, api_engine: Engine) -> None:
        """A revoked device token works while cached, then gets 401 (and 401 at once if the
        cache is off); an unknown token is never cached."""
        from api import accounts
        from api.main import create_app
        from api.settings import Settings
        from db.engine import session_scope

        with session_scope(api_engine) as session:
            device, token = accounts.create_device(
                session=session, registered_at=DEVICE_SINCE, vehicle_id="V2"
            )
            device_id = device.device_id
        batch = {"pings": [{"timestamp": _iso(700), "lat": -30.03, "lon": -51.23}]}
        cached = create_app(engine=api_engine, settings=Settings(device_token_cache_s=3600))
        uncached = create_app(engine=api_engine, settings=Settings(device_token_cache_s=0))
        with TestClient(cached) as a, TestClient(uncached) as b:
            assert a.post("/api/v1/pings", json=batch, headers=bearer(token)).status_code == 200
            assert b.post("/api/v1/pings", json=batch, headers=bearer(token)).status_code == 200
            with session_scope(api_engine) as session:
                accounts.revoke_device(session=session, device_id=device_id)
            assert a.post("/api/v1/pings", json=batch, headers=bearer(token)).status_code == 200
            assert b.post("/api/v1/pings", json=batch, headers=bearer(token)).status_code == 401
            cached.state.device_tokens.ttl_s = 0  # the delay has passed
            assert a.post("/api/v1/pings", json=batch, headers=bearer(token)).status_code == 401
            for _ in range(2):
                bad = a.post("/api/v1/pings", json=batch, headers=bearer("nao-existe"))
                assert bad.status_code == 401


class TestTtlCache:
    def test_values_expire(self) -> None:
        """A value is returned until ttl_s has passed; when full, the expired ones go."""
        from api.ratelimit import TtlCache

        now = [0.0]
        cache = TtlCache[int](ttl_s=10, max_items=2, clock=lambda: now[0])
        cache.put("a", 1)
        assert cache.get("a") == 1 and cache.get("b") is None
        now[0] = 9.9
        assert cache.get("a") == 1
        now[0] = 10.0
        assert cache.get("a") is None
        now[0] = 5.0
        cache.put("b", 2)
        now[0] = 12.0
        cache.put("c", 3)  # full: "a" (stored at 0) has expired and goes; "b" stays
        assert [cache.get(k) for k in "abc"] == [None, 2, 3]
        assert len(cache._items) == 2


class TestBatchBody:
    def test_malformed_bodies_are_422_naming_the_place(
        self, client: TestClient, seeded: dict
    ) -> None:
        """Not JSON, no 'pings', 'pings' not a list: 422 with the body location."""
        headers = bearer(seeded["device_token"]) | {"Content-Type": "application/json"}
        cases = [
            (b"{nope", ["body"]),
            (b'{"pongs": []}', ["body", "pings"]),
            (b'{"pings": {"lat": 1}}', ["body", "pings"]),
        ]
        for body, loc in cases:
            answer = client.post("/api/v1/pings", content=body, headers=headers)
            assert answer.status_code == 422, answer.text
            error = answer.json()["error"]
            assert error["code"] == "invalid_request"
            assert error["errors"][0]["loc"][: len(loc)] == loc

    def test_an_odd_row_is_refused_alone(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A row that is not an object, or a cell that is an object: that row is rejected and
        quarantined (the row or the cell as its JSON text), the good row beside it is stored."""
        good = {"timestamp": _iso(530), "lat": -30.03, "lon": -51.23}
        odd = {"timestamp": _iso(531), "lat": {"x": 1}, "lon": -51.23}
        answer = client.post(
            "/api/v1/pings",
            json={"pings": [good, None, odd, 7]},
            headers=bearer(seeded["device_token"]),
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert [(r["row"], r["status"], r["reason"]) for r in body["results"]] == [
            (1, "accepted", None),
            (2, "rejected", "not_an_object"),
            (3, "rejected", "invalid_coordinates"),
            (4, "rejected", "not_an_object"),
        ]
        # the quarantine keeps one row per (source, row, reason, values): rows 2 and 4 may be
        # there already from another test's batch, identical
        with api_engine.connect() as conn:
            odd_rows = conn.execute(
                text(
                    "SELECT row, raw->>'sent' FROM rejected_fixes WHERE reason = 'not_an_object' "
                    "AND row IN (2, 4)"
                )
            ).all()
            cell = conn.execute(
                text(
                    "SELECT count(*) FROM rejected_fixes WHERE row = 3 AND "
                    "reason = 'invalid_coordinates' AND raw->>'lat' = :lat"
                ),
                {"lat": '{"x":1}'},
            ).scalar_one()
        assert {(2, "null"), (4, "7")} <= {tuple(r) for r in odd_rows} and cell >= 1

    def test_a_row_with_an_unknown_key_is_refused_whole(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """``"taximetro"`` for ``meter``, ``"speed"`` for ``speed_kmh``: the row is rejected
        (``unknown_field``, every key quarantined), not stored without its meter; the resend
        with the contract's names is then accepted, not a conflicting duplicate."""
        when = _iso(540)
        typo = {"timestamp": when, "lat": -30.03, "lon": -51.23, "taximetro": "occupied"}
        odd = {"timestamp": _iso(541), "lat": -30.03, "lon": -51.23, "speed": 50}
        internal = {"timestamp": _iso(542), "lat": -30.03, "lon": -51.23, "_ts_origin": "x"}
        headers = bearer(seeded["device_token"])
        answer = client.post(
            "/api/v1/pings", json={"pings": [typo, odd, internal]}, headers=headers
        )
        assert answer.status_code == 200, answer.text
        assert [(r["status"], r["reason"]) for r in answer.json()["results"]] == [
            ("rejected", "unknown_field")
        ] * 3
        fixed = {"timestamp": when, "lat": -30.03, "lon": -51.23, "meter": "occupied"}
        again = client.post("/api/v1/pings", json={"pings": [fixed]}, headers=headers)
        assert [r["status"] for r in again.json()["results"]] == ["accepted"]
        with api_engine.connect() as conn:
            kept = conn.execute(
                text(
                    "SELECT raw->>'taximetro', raw->>'meter', raw->>'lat' FROM rejected_fixes "
                    "WHERE reason = 'unknown_field' AND raw->>'timestamp' = :t"
                ),
                {"t": when},
            ).one()
        assert tuple(kept) == ("occupied", "", "-30.03")

    def test_a_row_of_many_unknown_keys_keeps_twenty_and_counts_the_rest(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A row of 50,000 unknown keys is refused alone; the quarantine keeps the contract's
        cells, the first 20 others and how many were left out (each key was a column of the
        quarantine's frame: 100,000 held the server for half a minute)."""
        when = _iso(543)
        row = {"timestamp": when, "lat": -30.03, "lon": -51.23} | {
            f"k{i}": i for i in range(50_000)
        }
        answer = client.post(
            "/api/v1/pings", json={"pings": [row]}, headers=bearer(seeded["device_token"])
        )
        assert [r["reason"] for r in answer.json()["results"]] == ["unknown_field"]
        with api_engine.connect() as conn:
            kept = conn.execute(
                text(
                    "SELECT raw FROM rejected_fixes "
                    "WHERE reason = 'unknown_field' AND raw->>'timestamp' = :t"
                ),
                {"t": when},
            ).scalar_one()
        assert kept["k0"] == "0" and kept["k19"] == "19" and "k20" not in kept
        assert kept["campos_a_mais"] == "49980" and kept["lat"] == "-30.03"

    def test_an_unknown_key_beside_pings_is_422(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """``{"pings": [...], "pngs": [...]}``: 422 naming the key; nothing stored."""
        when = _iso(545)
        row = {"timestamp": when, "lat": -30.03, "lon": -51.23}
        answer = client.post(
            "/api/v1/pings",
            json={"pings": [row], "pngs": [row]},
            headers=bearer(seeded["device_token"]),
        )
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["errors"][0]["loc"] == ["body", "pngs"]
        assert "'pngs': campo não permitido" in error["message"]
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT count(*) FROM fixes WHERE ts = :t"), {"t": when}
            ).scalar_one()
        assert stored == 0

    def test_a_key_twice_in_one_object_is_422_and_nothing_stored(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """``{"lat": -30.03, "lat": -31}`` (JSON leaves it undefined; the last used to win):
        422 naming the key, no row stored or quarantined from that body."""
        when = _iso(520)
        good = f'{{"timestamp": "{when}", "lat": -30.03, "lon": -51.23}}'
        twice = f'{{"timestamp": "{when}", "lat": -30.03, "lat": -31, "lon": -51.23}}'
        headers = bearer(seeded["device_token"]) | {"Content-Type": "application/json"}
        for body, key in (
            (f'{{"pings": [{good}, {twice}]}}', "lat"),
            (f'{{"pings": [{good}], "pings": []}}', "pings"),
        ):
            answer = client.post("/api/v1/pings", content=body.encode(), headers=headers)
            assert answer.status_code == 422, answer.text
            error = answer.json()["error"]
            assert error["code"] == "invalid_request"
            assert f"chave '{key}' repetida" in error["message"]
            assert error["errors"][0]["type"] == "json_duplicate_key"
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT count(*) FROM fixes WHERE ts = :t"), {"t": when}
            ).scalar_one()
            kept = conn.execute(
                text("SELECT count(*) FROM rejected_fixes WHERE raw->>'timestamp' = :t"),
                {"t": when},
            ).scalar_one()
        assert (stored, kept) == (0, 0)
