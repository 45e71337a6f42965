from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest
from factories import make_pings, make_track, offset_m
from live_scenarios import (
    LIVE_LICENCES,
    LIVE_OPTIONS,
    N_DAYS,
    RANK_STANDS,
    absence_batch,
    absence_rows,
    fleet_month,
    live_cover,
    local_day,
)
from sqlalchemy import text
from sqlalchemy.orm import Session

from db.stands.queries import stands_frame
from db.tracking.store import copy_fixes
from engines.live import (
    LIVE_KINDS,
    PEERS_PREFIX,
    VISIT_KINDS,
    LiveConfigError,
    alert_matches,
    live_params,
    process_fixes,
    stand_cover,
    throttle_key,
)
from geo.cover import build_stand_cover, match_stands
from stands.licences import licence_frame_from_fleet
from stands.visits import detect_visits
from tracking.detectors import longer_route
from tracking.detectors.flag2_misuse import detect_flag2_misuse
from tracking.detectors.gps_anomaly import detect_gps_anomaly
from tracking.detectors.illegal_stand_formation import detect_illegal_stand_formation
from tracking.detectors.inactivity import detect_inactivity
from tracking.detectors.outside_municipality import detect_outside_municipality
from tracking.detectors.queue_jump import detect_queue_jump
from tracking.detectors.tracking_gap import detect_tracking_gap
from tracking.detectors.unlicensed_stand_use import detect_unlicensed_stand_use
from tracking.stops import detect_stops
from tracking.trips import detect_trips

BOUNDARIES = (
    Path(__file__).resolve().parents[2]
    / "data"
    / "brazil"
    / "boundaries"
    / "municipios_poa_pvh_pintobandeira.geojson"
)
POA = "4314902"

T0 = pd.Timestamp("2024-03-04T12:00:00Z")  # a Monday, 09:00 in Porto Alegre


def _fix(
    vehicle: str, minute: float, north_m: float, meter: str, tariff: int | None = None
) -> dict[str, Any]:
    lat, lon = offset_m(north_m, 0.0)
    return {
        "vehicle_id": vehicle,
        "timestamp": T0 + pd.Timedelta(minutes=minute),
        "lat": lat,
        "lon": lon,
        "meter": meter,
        "tariff": tariff,
    }


def track(vehicle: str) -> list[dict[str, Any]]:
    """Bandeira 2 on a Monday morning, a GPS outlier, a gap in service, then free fixes."""
    rows = [_fix(vehicle, k / 2, 50.0 * k, "occupied", 2) for k in range(21)]  # 10 min, tariff 2
    rows += [_fix(vehicle, 10.5 + k / 2, 1000.0, "free") for k in range(10)]  # parked, free
    rows[25]["lat"], rows[25]["lon"] = offset_m(6000.0, 0.0)  # 6 km away for one fix
    rows += [_fix(vehicle, 16.0, 1000.0, "occupied", 1)]
    rows += [_fix(vehicle, 40.0, 4000.0, "occupied", 1)]  # 24 min of silence, moved 3 km
    rows += [_fix(vehicle, 41.0 + k, 4000.0, "free") for k in range(10)]
    return rows


def batch_ids(pings: pd.DataFrame) -> set[str]:
    found = pd.concat(
        [
            detect_tracking_gap(pings),
            detect_gps_anomaly(pings),
            detect_flag2_misuse(pings, timezone="America/Sao_Paulo"),
        ]
    )
    return set(found["finding_id"])


def feed(session: Session, pings: pd.DataFrame, size: int, **options: Any) -> list[dict[str, Any]]:
    """Send the fleet's fixes in time order, ``size`` per request; the findings of them all."""
    ordered = pings.sort_values("timestamp", kind="stable")
    found = []
    for start in range(0, len(ordered), size):
        found += process_fixes(session, ordered.iloc[start : start + size], throttle_s=0, **options)
    return found


def count(session: Session, sql: str, **params: Any) -> int:
    return int(session.execute(text(sql), params).scalar_one())


