"""Device ingest robustness: database precision, resends, quarantine size, disconnects, NUL, pt-BR.

Each test reproduces a fault seen against a real ``pontual serve``: a fix lost to sub-microsecond
de-duplication, a resend with other values answered ``duplicate``, a quarantined row of megabytes,
a client disconnect logged as a 500 with a traceback, a NUL byte answered as a number too large,
and English validation messages.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import random
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from api_factories import DEVICE_SINCE, bearer
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api import ingest

VEHICLE = "IEDGE1"


@pytest.fixture(scope="module")
def token(api_engine: Engine, seeded: dict) -> str:
    """Device token of this module's own vehicle (its fixes stay away from other tests')."""
    from api import accounts
    from db.engine import session_scope
    from db.fleet.models import Vehicle

    with session_scope(api_engine) as session:
        if session.get(Vehicle, VEHICLE) is None:
            session.add(Vehicle(vehicle_id=VEHICLE, prefixo=VEHICLE))
            session.flush()
        return accounts.create_device(
            session=session, registered_at=DEVICE_SINCE, vehicle_id=VEHICLE
        )[1]


def _second() -> dt.datetime:
    """A whole second of the last day, unlikely to be used twice (its instants are free)."""
    ago = dt.timedelta(seconds=random.randrange(3600, 86_400))
    return (dt.datetime.now(dt.UTC) - ago).replace(microsecond=0)


def _iso(second: dt.datetime, fraction: str = "") -> str:
    return second.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def _post(client: TestClient, token: str, pings: list[dict[str, Any]]) -> dict[str, Any]:
    answer = client.post("/api/v1/pings", json={"pings": pings}, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _stored(engine: Engine, second: dt.datetime) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                text(
                    "SELECT ts, lat, lon, meter FROM fixes WHERE vehicle_id = :v "
                    "AND ts >= :t AND ts < :t + interval '1 second' ORDER BY ts"
                ),
                {"v": VEHICLE, "t": second},
            )
        ]


def _quarantined(engine: Engine, marker: str) -> list[tuple[str, dict[str, Any]]]:
    """Rejected rows whose raw ``driver_id`` is ``marker``: (reason, raw)."""
    with engine.connect() as conn:
        return [
            (r.reason, r.raw)
            for r in conn.execute(
                text(
                    "SELECT reason, raw FROM rejected_fixes WHERE raw->>'driver_id' = :m "
                    "ORDER BY rejected_id"
                ),
                {"m": marker},
            )
        ]


def _marker() -> str:
    return f"m{random.randrange(10**12)}"


class TestDatabasePrecision:
    def test_sub_microsecond_pair_with_other_values_is_quarantined(
        self, client: TestClient, token: str, api_engine: Engine
    ) -> None:
        """Two fixes of one microsecond, other values: the second is kept in rejected_fixes."""
        second, marker = _second(), _marker()
        body = _post(
            client,
            token,
            [
                {"timestamp": _iso(second, "0000001"), "lat": -30.05, "lon": -51.2,
                 "meter": "free", "driver_id": marker},
                {"timestamp": _iso(second, "0000009"), "lat": -29.90, "lon": -51.1,
                 "meter": "occupied", "driver_id": marker},
            ],
        )  # fmt: skip
        assert body["results"] == [
            {"row": 1, "status": "accepted", "reason": None},
            {"row": 2, "status": "rejected", "reason": "conflicting_duplicate"},
        ]
        assert [(r[1], r[3]) for r in _stored(api_engine, second)] == [(-30.05, "free")]
        quarantined = _quarantined(api_engine, marker)
        assert [reason for reason, _ in quarantined] == ["conflicting_duplicate"]
        assert quarantined[0][1]["lat"] == "-29.9"
        assert quarantined[0][1]["timestamp"] == _iso(second, "0000009")

    def test_sub_microsecond_pair_with_equal_values_is_duplicate(
        self, client: TestClient, token: str, api_engine: Engine
    ) -> None:
        """Equal at the database's precision and in every value: ``duplicate``, one fix."""
        second = _second()
        row = {"lat": -30.05, "lon": -51.2, "meter": "free"}
        body = _post(
            client,
            token,
            [
                row | {"timestamp": _iso(second, "0000001")},
                row | {"timestamp": _iso(second, "0000009")},
            ],
        )
        assert [r["status"] for r in body["results"]] == ["accepted", "duplicate"]
        assert len(_stored(api_engine, second)) == 1

    def test_one_fix_written_otherwise_in_a_batch_is_a_duplicate(
        self, client: TestClient, token: str, api_engine: Engine
    ) -> None:
        """'FREE' for 'free', '-51.20' as text, the instant at -03:00 for Z: the same values,
        so the same fix in one batch as across batches (it was conflicting_duplicate, the
        sender told the fix was refused); another meter is still a conflict."""
        second = _second()
        utc = pd.Timestamp(_iso(second, "0000000"))
        local = utc.tz_convert("America/Sao_Paulo").isoformat()
        row = {"timestamp": utc.isoformat(), "lat": -30.05, "lon": -51.2, "meter": "free"}
        body = _post(
            client,
            token,
            [
                row,
                row | {"meter": "FREE"},
                row | {"lon": "-51.20", "timestamp": local},
                row | {"meter": "occupied"},
            ],
        )
        assert [(r["status"], r.get("reason")) for r in body["results"]] == [
            ("accepted", None),
            ("duplicate", None),
            ("duplicate", None),
            ("rejected", "conflicting_duplicate"),
        ]
        assert len(_stored(api_engine, second)) == 1

    @pytest.mark.parametrize("path", ["fast", "slow"])
    def test_both_readers_merge_at_the_microsecond(self, path: str) -> None:
        """The record reader and validate_pings' path give the same microsecond verdicts."""
        now = pd.Timestamp("2026-11-30T12:00:00Z")
        rows = [
            {"timestamp": "2026-11-30T11:00:00.0000001Z", "lat": -30.05, "lon": -51.2},
            {"timestamp": "2026-11-30T11:00:00.0000009Z", "lat": -29.9, "lon": -51.1},
            {"timestamp": "2026-11-30T11:00:00.0000004Z", "lat": -30.05, "lon": -51.2},
            {"timestamp": "2026-11-30T11:00:00.000001Z", "lat": -30.05, "lon": -51.2},
        ]
        check = ingest._fast_check if path == "fast" else ingest._slow_check
        batch = check(rows, vehicle_id="V1", now=now)
        assert batch.rows.tolist() == [1, 4]
        assert batch.ts_ns.tolist() == [
            pd.Timestamp("2026-11-30T11:00:00.0000001Z").value,
            pd.Timestamp("2026-11-30T11:00:00.000001Z").value,
        ]
        assert batch.answers == {
            2: ingest.RowResult(2, "rejected", "conflicting_duplicate"),
            3: ingest.RowResult(3, "duplicate"),
        }
        assert [b[:2] for b in batch.bad] == [(2, "conflicting_duplicate")]


