"""Tests of api.routes.osmand: the OsmAnd protocol as Traccar Client speaks it."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from api.routes.osmand import osmand_row, traccar_json_row


def _traccar_query(token: str, unix_s: int) -> str:
    # Traccar Client's ProtocolFormatter: these parameters, in this order, speed in knots,
    # accuracy 0 for GPS fixes; the request is a POST with an empty body.
    return (
        f"id={token}&timestamp={unix_s}&lat=-30.0277&lon=-51.2287&speed=10.0&bearing=90.0"
        "&altitude=12.5&accuracy=0.0&batt=87.0"
    )


def _stored(engine: Engine, unix_s: int) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM fixes WHERE ts = to_timestamp(:t)"), {"t": unix_s}
            ).scalar_one()
        )


class TestOsmand:
    def test_traccar_client_request_is_accepted(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """Traccar Client's POST with query parameters is stored; 200 with an empty body."""
        unix_s = int(time.time()) - 3600
        response = client.post(f"/osmand?{_traccar_query(seeded['device_token'], unix_s)}")
        assert response.status_code == 200
        assert response.content == b""
        with api_engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT speed_kmh, heading_deg, accuracy_m, source FROM fixes "
                    "WHERE vehicle_id = 'V1' AND ts = to_timestamp(:t)"
                ),
                {"t": unix_s},
            ).one()
        assert row.speed_kmh == pytest.approx(18.52)
        assert row.heading_deg == 90.0
        assert row.accuracy_m is None
        assert row.source.startswith("osmand:device:")
        again = client.post(f"/osmand?{_traccar_query(seeded['device_token'], unix_s)}")
        assert again.status_code == 200

    def test_get_and_form_post(self, client: TestClient, seeded: dict) -> None:
        """The same fix by GET, and by POST as a form, is accepted."""
        token = seeded["device_token"]
        unix_s = int(time.time()) - 3000
        assert client.get(f"/osmand?{_traccar_query(token, unix_s)}").status_code == 200
        form = {
            "id": token,
            "timestamp": str(unix_s + 1),
            "lat": "-30.02",
            "lon": "-51.22",
            "meter": "occupied",
            "tariff": "1",
        }
        assert client.post("/osmand", data=form).status_code == 200

    def test_query_and_form_that_disagree_are_quarantined(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A POST whose query says lat -30.02 and whose form says -29.02: which is the fix? It
        is kept in the quarantine with both values (200, the reason named), never guessed; the
        same value in both is one fix."""
        token = seeded["device_token"]
        unix_s = int(time.time()) - 2400
        query = f"/osmand?id={token}&timestamp={unix_s}&lat=-30.02&lon=-51.22"
        answer = client.post(query, data={"lat": "-29.02"})
        assert answer.status_code == 200
        assert answer.headers["X-Pontual-Rejected"] == "malformed_request"
        with api_engine.connect() as conn:
            stored = conn.execute(
                text(
                    "SELECT count(*) FROM fixes WHERE vehicle_id = 'V1' AND ts = to_timestamp(:t)"
                ),
                {"t": unix_s},
            ).scalar()
            kept = conn.execute(
                text(
                    "SELECT raw FROM rejected_fixes WHERE reason = 'malformed_request' "
                    "AND raw ->> 'formulario.lat' = '-29.02' AND raw ->> 'consulta.lat' = '-30.02'"
                )
            ).all()
        assert stored == 0 and len(kept) == 1
        same = client.post(query, data={"lat": "-30.02"})
        assert same.status_code == 200 and "X-Pontual-Rejected" not in same.headers

    @pytest.mark.parametrize(
        ("query", "form"),
        [
            ("location=-30.03,-51.23&location=10,10", None),
            ("location=-30.03,-51.23&driver_id=D1&driver_id=D2", None),
            ("lon=-51.23", [("lat", "abc"), ("lat", "-30.03")]),
            ("lat=-30.03&lat=-30.04&lon=-51.23", None),
        ],
        ids=["location-twice", "driver-twice", "form-lat-twice", "query-lat-twice"],
    )
    def test_a_parameter_given_two_values_is_quarantined(
        self,
        client: TestClient,
        seeded: dict,
        api_engine: Engine,
        query: str,
        form: list[tuple[str, str]] | None,
    ) -> None:
        """A parameter (declared or read by hand) twice in the query, or a form field
        twice, with different values: which is the fix's? Quarantined with every value (200,
        the reason named), nothing stored; the same value twice is one fix."""
        token = seeded["device_token"]
        unix_s = int(time.time()) - 1800 - len(query)
        url = f"/osmand?id={token}&timestamp={unix_s}&{query}"
        body = "&".join(f"{k}={v}" for k, v in form) if form else None
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if form else None
        answer = client.post(url, content=body, headers=headers)
        assert answer.headers.get("X-Pontual-Rejected") == "malformed_request"
        name = "formulario.lat" if form else "consulta." + query.split("=")[0]
        name = "consulta.driver_id" if "driver_id" in query else name
        with api_engine.connect() as conn:
            stored = conn.execute(
                text("SELECT count(*) FROM fixes WHERE ts = to_timestamp(:t)"), {"t": unix_s}
            ).scalar()
            kept = conn.execute(
                text(
                    "SELECT raw ->> :n FROM rejected_fixes WHERE reason = 'malformed_request' "
                    "AND raw ? :n ORDER BY rejected_id DESC LIMIT 1"
                ),
                {"n": name},
            ).scalar()
        assert stored == 0 and len(set(json.loads(kept))) == 2  # raw values are kept as text
        same = client.get(
            f"/osmand?id={token}&timestamp={unix_s}&location=-30.03,-51.23&location=-30.03,-51.23"
        )
        assert same.status_code == 200 and "X-Pontual-Rejected" not in same.headers

    @pytest.mark.parametrize(
        "content_type",
        ["text/json", "Application/JSON; charset=UTF-8", "text/plain", None],
    )
    def test_json_labelled_otherwise_is_read(
        self, client: TestClient, seeded: dict, api_engine: Engine, content_type: str | None
    ) -> None:
        """Traccar Client 9's JSON sent as 'text/json', in capitals, as text or unlabelled is
        read as JSON and stored: it was answered 200 as a fix without coordinates, and lost."""
        unix_s = int(time.time()) - 1200 - len(content_type or "")
        body = {
            "device_id": seeded["device_token"],
            "location": {"timestamp": unix_s, "coords": {"latitude": -30.07, "longitude": -51.17}},
        }
        headers = {"Content-Type": content_type} if content_type else {}
        answer = client.post("/osmand", content=json.dumps(body), headers=headers)
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        assert _stored(api_engine, unix_s) == 1

    @pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", None])
    def test_a_form_body_not_labelled_as_one_is_read(
        self, client: TestClient, seeded: dict, api_engine: Engine, content_type: str | None
    ) -> None:
        """With an empty query the body is read as a form whatever its type, as Traccar's own
        decoder does: it was refused 401 (no token read), and the tracker resent it for ever."""
        unix_s = int(time.time()) - 1100 - len(content_type or "")
        body = f"id={seeded['device_token']}&timestamp={unix_s}&lat=-30.05&lon=-51.18"
        headers = {"Content-Type": content_type} if content_type else {}
        answer = client.post("/osmand", content=body, headers=headers)
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        assert _stored(api_engine, unix_s) == 1

    def test_a_final_slash_is_the_same_address(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A server URL typed '/osmand/' stores the fix (a 307 redirect, which trackers do not
        follow on a POST, lost every fix and echoed the token in the Location)."""
        unix_s = int(time.time()) - 1000
        answer = client.post(
            f"/osmand/?{_traccar_query(seeded['device_token'], unix_s)}", follow_redirects=False
        )
        assert answer.status_code == 200
        assert _stored(api_engine, unix_s) == 1

    def test_minus_one_in_the_query_is_unknown(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """speed, bearing and accuracy -1 (Android's 'unknown') store the fix without them, as
        in the JSON shape; the whole fix was quarantined as invalid_speed."""
        unix_s = int(time.time()) - 900
        url = (
            f"/osmand?id={seeded['device_token']}&timestamp={unix_s}&lat=-30.05&lon=-51.18"
            "&speed=-1&bearing=-1&accuracy=-1"
        )
        answer = client.get(url)
        assert answer.status_code == 200 and "X-Pontual-Rejected" not in answer.headers
        with api_engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT speed_kmh, heading_deg, accuracy_m FROM fixes "
                    "WHERE ts = to_timestamp(:t)"
                ),
                {"t": unix_s},
            ).one()
        assert tuple(row) == (None, None, None)

    def test_no_token_is_kept_in_the_quarantine(
        self, client: TestClient, seeded: dict, api_engine: Engine
    ) -> None:
        """A request quarantined whole (two ids; a JSON body without 'location') keeps no device
        token: a token there is a credential for whoever reads the quarantine page or a backup.
        The other device's token, given by mistake, is not kept either."""
        token = seeded["device_token"]
        other = "pd" + "0123456789abcdef" * 2
        answer = client.post(f"/osmand?id={other}&id={token}&lat=-30.05&lon=-51.18")
        assert answer.headers.get("X-Pontual-Rejected") == "malformed_request"
        body = json.dumps({"device_id": token, "note": f"id={token}"})
        answer = client.post("/osmand", content=body, headers={"Content-Type": "application/json"})
        assert answer.headers.get("X-Pontual-Rejected") == "malformed_request"
        with api_engine.connect() as conn:
            kept = (
                conn.execute(
                    text(
                        "SELECT raw::text FROM rejected_fixes WHERE reason = 'malformed_request' "
                        "ORDER BY rejected_id DESC LIMIT 2"
                    )
                )
                .scalars()
                .all()
            )
        assert len(kept) == 2 and '"lat"' in kept[1] and '"body"' in kept[0]
        assert not any(token in k or other in k for k in kept)

    def test_unknown_id_is_401(self, client: TestClient, seeded: dict) -> None:
        """An id that is not a device token is refused with 401."""
        response = client.get("/osmand?id=123456&lat=-30&lon=-51&timestamp=1700000000")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "not_authenticated"

    def test_rejected_fix_is_200_with_reason(self, client: TestClient, seeded: dict) -> None:
        """A fix failing validation is a 200 (the device's queue moves on) naming the reason."""
        token = seeded["device_token"]
        response = client.get(f"/osmand?id={token}&lat=0&lon=0&timestamp={int(time.time())}")
        assert response.status_code == 200
        assert response.headers["X-Pontual-Rejected"] == "null_island"


