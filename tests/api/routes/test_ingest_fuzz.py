"""Property-based fuzzing of the HTTP ingest (JSON ping batch, OsmAnd): never a 5xx.

Through the app with TestClient on the API tests' database; bounded examples. Every row of an
answered batch comes back accepted, duplicate or rejected with a reason.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from api_factories import bearer
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
_NOW = dt.datetime.now(dt.UTC)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["a\x00b", "\x00", "\u202e", "😀"]),
)
_JSON = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
_RECENT = st.integers(60, 30 * 86_400).map(lambda s: (_NOW - dt.timedelta(seconds=s)).isoformat())
_PING = st.fixed_dictionaries(
    {},
    optional={
        "vehicle_id": st.one_of(st.just("V1"), st.just("V2"), _SCALAR),
        "timestamp": st.one_of(_RECENT, _SCALAR, st.just("2024-03-04T12:00:00")),
        "lat": st.one_of(st.floats(-31, -29), _SCALAR),
        "lon": st.one_of(st.floats(-52, -50), _SCALAR),
        "speed_kmh": _JSON,
        "heading_deg": _JSON,
        "accuracy_m": _JSON,
        "meter": st.one_of(st.sampled_from(["free", "occupied", "off", "busy"]), _JSON),
        "tariff": st.one_of(st.sampled_from([1, 2, 3]), _JSON),
        "driver_id": _JSON,
        "extra": _JSON,
    },
)
_BODY = st.one_of(
    st.fixed_dictionaries({"pings": st.lists(st.one_of(_PING, _JSON), max_size=8)}),
    st.fixed_dictionaries({"pings": _JSON}),
    _JSON,
)


class TestPostPingsFuzz:
    @FUZZ
    @given(body=_BODY)
    def test_no_5xx_and_every_row_answered(
        self, client: TestClient, seeded: dict, body: Any
    ) -> None:
        """Any JSON body: no 5xx; a 200 answers every row, rejected ones with a reason."""
        response = client.post(
            "/api/v1/pings",
            content=json.dumps(body),  # NaN/Infinity included: not strict JSON
            headers=bearer(seeded["device_token"]) | {"content-type": "application/json"},
        )
        assert response.status_code < 500, response.text
        if response.status_code != 200:
            assert response.json()
            return
        results = response.json()["results"]
        assert len(results) == len(body["pings"])
        for r in results:
            assert r["status"] in ("accepted", "duplicate", "rejected")
            assert (r["status"] == "rejected") == bool(r["reason"])

    @FUZZ
    @given(raw=st.binary(max_size=200))
    def test_raw_bytes(self, client: TestClient, seeded: dict, raw: bytes) -> None:
        """Any bytes as the body: a 4xx, never a 5xx."""
        response = client.post(
            "/api/v1/pings",
            content=raw,
            headers=bearer(seeded["device_token"]) | {"content-type": "application/json"},
        )
        assert response.status_code < 500, response.text


_PARAM = st.one_of(
    st.text(max_size=15),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
)
_OSMAND = st.fixed_dictionaries(
    {},
    optional={
        "timestamp": st.one_of(
            _PARAM,
            st.integers(60, 86_400).map(lambda s: str(int(_NOW.timestamp()) - s)),
            st.integers(60, 86_400).map(lambda s: str((int(_NOW.timestamp()) - s) * 1000)),
        ),
        "lat": st.one_of(_PARAM, st.floats(-31, -29).map(str)),
        "lon": st.one_of(_PARAM, st.floats(-52, -50).map(str)),
        "location": _PARAM,
        "speed": _PARAM,
        "bearing": _PARAM,
        "heading": _PARAM,
        "altitude": _PARAM,
        "accuracy": _PARAM,
        "batt": _PARAM,
        "meter": _PARAM,
        "tariff": _PARAM,
        "driver_id": _PARAM,
        "valid": _PARAM,
    },
)


class TestOsmandFuzz:
    @FUZZ
    @given(params=_OSMAND, known=st.booleans(), post=st.booleans())
    def test_no_5xx(
        self, client: TestClient, seeded: dict, params: dict[str, str], known: bool, post: bool
    ) -> None:
        """Any OsmAnd parameters, by GET or form POST: 200 (stored or rejected), or 401."""
        params = params | {"id": seeded["device_token"] if known else "123456"}
        if post:
            response = client.post("/osmand", data=params)
        else:
            response = client.get("/osmand", params=params)
        assert response.status_code < 500, response.text
        assert response.status_code == (200 if known else 401), response.text


class TestNulCharacter:
    def test_nul_in_driver_id_is_rejected_not_a_500(self, client: TestClient, seeded: dict) -> None:
        """A NUL in driver_id (found by the fuzzing: it was a 500) is rejected: invalid_text."""
        t = (_NOW - dt.timedelta(minutes=9)).isoformat()
        ping = {"vehicle_id": "V1", "timestamp": t, "lat": -30.03, "lon": -51.23}
        response = client.post(
            "/api/v1/pings",
            json={"pings": [ping | {"driver_id": "a\x00b"}]},
            headers=bearer(seeded["device_token"]),
        )
        assert response.status_code == 200, response.text
        assert response.json()["results"][0]["reason"] == "invalid_text"
        unix_s = str(int(_NOW.timestamp()) - 540)
        params = {"id": seeded["device_token"], "timestamp": unix_s, "lat": "-30", "lon": "-51"}
        response = client.get("/osmand", params=params | {"driver_id": "x\x00"})
        assert response.status_code == 200
        assert response.headers["X-Pontual-Rejected"] == "invalid_text"
        response = client.get("/osmand", params=params | {"meter": "\x00"})  # rejected row kept
        assert response.status_code == 200
        assert "X-Pontual-Rejected" in response.headers
