"""Tests of api.routes.stands: GeoJSON stands, admin edits, licences, current occupancy."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from api_factories import bearer
from fastapi.testclient import TestClient

SQUARE = {
    "type": "Polygon",
    "coordinates": [
        [
            [-51.30, -30.10],
            [-51.299, -30.10],
            [-51.299, -30.099],
            [-51.30, -30.099],
            [-51.30, -30.10],
        ]
    ],
}


class TestListStands:
    def test_geojson_for_planner(self, client: TestClient, seeded: dict) -> None:
        """A planner gets every active stand as a FeatureCollection with polygons."""
        body = client.get("/api/v1/stands", headers=bearer(seeded["tokens"]["planner"])).json()
        assert body["type"] == "FeatureCollection"
        ids = {f["id"] for f in body["features"]}
        assert {"S1", "S2"} <= ids
        assert body["features"][0]["geometry"]["type"] == "MultiPolygon"

    def test_supervisor_sees_only_their_stands(self, client: TestClient, seeded: dict) -> None:
        """A supervisor's list holds only their stands; another stand is 403."""
        headers = bearer(seeded["tokens"]["supervisor"])
        body = client.get("/api/v1/stands", headers=headers).json()
        assert [f["id"] for f in body["features"]] == ["S1"]
        assert client.get("/api/v1/stands/S2", headers=headers).status_code == 403
        assert client.get("/api/v1/stands/S1", headers=headers).status_code == 200