class TestResend:
    def test_resend_with_other_values_is_quarantined(
        self, client: TestClient, token: str, api_engine: Engine
    ) -> None:
        """A stored instant sent again with other values: conflicting_duplicate, raw kept."""
        second, marker = _second(), _marker()
        first = {"timestamp": _iso(second, "25"), "lat": -30.05, "lon": -51.2, "meter": "free",
                 "speed_kmh": 10.0, "driver_id": marker}  # fmt: skip
        assert _post(client, token, [first])["accepted"] == 1
        others = [
            first | {"lat": -30.06},
            first | {"meter": "occupied"},
            first | {"speed_kmh": 11.0},
            first | {"speed_kmh": None},
        ]
        for other in others:
            body = _post(client, token, [other])
            assert body["results"] == [
                {"row": 1, "status": "rejected", "reason": "conflicting_duplicate"}
            ], other
        assert _post(client, token, [first])["duplicates"] == 1
        quarantined = _quarantined(api_engine, marker)
        assert [reason for reason, _ in quarantined] == ["conflicting_duplicate"] * 4
        assert [raw["lat"] for _, raw in quarantined][:2] == ["-30.06", "-30.05"]
        assert quarantined[1][1]["meter"] == "occupied"
        assert [(r[1], r[3]) for r in _stored(api_engine, second)] == [(-30.05, "free")]

    def test_resend_of_a_batch_mixes_duplicates_and_conflicts(
        self, client: TestClient, token: str
    ) -> None:
        """Only the rows whose values differ from the stored fix are conflicts."""
        second = _second()
        rows = [
            {"timestamp": _iso(second, f"{i}"), "lat": -30.05 - i / 1000, "lon": -51.2}
            for i in range(1, 5)
        ]
        assert _post(client, token, rows)["accepted"] == 4
        rows[2] = rows[2] | {"lat": -31.0}
        body = _post(client, token, rows)
        assert [r["status"] for r in body["results"]] == [
            "duplicate",
            "duplicate",
            "rejected",
            "duplicate",
        ]

    def test_osmand_resend_with_other_values_names_the_conflict(
        self, client: TestClient, token: str
    ) -> None:
        """OsmAnd: 200 (the queue moves on), the conflict in X-Pontual-Rejected."""
        stamp = str(int(_second().timestamp()))
        params = {"id": token, "timestamp": stamp, "lat": "-30.05", "lon": "-51.2"}
        assert client.get("/osmand", params=params).status_code == 200
        same = client.get("/osmand", params=params)
        assert same.status_code == 200
        assert "X-Pontual-Rejected" not in same.headers
        other = client.get("/osmand", params=params | {"lat": "-30.06"})
        assert other.status_code == 200
        assert other.headers["X-Pontual-Rejected"] == "conflicting_duplicate"