class TestProcessFixes:
    def test_live_finds_what_the_batch_finds(self, db_session: Session) -> None:
        """Fed one fix batch at a time, the live detectors give the batch detectors' ids."""
        pings = make_pings(track("LIVE1"))
        expected = batch_ids(pings)
        assert {i.split("-")[0] for i in expected} == {
            "tracking_gap",
            "gps_anomaly",
            "flag2_misuse",
        }
        found = []
        for start in range(0, len(pings), 7):  # requests of 7 fixes
            found += process_fixes(db_session, pings.iloc[start : start + 7], throttle_s=0)
        assert {f["finding_id"] for f in found} == expected
        assert all(f["new"] and f["alert_id"] == f"alert-{f['finding_id']}" for f in found)
        stored = count(db_session, "SELECT count(*) FROM findings WHERE vehicle_id = :v", v="LIVE1")
        assert stored == len(expected)
        alerts = count(db_session, "SELECT count(*) FROM alerts WHERE vehicle_id = :v", v="LIVE1")
        assert alerts == len(expected)

    def test_one_request_equals_many(self, db_session: Session) -> None:
        """All fixes in one call give the same findings as the same fixes one by one."""
        pings = make_pings(track("LIVE2"))
        found = process_fixes(db_session, pings, throttle_s=0)
        assert {f["finding_id"] for f in found} == batch_ids(pings)

    def test_resent_fixes_give_nothing(self, db_session: Session) -> None:
        """Fixes sent again (or older than the state) produce no finding and no alert."""
        pings = make_pings(track("LIVE3"))
        first = process_fixes(db_session, pings, throttle_s=0)
        again = process_fixes(db_session, pings, throttle_s=0)
        assert first and again == []

    def test_state_is_plain_json_per_vehicle_and_detector(self, db_session: Session) -> None:
        """Each (vehicle, detector) state is one JSON row with the last fix time."""
        pings = make_pings(track("LIVE4"))
        process_fixes(db_session, pings)
        rows = db_session.execute(
            text(
                "SELECT detector, last_ts FROM live_detector_states WHERE vehicle_id = 'LIVE4' "
                "AND detector NOT LIKE 'longer_route_peers:%'"
            )
        ).all()
        unregistered = {
            "operating_while_barred",
            "outside_municipality",
            "driver_not_allowed",  # no driver links in the registry
            "inactivity",
            "habitual_absence",  # fed by the visits tracker: needs stands
            *VISIT_KINDS,
        }
        assert {d for d, _ in rows} == set(LIVE_KINDS) - unregistered
        assert {pd.Timestamp(ts) for _, ts in rows} == {pings["timestamp"].max()}

    def test_finding_already_stored_is_not_alerted(self, db_session: Session) -> None:
        """A finding stored before (e.g. by a batch run) is kept and not alerted again."""
        pings = make_pings(track("LIVE5"))
        gap = detect_tracking_gap(pings).iloc[0]
        db_session.execute(
            text(
                "INSERT INTO findings (finding_id, kind, vehicle_id, started_at, ended_at, "
                "confidence) VALUES (:i, 'tracking_gap', 'LIVE5', :s, :e, 0.9)"
            ),
            {"i": gap["finding_id"], "s": gap["started_at"], "e": gap["ended_at"]},
        )
        found = process_fixes(db_session, pings, throttle_s=0)
        mine = [f for f in found if f["finding_id"] == gap["finding_id"]]
        assert len(mine) == 1 and not mine[0]["new"] and mine[0]["alert_id"] is None

    def test_operating_while_barred_for_a_suspended_vehicle(self, db_session: Session) -> None:
        """A suspended registered vehicle in service is found once its day is over."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LIVE6', 'LIVE6'); "
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('LIVE6', 'suspended', '2024-03-01', '2024-03-31')"
            )
        )
        rows = [_fix("LIVE6", k, 300.0 * k, "occupied", 1) for k in range(6)]
        rows += [_fix("LIVE6", 7, 2000.0, "free"), _fix("LIVE6", 24 * 60, 2000.0, "free")]
        found = process_fixes(db_session, make_pings(rows), kinds=("operating_while_barred",))
        assert [f["kind"] for f in found] == ["operating_while_barred"]
        assert found[0]["details"]["reason"] == "suspended"

    def test_barred_service_is_alerted_as_it_happens(self, db_session: Session) -> None:
        """A suspended vehicle's first ride long enough is alerted while it runs, marked
        'dia em curso'; its later rides extend that finding and alert (no second alert); the
        next day's first fix settles the day's finding, provisional no more."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LIVE7', 'LIVE7'); "
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('LIVE7', 'suspended', '2024-03-01', '2024-03-31')"
            )
        )
        ride = [_fix("LIVE7", k, 300.0 * k, "occupied", 1) for k in range(6)]
        later = [_fix("LIVE7", 60 + k, 300.0 * k, "occupied", 1) for k in range(6)]
        kinds = ("operating_while_barred",)
        first = process_fixes(db_session, make_pings(ride), kinds=kinds, throttle_s=0)
        assert len(first) == 1 and first[0]["new"] and first[0]["alert_id"]
        assert first[0]["details"]["provisional"] is True
        fid = first[0]["finding_id"]
        more = make_pings([_fix("LIVE7", 7, 2000.0, "free"), *later])
        second = process_fixes(db_session, more, kinds=kinds, throttle_s=0)
        assert [(f["finding_id"], f["new"], f["alert_id"]) for f in second] == [(fid, False, None)]
        assert second[0]["details"]["n_trips"] == 2
        alert = db_session.execute(
            text("SELECT payload, event_at, revision FROM alerts WHERE finding_id = :f"),
            {"f": fid},
        ).one()
        assert pd.Timestamp(alert.event_at) == later[-1]["timestamp"]
        assert alert.payload["details"]["n_trips"] == 2
        assert alert.revision == 0  # a provisional version is not announced again
        next_day = make_pings([_fix("LIVE7", 24 * 60, 0.0, "free")])
        third = process_fixes(db_session, next_day, kinds=kinds, throttle_s=0)
        assert [(f["finding_id"], f["new"]) for f in third] == [(fid, False)]
        stored = db_session.execute(
            text("SELECT details FROM findings WHERE finding_id = :f"), {"f": fid}
        ).scalar_one()
        assert "provisional" not in stored and stored["n_trips"] == 2
        assert count(db_session, "SELECT count(*) FROM alerts WHERE vehicle_id = 'LIVE7'") == 1
        revision = "SELECT revision FROM alerts WHERE vehicle_id = 'LIVE7'"
        assert count(db_session, revision) == 1  # settled: announced again

    def test_a_provisional_day_the_closed_day_does_not_confirm_is_withdrawn(
        self, db_session: Session
    ) -> None:
        """Suspended in the morning's registry, the suspension then annulled the same day: the
        ride's provisional finding is marked withdrawn (and its alert) at the next day's first
        fix, as the closed day no longer bars it; it is never proposed."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LIVEW', 'LIVEW'); "
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('LIVEW', 'suspended', '2024-03-01', '2024-03-31')"
            )
        )
        kinds = ("operating_while_barred",)
        ride = [_fix("LIVEW", k, 300.0 * k, "occupied", 1) for k in range(6)]
        (first,) = process_fixes(db_session, make_pings(ride), kinds=kinds, throttle_s=0)
        assert first["details"]["provisional"] is True
        db_session.execute(
            text(
                "WITH w AS (INSERT INTO webhooks (url, secret) VALUES ('http://127.0.0.1:9', 'x') "
                "RETURNING webhook_id) INSERT INTO webhook_deliveries (webhook_id, alert_id, "
                "status, attempts, delivered_at) SELECT webhook_id, :a, 'delivered', 1, now() "
                "FROM w"
            ),
            {"a": first["alert_id"]},
        )  # the provisional alert was delivered
        db_session.execute(
            text("DELETE FROM vehicle_status_periods WHERE vehicle_id = 'LIVEW'")
        )  # the suspension annulled
        next_day = make_pings([_fix("LIVEW", 24 * 60, 0.0, "free")])
        assert process_fixes(db_session, next_day, kinds=kinds, throttle_s=0) == []
        details = db_session.execute(
            text("SELECT details FROM findings WHERE finding_id = :f"),
            {"f": first["finding_id"]},
        ).scalar_one()
        assert details.get("withdrawn") is True and "provisional" not in details
        payload, revision = db_session.execute(
            text("SELECT payload, revision FROM alerts WHERE finding_id = :f"),
            {"f": first["finding_id"]},
        ).one()
        assert payload["details"].get("withdrawn") is True and revision == 1
        delivery = db_session.execute(
            text(
                "SELECT status, attempts, delivered_at FROM webhook_deliveries WHERE alert_id = :a"
            ),
            {"a": first["alert_id"]},
        ).one()
        assert tuple(delivery) == ("pending", 0, None)  # the webhook is sent it again

    def test_a_gap_its_late_fixes_fill_is_withdrawn(self, db_session: Session) -> None:
        """A tracker back online sends its live fix first and its buffer after: the silence the
        live fix opened is alerted, then withdrawn (finding and alert, announced again) once
        the buffered fixes arrive, and never proposed; the batch finds no gap in the same
        fixes."""
        ride = [_fix("LIVEG", k / 4, 30.0 * k, "occupied", 1) for k in range(61)]  # 15 min
        ride += [_fix("LIVEG", 15.5 + k, 1800.0, "free") for k in range(5)]
        before, buffered, after = ride[:20], ride[20:60], ride[60:]
        assert detect_tracking_gap(make_pings(ride)).empty
        kinds = ("tracking_gap",)
        process_fixes(db_session, make_pings(before), kinds=kinds, throttle_s=0)
        (gap,) = process_fixes(db_session, make_pings(after), kinds=kinds, throttle_s=0)
        assert gap["kind"] == "tracking_gap" and gap["alert_id"]
        assert process_fixes(db_session, make_pings(buffered), kinds=kinds, throttle_s=0) == []
        details = db_session.execute(
            text("SELECT details FROM findings WHERE finding_id = :f"),
            {"f": gap["finding_id"]},
        ).scalar_one()
        assert details["withdrawn"] is True
        assert pd.Timestamp(details["filled_at"]) == buffered[0]["timestamp"]
        from enforcement.documents import evidence_summary

        _, measures, _ = evidence_summary({**gap, "details": details}, timezone="UTC")
        assert not [m for m in measures if "_" in m]  # every measure named in pt-BR
        payload, revision = db_session.execute(
            text("SELECT payload, revision FROM alerts WHERE finding_id = :f"),
            {"f": gap["finding_id"]},
        ).one()
        assert payload["details"]["withdrawn"] is True and revision == 1
        assert pd.Timestamp(payload["details"]["filled_at"]) == buffered[0]["timestamp"]
        # a fix of the same instants sent again withdraws nothing more (nor announces again)
        process_fixes(db_session, make_pings(buffered[:3]), kinds=kinds, throttle_s=0)
        assert count(db_session, "SELECT revision FROM alerts WHERE vehicle_id = 'LIVEG'") == 1

    def test_the_next_days_ride_is_not_folded_into_the_days_alert(
        self, db_session: Session
    ) -> None:
        """A suspended taxi's ride ending just before midnight and the next ride just after:
        each day has its own alert, the default throttle window notwithstanding."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LIVEM', 'LIVEM'); "
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('LIVEM', 'suspended', '2024-03-01', '2024-03-31')"
            )
        )
        midnight = 15 * 60  # minutes from T0 (09:00 local) to the local midnight
        late = [_fix("LIVEM", midnight - 8 + k, 300.0 * k, "occupied", 1) for k in range(6)]
        late += [_fix("LIVEM", midnight - 2, 2000.0, "free")]
        early = [_fix("LIVEM", midnight + 1 + k, 300.0 * k, "occupied", 1) for k in range(6)]
        kinds = ("operating_while_barred",)
        for part in (late, early):
            process_fixes(db_session, make_pings(part), kinds=kinds)
        assert count(db_session, "SELECT count(*) FROM alerts WHERE vehicle_id = 'LIVEM'") == 2

    def test_barred_day_is_judged_with_that_days_registry(self, db_session: Session) -> None:
        """A day suspended, then active: the day's finding, emitted the next day, names the
        suspension; the active day's ride is not found."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LIVE8', 'LIVE8'); "
                "INSERT INTO vehicle_status_periods (vehicle_id, status, valid_from, valid_until) "
                "VALUES ('LIVE8', 'suspended', '2024-03-04', '2024-03-04'), "
                "('LIVE8', 'active', '2024-03-05', NULL)"
            )
        )
        day = 24 * 60
        rows = [_fix("LIVE8", k, 300.0 * k, "occupied", 1) for k in range(6)]
        rows += [_fix("LIVE8", 7, 2000.0, "free")]
        rows += [_fix("LIVE8", day + k, 300.0 * k, "occupied", 1) for k in range(6)]
        rows += [_fix("LIVE8", day + 7, 2000.0, "free"), _fix("LIVE8", 2 * day, 0.0, "free")]
        found = feed(db_session, make_pings(rows), 7, kinds=("operating_while_barred",))
        settled = [f for f in found if "provisional" not in f["details"]]
        assert [f["details"]["local_date"] for f in settled] == ["2024-03-04"]
        assert settled[0]["details"]["reasons"][0]["status_until"] == "2024-03-04"
        assert {f["finding_id"] for f in found} == {settled[0]["finding_id"]}

    def test_operating_with_the_termo_recolhido(self, db_session: Session) -> None:
        """A registered vehicle in service while its Termo is recolhido is found live, with the
        registry dates as evidence."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo, termo_recolhido_since) "
                "VALUES ('LIVE9', 'LIVE9', '2024-03-04')"
            )
        )
        rows = [_fix("LIVE9", k, 300.0 * k, "occupied", 1) for k in range(6)]
        rows += [_fix("LIVE9", 7, 2000.0, "free"), _fix("LIVE9", 24 * 60, 2000.0, "free")]
        found = process_fixes(db_session, make_pings(rows), kinds=("operating_while_barred",))
        assert [f["details"]["reasons"] for f in found] == [
            [
                {
                    "reason": "termo_recolhido",
                    "termo_recolhido_since": "2024-03-04",
                    "termo_recolhido_until": None,
                }
            ]
        ]

    def test_vehicle_age_by_its_municipalitys_rulebook(self, db_session: Session) -> None:
        """The same 2010 vehicle is over age in Pinto Bandeira (5 years, art. 10) and not in
        Porto Alegre, whose taxi decree fixes no age."""
        db_session.execute(
            text(
                "INSERT INTO municipalities (code, name, uf) VALUES ('4314548', 'Pinto Bandeira', "
                "'RS'), ('4314902', 'Porto Alegre', 'RS') ON CONFLICT (code) DO NOTHING; "
                "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code, year) VALUES "
                "('AGE1', 'AGE1', '4314548', 2010), ('AGE2', 'AGE2', '4314902', 2010)"
            )
        )
        rows = [_fix("AGE1", k, 300.0 * k, "occupied", 1) for k in range(6)]
        rows += [_fix("AGE1", 7, 2000.0, "free"), _fix("AGE1", 24 * 60, 2000.0, "free")]
        rows += [{**r, "vehicle_id": "AGE2"} for r in rows]
        found = process_fixes(db_session, make_pings(rows), kinds=("operating_while_barred",))
        assert [(f["vehicle_id"], f["details"]["reason"]) for f in found] == [
            ("AGE1", "vehicle_over_age")
        ]
        assert found[0]["details"]["reasons"][0]["age_years"] == 14

    def test_outside_municipality_with_each_vehicles_boundary(self, db_session: Session) -> None:
        """In one call, a Pinto Bandeira taxi picking up in Porto Alegre is found and a Porto
        Alegre taxi at the same place is not."""
        self.register_in_porto_alegre(db_session, ["OUT3"])
        self.register_in(db_session, "4314548", "Pinto Bandeira", ["OUT4"])
        rows = [_fix("OUT3", 0, 0.0, "free")]
        rows += [_fix("OUT3", 1 + k, 200.0 * k, "occupied", 1) for k in range(6)]
        rows += [_fix("OUT3", 8, 1200.0, "free")]
        rows += [{**r, "vehicle_id": "OUT4"} for r in rows]
        found = process_fixes(db_session, make_pings(rows), kinds=("outside_municipality",))
        assert [f["vehicle_id"] for f in found] == ["OUT4"]
        assert found[0]["details"]["distance_to_boundary_m"] > 50_000

    def test_flag2_knows_each_vehicles_boundary(self, db_session: Session) -> None:
        """Bandeira 2 on a Monday morning in Porto Alegre, live: a Pinto Bandeira taxi's ride
        left its municipality, a Porto Alegre taxi's did not, as the batch says with each
        boundary; an unregistered vehicle's is judged without one."""
        self.register_in_porto_alegre(db_session, ["F2POA"])
        self.register_in(db_session, "4314548", "Pinto Bandeira", ["F2PB"])
        ride = [_fix("F2", k / 2, 50.0 * k, "occupied", 2) for k in range(21)]
        ride += [_fix("F2", 10.5, 1000.0, "free")]
        rows = [{**r, "vehicle_id": v} for v in ("F2POA", "F2PB", "F2X") for r in ride]
        found = feed(db_session, make_pings(rows), 7, kinds=("flag2_misuse",))
        marks = {f["vehicle_id"]: f["details"].get("left_municipality") for f in found}
        assert marks == {"F2POA": False, "F2PB": True, "F2X": None}
        mine = make_pings([r for r in rows if r["vehicle_id"] == "F2PB"])
        batch = detect_flag2_misuse(mine, boundary=self.boundary("4314548"))
        (live,) = [f for f in found if f["vehicle_id"] == "F2PB"]

        def unrowed(d: dict[str, Any]) -> dict[str, Any]:  # rows number the fed frame's
            return {k: v for k, v in d.items() if k != "fixes"}

        assert unrowed(live["details"]) == unrowed(batch.iloc[0]["details"])

    def test_gps_errors_alert_once_the_rulebook_would_propose(self, db_session: Session) -> None:
        """Sent as they happen, a Porto Alegre taxi's GPS outliers (art. 58, IX: 5 within an
        hour) are stored and alerted only from the fifth; an unregistered vehicle's are alerted
        each (no rulebook)."""
        self.register_in_porto_alegre(db_session, ["GPS1"])
        away = [(6000.0, 0.0), (0.0, 7000.0), (-6500.0, 0.0), (0.0, -7500.0), (8000.0, 8000.0)]
        rows = []
        for k, (north, east) in enumerate(away):
            rows += [_fix("GPS1", 10 * k + j / 2, 100.0 * (4 * k + j), "free") for j in range(4)]
            lat, lon = offset_m(north, east)
            rows[-2] |= {"lat": lat, "lon": lon}  # one fix thrown far away, then back
        rows.append(_fix("GPS1", 90, 2000.0, "free"))
        rows += [{**r, "vehicle_id": "GPS2"} for r in rows]
        found = feed(db_session, make_pings(rows), 4, kinds=("gps_anomaly",))
        alerted = {
            v: [f["alert_id"] is not None for f in found if f["vehicle_id"] == v]
            for v in ("GPS1", "GPS2")
        }
        assert alerted == {"GPS1": [False] * 4 + [True], "GPS2": [True] * 5}
        assert all(f["new"] for f in found)

    @staticmethod
    def boundary(code: str) -> Any:
        """The bundled IBGE boundary of a municipality (shapely, EPSG:4326)."""
        frame = gpd.read_file(BOUNDARIES)
        return frame.loc[frame["cod_ibge"].astype(str) == code].geometry.union_all()

    @classmethod
    def register_in(cls, session: Session, code: str, name: str, vehicles: list[str]) -> None:
        """Store a bundled municipality with its boundary, and ``vehicles`` registered in it."""
        session.execute(
            text(
                "INSERT INTO municipalities (code, name, uf, boundary) VALUES (:c, :n, 'RS', "
                "ST_Multi(ST_GeomFromText(:g, 4326))) ON CONFLICT (code) DO UPDATE "
                "SET boundary = EXCLUDED.boundary"
            ),
            {"c": code, "n": name, "g": cls.boundary(code).wkt},
        )
        session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo, municipality_code) "
                "SELECT v, v, :c FROM unnest(CAST(:vs AS text[])) AS v"
            ),
            {"c": code, "vs": vehicles},
        )

    @classmethod
    def register_in_porto_alegre(cls, session: Session, vehicles: list[str]) -> gpd.GeoDataFrame:
        cls.register_in(session, POA, "Porto Alegre", vehicles)
        poa = gpd.read_file(BOUNDARIES)
        return poa.loc[poa["cod_ibge"].astype(str) == POA]

    def test_outside_municipality_from_the_vehicles_boundary(self, db_session: Session) -> None:
        """A pickup in Canoas by a Porto Alegre taxi is found live as in batch; others are not."""
        poa = self.register_in_porto_alegre(db_session, ["OUT1"])
        rows = []
        for start, (lat, lon) in ((0.0, (-29.9177, -51.1836)), (20.0, offset_m(0.0, 0.0))):
            rows.append({**_fix("OUT1", start, 0.0, "free"), "lat": lat, "lon": lon})
            rows += [
                {
                    **_fix("OUT1", start + 1 + k, 0.0, "occupied", 1),
                    "lat": lat + 4e-4 * k,
                    "lon": lon,
                }
                for k in range(6)
            ]
            rows.append({**_fix("OUT1", start + 8, 0.0, "free"), "lat": lat, "lon": lon})
        outsider = [{**r, "vehicle_id": "OUT2"} for r in rows]  # not registered: not judged
        pings = make_pings(rows + outsider)
        mine = pings[pings["vehicle_id"] == "OUT1"].reset_index(drop=True)
        batch = detect_outside_municipality(detect_trips(mine, max_gap_s=300.0), poa, pings=mine)
        assert len(batch) == 1
        found = []
        for start in range(0, len(pings), 5):
            found += process_fixes(
                db_session, pings.iloc[start : start + 5], kinds=("outside_municipality",)
            )
        assert [f["finding_id"] for f in found] == batch["finding_id"].tolist()
        assert found[0]["details"] == batch.iloc[0]["details"]
        assert found[0]["alert_id"] is not None

    def test_unknown_threshold_is_refused(self, db_session: Session) -> None:
        """A threshold unknown to the live and the batch detector is an error."""
        with pytest.raises(LiveConfigError, match="max_gap_minutes"):
            process_fixes(
                db_session,
                make_pings(track("LIVE7")),
                thresholds={"tracking_gap": {"max_gap_minutes": 5}},
            )