class TestCreateStand:
    def test_admin_creates_edits_retires(self, client: TestClient, seeded: dict) -> None:
        """An admin creates, edits and retires a stand; a retired stand leaves the list."""
        headers = bearer(seeded["tokens"]["admin"])
        body = {"stand_id": "NEW1", "name": "Novo", "capacity": 2, "geometry": SQUARE}
        created = client.post("/api/v1/stands", json=body, headers=headers)
        assert created.status_code == 201, created.text
        assert client.post("/api/v1/stands", json=body, headers=headers).status_code == 409
        edited = client.patch("/api/v1/stands/NEW1", json={"capacity": 4}, headers=headers)
        assert edited.json()["properties"]["capacity"] == 4
        retired = client.post("/api/v1/stands/NEW1/retire", headers=headers)
        assert retired.json()["properties"]["retired_at"] is not None
        listed = client.get("/api/v1/stands", headers=headers).json()
        assert "NEW1" not in {f["id"] for f in listed["features"]}

    def test_bad_geometry_is_422(self, client: TestClient, seeded: dict) -> None:
        """A geometry that is not a valid polygon is a 422."""
        body = {"stand_id": "BAD", "geometry": {"type": "Point", "coordinates": [1, 2]}}
        response = client.post(
            "/api/v1/stands", json=body, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_request"

    def test_id_with_surrounding_blanks_is_stored_stripped_and_answered(
        self, client: TestClient, seeded: dict
    ) -> None:
        """' TST-R8 ' is stored as 'TST-R8' and the answer is its Feature (201), not a 404."""
        headers = bearer(seeded["tokens"]["admin"])
        body = {"stand_id": " TST-R8 ", "name": "  Praça XV  ", "geometry": SQUARE}
        created = client.post("/api/v1/stands", json=body, headers=headers)
        assert created.status_code == 201, created.text
        assert created.json()["id"] == "TST-R8"
        assert created.json()["properties"]["name"] == "Praça XV"
        assert client.get("/api/v1/stands/TST-R8", headers=headers).status_code == 200

    @pytest.mark.parametrize(
        "stand_id", ["a/b", "a?b", "a#b", "a%b", "a b", "a\tb", "a\u0000b", "a;b", "x" * 65]
    )
    def test_id_unreachable_by_url_is_422(
        self, client: TestClient, seeded: dict, stand_id: str
    ) -> None:
        """The registry's id rule (fleet.ids): no blank, control character nor / ? # % , ; \"."""
        body = {"stand_id": stand_id, "geometry": SQUARE}
        response = client.post(
            "/api/v1/stands", json=body, headers=bearer(seeded["tokens"]["admin"])
        )
        assert response.status_code == 422, response.text
        assert "'stand_id'" in response.json()["error"]["message"]

    @pytest.mark.parametrize("name", ["Praça\u202eXV", "Praça\u2069XV", "Praça\nXV", "a\x07"])
    def test_name_with_control_or_bidi_characters_is_422(
        self, client: TestClient, seeded: dict, name: str
    ) -> None:
        """A name with a control character or a bidirectional override is refused, on create
        and on edit."""
        headers = bearer(seeded["tokens"]["admin"])
        body = {"stand_id": "BADNAME", "name": name, "geometry": SQUARE}
        response = client.post("/api/v1/stands", json=body, headers=headers)
        assert response.status_code == 422, response.text
        assert "caractere" in response.json()["error"]["message"]
        edited = client.patch("/api/v1/stands/S2", json={"name": name}, headers=headers)
        assert edited.status_code == 422, edited.text

    def test_planner_cannot_create(self, client: TestClient, seeded: dict) -> None:
        """Only admins create stands."""
        body = {"stand_id": "NOPE", "geometry": SQUARE}
        response = client.post(
            "/api/v1/stands", json=body, headers=bearer(seeded["tokens"]["planner"])
        )
        assert response.status_code == 403


class TestStandLicences:
    def test_supervisor_lists_their_licensees(self, client: TestClient, seeded: dict) -> None:
        """A supervisor lists the prefixos licensed at their stand."""
        body = client.get(
            "/api/v1/stands/S1/licences", headers=bearer(seeded["tokens"]["supervisor"])
        ).json()
        assert [lic["vehicle_id"] for lic in body["data"]] == ["V1"]


class TestStandOccupancy:
    @pytest.fixture
    def s1_left_as_found(self, api_engine) -> Iterator[None]:
        """The session's database after the test as before it: V1 and V2 not at S1 now, V2's
        licences placed (other modules read who is at S1 now)."""
        from sqlalchemy import text

        since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=601)
        yield
        with api_engine.begin() as conn:
            conn.execute(
                text("DELETE FROM fixes WHERE vehicle_id IN ('V1', 'V2') AND ts >= :since"),
                {"since": since},
            )
            conn.execute(text("UPDATE vehicles SET unplaced_stands = '{}' WHERE vehicle_id = 'V2'"))

    @pytest.mark.usefixtures("s1_left_as_found")
    def test_vehicles_waiting_now_in_queue_order(
        self, client: TestClient, seeded: dict, api_engine
    ) -> None:
        """Recent fixes inside S1 put V1 first and V2 (unlicensed) second in the queue; once the
        fleet import could not place a licence of V2's, V2 is neither licensed nor intruder."""
        from sqlalchemy import text

        now = dt.datetime.now(dt.UTC)

        def batch(vehicle: str, start_s: int) -> dict:
            return {
                "pings": [
                    {
                        "vehicle_id": vehicle,
                        "lat": -30.0277,
                        "lon": -51.2287,
                        "meter": "free",
                        "timestamp": (now - dt.timedelta(seconds=start_s - 30 * i)).isoformat(),
                    }
                    for i in range(start_s // 30)
                ]
            }

        for vehicle, token, start in (
            ("V1", "device_token", 600),
            ("V2", "other_device_token", 300),
        ):
            sent = client.post(
                "/api/v1/pings", json=batch(vehicle, start), headers=bearer(seeded[token])
            )
            assert sent.json()["rejected"] == 0, sent.text
        body = client.get(
            "/api/v1/stands/S1/occupancy", headers=bearer(seeded["tokens"]["supervisor"])
        ).json()
        assert [(v["position"], v["vehicle_id"], v["licensed"]) for v in body["vehicles"]] == [
            (1, "V1", True),
            (2, "V2", False),
        ]
        assert body["intruders"] == 1
        assert body["vehicles_present"] == 2
        with api_engine.begin() as conn:
            conn.execute(
                text("UPDATE vehicles SET unplaced_stands = '{P01}' WHERE vehicle_id = 'V2'")
            )
        body = client.get(
            "/api/v1/stands/S1/occupancy", headers=bearer(seeded["tokens"]["supervisor"])
        ).json()
        assert [v["licensed"] for v in body["vehicles"]] == [True, None]
        assert body["intruders"] == 0


class TestRegistryWrites:
    def test_point_stand_licences_exclusion_supervisor_audited(
        self, client: TestClient, seeded: dict, api_engine
    ) -> None:
        """An admin creates a point stand with a radius, grants a licence (an overlapping one is
        409), excludes the prefixo with its art. 50 ground, records and homologates a supervisor;
        every change is in the audit log under the admin's name."""
        from sqlalchemy import text

        headers = bearer(seeded["tokens"]["admin"])
        body = {"stand_id": "PT1", "lat": -30.05, "lon": -51.21, "radius_m": 25, "kind": "fixo",
                "capacity": 3, "order_number": 7, "address": "Rua A, 1"}  # fmt: skip
        created = client.post("/api/v1/stands", json=body, headers=headers)
        assert created.status_code == 201, created.text
        assert created.json()["properties"]["radius_m"] == 25

        grant = {"vehicle_id": "V2", "valid_from": "2024-01-01"}
        assert (
            client.post("/api/v1/stands/PT1/licences", json=grant, headers=headers).status_code
            == 201
        )
        again = client.post("/api/v1/stands/PT1/licences", json=grant, headers=headers)
        assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"

        excl = {"vehicle_id": "V2", "on": "2024-06-01", "ground": "penalidade"}
        done = client.post("/api/v1/stands/PT1/exclusions", json=excl, headers=headers)
        assert done.status_code == 201, done.text
        licences = client.get("/api/v1/stands/PT1/licences", headers=headers).json()["data"]
        assert [(lic["vehicle_id"], lic["valid_until"]) for lic in licences] == [
            ("V2", "2024-05-31")
        ]

        elect = {
            "person_name": "Ana Souza",
            "elected_on": "2024-02-01",
            "minutes_ref": "ata 1/2024",
        }
        sup = client.post("/api/v1/stands/PT1/supervisors", json=elect, headers=headers).json()
        path = f"/api/v1/stands/PT1/supervisors/{sup['supervisor_id']}/homologate"
        homologated = client.post(path, json={"on": "2024-02-10"}, headers=headers)
        assert homologated.json()["homologated_on"] == "2024-02-10"
        listed = client.get("/api/v1/stands/PT1/supervisors", headers=headers).json()
        assert listed["count"] == 1

        with api_engine.connect() as conn:
            actions = (
                conn.execute(
                    text(
                        "SELECT action FROM audit_log WHERE actor = 'user:u_admin' "
                        "AND (entity_id = 'PT1' OR details::text LIKE '%PT1%')"
                    )
                )
                .scalars()
                .all()
            )
        assert len(actions) >= 4

    def test_unknown_vehicle_is_404(self, client: TestClient, seeded: dict) -> None:
        """A licence for a prefixo not in the registry is a 404 naming it."""
        headers = bearer(seeded["tokens"]["admin"])
        grant = {"vehicle_id": "NOPE", "valid_from": "2024-01-01"}
        response = client.post("/api/v1/stands/S2/licences", json=grant, headers=headers)
        assert response.status_code == 404 and "NOPE" in response.json()["error"]["message"]


class TestEndLicenceTwice:
    def test_ending_an_ended_licence_again_is_audited(
        self, client: TestClient, seeded: dict, api_engine
    ) -> None:
        """Ending an already ended licence earlier is 200, the previous end audited as text."""
        from sqlalchemy import text

        headers = bearer(seeded["tokens"]["admin"])
        body = {"stand_id": "END1", "lat": -30.06, "lon": -51.21, "radius_m": 20}
        assert client.post("/api/v1/stands", json=body, headers=headers).status_code == 201
        grant = {"vehicle_id": "V3", "valid_from": "2023-01-01"}
        url = "/api/v1/stands/END1/licences"
        assert client.post(url, json=grant, headers=headers).status_code == 201
        first = client.post(f"{url}/V3/end", json={"until": "2024-06-30"}, headers=headers)
        assert first.status_code == 200, first.text
        again = client.post(f"{url}/V3/end", json={"until": "2024-03-31"}, headers=headers)
        assert again.status_code == 200, again.text
        assert again.json()["detail"]["valid_until"] == "2024-03-31"
        with api_engine.connect() as conn:
            details = conn.execute(
                text(
                    "SELECT details FROM audit_log WHERE entity = 'parking_licence' "
                    "AND action = 'end' AND details->>'stand_id' = 'END1' ORDER BY entry_id"
                )
            ).scalars()
            assert [d["valid_until"] for d in details] == [
                {"from": None, "to": "2024-06-30"},
                {"from": "2024-06-30", "to": "2024-03-31"},
            ]


class TestStrictRequestTypes:
    def test_patch_with_bool_and_tiny_radius_is_422(self, client: TestClient, seeded: dict) -> None:
        """``lat 0, lon false, radius_m 5e-324`` (and other wrong types, lengths, unknown fields)
        is refused; the stand keeps its area."""
        headers = bearer(seeded["tokens"]["admin"])
        before = client.get("/api/v1/stands/S2", headers=headers).json()["geometry"]
        for body in (
            {"lat": 0, "lon": False, "radius_m": 5e-324},
            {"lat": -30.02, "lon": -51.22, "radius_m": 5e-324},
            {"lat": True, "lon": -51.22, "radius_m": 30},
            {"lat": "-30.02", "lon": -51.22, "radius_m": 30},
            {"capacity": True},
            {"capacity": 2.0},
            {"name": "N" * 201},
            {"nmae": "typo"},
        ):
            answer = client.patch("/api/v1/stands/S2", json=body, headers=headers)
            assert answer.status_code == 422, (body, answer.text)
        assert client.get("/api/v1/stands/S2", headers=headers).json()["geometry"] == before

    def test_degenerate_polygons_are_422(self, client: TestClient, seeded: dict) -> None:
        """A polygon that is a point or a line, or empty, is refused."""
        headers = bearer(seeded["tokens"]["admin"])
        point = [[-51.3, -30.1]] * 4
        line = [[-51.3, -30.1], [-51.29, -30.1], [-51.28, -30.1], [-51.3, -30.1]]
        for ring in (point, line, []):
            body = {"stand_id": "DEG1", "geometry": {"type": "Polygon", "coordinates": [ring]}}
            answer = client.post("/api/v1/stands", json=body, headers=headers)
            assert answer.status_code == 422, (ring, answer.text)

    def test_dates_must_be_text_in_the_registry_range(
        self, client: TestClient, seeded: dict
    ) -> None:
        """``on: 0.0`` or a number is not a date; 0202-12-01 and far futures are out of range."""
        headers = bearer(seeded["tokens"]["admin"])
        far = (dt.date.today() + dt.timedelta(days=800)).isoformat()
        for on in (0.0, 0, 1700000000, "0202-12-01", "7743-01-01", far, "1989-12-31"):
            answer = client.post("/api/v1/stands/S2/retire", json={"on": on}, headers=headers)
            assert answer.status_code == 422, (on, answer.text)
        election = {"person_name": "X", "elected_on": "7743-01-01", "minutes_ref": "ata 1"}
        answer = client.post("/api/v1/stands/S1/supervisors", json=election, headers=headers)
        assert answer.status_code == 422


class TestSuspensions:
    def test_admin_records_and_lists_a_suspension_audited(
        self, client: TestClient, seeded: dict, api_engine
    ) -> None:
        """A prefixo's 20-day suspension at S1 is recorded (201), listed and audited."""
        from sqlalchemy import text

        headers = bearer(seeded["tokens"]["admin"])
        body = {"vehicle_id": "V2", "starts_on": "2024-03-01", "ends_on": "2024-03-20",
                "kind": "suspension", "reason": "desacato ao supervisor",
                "process_ref": "EPTC 1/2024"}  # fmt: skip
        done = client.post("/api/v1/stands/S1/suspensions", json=body, headers=headers)
        assert done.status_code == 201, done.text
        row = done.json()
        assert (row["stand_id"], row["vehicle_id"], row["driver_id"]) == ("S1", "V2", None)
        listed = client.get("/api/v1/stands/S1/suspensions", headers=headers).json()
        assert listed["count"] == 1 and listed["data"][0]["ends_on"] == "2024-03-20"
        with api_engine.connect() as conn:
            entry = conn.execute(
                text(
                    "SELECT actor, action FROM audit_log WHERE entity = 'stand_suspension' "
                    "AND entity_id = :i"
                ),
                {"i": str(row["suspension_id"])},
            ).one()
        assert tuple(entry) == ("user:u_admin", "create")

    def test_bad_suspensions_are_422_in_portuguese(self, client: TestClient, seeded: dict) -> None:
        """Both subjects, an end before the start, or an open suspension: 422 naming the field."""
        headers = bearer(seeded["tokens"]["admin"])
        url = "/api/v1/stands/S1/suspensions"
        both = {"vehicle_id": "V2", "driver_id": "D1", "starts_on": "2024-03-01",
                "ends_on": "2024-03-20", "kind": "suspension"}  # fmt: skip
        backwards = {"vehicle_id": "V2", "starts_on": "2024-03-20", "ends_on": "2024-03-01",
                     "kind": "suspension"}  # fmt: skip
        open_ended = {"vehicle_id": "V2", "starts_on": "2024-03-01", "kind": "suspension"}
        for body, word in ((both, "exatamente um"), (backwards, "antes"), (open_ended, "barred")):
            response = client.post(url, json=body, headers=headers)
            assert response.status_code == 422, response.text
            assert word in response.json()["error"]["message"]

    def test_unknown_driver_is_404_and_planner_cannot_read(
        self, client: TestClient, seeded: dict
    ) -> None:
        """A driver not in the registry is 404; planners do not read suspensions (403)."""
        headers = bearer(seeded["tokens"]["admin"])
        body = {"driver_id": "NOPE", "starts_on": "2024-03-01", "kind": "barred"}
        response = client.post("/api/v1/stands/S1/suspensions", json=body, headers=headers)
        assert response.status_code == 404 and "NOPE" in response.json()["error"]["message"]
        planner = bearer(seeded["tokens"]["planner"])
        assert client.get("/api/v1/stands/S1/suspensions", headers=planner).status_code == 403

    def test_admin_records_a_stand_closure_without_subject(
        self, client: TestClient, seeded: dict, api_engine
    ) -> None:
        """A closure of S2 (road works) is recorded (201) with no prefixo nor driver and read
        back by the rule's frame with vehicle_id None."""
        from db.stands.store import suspensions_frame

        headers = bearer(seeded["tokens"]["admin"])
        body = {"starts_on": "2024-02-01", "ends_on": "2024-02-03", "kind": "closed",
                "reason": "obras na via", "process_ref": "SMMU 7/2024"}  # fmt: skip
        done = client.post("/api/v1/stands/S2/suspensions", json=body, headers=headers)
        assert done.status_code == 201, done.text
        row = done.json()
        assert (row["kind"], row["vehicle_id"], row["driver_id"]) == ("closed", None, None)
        listed = client.get("/api/v1/stands/S2/suspensions", headers=headers).json()
        assert row["suspension_id"] in [r["suspension_id"] for r in listed["data"]]
        with api_engine.connect() as conn:
            frame = suspensions_frame(conn=conn, stand_ids=["S2"])
        stored = frame[frame["suspension_id"] == row["suspension_id"]].iloc[0]
        assert stored["kind"] == "closed"
        assert stored["vehicle_id"] is None and stored["driver_id"] is None

    def test_bad_closures_are_422_in_portuguese(self, client: TestClient, seeded: dict) -> None:
        """A closure naming a prefixo or a driver is 422 naming the field; nothing stored."""
        headers = bearer(seeded["tokens"]["admin"])
        url = "/api/v1/stands/S2/suspensions"
        before = client.get(url, headers=headers).json()["count"]
        for subject in ({"vehicle_id": "V2"}, {"driver_id": "D1"}):
            body = {"starts_on": "2024-02-01", "kind": "closed"} | subject
            response = client.post(url, json=body, headers=headers)
            assert response.status_code == 422, response.text
            message = response.json()["error"]["message"]
            assert f"'{next(iter(subject))}'" in message and "interdição do ponto" in message
        response = client.post(url, json={"starts_on": "2024-02-01", "kind": "barred"},
                               headers=headers)  # fmt: skip
        assert response.status_code == 422 and "exatamente um" in response.text
        assert client.get(url, headers=headers).json()["count"] == before
