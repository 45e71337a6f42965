from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pandas as pd
import pytest
from factories import make_pings, offset_m
from kernel_checks import assert_pieces_give_batch, geojson_bytes

from tracking.detectors._errors import DetectorInputError, DetectorThresholdError, FleetFrameError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.kernel import advance, open_findings, replay_in_pieces
from tracking.detectors.operating_while_barred import (
    KERNEL,
    REASONS,
    detect_operating_while_barred,
)
from tracking.detectors.tracking_gap import KERNEL as GAP_KERNEL
from tracking.trips import detect_trips

D = dt.date


def ride(vehicle: str, start: str, *, minutes: float = 10, step_s: int = 30) -> list[dict]:
    """A free fix, an occupied ride of ``minutes`` (a fix every ``step_s``), a free fix."""
    t0 = pd.Timestamp(start)
    n = int(minutes * 60 // step_s)
    rows = []
    for k in range(-1, n + 2):
        lat, lon = offset_m(100.0 * k, 0.0)
        rows.append(
            {
                "vehicle_id": vehicle,
                "timestamp": t0 + pd.Timedelta(seconds=step_s * k),
                "lat": lat,
                "lon": lon,
                "meter": "occupied" if 0 <= k <= n else "free",
            }
        )
    return rows


def fleet(**columns: Any) -> pd.DataFrame:
    row = {
        "vehicle_id": "v1",
        "status": "active",
        "status_since": None,
        "status_until": None,
        "alvara_valid_until": None,
        "inspection_valid_until": None,
    }
    row.update(columns)
    return pd.DataFrame([row])


def detect(rows: list[dict], fleet_frame: pd.DataFrame, **kw: Any) -> pd.DataFrame:
    pings = make_pings(rows)
    trips = detect_trips(pings, max_gap_s=300.0)
    return detect_operating_while_barred(trips, fleet_frame, pings=pings, **kw)


SUSPENDED = {"status": "suspended", "status_since": D(2024, 3, 1), "status_until": D(2024, 3, 10)}


class TestDetectOperatingWhileBarred:
    @pytest.mark.parametrize(
        ("start", "expected"),
        [
            ("2024-02-29T15:00:00Z", 0),
            ("2024-03-01T15:00:00Z", 1),
            ("2024-03-10T15:00:00Z", 1),
            ("2024-03-11T15:00:00Z", 0),
            ("2024-03-11T02:30:00Z", 1),  # 23:30 of 10 March in Porto Alegre
            ("2024-03-11T03:30:00Z", 0),  # 00:30 of 11 March
        ],
    )
    def test_status_period_is_inclusive_local_dates(self, start: str, expected: int) -> None:
        """status_since/status_until bar their local dates inclusively, not UTC dates."""
        assert len(detect(ride("v1", start), fleet(**SUSPENDED))) == expected

    def test_timezone_keyword_moves_the_day(self) -> None:
        """In UTC the 02:30Z ride is on 11 March, after the suspension."""
        rows = ride("v1", "2024-03-11T02:30:00Z")
        assert detect(rows, fleet(**SUSPENDED), timezone="UTC").empty

    def test_finding_contents(self) -> None:
        """The finding names the reason, the registry dates, the trip and its fixes."""
        found = detect(ride("v1", "2024-03-05T15:00:00Z"), fleet(**SUSPENDED))
        validate_findings(found)
        assert list(found.columns) == list(FINDING_COLUMNS)
        f = found.iloc[0]
        assert f["started_at"] == pd.Timestamp("2024-03-05T15:00:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-05T15:10:00Z")
        d = f["details"]
        json.dumps(d)
        assert d["reason"] == "suspended"
        assert d["reasons"] == [
            {
                "reason": "suspended",
                "status": "suspended",
                "status_since": "2024-03-01",
                "status_until": "2024-03-10",
            }
        ]
        assert d["local_date"] == "2024-03-05" and d["n_trips"] == 1
        assert d["trips"][0]["trip_id"] == "v1-20240305T150000Z"
        assert [x["row"] for x in d["fixes"]] == [2, 22]
        assert d["thresholds"] == {"min_trip_duration_s": 60.0}
        assert f["confidence"] == pytest.approx(0.95 * (0.7 + 0.3 * 600 / 1800))

    @pytest.mark.parametrize("status", ["suspended", "out_of_operation", "revoked", "reserved"])
    def test_each_barring_status_is_a_reason(self, status: str) -> None:
        """Suspended, Fora de Operação, revoked and reserved all bar operation."""
        registry = fleet(status=status, status_since=D(2024, 3, 1))
        found = detect(ride("v1", "2024-03-05T15:00:00Z"), registry)
        assert found.iloc[0]["details"]["reason"] == status

    def test_active_vehicle_is_not_found(self) -> None:
        """An active vehicle with valid documents operates lawfully."""
        rows = ride("v1", "2024-03-05T15:00:00Z")
        assert detect(rows, fleet(alvara_valid_until=D(2025, 1, 1))).empty

    @pytest.mark.parametrize(
        ("column", "reason"),
        [
            ("alvara_valid_until", "alvara_expired"),
            ("inspection_valid_until", "inspection_expired"),
        ],
    )
    def test_expired_document_bars_from_the_next_day(self, column: str, reason: str) -> None:
        """The validity day is fine; the day after is barred, days_expired counted."""
        limit = {column: D(2024, 3, 10)}
        assert detect(ride("v1", "2024-03-10T22:00:00Z"), fleet(**limit)).empty
        found = detect(ride("v1", "2024-03-11T15:00:00Z"), fleet(**limit))
        assert found.iloc[0]["details"]["reasons"] == [
            {"reason": reason, column: "2024-03-10", "days_expired": 1}
        ]
        later = detect(ride("v1", "2024-04-20T15:00:00Z"), fleet(**limit))
        assert later.iloc[0]["confidence"] > found.iloc[0]["confidence"]

    def test_several_reasons_one_finding_most_serious_first(self) -> None:
        """Suspended with expired alvará and vistoria: one finding, reasons in order."""
        f = fleet(
            **SUSPENDED, alvara_valid_until=D(2024, 1, 1), inspection_valid_until=D(2024, 2, 1)
        )
        found = detect(ride("v1", "2024-03-05T15:00:00Z"), f)
        assert len(found) == 1
        reasons = [r["reason"] for r in found.iloc[0]["details"]["reasons"]]
        assert reasons == ["suspended", "alvara_expired", "inspection_expired"]
        assert reasons == sorted(reasons, key=REASONS.index)

    def test_one_finding_per_vehicle_day(self) -> None:
        """Two rides on a day give one finding spanning both; another day gives another."""
        rows = ride("v1", "2024-03-05T12:00:00Z") + ride("v1", "2024-03-05T18:00:00Z")
        rows += ride("v1", "2024-03-06T12:00:00Z")
        found = detect(rows, fleet(**SUSPENDED))
        assert len(found) == 2
        first = found.iloc[0]
        assert first["details"]["n_trips"] == 2
        assert first["started_at"] == pd.Timestamp("2024-03-05T12:00:00Z")
        assert first["ended_at"] == pd.Timestamp("2024-03-05T18:10:00Z")

    def test_short_meter_blip_is_not_service(self) -> None:
        """A 30 s occupied blip is no service unless the threshold is lowered."""
        rows = ride("v1", "2024-03-05T15:00:00Z", minutes=0.5)
        assert detect(rows, fleet(**SUSPENDED)).empty
        assert len(detect(rows, fleet(**SUSPENDED), min_trip_duration_s=0.0)) == 1

    def test_unknown_status_start_lowers_confidence(self) -> None:
        """A status without status_since bars its snapshot day, at 0.7 times the confidence."""
        rows = ride("v1", "2024-03-05T15:00:00Z")
        dated = detect(rows, fleet(**SUSPENDED)).iloc[0]
        undated = detect(rows, fleet(status="suspended"), as_of=D(2024, 3, 5)).iloc[0]
        assert undated["details"]["reasons"][0]["status_since"] is None
        assert undated["details"]["reasons"][0]["status_known_since"] == "2024-03-05"
        assert undated["confidence"] == pytest.approx(dated["confidence"] * 0.7, abs=1e-4)

    @pytest.mark.parametrize(
        ("until", "as_of", "days"),
        [
            (None, D(2024, 3, 10), ["2024-03-10"]),
            (None, D(2024, 3, 11), []),
            (None, None, []),
            (D(2024, 3, 12), D(2024, 3, 9), ["2024-03-09", "2024-03-10"]),
            (D(2024, 3, 8), D(2024, 3, 9), []),
        ],
    )
    def test_unknown_status_start_bars_no_day_before_the_snapshot(
        self, until: dt.date | None, as_of: dt.date | None, days: list[str]
    ) -> None:
        """A suspension without status_since is known only as of the registry's day (as_of):
        service on the days before it, the suspension may not have begun, is never barred."""
        rows = [r for d in range(1, 11) for r in ride("v1", f"2024-03-{d:02d}T15:00:00Z")]
        registry = fleet(status="suspended", status_until=until)
        found = detect(rows, registry, as_of=as_of)
        assert [f["local_date"] for f in found["details"]] == days

    def test_as_of_must_be_a_date(self) -> None:
        """A timestamp is not a day."""
        with pytest.raises(DetectorThresholdError, match="as_of"):
            detect(ride("v1", "2024-03-05T15:00:00Z"), fleet(), as_of=pd.Timestamp("2024-03-05"))

    @pytest.mark.parametrize(("parked", "found"), [(True, 0), (False, 1)])
    def test_a_meter_on_in_a_parked_car_is_not_service(self, parked: bool, found: int) -> None:
        """Suspended, parked at home 10 min with the meter on, GPS noise of a few metres (its
        steps add 200 m of driven length): an independent check had it proposed under art.
        60 V. Driving the same 10 min: found."""
        rows = ride("v1", "2024-03-05T15:00:00Z")
        noise = [(0.0, 0.0), (6.0, 4.0), (-5.0, 7.0), (3.0, -6.0), (-4.0, -3.0)]
        if parked:
            for k, row in enumerate(rows):
                row["lat"], row["lon"] = offset_m(*noise[k % len(noise)])
        pings = make_pings(rows)
        trip = detect_trips(pings, max_gap_s=300.0).iloc[0]
        assert trip["distance_m"] > 150.0
        assert (trip["spread_m"] < 10.0) == parked
        assert len(detect(rows, fleet(**SUSPENDED))) == found

    def test_stop_inferred_trips_are_service_only_on_request(self) -> None:
        """A movement between stops is not operating (a car Fora de Operação may transit,
        art. 38 II): no finding by default; on request, at lower confidence."""
        trips = pd.DataFrame(
            {
                "vehicle_id": ["v1"],
                "trip_id": ["v1-x"],
                "started_at": pd.to_datetime(["2024-03-05T15:00:00Z"]),
                "ended_at": pd.to_datetime(["2024-03-05T15:30:00Z"]),
                "pickup_lat": [-30.0],
                "pickup_lon": [-51.2],
                "dropoff_lat": [-30.01],
                "dropoff_lon": [-51.2],
                "source": ["stops"],
            }
        )
        assert detect_operating_while_barred(trips, fleet(**SUSPENDED)).empty
        found = detect_operating_while_barred(
            trips, fleet(**SUSPENDED), include_inferred_trips=True
        )
        assert found.iloc[0]["confidence"] == pytest.approx(0.6)
        assert found.iloc[0]["details"]["fixes"][0]["row"] is None

    def test_unmetered_tracker_driving_while_barred_is_not_accused(self) -> None:
        """Without meter data, a drive from a stop to the vistoria and back (the trips inferred
        from the stops) while Fora de Operação is no finding; the same with the meter
        occupied is one."""
        rows = []
        for k, (start, north) in enumerate(
            [("2024-03-05T12:00:00Z", 0.0), ("2024-03-05T13:00:00Z", 3000.0)]
        ):
            t0 = pd.Timestamp(start)
            stay = [(t0 + pd.Timedelta(seconds=30 * j), north) for j in range(21)]
            drive = [
                (
                    t0 + pd.Timedelta(seconds=630 + 30 * j),
                    north + (150.0 * j if k == 0 else -150.0 * j),
                )
                for j in range(1, 20)
            ]
            for stamp, n in stay + drive:
                lat, lon = offset_m(n, 0.0)
                rows.append({"vehicle_id": "v1", "timestamp": stamp, "lat": lat, "lon": lon})
        pings = make_pings(rows)
        trips = detect_trips(pings, max_gap_s=300.0)
        assert set(trips["source"]) == {"stops"}
        registry = fleet(
            status="out_of_operation", status_since=D(2024, 3, 1), status_until=D(2024, 3, 31)
        )
        assert detect_operating_while_barred(trips, registry, pings=pings).empty
        assert (
            len(
                detect_operating_while_barred(
                    trips, registry, pings=pings, include_inferred_trips=True
                )
            )
            == 1
        )
        assert len(detect(ride("v1", "2024-03-05T15:00:00Z"), registry)) == 1

    def test_vehicle_absent_from_fleet_is_not_judged(self) -> None:
        """Only fleet vehicles are judged."""
        assert detect(ride("v9", "2024-03-05T15:00:00Z"), fleet(**SUSPENDED)).empty

    @pytest.mark.parametrize(
        ("columns", "match"),
        [({"status": "busy"}, "status"), ({"alvara_valid_until": "10/03/2024"}, "alvara")],
    )
    def test_bad_fleet_values_raise(self, columns: dict, match: str) -> None:
        """Unknown statuses and unreadable dates are refused by name."""
        with pytest.raises(FleetFrameError, match=match):
            detect(ride("v1", "2024-03-05T15:00:00Z"), fleet(**columns))

    def test_missing_trip_columns_raise(self) -> None:
        """Trips without pickup coordinates are refused."""
        trips = detect_trips(make_pings(ride("v1", "2024-03-05T15:00:00Z")))
        with pytest.raises(DetectorInputError, match="pickup_lat"):
            detect_operating_while_barred(trips.drop(columns=["pickup_lat"]), fleet())


def _stream() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two vehicles over four days: barred and lawful days, a ride across local midnight."""
    rows = ride("v1", "2024-03-04T12:00:00Z") + ride("v1", "2024-03-05T02:55:00Z", minutes=20)
    rows += ride("v1", "2024-03-05T15:00:00Z") + ride("v1", "2024-03-06T15:00:00Z")
    rows += ride("v1", "2024-03-06T15:20:00Z", minutes=0.5) + ride("v1", "2024-03-08T15:00:00Z")
    # v2: a silence of 10 min splits a ride into two trips; alvará expired on the 5th.
    rows += ride("v2", "2024-03-05T12:00:00Z") + ride("v2", "2024-03-06T12:00:00Z")
    second = ride("v2", "2024-03-06T12:20:30Z")
    for r in second:
        r["meter"] = "occupied"
    rows += second[1:]
    rows += ride("v2", "2024-03-07T12:00:00Z")
    registry = pd.DataFrame(
        {
            "vehicle_id": ["v1", "v2"],
            "status": ["suspended", "active"],
            "status_since": [D(2024, 3, 4), None],
            "status_until": [D(2024, 3, 6), None],
            "alvara_valid_until": [None, D(2024, 3, 5)],
            "inspection_valid_until": [D(2024, 3, 7), None],
        }
    )
    return make_pings(rows), registry


class TestOperatingWhileBarredKernel:
    def test_pieces_give_the_batch_findings(self) -> None:
        """Fix by fix or in random pieces, over vehicles and days, the findings are the batch's."""
        pings, registry = _stream()
        batch = assert_pieces_give_batch(KERNEL, pings, min_findings=5, fleet=registry)
        assert {f["local_date"] for f in batch["details"]} >= {"2024-03-04", "2024-03-06"}

    def test_kernel_is_the_batch_function_on_meter_trips(self) -> None:
        """The kernel's rule is detect_operating_while_barred over the pipeline's trips."""
        pings, registry = _stream()
        batch = detect_operating_while_barred(
            detect_trips(pings, max_gap_s=300.0), registry, pings=pings
        )
        assert geojson_bytes(KERNEL.detect(pings, fleet=registry)) == geojson_bytes(batch)

    def test_ride_across_local_midnight_counts_on_its_start_day(self) -> None:
        """A ride from 23:55 to 00:15 is service on the day it began, whichever fix cuts it."""
        rows = ride("v1", "2024-03-05T02:55:00Z", minutes=20)
        pings = make_pings(rows)
        registry = fleet(status="suspended", status_since=D(2024, 3, 4), status_until=D(2024, 3, 4))
        batch = KERNEL.detect(pings, fleet=registry)
        assert [d["local_date"] for d in batch["details"]] == ["2024-03-04"]
        for cut in range(1, len(pings)):
            live = replay_in_pieces(KERNEL, pings, [cut], fleet=registry)
            assert geojson_bytes(live) == geojson_bytes(batch)

    def test_suspension_from_mid_stream_bars_its_days_only(self) -> None:
        """Suspended from the 5th: the 4th's rides are lawful, the 5th's form one finding."""
        rows = ride("v1", "2024-03-04T20:00:00Z") + ride("v1", "2024-03-05T12:00:00Z")
        rows += ride("v1", "2024-03-05T18:00:00Z")
        pings = make_pings(rows)
        registry = fleet(status="suspended", status_since=D(2024, 3, 5))
        batch = assert_pieces_give_batch(KERNEL, pings, fleet=registry)
        assert [d["local_date"] for d in batch["details"]] == ["2024-03-05"]
        assert batch.iloc[0]["details"]["n_trips"] == 2

    def test_day_is_emitted_once_the_day_is_over(self) -> None:
        """Nothing is emitted during the barred day; the next day's first fix emits it."""
        pings = make_pings(ride("v1", "2024-03-05T15:00:00Z") + ride("v1", "2024-03-06T15:00:00Z"))
        registry = fleet(status="suspended", status_since=D(2024, 3, 5), status_until=D(2024, 3, 5))
        states: dict[str, Any] = {}
        emitted = []
        for k in range(len(pings)):
            states, found = advance(KERNEL, states, pings.iloc[k : k + 1], fleet=registry)
            emitted.append(len(found))
            json.dumps(states)  # plain data
        assert sum(emitted) == 1
        first_next_day = pings.index[pings["timestamp"] >= "2024-03-06T03:00:00Z"][0]
        assert emitted.index(1) == first_next_day
        assert len(advance(KERNEL, states, pings.iloc[:0], final=True, fleet=registry)[1]) == 0

    def test_open_findings_only_grow(self) -> None:
        """Fix by fix, each barred day's finding is seen on the open day from its first ride long
        enough, under its final id and start, never withdrawn, and ending no later than the
        final one."""
        pings, registry = _stream()
        batch = KERNEL.detect(pings, fleet=registry)
        final = {f.finding_id: f for f in batch.itertuples()}
        order = pings.sort_values(["timestamp", "vehicle_id"], kind="stable")
        states: dict[str, Any] = {}
        announced: dict[str, int] = {}
        for k in range(len(order)):
            states, closed = advance(KERNEL, states, order.iloc[k : k + 1], fleet=registry)
            for f in closed.itertuples():
                assert f.finding_id in announced  # announced before its day closed
            for f in open_findings(KERNEL, states, fleet=registry).itertuples():
                assert f.started_at == final[f.finding_id].started_at
                assert f.ended_at <= final[f.finding_id].ended_at
                announced.setdefault(f.finding_id, k)
        assert set(announced) == set(final)

    def test_open_findings_need_a_rule_that_only_grows(self) -> None:
        """A rule whose later fixes may withdraw a finding has none to announce early."""
        with pytest.raises(ValueError, match="withdraw"):
            open_findings(GAP_KERNEL, {})

    def test_lawful_vehicle_keeps_only_its_open_trip(self) -> None:
        """An active vehicle's state holds its open trip, then nothing once it ends."""
        pings = make_pings(ride("v1", "2024-03-05T15:00:00Z"))
        registry = fleet(alvara_valid_until=D(2025, 1, 1))
        states, _ = advance(KERNEL, {}, pings.iloc[:5], fleet=registry)
        assert states["v1"]["tail"]["meter"] == ["occupied"] * 4
        states, _ = advance(KERNEL, states, pings.iloc[5:], fleet=registry)
        assert states["v1"]["tail"] == {}

    def test_unknown_vehicle_is_never_barred(self) -> None:
        """A vehicle absent from the fleet gives nothing and keeps no fixes."""
        pings = make_pings(ride("v9", "2024-03-05T15:00:00Z"))
        registry = fleet(**SUSPENDED)
        states, found = advance(KERNEL, {}, pings, fleet=registry)
        assert len(found) == 0 and states["v9"]["tail"] == {}
        assert len(advance(KERNEL, states, pings.iloc[:0], final=True, fleet=registry)[1]) == 0


def _reasons(found: pd.DataFrame) -> list[list[str]]:
    return [[r["reason"] for r in d["reasons"]] for d in found["details"]]


class TestVehicleAndDocumentReasons:
    @pytest.mark.parametrize(
        ("year", "start", "expected"),
        [
            (2019, "2024-12-31T15:00:00Z", 0),  # age 5 through 31 December Y+5
            (2019, "2025-01-01T15:00:00Z", 1),  # 6 from 1 January Y+6
            (2019, "2025-01-01T02:00:00Z", 0),  # still 31 December in São Paulo
            (None, "2030-01-01T15:00:00Z", 0),  # unknown year: not judged
        ],
    )
    def test_vehicle_over_age_counts_calendar_years(
        self, year: int | None, start: str, expected: int
    ) -> None:
        """Pinto Bandeira art. 10: over 5 years from 1 January of the year after Y+5."""
        found = detect(ride("v1", start), fleet(year=year), max_vehicle_age_years=5)
        assert len(found) == expected
        if expected:
            (ev,) = found["details"].iloc[0]["reasons"]
            assert ev == {
                "reason": "vehicle_over_age",
                "counted_from": "manufacture",
                "year": 2019,
                "first_registered_on": None,
                "base_year": 2019,
                "age_years": 6,
                "max_vehicle_age_years": 5,
            }
            assert found["details"].iloc[0]["thresholds"]["max_vehicle_age_years"] == 5

    def test_vehicle_age_off_by_default(self) -> None:
        """Without a limit (a law without one) an old vehicle is not found."""
        assert detect(ride("v1", "2024-03-04T15:00:00Z"), fleet(year=1990)).empty

    def test_age_from_first_registration_year(self) -> None:
        """Fretamento art. 12 § único: the age counts from the year of first registration."""
        reg = fleet(year=2005, first_registered_on=D(2009, 12, 30))
        kw = {"max_vehicle_age_years": 15, "vehicle_age_counted_from": "first_registration"}
        assert detect(ride("v1", "2024-12-31T15:00:00Z"), reg, **kw).empty
        found = detect(ride("v1", "2025-01-02T15:00:00Z"), reg, **kw)
        assert _reasons(found) == [["vehicle_over_age"]]
        assert found["details"].iloc[0]["reasons"][0]["age_years"] == 16

    @pytest.mark.parametrize(
        ("start", "expected"),
        [
            ("2024-03-31T15:00:00Z", 0),  # since + 30: the last lawful day
            ("2024-04-01T15:00:00Z", 1),
            ("2024-02-20T15:00:00Z", 0),  # before the substitution: not judged
        ],
    )
    def test_substitution_beyond_its_days(self, start: str, expected: int) -> None:
        """Fretamento art. 13: a provisional substitute operates 30 days after its registration."""
        reg = fleet(substitution_since=D(2024, 3, 1), substituted_plate="ABC1D23")
        found = detect(ride("v1", start), reg, max_substitution_days=30)
        assert len(found) == expected
        if expected:
            ev = found["details"].iloc[0]["reasons"][0]
            assert ev == {
                "reason": "substitution_expired",
                "substitution_since": "2024-03-01",
                "days_since": 31,
                "max_substitution_days": 30,
                "days_over": 1,
            }  # the substituted plate (personal data) is not in the finding

    def test_vehicle_under_valid_substitution_is_fine(self) -> None:
        """A substitute within its 30 days bars nothing, even with every limit on."""
        reg = fleet(substitution_since=D(2024, 3, 1), year=2023, last_inspection_on=D(2024, 1, 1))
        kw = {"max_substitution_days": 30, "max_vehicle_age_years": 5}
        assert detect(ride("v1", "2024-03-15T15:00:00Z"), reg, **kw).empty

    @pytest.mark.parametrize(
        ("last", "expected"),
        [
            (D(2023, 3, 6), 0),  # 365 days (2024 is a leap year): not more than 365
            (D(2023, 3, 5), 1),  # 366 days
            (D(2024, 3, 5), 0),  # done late but on the day: fine
            (D(2024, 3, 6), 0),  # after the day: the earlier one is unknown, not judged
            (None, 0),
        ],
    )
    def test_inspection_overdue(self, last: dt.date | None, expected: int) -> None:
        """Pinto Bandeira art. 32 VII: more than 365 days without vistoria."""
        found = detect(
            ride("v1", "2024-03-05T15:00:00Z"),
            fleet(last_inspection_on=last),
            max_inspection_age_days=365,
        )
        assert len(found) == expected
        if expected:
            ev = found["details"].iloc[0]["reasons"][0]
            assert ev == {
                "reason": "inspection_overdue",
                "last_inspection_on": "2023-03-05",
                "days_since": 366,
                "max_inspection_age_days": 365,
                "days_over": 1,
            }

    @pytest.mark.parametrize(
        ("start", "expected"),
        [
            ("2024-03-09T15:00:00Z", 0),  # the day before recolhimento
            ("2024-03-10T15:00:00Z", 1),
            ("2024-03-20T15:00:00Z", 1),
            ("2024-03-21T15:00:00Z", 0),  # returned
        ],
    )
    def test_termo_recolhido_inclusive_dates(self, start: str, expected: int) -> None:
        """Fretamento art. 25 IV: operating while the Termo is recolhido."""
        reg = fleet(termo_recolhido_since=D(2024, 3, 10), termo_recolhido_until=D(2024, 3, 20))
        found = detect(ride("v1", start), reg)
        assert len(found) == expected
        if expected:
            assert _reasons(found) == [["termo_recolhido"]]

    @pytest.mark.parametrize(
        ("start", "expected"),
        [("2024-03-09T15:00:00Z", 1), ("2024-03-10T15:00:00Z", 0), ("2024-04-10T15:00:00Z", 0)],
    )
    def test_before_alvara(self, start: str, expected: int) -> None:
        """Porto Velho art. 15: service before the alvará's issue; the issue day is fine."""
        found = detect(ride("v1", start), fleet(alvara_first_issued_on=D(2024, 3, 10)))
        assert len(found) == expected
        if expected:
            ev = found["details"].iloc[0]["reasons"][0]
            assert ev == {
                "reason": "before_alvara",
                "alvara_first_issued_on": "2024-03-10",
                "days_before": 1,
            }

    def test_new_reasons_follow_statuses_in_order(self) -> None:
        """Several reasons give one finding; a status outranks a document or the age."""
        reg = fleet(**SUSPENDED, year=2010, termo_recolhido_since=D(2024, 3, 1))
        found = detect(ride("v1", "2024-03-05T15:00:00Z"), reg, max_vehicle_age_years=5)
        assert _reasons(found) == [["suspended", "termo_recolhido", "vehicle_over_age"]]
        assert list(REASONS).index("termo_recolhido") < list(REASONS).index("inspection_overdue")

    @pytest.mark.parametrize(
        ("kw", "match"),
        [
            ({"max_vehicle_age_years": -1}, "max_vehicle_age_years"),
            ({"max_substitution_days": 2.5}, "max_substitution_days"),
            ({"vehicle_age_counted_from": "purchase"}, "vehicle_age_counted_from"),
        ],
    )
    def test_bad_limits_raise(self, kw: dict, match: str) -> None:
        """A negative, fractional or unknown limit is refused, naming it."""
        with pytest.raises(DetectorThresholdError, match=match):
            detect(ride("v1", "2024-03-05T15:00:00Z"), fleet(), **kw)

    def test_pieces_give_the_batch_with_the_new_reasons(self) -> None:
        """Fix by fix or in pieces, the new reasons give the batch's findings and bytes."""
        rows = ride("v1", "2024-03-04T12:00:00Z") + ride("v1", "2024-03-05T12:00:00Z")
        rows += ride("v2", "2024-03-04T13:00:00Z") + ride("v2", "2024-03-06T13:00:00Z")
        rows += ride("v3", "2024-03-04T14:00:00Z") + ride("v3", "2024-03-07T14:00:00Z")
        registry = pd.DataFrame(
            {
                "vehicle_id": ["v1", "v2", "v3"],
                "year": [2015, 2023, 2023],
                "substitution_since": [None, D(2024, 2, 3), None],
                "substituted_plate": [None, "XYZ9A87", None],
                "last_inspection_on": [None, None, D(2023, 3, 6)],
                "alvara_first_issued_on": [D(2024, 3, 5), None, None],
            }
        )
        batch = assert_pieces_give_batch(
            KERNEL,
            make_pings(rows),
            min_findings=4,
            fleet=registry,
            max_vehicle_age_years=5,
            max_substitution_days=30,
            max_inspection_age_days=365,
        )
        reasons = {(f["local_date"], r["reason"]) for f in batch["details"] for r in f["reasons"]}
        assert {("2024-03-04", "before_alvara"), ("2024-03-06", "substitution_expired")} <= reasons
        assert ("2024-03-07", "inspection_overdue") in reasons


def _fretamento_limits() -> dict[str, Any]:
    """The fretamento rulebook's limits, bands included (one table: the rulebook's)."""
    from enforcement.rulebook import bundled_rulebooks

    return bundled_rulebooks()[("4314902", "fretamento")].thresholds()["operating_while_barred"]


def _overdue(day: dt.date, last: dt.date, first_registered: dt.date | None) -> list[dict]:
    """The ``inspection_overdue`` evidence of a ride on ``day`` (empty: not overdue)."""
    found = detect(
        ride("v1", f"{day.isoformat()}T15:00:00Z"),
        fleet(last_inspection_on=last, first_registered_on=first_registered),
        **_fretamento_limits(),
    )
    return [
        r for f in found["details"] for r in f["reasons"] if r["reason"] == "inspection_overdue"
    ]


DAY = D(2024, 6, 15)


class TestInspectionBands:
    def test_rulebook_gives_the_bands(self) -> None:
        """The fretamento rulebook passes art. 14 a–e to the detector, c marked at its edge."""
        bands = _fretamento_limits()["inspection_bands"]
        assert [(b["age_min_years"], b["age_max_years"], b["interval_days"]) for b in bands] == [
            (0, 3, 120), (4, 7, 90), (8, 9, 60), (10, 11, 45), (12, 15, 30),
        ]  # fmt: skip
        assert [b["overlaps_previous"] for b in bands] == [False, False, True, False, False]

    @pytest.mark.parametrize(
        ("registered_year", "interval"),
        [
            (2024, 120),  # age 0 (a: "de 0 a 04 anos incompletos")
            (2021, 120),  # age 3
            (2020, 90),  # age 4 (b: "de 04 anos completos")
            (2017, 90),  # age 7
            (2016, 90),  # age 8: b "a 08 anos" and c "8 anos completos" overlap: the larger
            (2015, 60),  # age 9 (c: "a 10 (dez) anos incompletos")
            (2014, 45),  # age 10 (d)
            (2013, 45),  # age 11
            (2012, 30),  # age 12 (e)
            (2009, 30),  # age 15 (e: "a 15 (quinze) anos")
        ],
    )
    def test_each_band_edge(self, registered_year: int, interval: int) -> None:
        """At each age, ``interval`` days since the inspection is lawful and one more is not."""
        registered = D(registered_year, 1, 10)
        last_ok = DAY - dt.timedelta(days=interval)
        assert last_ok.year == DAY.year  # the same age at the inspection as on the day
        assert _overdue(DAY, last_ok, registered) == []
        (ev,) = _overdue(DAY, last_ok - dt.timedelta(days=1), registered)
        assert (ev["max_inspection_age_days"], ev["days_over"]) == (interval, 1)
        band = ev["inspection_band"]
        assert band["age_years"] == DAY.year - registered_year
        assert band["band"]["interval_days"] == interval
        assert band["counted_from"] == "first_registration"

    def test_edge_of_eight_names_both_alineas(self) -> None:
        """At 8 the evidence names c and that b also reads it (90 days, not 60)."""
        (ev,) = _overdue(DAY, DAY - dt.timedelta(days=91), D(2016, 5, 1))
        band = ev["inspection_band"]["band"]
        assert (band["provision"], band["also_read_as"], band["interval_days"]) == (
            "art. 14, c",
            "art. 14, b",
            90,
        )

    def test_unknown_age_takes_the_largest_interval(self) -> None:
        """Without the first registration the safe bound is 120 days."""
        assert _overdue(DAY, DAY - dt.timedelta(days=120), None) == []
        (ev,) = _overdue(DAY, DAY - dt.timedelta(days=121), None)
        assert ev["inspection_band"]["age_years"] is None
        assert ev["inspection_band"]["band"] is None
        assert ev["max_inspection_age_days"] == 120

    def test_changing_band_keeps_the_due_date_of_the_last_inspection(self) -> None:
        """Inspected at 3 (120 days), the vehicle turns 4 (90) on 1 January: not overdue
        before the 120 days; overdue after them, the evidence naming both bands."""
        registered = D(2020, 3, 1)
        last = D(2023, 10, 1)  # age 3
        assert _overdue(D(2024, 1, 10), last, registered) == []  # 101 days, age 4 now
        (ev,) = _overdue(D(2024, 1, 31), last, registered)  # 122 days
        band = ev["inspection_band"]
        assert (band["age_years"], band["age_years_at_last_inspection"]) == (4, 3)
        assert band["band"]["provision"] == "art. 14, b"
        assert band["band_at_last_inspection"]["provision"] == "art. 14, a"
        assert (ev["max_inspection_age_days"], ev["days_over"]) == (120, 2)

    def test_inspected_in_the_stricter_band_counts_its_interval(self) -> None:
        """Inspected at 4 (90 days): 96 days later it is overdue."""
        (ev,) = _overdue(D(2024, 4, 10), D(2024, 1, 5), D(2020, 3, 1))
        assert (ev["max_inspection_age_days"], ev["days_over"]) == (90, 6)

    def test_over_age_vehicle_outside_the_bands_takes_the_largest(self) -> None:
        """At 16 no band applies: 100 days is no inspection finding (the age is its own)."""
        assert _overdue(DAY, DAY - dt.timedelta(days=100), D(2008, 1, 1)) == []

    def test_without_bands_the_single_bound_stays(self) -> None:
        """Pinto Bandeira's 365 days (no bands) is unchanged and names no band."""
        found = detect(
            ride("v1", "2024-03-05T15:00:00Z"),
            fleet(last_inspection_on=D(2023, 3, 5), first_registered_on=D(2015, 1, 1)),
            max_inspection_age_days=365,
        )
        assert "inspection_band" not in found["details"].iloc[0]["reasons"][0]

    @pytest.mark.parametrize(
        ("bands", "match"),
        [
            ([{"age_min_years": 0, "age_max_years": 3, "interval_days": 0}], "interval_days"),
            ([{"age_min_years": 4, "age_max_years": 3, "interval_days": 9}], "age_max_years"),
            (
                [
                    {"age_min_years": 0, "age_max_years": 4, "interval_days": 9},
                    {"age_min_years": 4, "age_max_years": 6, "interval_days": 9},
                ],
                "sobrepostas",
            ),
        ],
    )
    def test_bad_bands_raise(self, bands: list[dict], match: str) -> None:
        """A zero interval, a reversed band or overlapping bands are refused in pt-BR."""
        with pytest.raises(DetectorThresholdError, match=match):
            detect(ride("v1", "2024-03-05T15:00:00Z"), fleet(), inspection_bands=bands)

    def test_pieces_give_the_batch_with_bands(self) -> None:
        """Fix by fix or in pieces, the banded inspection rule gives the batch's bytes."""
        rows = ride("v1", "2024-01-10T12:00:00Z") + ride("v1", "2024-01-31T12:00:00Z")
        rows += ride("v2", "2024-04-04T13:00:00Z") + ride("v2", "2024-04-10T13:00:00Z")
        registry = pd.DataFrame(
            {
                "vehicle_id": ["v1", "v2"],
                "first_registered_on": [D(2020, 3, 1), D(2020, 3, 1)],
                "last_inspection_on": [D(2023, 10, 1), D(2024, 1, 5)],
            }
        )
        batch = assert_pieces_give_batch(
            KERNEL, make_pings(rows), min_findings=2, fleet=registry, **_fretamento_limits()
        )
        days = sorted(
            (f["vehicle_id"], d["local_date"])
            for f, d in zip(batch.to_dict("records"), batch["details"], strict=True)
        )
        assert days == [("v1", "2024-01-31"), ("v2", "2024-04-10")]