def route_trip(vehicle: str, corners: list[tuple[float, float]], t0: float) -> list[dict]:
    """Occupied fixes every 15 s and 100 m along (north, east) corners, then a free fix."""
    points = [corners[0]]
    for (n0, e0), (n1, e1) in zip(corners[:-1], corners[1:], strict=True):
        k = max(1, round(max(abs(n1 - n0), abs(e1 - e0)) / 100.0))
        points += [(n0 + (n1 - n0) * i / k, e0 + (e1 - e0) * i / k) for i in range(1, k + 1)]
    rows = [(t0 + 15.0 * i, n, e) for i, (n, e) in enumerate(points)]
    free = [(t0 + 15.0 * len(points), *points[-1])]
    return make_track(vehicle, rows, meter="occupied") + make_track(vehicle, free, meter="free")


STRAIGHT = [(0.0, 0.0), (0.0, 3000.0)]
LOOP = [(0, 0), (0, 1500), (1000, 1500), (1000, 2000), (0, 2000), (0, 1500), (0, 3000)]


class TestLongerRoute:
    def test_peer_trips_are_stored_and_read_back(self, db_session: Session) -> None:
        """Peers closed in earlier requests are stored per cells and give the batch's finding."""
        rows = [r for k in range(5) for r in route_trip(f"ROUTE-P{k}", STRAIGHT, k * 3600.0)]
        pings = make_pings(rows + route_trip("ROUTE-V", LOOP, 6 * 3600.0))
        batch = longer_route.detect_longer_route_in_fixes(pings)
        assert len(batch) == 1 and batch.iloc[0]["details"]["peer_trips"]["count"] == 5
        found = feed(db_session, pings, 9, kinds=("longer_route",))
        assert [f["finding_id"] for f in found] == batch["finding_id"].tolist()
        assert found[0]["details"] == batch.iloc[0]["details"]
        stored = db_session.execute(
            text(
                "SELECT vehicle_id, state FROM live_detector_states "
                "WHERE detector = :d ORDER BY vehicle_id"
            ),
            {
                "d": PEERS_PREFIX
                + batch.iloc[0]["details"]["origin_cell"]
                + "-"
                + batch.iloc[0]["details"]["destination_cell"]
            },
        ).all()
        assert [v for v, _ in stored] == [*(f"ROUTE-P{k}" for k in range(5)), "ROUTE-V"]
        assert all(len(entries) == 1 and len(entries[0]) == 6 for _, entries in stored)

    def test_thresholds_are_the_batch_functions(self) -> None:
        """Its live thresholds are detect_longer_route's; the stored peers are no threshold."""
        assert live_params("longer_route", {"longer_route": {"min_ratio": 1.5}}) == {
            "min_ratio": 1.5
        }
        with pytest.raises(LiveConfigError, match="peer_trips"):
            live_params("longer_route", {"longer_route": {"peer_trips": []}})

    @pytest.mark.parametrize("with_start", [0, 1])
    def test_peer_rows_of_the_former_shape_are_read(
        self, db_session: Session, with_start: int
    ) -> None:
        """Stored entries without the start ([id, end, driven, ratio, straight]) are peers;
        their pace is unknown. With one peer's pace known the finding is the batch's; with
        none, the trip is not judged (its peers' time might have excused it)."""
        rows = [r for k in range(5) for r in route_trip(f"ROUTE-Q{k}", STRAIGHT, k * 3600.0)]
        pings = make_pings(rows + route_trip("ROUTE-W", LOOP, 6 * 3600.0))
        batch = longer_route.detect_longer_route_in_fixes(pings)
        _, _, trips = longer_route.advance_longer_route({}, pings, final=True)
        peers = trips.loc[trips["vehicle_id"] != "ROUTE-W"]
        for k, peer in enumerate(peers.itertuples()):
            entry = [peer.trip_id, peer.ended_ns, peer.driven_m, None, peer.straight_m]
            if k < with_start:
                entry.append(peer.started_ns)
            db_session.execute(
                text(
                    "INSERT INTO live_detector_states (vehicle_id, detector, state, updated_at) "
                    "VALUES (:v, :d, CAST(:s AS jsonb), now())"
                ),
                {"v": peer.vehicle_id, "d": PEERS_PREFIX + peer.cells, "s": json.dumps([entry])},
            )
        mine = pings.loc[pings["vehicle_id"] == "ROUTE-W"]
        found = process_fixes(db_session, mine, kinds=("longer_route",), throttle_s=0)
        if not with_start:
            assert found == [] and len(batch) == 1
            return
        assert [f["finding_id"] for f in found] == batch["finding_id"].tolist()
        assert found[0]["details"] == batch.iloc[0]["details"]