class TestOsmandRow:
    @pytest.mark.parametrize(
        ("params", "expected"),
        [
            ({"speed": "10"}, {"speed_kmh": pytest.approx(18.52)}),
            ({"timestamp": "1700000000123"}, {"timestamp": "1700000000.123"}),
            ({"timestamp": "1700000000123456"}, {"timestamp": "1700000000123456"}),  # µs: as sent
            ({"timestamp": "2024-03-04T12:00:00Z"}, {"timestamp": "2024-03-04T12:00:00Z"}),
            ({"location": "-30.1,-51.2"}, {"lat": "-30.1", "lon": "-51.2"}),
            ({"accuracy": "0"}, {"accuracy_m": None}),
            ({"accuracy": "12"}, {"accuracy_m": "12"}),
            ({"accuracy": "-1"}, {"accuracy_m": None}),
            ({"speed": "-1", "bearing": "-1"}, {"speed_kmh": None, "heading_deg": None}),
            ({"speed": "-5"}, {"speed_kmh": pytest.approx(-9.26)}),  # refused by validation
        ],
    )
    def test_units_and_forms(self, params: dict, expected: dict) -> None:
        """Knots become km/h, milliseconds seconds, 'location' lat/lon, accuracy 0 unknown."""
        row = osmand_row(params)
        for key, value in expected.items():
            assert row[key] == value