class TestQuarantineSize:
    def test_per_row_raw_values_are_capped(
        self, client: TestClient, token: str, api_engine: Engine
    ) -> None:
        """A 1.9 MB cell is kept as its first MAX_RAW_CHARS characters."""
        marker = _marker()
        body = _post(
            client,
            token,
            [{"timestamp": _iso(_second()), "lat": -30.0, "lon": -51.0, "meter": "x" * 1_900_000,
              "driver_id": marker}],
        )  # fmt: skip
        assert body["rejected"] == 1
        ((_, raw),) = _quarantined(api_engine, marker)
        assert raw["meter"] == "x" * ingest.MAX_RAW_CHARS

    def test_one_cap_for_both_paths(self) -> None:
        """The OsmAnd malformed-request path cuts with the same helper."""
        assert ingest.MAX_RAW_CHARS == 1000
        assert ingest.raw_text("y" * 5000) == "y" * 1000
        assert ingest.raw_text(None) == ""


def _disconnecting(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[dict, Any, Any]:
    """ASGI scope, receive and send of a client that sends 14 of 1,000,000 bytes and leaves."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-length", b"1000000"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    messages = [
        {"type": "http.request", "body": b'{"pings": [{"', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(_: dict) -> None:
        return None

    return scope, receive, send


class TestClientDisconnect:
    @pytest.mark.parametrize("path", ["/osmand", "/api/v1/pings"])
    def test_disconnect_is_one_info_line(
        self,
        app: FastAPI,
        client: TestClient,
        token: str,
        api_engine: Engine,
        caplog: pytest.LogCaptureFixture,
        path: str,
    ) -> None:
        """A client leaving mid-upload: one INFO line without traceback, nothing stored."""
        with api_engine.connect() as conn:
            before = conn.execute(text("SELECT count(*) FROM rejected_fixes")).scalar_one()
        headers = [(b"content-type", b"application/json")]
        if path == "/api/v1/pings":
            headers.append((b"authorization", f"Bearer {token}".encode()))
        caplog.set_level(logging.DEBUG)
        asyncio.run(app(*_disconnecting(path, headers)))
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        lines = [r for r in caplog.records if "disconnect" in r.getMessage().lower()]
        assert len(lines) == 1
        assert lines[0].levelno in (logging.INFO, logging.DEBUG)
        assert lines[0].exc_info is None
        with api_engine.connect() as conn:
            after = conn.execute(text("SELECT count(*) FROM rejected_fixes")).scalar_one()
        assert after == before

    def test_disconnects_over_real_http_leave_no_traceback(
        self, api_database_url: str, token: str, tmp_path: Path
    ) -> None:
        """``pontual serve``: 20 clients leaving mid-upload write no error and no traceback."""
        from api_factories import LiveServer

        log = tmp_path / "serve.log"
        with LiveServer(api_database_url, log) as server:
            for i in range(20):
                path = "/osmand" if i % 2 else "/api/v1/pings"
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                    "Content-Length: 1000000\r\n\r\n"
                )
                with socket.create_connection(("127.0.0.1", server.port)) as sock:
                    sock.sendall(head.encode() + b'{"pings": [{"')
            time.sleep(1.0)  # the server notices the last disconnect
            assert httpx.get(server.url + "/health", timeout=5).status_code == 200
        text_ = log.read_text()
        assert "Traceback" not in text_, text_[-3000:]
        assert "ERROR" not in text_, text_[-3000:]


class TestNul:
    def test_login_with_nul_names_the_character(self, client: TestClient) -> None:
        """A NUL in the login form: 422 saying a text field has a NUL character."""
        answer = client.post("/api/v1/auth/token", data={"username": "a\x00b", "password": "senha"})
        assert answer.status_code == 422, answer.text
        message = answer.json()["error"]["message"]
        assert "caractere nulo" in message
        assert "número" not in message

    def test_database_error_of_a_nul_is_422(self) -> None:
        """Raised by psycopg or wrapped by SQLAlchemy: the same 422."""
        from psycopg import DataError as PgDataError
        from sqlalchemy.exc import DataError

        from api.errors import _database_error

        pg = PgDataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        wrapped = DataError("SELECT 1", {}, pg)
        for exc in (pg, wrapped):
            answer = _database_error(None, exc)  # type: ignore[arg-type]
            assert answer.status_code == 422
            assert "caractere nulo" in json.loads(answer.body)["error"]["message"]

    @pytest.mark.parametrize(
        ("cell", "reason"),
        [
            ({"vehicle_id": VEHICLE + "\x00"}, "vehicle_not_allowed"),
            ({"driver_id": "D\x001"}, "invalid_text"),
            ({"meter": "fr\x00ee"}, "unknown_meter"),
            ({"lat": "-30\x00"}, "invalid_coordinates"),
            ({"timestamp": "2024-03-04T12:00:00Z\x00"}, "unparseable_timestamp"),
        ],
    )
    def test_nul_in_a_ping_is_a_rejected_row(
        self, client: TestClient, token: str, cell: dict[str, Any], reason: str
    ) -> None:
        """A NUL in any text cell rejects that row only; the row beside it is stored."""
        second = _second()
        good = {"timestamp": _iso(second), "lat": -30.05, "lon": -51.2}
        bad = good | {"timestamp": _iso(second, "5")} | cell
        body = _post(client, token, [good, bad])
        assert body["results"][0]["status"] == "accepted"
        assert body["results"][1] == {"row": 2, "status": "rejected", "reason": reason}

    def test_nul_in_osmand_is_answered_200(self, client: TestClient, token: str) -> None:
        """OsmAnd: a NUL in a value or a parameter name is a rejected fix, 200."""
        stamp = str(int(_second().timestamp()))
        params = {"id": token, "timestamp": stamp, "lat": "-30.05", "lon": "-51.2"}
        for extra in ({"meter": "\x00"}, {"driver_id": "a\x00"}, {"a\x00b": "1", "lat": "\x00"}):
            answer = client.get("/osmand", params=params | extra)
            assert answer.status_code == 200, (extra, answer.text)
            assert answer.headers.get("X-Pontual-Rejected"), extra


class TestPortugueseMessages:
    @pytest.mark.parametrize(
        ("method", "url", "kwargs"),
        [
            ("get", "/api/v1/public/accessible-taxis?lat=abc&lon=-51.2", {}),
            ("get", "/api/v1/public/accessible-taxis?lat=nan&lon=-51.2", {}),
            ("get", "/api/v1/public/accessible-taxis?lat=inf&lon=-51.2", {}),
            ("get", "/api/v1/public/accessible-taxis?lat=-30&lon=-51.2&radius_m=x", {}),
            ("get", "/api/v1/public/stands?lat=1e999&lon=-51.2", {}),
            ("post", "/api/v1/pings", {"json": {"pings": {}}}),
            ("post", "/api/v1/pings", {"json": {"pings": "x"}}),
            ("post", "/api/v1/pings", {"json": [1, 2]}),
            ("post", "/api/v1/pings", {"json": {}}),
            ("post", "/api/v1/pings", {"content": b"{not json"}),
            ("post", "/api/v1/pings", {"content": b""}),
        ],
    )
    def test_no_english_reaches_the_client(
        self, client: TestClient, token: str, method: str, url: str, kwargs: dict[str, Any]
    ) -> None:
        """Every 422 of a malformed input is in pt-BR, in the message and in ``errors``."""
        headers = bearer(token) if url.startswith("/api/v1/pings") else {}
        answer = getattr(client, method)(url, headers=headers, **kwargs)
        assert answer.status_code == 422, answer.text
        for english in ("Input should", "Field required", "valid ", "unable to", "Invalid"):
            assert english not in answer.text, answer.text

    @pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
    def test_non_finite_number_says_finite(self, client: TestClient, value: str) -> None:
        """``lat=nan`` is not 'at most 90': it must be a finite number."""
        answer = client.get(f"/api/v1/public/accessible-taxis?lat={value}&lon=-51.2")
        assert answer.status_code == 422
        message = answer.json()["error"]["message"]
        assert "número finito" in message, message
        assert "'lat'" in message