def at_stand(vehicle: str, arrive: int, leave: int, *, board_at: int | None = None) -> list[dict]:
    """Approach from the south, wait at the stand (a fix every 30 s), leave north until 2000 s."""
    points = [(arrive - 60, -300.0, 0.0), (arrive - 30, -150.0, 0.0)]
    points += [(t, 1.0, 0.0) for t in range(arrive, leave + 1, 30)]
    points += [(t, 150.0 * (t - leave) / 30, 0.0) for t in range(leave + 30, 2001, 30)]
    meters = [
        "occupied" if board_at is not None and t >= board_at else "free" for t, _, _ in points
    ]
    return make_track(vehicle, points, meter=meters)


class TestVisitKinds:
    FLEET = pd.DataFrame(  # noqa: RUF012
        {
            "vehicle_id": ["Q1", "Q2", "Q3", "Q4"],
            "accessible": [False, False, False, False],
            "stands": [("QS1",), ("QS1",), (), ()],
            "stand_names": [(), (), (), ()],
        }
    )

    @classmethod
    def register(cls, session: Session) -> None:
        lat, lon = offset_m(0.0, 0.0)
        circle = gpd.GeoSeries.from_xy([lon], [lat], crs=4326).to_crs(31982).buffer(30.0, 64)
        session.execute(
            text(
                "INSERT INTO stands (stand_id, name, geometry) "
                "VALUES ('QS1', 'Ponto Q', ST_Multi(ST_GeomFromText(:g, 4326)))"
            ),
            {"g": circle.to_crs(4326).iloc[0].wkt},
        )
        for vid, acc, stands in cls.FLEET[["vehicle_id", "accessible", "stands"]].itertuples(
            index=False
        ):
            session.execute(
                text("INSERT INTO vehicles (vehicle_id, prefixo, accessible) VALUES (:v, :v, :a)"),
                {"v": vid, "a": acc},
            )
            for sid in stands:
                session.execute(
                    text("INSERT INTO parking_licences (vehicle_id, stand_id) VALUES (:v, :s)"),
                    {"v": vid, "s": sid},
                )

    @classmethod
    def batch(cls, session: Session, pings: pd.DataFrame) -> pd.DataFrame:
        stands = stands_frame(session=session)
        cover = build_stand_cover(stands)
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        licences = licence_frame_from_fleet(cls.FLEET)
        visits = detect_visits(
            pings, memberships, stands=stands, licences=licences, max_gap_s=300.0
        )
        return pd.concat(
            [
                detect_queue_jump(visits, pings, fleet=cls.FLEET),
                detect_unlicensed_stand_use(visits, pings, fleet=cls.FLEET),
            ]
        )

    def test_live_finds_what_the_batch_finds(self, db_session: Session) -> None:
        """Fed the fleet's fixes in requests, the visit kinds give the batch detectors' ids."""
        self.register(db_session)
        rows = at_stand("Q1", 0, 1200)  # waits first, licensed
        rows += at_stand("Q2", 300, 600, board_at=600)  # licensed, leaves ahead of Q1
        rows += at_stand("Q3", 690, 900, board_at=900)  # unlicensed, leaves ahead of Q1
        # unlicensed, after Q1 left: the meter on 20 m beyond the edge, 30 s after leaving
        points = [(1240, -150.0, 0.0), *[(t, 1.0, 0.0) for t in range(1270, 1571, 30)]]
        points += [(t, 50.0 + 5 * (t - 1600), 0.0) for t in range(1600, 2001, 30)]
        rows += make_track("Q4", points, meter=["free"] * 12 + ["occupied"] * 14)
        pings = make_pings(rows)
        batch = self.batch(db_session, pings)
        assert sorted(zip(batch["kind"], batch["vehicle_id"], strict=True)) == [
            ("queue_jump", "Q2"),
            ("queue_jump", "Q3"),
            ("unlicensed_stand_use", "Q3"),
            ("unlicensed_stand_use", "Q4"),
        ]
        q4 = batch.loc[batch["vehicle_id"].eq("Q4"), "details"].iloc[0]
        assert 19.0 < q4["boarding_distance_m"] < 21.0
        found = feed(db_session, pings, 5, kinds=VISIT_KINDS)
        assert sorted(f["finding_id"] for f in found) == sorted(batch["finding_id"])
        by_id = {f["finding_id"]: f for f in found}
        for f in batch.to_dict("records"):
            assert by_id[f["finding_id"]]["details"] == f["details"]
        assert all(f["stand_id"] == "QS1" and f["alert_id"] for f in found)
        rows_ = db_session.execute(
            text("SELECT detector FROM live_detector_states WHERE vehicle_id = '*'")
        ).scalars()
        assert set(rows_) == {"visits", "unlicensed_stand_use", "queue_jump:QS1"}

    def test_a_tracker_gone_quiet_at_the_stand_does_not_hold_the_alerts_back(
        self, db_session: Session
    ) -> None:
        """Q1, licensed, waits at QS1 and its tracker stops at 300 s (asleep, the ignition
        off); Q3 boards there unlicensed at 900 s: alerted from the others' fixes once Q1 has
        been silent for the trip gap (an independent check saw such alerts held 15 min, until
        the quiet tracker woke)."""
        self.register(db_session)
        points = [
            (-60, -300.0, 0.0),
            (-30, -150.0, 0.0),
            *[(t, 1.0, 0.0) for t in range(0, 301, 30)],
        ]
        rows = make_track("Q1", points, meter=["free"] * len(points))
        rows += at_stand("Q3", 690, 900, board_at=900)
        found = feed(db_session, make_pings(rows), 5, kinds=("unlicensed_stand_use",))
        assert [f["vehicle_id"] for f in found] == ["Q3"]

    def test_a_vehicle_with_unplaced_licences_is_not_accused(self, db_session: Session) -> None:
        """Q3's fleet import named a stand the registry could not place: its licences are not
        known, so its boarding at QS1 is no unlicensed boarding (it may hold QS1 under another
        code); the same boarding without it is one (the next test)."""
        self.register(db_session)
        db_session.execute(
            text("UPDATE vehicles SET unplaced_stands = '{PONTO X}' WHERE vehicle_id = 'Q3'")
        )
        pings = make_pings(at_stand("Q3", 690, 900, board_at=900))
        assert feed(db_session, pings, 3, kinds=("unlicensed_stand_use",)) == []

    def test_boarding_after_exclusion_names_the_ended_licence(self, db_session: Session) -> None:
        """Q3 excluded from QS1 (art. 50, II) boards there later: the licence and its reason."""
        self.register(db_session)
        reason = "art. 50, II: por decorrência de aplicação de penalidade, pela EPTC"
        db_session.execute(
            text(
                "INSERT INTO parking_licences (vehicle_id, stand_id, valid_from, valid_until) "
                "VALUES ('Q3', 'QS1', '2023-01-01', '2024-01-31')"
            )
        )
        db_session.execute(
            text(
                "INSERT INTO licence_exclusions (vehicle_id, stand_id, excluded_on, reason) "
                "VALUES ('Q3', 'QS1', '2024-02-01', :r)"
            ),
            {"r": reason},
        )
        pings = make_pings(at_stand("Q3", 690, 900, board_at=900))
        found = feed(db_session, pings, 3, kinds=("unlicensed_stand_use",))
        assert [f["vehicle_id"] for f in found] == ["Q3"]
        d = found[0]["details"]
        assert d["licence_end"] == "excluded"
        assert d["licence_ended"]["valid_until"] == "2024-01-31"
        assert d["licence_ended"]["reason"] == reason

    def test_suspensions_from_the_registry_as_in_the_batch(self, db_session: Session) -> None:
        """Q2 suspended at its own stand boards there; the barred auxiliar of Q1 waits there:
        live reads ``stand_suspensions`` and gives the batch's findings."""
        from db.stands.store import suspensions_frame

        self.register(db_session)
        db_session.execute(
            text("INSERT INTO drivers (driver_id, name, synthetic) VALUES ('AUXQ', 'F', true)")
        )
        db_session.execute(
            text(
                "INSERT INTO stand_suspensions (stand_id, vehicle_id, driver_id, starts_on, "
                "ends_on, kind, reason) VALUES ('QS1', 'Q2', NULL, '2024-03-01', '2024-03-20', "
                "'suspension', 'desacato'), ('QS1', NULL, 'AUXQ', '2024-03-02', NULL, 'barred', "
                "'agressão')"
            )
        )
        rows = [dict(r, driver_id="AUXQ") for r in at_stand("Q1", 0, 1200)]
        rows += at_stand("Q2", 300, 600, board_at=600)
        pings = make_pings(rows)
        susp = suspensions_frame(conn=db_session, stand_ids=["QS1"])
        stands = stands_frame(session=db_session)
        cover = build_stand_cover(stands)
        p_idx, s_idx = match_stands(pings["lat"], pings["lon"], cover)
        memberships = pd.DataFrame({"ping_index": p_idx, "stand_id": cover.stand_ids[s_idx]})
        visits = detect_visits(
            pings,
            memberships,
            stands=stands,
            licences=licence_frame_from_fleet(self.FLEET),
            max_gap_s=300.0,
        )
        batch = detect_unlicensed_stand_use(visits, pings, fleet=self.FLEET, suspensions=susp)
        uses = sorted((f["vehicle_id"], f["details"]["use"]) for f in batch.to_dict("records"))
        assert uses == [("Q1", "wait"), ("Q2", "boarding")]
        found = feed(db_session, pings, 4, kinds=("unlicensed_stand_use",))
        assert sorted(f["finding_id"] for f in found) == sorted(batch["finding_id"])
        by_id = {f["finding_id"]: f for f in found}
        for f in batch.to_dict("records"):
            assert by_id[f["finding_id"]]["details"] == f["details"]

    def test_without_stands_nothing_is_kept(self, db_session: Session) -> None:
        """No stand with a geometry: the visit kinds keep no state and find nothing."""
        pings = make_pings(at_stand("Q9", 0, 600, board_at=600))
        assert process_fixes(db_session, pings, kinds=VISIT_KINDS) == []
        n = count(db_session, "SELECT count(*) FROM live_detector_states WHERE vehicle_id = '*'")
        assert n == 0


