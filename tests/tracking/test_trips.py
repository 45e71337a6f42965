"""Trips: meter runs split by silences, trips inferred from stops, distances without GPS jumps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from factories import at, make_pings, make_track, offset_m

from tracking import frames as fr
from tracking._errors import InvalidParameterError, MissingColumnsError, PingFrameError
from tracking.porto import read_porto_trips
from tracking.trips import assign_trip_ids, detect_trips, meter_blip_ends, trip_distances

DATA = Path(__file__).resolve().parents[2] / "data" / "porto" / "derived" / "trips_combined.csv"


def _line(
    t0: float, n: int, *, step_m: float = 100.0, north0: float = 0.0
) -> list[tuple[float, float, float]]:
    """``n`` fixes 15 s apart going north ``step_m`` each (24 km/h for 100 m)."""
    return [(t0 + 15 * k, north0 + step_m * k, 0.0) for k in range(n)]


class TestDetectTripsFromMeter:
    def test_run_of_occupied_fixes(self) -> None:
        """free, free, occupied ×4, free: one trip from the first to the last occupied fix."""
        meters = ["free", "free", "occupied", "occupied", "occupied", "occupied", "free"]
        rows = make_track("V1", _line(0, 7), meter=meters)
        trips = detect_trips(make_pings(rows))
        assert len(trips) == 1
        trip = trips.iloc[0]
        assert (trip["started_at"], trip["ended_at"]) == (at(30), at(75))
        assert (trip["pickup_lat"], trip["pickup_lon"]) == (rows[2]["lat"], rows[2]["lon"])
        assert (trip["dropoff_lat"], trip["dropoff_lon"]) == (rows[5]["lat"], rows[5]["lon"])
        assert trip["trip_id"] == "V1-20240304T120030Z"
        assert trip["distance_m"] == pytest.approx(300.0, rel=1e-3)
        assert trip["source"] == "meter" and trip["n_fixes"] == 4 and trip["first_row"] == 3
        assert trip["pickup_stand_id"] is None

    def test_contract_columns_and_dtypes(self) -> None:
        """TRIP_COLUMNS come first with explicit dtypes, also for an empty result."""
        full = detect_trips(make_pings(make_track("V1", _line(0, 3), meter="occupied")))
        empty = detect_trips(make_pings(make_track("V1", _line(0, 3), meter="free")))
        for frame in (full, empty):
            assert list(frame.columns)[: len(fr.TRIP_COLUMNS)] == list(fr.TRIP_COLUMNS)
            assert str(frame["started_at"].dtype) == "datetime64[ns, UTC]"
            assert str(frame["trip_id"].dtype) == "str"
            assert str(frame["distance_m"].dtype) == "float64"
        assert len(full) == 1 and empty.empty

    @pytest.mark.parametrize(("silence_s", "n_trips"), [(300, 1), (301, 2)])
    def test_split_by_silence(self, silence_s: float, n_trips: int) -> None:
        """A silence longer than max_gap_s inside an occupied run splits it in two trips."""
        points = [*_line(0, 3), *_line(30 + silence_s, 3, north0=300)]
        trips = detect_trips(make_pings(make_track("V1", points, meter="occupied")), max_gap_s=300)
        assert len(trips) == n_trips
        if n_trips == 2:
            assert trips["ended_at"].tolist() == [at(30), at(60 + silence_s)]
            assert trips["distance_m"].tolist() == pytest.approx([200.0, 200.0], rel=1e-3)

    def test_unknown_meter_ends_a_run_and_single_fix_is_a_trip(self) -> None:
        """occupied, None, occupied: two trips of one fix each, distance 0."""
        rows = make_track("V1", _line(0, 3), meter=["occupied", None, "occupied"])
        trips = detect_trips(make_pings(rows))
        assert trips["n_fixes"].tolist() == [1, 1]
        assert trips["distance_m"].tolist() == [0.0, 0.0]

    def test_vehicles_do_not_share_trips(self) -> None:
        """Occupied fixes of two vehicles interleaved in time make one trip per vehicle."""
        rows = make_track("A", _line(0, 3), meter="occupied") + make_track(
            "B", _line(5, 3), meter="occupied"
        )
        trips = detect_trips(make_pings(rows))
        assert trips["vehicle_id"].tolist() == ["A", "B"]
        assert trips["n_fixes"].tolist() == [3, 3]

    def test_stand_of_ping_gives_pickup_stand(self) -> None:
        """pickup_stand_id is the stand of the pickup fix, given per ping in input order."""
        rows = make_track(
            "V1", _line(0, 5), meter=["free", "occupied", "occupied", "free", "occupied"]
        )
        pings = make_pings(rows)
        trips = detect_trips(pings, stand_of_ping=[None, "S9", None, "S1", None])
        assert trips["pickup_stand_id"].tolist() == ["S9", None]

    def test_stand_of_ping_follows_unsorted_input(self) -> None:
        """With an unsorted frame, stand_of_ping is read in the frame's own order."""
        pings = make_pings(make_track("V1", _line(0, 3), meter="occupied"))
        reversed_ = pings.iloc[::-1]
        trips = detect_trips(reversed_, stand_of_ping=["S3", "S2", "S1"])
        assert trips["pickup_stand_id"].tolist() == ["S1"]

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"max_gap_s": 0}, InvalidParameterError, "'max_gap_s' era 0"),
            ({"max_speed_kmh": -1}, InvalidParameterError, "'max_speed_kmh' era -1"),
            ({"stand_of_ping": ["S1"]}, PingFrameError, "um por ping"),
        ],
    )
    def test_bad_arguments(
        self, kwargs: dict[str, Any], error: type[Exception], match: str
    ) -> None:
        """Out-of-range thresholds and a stand_of_ping of the wrong length are refused."""
        pings = make_pings(make_track("V1", _line(0, 3), meter="occupied"))
        with pytest.raises(error, match=match):
            detect_trips(pings, **kwargs)


