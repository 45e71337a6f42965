"""Tests of api.routes.stands: GeoJSON stands, admin edits, licences, current occupancy."""

from __future__ import annotations

import datetime as dt

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
    def test_vehicles_waiting_now_in_queue_order(self, client: TestClient, seeded: dict) -> None:
        """Recent fixes inside S1 put V1 first and V2 (unlicensed) second in the queue."""
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