class TestInactivity:
    def test_judged_when_a_new_local_day_begins(self, db_session: Session) -> None:
        """A registered vehicle never seen is found at the first fix past 60 days, as in batch
        (the other one reports every day: the feed is live), and once."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('INA1', 'INA1'), "
                "('INA2', 'INA2')"
            )
        )
        lat, lon = offset_m(0.0, 0.0)
        days = pd.date_range("2024-01-01", "2024-03-05", freq="D").strftime("%Y-%m-%d")
        pings = make_pings(
            [
                {
                    "vehicle_id": "INA1",
                    "timestamp": f"{d}T15:00:00Z",
                    "lat": lat,
                    "lon": lon,
                    "meter": "occupied",
                }
                for d in days
            ]
        )
        found = []
        for k in range(len(pings)):
            found += process_fixes(db_session, pings.iloc[k : k + 1], kinds=("inactivity",))
        fleet = pd.DataFrame(
            {
                "vehicle_id": ["INA1", "INA2"],
                "status": [None, None],
                "status_since": [None, None],
                "status_until": [None, None],
            }
        )
        closed = pings.iloc[: list(days).index("2024-03-02")]  # 1 Jan–1 Mar: 61 days
        batch = detect_inactivity(closed, fleet, as_of=pd.Timestamp("2024-03-01").date())
        assert batch["vehicle_id"].tolist() == ["INA2"]
        assert [f["finding_id"] for f in found] == batch["finding_id"].tolist()
        assert found[0]["details"] == batch.iloc[0]["details"]


def _register_stands(session: Session, stands: gpd.GeoDataFrame) -> None:
    for sid, geom in zip(stands["stand_id"], stands.geometry, strict=True):
        session.execute(
            text(
                "INSERT INTO stands (stand_id, name, geometry) "
                "VALUES (:s, :s, ST_Multi(ST_GeomFromText(:g, 4326)))"
            ),
            {"s": sid, "g": geom.wkt},
        )


def _without_rows(value: Any) -> Any:
    """Evidence without file rows (live fixes come from the database, which has none)."""
    if isinstance(value, dict):
        return {k: _without_rows(v) for k, v in value.items() if k != "row"}
    if isinstance(value, list):
        return [_without_rows(v) for v in value]
    return value


class TestHabitualAbsence:
    def test_live_equals_batch(self, db_session: Session) -> None:
        """Fed in requests, the worker emits the batch's findings of the days it judges."""
        stands, _ = live_cover()
        _register_stands(db_session, stands)
        for vid, sid in LIVE_LICENCES.itertuples(index=False):
            db_session.execute(
                text("INSERT INTO vehicles (vehicle_id, prefixo) VALUES (:v, :v)"), {"v": vid}
            )
            db_session.execute(
                text("INSERT INTO parking_licences (vehicle_id, stand_id) VALUES (:v, :s)"),
                {"v": vid, "s": sid},
            )
        pings = make_pings(absence_rows())
        found = feed(
            db_session,
            pings,
            40,
            kinds=("habitual_absence",),
            thresholds={"habitual_absence": LIVE_OPTIONS},
        )
        assert [f["vehicle_id"] for f in found] == ["absent", "absent"]  # once per window
        first = local_day(pings["timestamp"].min())
        batch = pd.concat(
            [absence_batch(pings, first + pd.Timedelta(days=k)) for k in range(N_DAYS)]
        ).drop_duplicates("finding_id")
        by_id = {f["finding_id"]: f for f in batch.to_dict("records")}
        for f in found:
            expected = by_id[f["finding_id"]]
            for column in ("stand_id", "started_at", "ended_at", "confidence", "details"):
                assert f[column] == expected[column], column
        states = db_session.execute(  # one row per vehicle: a call rewrites its vehicles' only
            text(
                "SELECT vehicle_id, state FROM live_detector_states "
                "WHERE detector = 'habitual_absence'"
            )
        ).all()
        assert {v for v, _ in states} == set(pings["vehicle_id"])
        for _, state in states:
            assert set(state) == {"days", "visits", "next", "emitted", "near"}
            assert len(state["days"]) <= LIVE_OPTIONS["window_days"]  # the window's days only

    def test_accessible_taxi_is_flagged_from_the_registry(self, db_session: Session) -> None:
        """Registered accessible: its live finding carries ``accessible`` (art. 28 § 2)."""
        stands, _ = live_cover()
        _register_stands(db_session, stands)
        for vid, sid in LIVE_LICENCES.itertuples(index=False):
            db_session.execute(
                text("INSERT INTO vehicles (vehicle_id, prefixo, accessible) VALUES (:v, :v, :a)"),
                {"v": vid, "a": vid == "absent"},
            )
            db_session.execute(
                text("INSERT INTO parking_licences (vehicle_id, stand_id) VALUES (:v, :s)"),
                {"v": vid, "s": sid},
            )
        found = feed(
            db_session,
            make_pings(absence_rows()),
            4,
            kinds=("habitual_absence",),
            thresholds={"habitual_absence": LIVE_OPTIONS},
        )
        assert [f["vehicle_id"] for f in found] == ["absent", "absent"]
        assert all(f["details"]["accessible"] is True for f in found)