class TestDetectTripsFromStops:
    def test_movement_between_two_stops(self) -> None:
        """Without meter data: stop, drive, stop gives one trip from departure to arrival."""
        wait1 = [(15 * k, 0.0, 0.0) for k in range(15)]  # 0..210 s
        drive = [(225 + 15 * k, 150.0 * (k + 1), 0.0) for k in range(6)]  # 225..300 s
        wait2 = [(315 + 15 * k, 1000.0, 0.0) for k in range(15)]  # 315..525 s
        pings = make_pings(make_track("V1", wait1 + drive + wait2))
        trips = detect_trips(pings)
        assert len(trips) == 1
        trip = trips.iloc[0]
        assert trip["source"] == "stops"
        assert (trip["started_at"], trip["ended_at"]) == (at(210), at(315))
        assert trip["distance_m"] == pytest.approx(1000.0, rel=1e-3)
        assert (trip["pickup_lat"], trip["pickup_lon"]) == pytest.approx(offset_m(0.0, 0.0))

    def test_a_gps_excursion_of_a_parked_vehicle_is_no_trip(self) -> None:
        """Parked 2 h without meter data, its GPS thrown 5 km away for 150 s and back: the
        excursion cuts the stop in two, but the vehicle did not move: no trip."""
        track = [(15 * k, 5000.0 if 200 <= k < 210 else 0.0, 0.0) for k in range(480)]
        assert detect_trips(make_pings(make_track("V1", track))).empty

    def test_given_stops_are_used(self) -> None:
        """Stops passed in replace detection: the movement between them is the trip."""
        pings = make_pings(make_track("V1", _line(0, 10)))
        stops = pd.DataFrame(
            {
                "vehicle_id": ["V1", "V1"],
                "started_at": [at(0), at(90)],
                "ended_at": [at(30), at(135)],
            }
        )
        trips = detect_trips(pings, stops=stops)
        assert (trips["started_at"].tolist(), trips["ended_at"].tolist()) == ([at(30)], [at(90)])
        assert detect_trips(pings).empty  # a steady drive has no stops

    def test_meter_vehicles_ignore_stops_and_others_use_them(self) -> None:
        """A vehicle with any meter data uses its meter; one with none uses stops."""
        waits = [(15 * k, 0.0, 0.0) for k in range(15)] + [
            (300 + 15 * k, 900.0, 0.0) for k in range(15)
        ]
        rows = make_track("M", waits, meter="free") + make_track("S", waits)
        trips = detect_trips(make_pings(rows))
        assert trips[["vehicle_id", "source"]].values.tolist() == [["S", "stops"]]

    def test_stops_frame_needs_its_columns(self) -> None:
        """Stops without ended_at are refused."""
        pings = make_pings(make_track("V1", _line(0, 3)))
        stops = pd.DataFrame({"vehicle_id": ["V1"], "started_at": [at(0)]})
        with pytest.raises(MissingColumnsError, match="ended_at"):
            detect_trips(pings, stops=stops)