class TestTraccarJsonRow:
    @pytest.mark.parametrize(
        ("speed", "expected"), [(-1, None), (None, None), (10, pytest.approx(36.0)), (-50, -180.0)]
    )
    def test_speed_minus_one_is_unknown_another_negative_is_kept_to_be_refused(
        self, speed: float | None, expected: object
    ) -> None:
        """-1 m/s is the library's 'unknown'; -50 is no speed a device means: it reaches the
        validation (invalid_speed, quarantined) instead of being dropped unseen."""
        row = traccar_json_row({"timestamp": 1700000000, "coords": {"speed": speed}})
        assert row["speed_kmh"] == expected


class TestUnreadableJson:
    """JSON that parses only ambiguously, or not in Python: 422 in pt-BR before any device
    lookup (the same answer whatever the token), nothing stored."""

    @staticmethod
    def _body(token: str, *, latitude: str = "-30.03", twice: bool = False) -> bytes:
        device = f'"device_id": "{token}", ' * (2 if twice else 1)
        location = f'{{"timestamp": {int(time.time())}, "coords": {{"latitude": {latitude}, '
        return f'{{{device}"location": {location}"longitude": -51.22}}}}}}'.encode()

    def _stored(self, engine: Engine) -> tuple[int, int]:
        with engine.connect() as conn:
            return (
                conn.execute(text("SELECT count(*) FROM fixes")).scalar_one(),
                conn.execute(text("SELECT count(*) FROM rejected_fixes")).scalar_one(),
            )

    @pytest.mark.parametrize(
        ("options", "says"),
        [
            ({"latitude": "1" * 4300 + "0"}, "número com mais de 4300 dígitos"),
            ({"twice": True}, "chave 'device_id' repetida"),
        ],
        ids=["number-too-long", "key-twice"],
    )
    def test_is_422_for_a_known_and_an_unknown_token(
        self, client: TestClient, seeded: dict, api_engine: Engine, options: dict, says: str
    ) -> None:
        """A 4,301-digit latitude (was 401 for a valid device) or a repeated key: 422 naming
        it, alike for a device token and for a token that is none; nothing stored."""
        before = self._stored(api_engine)
        answers = [
            client.post(
                "/osmand",
                content=self._body(token, **options),
                headers={"Content-Type": "application/json"},
            )
            for token in (seeded["device_token"], "nao-existe")
        ]
        for answer in answers:
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["code"] == "invalid_request"
            assert says in answer.json()["error"]["message"]
        assert answers[0].json() == answers[1].json()
        assert self._stored(api_engine) == before

    def test_a_number_too_long_in_the_query_is_a_rejected_fix(
        self, client: TestClient, seeded: dict
    ) -> None:
        """The same number in a query is a value, not JSON: the fix is kept as invalid (200)."""
        token = seeded["device_token"]
        answer = client.get(f"/osmand?id={token}&lat={'1' * 4301}&lon=-51&timestamp=1")
        assert answer.status_code == 200
        assert answer.headers["X-Pontual-Rejected"] == "invalid_coordinates"