class TestIllegalStandFormation:
    def test_live_equals_batch(self, db_session: Session) -> None:
        """Stops closed by the stored fixes feed the rank: emitted once its day closed, as batch."""
        _register_stands(db_session, RANK_STANDS)
        pings = make_pings(fleet_month())
        copy_fixes(db_session.connection(), pings, source="t")
        found = feed(db_session, pings, 25, kinds=("illegal_stand_formation",))
        stops = detect_stops(pings)
        final = detect_illegal_stand_formation(stops, pings, RANK_STANDS)
        assert [f["finding_id"] for f in found] == final["finding_id"].tolist()  # one, once
        emitted = found[0]
        assert emitted["details"]["n_days"] == 3  # emitted when it became certain
        seen = stops.loc[stops["ended_at"] <= emitted["ended_at"]]
        then = detect_illegal_stand_formation(seen, pings, RANK_STANDS).iloc[0]
        assert _without_rows(emitted["details"]) == _without_rows(then["details"])
        assert (emitted["started_at"], emitted["ended_at"]) == (
            then["started_at"],
            then["ended_at"],
        )
        assert final.iloc[0]["details"]["n_vehicles"] == 5  # the rank grew after; same id
        runs = db_session.execute(
            text(
                "SELECT count(*) FROM live_detector_states "
                "WHERE detector = 'illegal_stand_formation' AND vehicle_id <> '*'"
            )
        ).scalar_one()
        assert runs == pings["vehicle_id"].nunique()  # each vehicle's open run

    def test_without_stands_the_rank_is_still_found(self, db_session: Session) -> None:
        """No stand registered: waiting anywhere is outside every stand, as in batch."""
        pings = make_pings(fleet_month())
        copy_fixes(db_session.connection(), pings, source="t")
        found = feed(db_session, pings, 200, kinds=("illegal_stand_formation",))
        empty = RANK_STANDS.iloc[:0]
        batch = detect_illegal_stand_formation(detect_stops(pings), pings, empty)
        assert sorted(f["finding_id"] for f in found) == sorted(batch["finding_id"])
        assert len(found) >= 1

    def test_an_allowed_place_is_no_rank(self, db_session: Session) -> None:
        """The rank's area imported as an allowed place (``allowed_places``): nothing found, as
        in batch given the same area."""
        import geopandas as gpd

        from db.stands.store import load_allowed_places

        _register_stands(db_session, RANK_STANDS)
        pings = make_pings(fleet_month())
        stops = detect_stops(pings)
        [area] = detect_illegal_stand_formation(stops, pings, RANK_STANDS)["geometry"]
        places = gpd.GeoDataFrame({"stand_id": ["E1"]}, geometry=[area], crs=4326)
        load_allowed_places(conn=db_session.connection(), places=places, actor="t", source="t")
        copy_fixes(db_session.connection(), pings, source="t")
        found = feed(db_session, pings, 200, kinds=("illegal_stand_formation",))
        batch = detect_illegal_stand_formation(stops, pings, RANK_STANDS, allowed_places=places)
        assert found == [] and batch.empty

    def test_no_stored_fixes_no_stops(self, db_session: Session) -> None:
        """Runs are read back from ``fixes``: fixes not stored there give no stop (no finding)."""
        _register_stands(db_session, RANK_STANDS)
        pings = make_pings(fleet_month())
        found = process_fixes(db_session, pings, kinds=("illegal_stand_formation",))
        assert found == []