class TestTripDistances:
    @staticmethod
    def _distance(
        points: list[tuple[float, float, float]], **kwargs: Any
    ) -> tuple[float, int, int]:
        pings = make_pings(make_track("V1", points, meter="occupied"))
        trip = detect_trips(pings, **kwargs).iloc[0]
        return trip["distance_m"], trip["n_dropped_fixes"], trip["n_skipped_steps"]

    def test_inner_jump_fix_dropped(self) -> None:
        """A fix 3 km off for one sample is dropped: the distance is the straight 400 m."""
        points = _line(0, 5)
        points[2] = (30, 200.0, 3000.0)
        distance, dropped, skipped = self._distance(points)
        assert distance == pytest.approx(400.0, rel=1e-3)
        assert (dropped, skipped) == (1, 0)

    def test_first_fix_jump_dropped(self) -> None:
        """A bad first fix is dropped from the distance; the pickup stays that fix."""
        points = _line(0, 5)
        points[0] = (0, -5000.0, 0.0)
        pings = make_pings(make_track("V1", points, meter="occupied"))
        trip = detect_trips(pings).iloc[0]
        assert trip["distance_m"] == pytest.approx(300.0, rel=1e-3)
        assert trip["n_dropped_fixes"] == 1
        assert trip["pickup_lat"] == pings["lat"].iloc[0]

    def test_last_fix_jump_dropped(self) -> None:
        """A bad last fix is dropped too."""
        points = _line(0, 5)
        points[4] = (60, 9000.0, 0.0)
        assert self._distance(points)[:2] == (pytest.approx(300.0, rel=1e-3), 1)

    def test_displaced_stretch_dropped(self) -> None:
        """Two fixes 3 km off that move 300 m between them: dropped, not driven; the track is
        joined across them (700 m)."""
        points = _line(0, 8)
        points[3], points[4] = (45, 300.0, 3000.0), (60, 300.0, 3300.0)
        assert self._distance(points) == (pytest.approx(700.0, rel=1e-3), 2, 0)

    def test_teleport_between_consistent_stretches_is_skipped(self) -> None:
        """Two stretches joined by an impossible 5 km step: that step adds nothing."""
        points = [*_line(0, 3), *_line(45, 3, north0=5200.0)]
        assert self._distance(points) == (pytest.approx(400.0, rel=1e-3), 0, 1)

    @pytest.mark.parametrize(("limit", "expected"), [(100.0, 400.0), (10.0, 0.0)])
    def test_limit_decides(self, limit: float, expected: float) -> None:
        """Steps of 24 km/h count under a 100 km/h limit; under 10 km/h none does."""
        distance, _, _ = self._distance(_line(0, 5), max_speed_kmh=limit)
        assert distance == pytest.approx(expected, rel=1e-3)

    def test_trips_are_independent(self) -> None:
        """Jump filtering never looks across two trips."""
        ts = (np.arange(6) * 15 * 1_000_000_000).astype(np.int64)
        lat = np.array([0.0, 0.001, 0.002, 1.0, 1.001, 1.002])
        lon = np.zeros(6)
        dist, dropped, skipped = trip_distances(
            ts, lat, lon, np.array([0, 3]), np.array([2, 5]), max_speed_kmh=250.0
        )
        assert dist == pytest.approx([222.4, 222.4], rel=1e-3)
        assert dropped.tolist() == [0, 0] and skipped.tolist() == [0, 0]