class TestStandCover:
    def test_rebuilt_when_the_stands_change(self, db_session: Session) -> None:
        """No stands: None; a stand added: a cover with it; one more: rebuilt with both."""
        assert stand_cover(db_session) is None
        TestVisitKinds.register(db_session)
        assert list(stand_cover(db_session).stand_ids) == ["QS1"]
        db_session.execute(
            text(
                "INSERT INTO stands (stand_id, geometry) "
                "SELECT 'QS2', ST_Translate(geometry, 0.01, 0) FROM stands WHERE stand_id = 'QS1'"
            )
        )
        assert sorted(stand_cover(db_session).stand_ids) == ["QS1", "QS2"]


class TestThrottling:
    @staticmethod
    def gaps(vehicle: str, starts_min: list[float]) -> pd.DataFrame:
        rows = []
        for m in starts_min:  # each: occupied twice, 6 min of silence, occupied, free
            rows += [
                _fix(vehicle, m - 0.25, 0.0, "occupied", 1),  # the tracker's cadence: 15 s
                _fix(vehicle, m, 0.0, "occupied", 1),
                _fix(vehicle, m + 6, 0.0, "occupied", 1),
                _fix(vehicle, m + 6.5, 0.0, "free"),
            ]
        return make_pings(rows)

    def test_recurrence_within_the_window_is_not_realerted(self, db_session: Session) -> None:
        """Gaps 7 min apart: every finding stored, one alert counting the repeats."""
        found = process_fixes(db_session, self.gaps("THR1", [0, 7, 14]), throttle_s=900)
        assert len(found) == 3 and all(f["new"] for f in found)
        assert [f["alert_id"] is not None for f in found] == [True, False, False]
        row = db_session.execute(
            text("SELECT repeat_count, last_repeat_at FROM alerts WHERE vehicle_id = 'THR1'")
        ).one()
        assert row[0] == 2
        assert pd.Timestamp(row[1]) == T0 + pd.Timedelta(minutes=20)

    def test_after_the_window_a_new_alert(self, db_session: Session) -> None:
        """A recurrence past the window is alerted again."""
        found = process_fixes(db_session, self.gaps("THR2", [0, 30]), throttle_s=900)
        alerts = [f["alert_id"] for f in found]
        assert len(alerts) == 2 and None not in alerts and alerts[0] != alerts[1]

    def test_zero_window_alerts_everything(self, db_session: Session) -> None:
        """throttle_s=0 alerts every new finding."""
        found = process_fixes(db_session, self.gaps("THR3", [0, 7]), throttle_s=0)
        alerts = [f["alert_id"] for f in found]
        assert len(alerts) == 2 and None not in alerts and alerts[0] != alerts[1]

    def test_throttle_key_names_kind_vehicle_stand(self) -> None:
        """The key is kind, vehicle and stand."""
        assert throttle_key("queue_jump", "V1", "S1") == "queue_jump|V1|S1"
        assert throttle_key("tracking_gap", "V1", None) == "tracking_gap|V1|"


class TestAlertMatches:
    ALERT: dict[str, Any] = {  # noqa: RUF012
        "kind": "tracking_gap",
        "stand_id": "S1",
        "bbox": [-51.23, -30.03, -51.22, -30.02],
    }

    @pytest.mark.parametrize(
        ("filters", "expected"),
        [
            (None, True),
            ({}, True),
            ({"kinds": ["tracking_gap", "gps_anomaly"]}, True),
            ({"kinds": ["gps_anomaly"]}, False),
            ({"stand_ids": ["S1"]}, True),
            ({"stand_ids": ["S2"]}, False),
            ({"bbox": [-51.3, -30.1, -51.2, -30.0]}, True),
            ({"bbox": [-51.225, -30.025, -51.0, -29.0]}, True),  # overlaps a corner
            ({"bbox": [-51.1, -30.1, -51.0, -30.0]}, False),
            ({"kinds": ["tracking_gap"], "stand_ids": ["S2"]}, False),
        ],
    )
    def test_filters(self, filters: dict[str, Any] | None, expected: bool) -> None:
        """Kinds, stands and bbox filter; all given filters must pass."""
        assert alert_matches(filters, self.ALERT) is expected

    def test_bbox_filter_drops_alerts_without_geometry(self) -> None:
        """An alert without geometry never passes an area filter."""
        assert not alert_matches({"bbox": [-180, -90, 180, 90]}, {**self.ALERT, "bbox": None})


class TestLiveParams:
    def test_batch_only_parameters_are_left_out(self) -> None:
        """A batch-only threshold is accepted and not passed to the live function."""
        params = live_params(
            "operating_while_barred", {"operating_while_barred": {"include_inferred_trips": False}}
        )
        assert params == {}

    def test_kind_without_live_detection(self) -> None:
        """A kind with no live function is refused."""
        with pytest.raises(LiveConfigError, match="speeding"):
            live_params("speeding", None)

    def test_every_contract_kind_is_live(self) -> None:
        """Each kind of the contract runs live, with the batch's thresholds."""
        from tracking.detectors.detect import KINDS

        assert set(LIVE_KINDS) == set(KINDS)
        thresholds = {
            "habitual_absence": {"window_days": 14, "min_operating_days": 5},
            "illegal_stand_formation": {"min_vehicles": 4, "cluster_radius_m": 60.0},
        }
        assert live_params("habitual_absence", thresholds) == thresholds["habitual_absence"]
        assert live_params("illegal_stand_formation", thresholds) == {
            "min_vehicles": 4,
            "cluster_radius_m": 60.0,
        }


class TestDriverNotAllowed:
    def test_an_unregistered_driver_is_alerted_at_the_first_drop_off(
        self, db_session: Session
    ) -> None:
        """A driver the registry lacks at the wheel of a prefixo with a titular: nothing while
        the ride runs (it may cross midnight), a provisional alert once it ended; the day's
        later ride extends that finding (no second alert); the next day's first fix settles it,
        announced again."""
        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LDN1', 'LDN1'); "
                "INSERT INTO drivers (driver_id, name, synthetic) VALUES "
                "('LDT1', 'Sintético T', true); "
                "INSERT INTO driver_assignments (driver_id, vehicle_id, role, valid_from) VALUES "
                "('LDT1', 'LDN1', 'autorizatario_condutor', '2020-01-01')"
            )
        )

        def ride(minute: int) -> list[dict[str, Any]]:
            return [
                _fix("LDN1", minute + k, 100.0 * k, "occupied" if 0 <= k <= 10 else "free")
                | {"driver_id": "LDX9"}
                for k in range(-1, 12)
            ]

        kinds = ("driver_not_allowed",)
        first = ride(0)
        assert process_fixes(db_session, make_pings(first[:8]), kinds=kinds, throttle_s=0) == []
        (ended,) = process_fixes(db_session, make_pings(first[8:]), kinds=kinds, throttle_s=0)
        assert ended["new"] and ended["alert_id"] and ended["details"]["provisional"] is True
        assert ended["details"]["reason"] == "not_registered"
        fid = ended["finding_id"]
        later = process_fixes(db_session, make_pings(ride(120)), kinds=kinds, throttle_s=0)
        assert [(f["finding_id"], f["new"], f["alert_id"]) for f in later] == [(fid, False, None)]
        assert later[0]["details"]["n_trips"] == 2
        next_day = make_pings([_fix("LDN1", 24 * 60, 0.0, "free") | {"driver_id": "LDX9"}])
        settled = process_fixes(db_session, next_day, kinds=kinds, throttle_s=0)
        assert [(f["finding_id"], f["new"]) for f in settled] == [(fid, False)]
        stored = db_session.execute(
            text("SELECT details FROM findings WHERE finding_id = :f"), {"f": fid}
        ).scalar_one()
        assert "provisional" not in stored and stored["n_trips"] == 2
        alerts = "SELECT count(*) FROM alerts WHERE vehicle_id = 'LDN1'"
        assert count(db_session, alerts) == 1
        assert count(db_session, "SELECT revision FROM alerts WHERE vehicle_id = 'LDN1'") == 1


class TestAuxiliaryOnly:
    def test_live_gives_the_batch_block(self, db_session: Session) -> None:
        """Service left to the auxiliares for 2 days: live, from the registry, finds the batch's
        auxiliary_only block once a later day begins."""
        from db.fleet.store import driver_registry_frames
        from tracking.detectors.driver_not_allowed import detect_driver_not_allowed

        db_session.execute(
            text(
                "INSERT INTO vehicles (vehicle_id, prefixo) VALUES ('LAX1', 'LAX1'); "
                "INSERT INTO drivers (driver_id, name, synthetic) VALUES "
                "('LT1', 'Sintético T', true), ('LA1', 'Sintético A', true), "
                "('LA2', 'Sintético B', true); "
                "INSERT INTO driver_assignments (driver_id, vehicle_id, role, valid_from) VALUES "
                "('LT1', 'LAX1', 'autorizatario_condutor', '2020-01-01'), "
                "('LA1', 'LAX1', 'auxiliar', '2020-01-01'), "
                "('LA2', 'LAX1', 'auxiliar', '2020-01-01')"
            )
        )
        rows = []
        for day, driver in (("03", "LT1"), ("04", "LA1"), ("05", "LA2"), ("06", "LA1")):
            t0 = pd.Timestamp(f"2024-03-{day}T15:00:00Z")
            for k in range(-1, 12):
                lat, lon = offset_m(100.0 * k, 0.0)
                meter = "occupied" if 0 <= k <= 10 else "free"
                rows.append(
                    {
                        "vehicle_id": "LAX1",
                        "timestamp": t0 + pd.Timedelta(seconds=60 * k),
                        "lat": lat,
                        "lon": lon,
                        "meter": meter,
                        "driver_id": driver,
                    }
                )
        pings = make_pings(rows)
        thresholds = {"driver_not_allowed": {"auxiliary_only_min_days": 2}}
        drivers, links = driver_registry_frames(
            conn=db_session, vehicle_ids=["LAX1"], driver_ids=["LT1", "LA1", "LA2"]
        )
        batch = detect_driver_not_allowed(
            pings, drivers=drivers, driver_links=links, auxiliary_only_min_days=2
        )
        assert [d["reason"] for d in batch["details"]] == ["auxiliary_only"]
        found = feed(db_session, pings, 5, kinds=("driver_not_allowed",), thresholds=thresholds)
        assert [f["finding_id"] for f in found] == list(batch["finding_id"])
        assert found[0]["details"]["reasons"][0]["window_until"] == "2024-03-05"