class TestAssignTripIds:
    def test_each_fix_gets_its_trip(self) -> None:
        """Fixes inside a trip get its id (the start fix included); others get <NA>."""
        meters = ["free", "occupied", "occupied", "free", "occupied", "occupied"]
        pings = make_pings(make_track("V1", _line(0, 6), meter=meters))
        trips = detect_trips(pings)
        ids = assign_trip_ids(pings, trips)
        assert ids.isna().tolist() == [True, False, False, True, False, False]
        assert ids.iloc[1] == ids.iloc[2] == "V1-20240304T120015Z"
        assert ids.iloc[4] == "V1-20240304T120100Z"
        starts = pings["timestamp"].isin(trips["started_at"]) & ids.notna()
        assert starts.tolist() == [False, True, False, False, True, False]

    def test_keeps_index_and_vehicles_apart(self) -> None:
        """The result is aligned with the frame's index; same times, other vehicle: no trip."""
        rows = make_track("A", _line(0, 3), meter="occupied") + make_track(
            "B", _line(0, 3), meter="free"
        )
        pings = make_pings(rows).sample(frac=1.0, random_state=3)
        pings.index = pings.index + 100
        ids = assign_trip_ids(pings, detect_trips(pings))
        assert ids.index.equals(pings.index)
        assert (ids.notna() == (pings["vehicle_id"] == "A")).all()

    def test_missing_columns(self) -> None:
        """A trips frame without trip_id is refused."""
        pings = make_pings(make_track("V1", _line(0, 2)))
        with pytest.raises(MissingColumnsError, match="trip_id"):
            assign_trip_ids(
                pings, pd.DataFrame({"vehicle_id": [], "started_at": [], "ended_at": []})
            )


class TestDetectTripsRealData:
    def test_porto_trips(self) -> None:
        """Every labelled Porto trip's first fix starts or lies inside a detected trip."""
        pings, _, labels = read_porto_trips(DATA, now=pd.Timestamp("2024-01-01T00:00:00Z"))
        trips = detect_trips(pings)
        # Each record is its own trip (trip_ref): 2,101 records with points, plus 4 pieces where
        # two overlapping records of the same taxi interleave (taxis 20000305 and 20000320).
        assert len(trips) == 2105
        assert len(detect_trips(pings.drop(columns=["trip_ref"]))) == 2040  # merged runs
        assert (trips["source"] == "meter").all()
        ids = assign_trip_ids(pings, trips)
        assert ids.notna().all()
        assert trips["trip_id"].is_unique
        first_fix = labels[labels["n_points"] > 0][["vehicle_id", "started_at"]]
        merged = first_fix.merge(
            pings.assign(trip_id=ids)[["vehicle_id", "timestamp", "trip_id"]],
            left_on=["vehicle_id", "started_at"],
            right_on=["vehicle_id", "timestamp"],
        )
        assert len(merged) == len(first_fix) and merged["trip_id"].notna().all()
        assert (trips["distance_m"] >= 0).all()
        assert int(trips["n_dropped_fixes"].sum()) + int(trips["n_skipped_steps"].sum()) > 0


class TestMeterBlip:
    @pytest.mark.parametrize(
        ("meters", "gap_s", "blip"),
        [
            ("OFO", 15, True),  # one fix read free inside a ride
            ("OFFO", 15, True),  # two
            ("OFFFO", 15, False),  # three: a stop, the passenger left and another boarded
            ("FFO", 15, False),  # no ride before: a boarding
            ("OFO", 70, False),  # 140 s from the ride's last occupied fix: a new ride
        ],
    )
    def test_one_or_two_fixes_not_occupied_inside_a_ride(
        self, meters: str, gap_s: float, blip: bool
    ) -> None:
        """meter_blip_ends: the start after 1-2 fixes not occupied, within 120 s of the ride's
        last occupied fix, ends a blip; a silence (another stretch) ends the ride."""
        occupied = np.array([m == "O" for m in meters])
        t = np.arange(len(meters), dtype=np.int64) * round(gap_s * 1e9)
        start = np.array([len(meters) - 1])
        same = np.zeros(len(meters), dtype=np.int64)
        assert meter_blip_ends(occupied, same, t, start).tolist() == [blip]
        apart = same.copy()
        apart[-1] = 1  # a silence before the start
        assert meter_blip_ends(occupied, apart, t, start).tolist() == [False]
