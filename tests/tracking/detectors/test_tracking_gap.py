from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from factories import make_pings, make_track
from kernel_checks import assert_pieces_give_batch

from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.kernel import advance, replay_in_pieces
from tracking.detectors.tracking_gap import KERNEL, detect_tracking_gap


def _gap_track(
    meter_before: str | None,
    meter_after: str | None,
    *,
    gap_s: float = 900.0,
    moved_m: float = 2000.0,
    vehicle: str = "T1",
) -> list[dict[str, Any]]:
    """Two fixes 15 s apart, a silence of ``gap_s``, two fixes ``moved_m`` further north."""
    return make_track(
        vehicle,
        [(0, 0, 0), (15, 0, 0), (15 + gap_s, moved_m, 0), (30 + gap_s, moved_m, 0)],
        meter=[meter_before, meter_before, meter_after, meter_after],
    )


def _replay(pings: pd.DataFrame) -> gpd.GeoDataFrame:
    return replay_in_pieces(KERNEL, pings, list(range(1, len(pings))))


def _cadenced(step_s: float, gap_s: float, *, vehicle: str = "C1") -> list[dict[str, Any]]:
    """A ride reporting every ``step_s`` (8 m/s north, occupied), one step of ``gap_s``."""
    times = [k * step_s for k in range(5)]
    times += [times[-1] + gap_s + k * step_s for k in range(3)]
    return make_track(vehicle, [(t, 8.0 * t, 0.0) for t in times], meter="occupied")


class TestDetectTrackingGap:
    @pytest.mark.parametrize(
        ("step_s", "gap_s", "found"),
        [
            (15, 310, False),  # 295 s beyond its cadence
            (15, 320, True),
            (60, 352, False),  # a 60 s tracker: 292 s without its report
            (60, 420, True),
            (300, 305, False),  # Traccar Client's default cadence: no silence at all
            (300, 580, False),
            (300, 610, True),
        ],
    )
    def test_a_gap_is_a_silence_beyond_the_tracker_s_cadence(
        self, step_s: float, gap_s: float, found: bool
    ) -> None:
        """``gap_s − cadence_s > max_gap_s``: a tracker's own interval is no outage."""
        out = detect_tracking_gap(make_pings(_cadenced(step_s, gap_s)))
        assert len(out) == int(found)
        if found:
            assert out.iloc[0]["details"]["cadence_s"] == step_s

    def test_gap_occupied_both_sides_is_a_finding(self) -> None:
        """A 15-min silence with a passenger aboard on both sides gives one finding, explained."""
        found = detect_tracking_gap(make_pings(_gap_track("occupied", "occupied")))
        assert len(found) == 1
        f = found.iloc[0]
        assert f["kind"] == "tracking_gap"
        assert f["vehicle_id"] == "T1"
        assert f["stand_id"] is None
        assert f["started_at"] == pd.Timestamp("2024-03-04T12:00:15Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-04T12:15:15Z")
        d = f["details"]
        assert d["gap_s"] == 900.0
        assert d["displacement_m"] == pytest.approx(2000.0, abs=2)
        assert d["implied_speed_kmh"] == pytest.approx(8.0, abs=0.1)
        assert (d["meter_before"], d["meter_after"]) == ("occupied", "occupied")
        assert d["rule"] == "occupied_both_sides"
        assert [x["row"] for x in d["fixes"]] == [2, 3]
        assert d["fixes"][0]["timestamp"] == "2024-03-04T12:00:15Z"
        assert d["still"] is False  # 8 km/h in a straight line: it drove while silent
        assert d["after_ride"] is False
        assert d["thresholds"] == {
            "max_gap_s": 300.0,
            "parked_radius_m": 100.0,
            "still_speed_kmh": 5.0,
            "max_ride_s": 7200.0,
        }
        assert isinstance(f["geometry"], shapely.LineString)
        json.dumps(d)  # plain JSON

    def test_gap_while_parked_and_free_is_not_a_finding(self) -> None:
        """An hour of silence while parked (10 m) with the meter free is no finding."""
        pings = make_pings(_gap_track("free", "free", gap_s=3600, moved_m=10))
        assert detect_tracking_gap(pings).empty

    @pytest.mark.parametrize(
        ("before", "after", "moved_m", "rule"),
        [
            ("occupied", "occupied", 0.0, "occupied_both_sides"),
            ("occupied", "free", 2000.0, "occupied_before_and_moved"),
            ("occupied", "off", 150.0, "occupied_before_and_moved"),
            ("occupied", None, 2000.0, "occupied_before_and_moved"),
            ("occupied", "free", 50.0, None),
            ("free", "occupied", 2000.0, None),
            ("free", "free", 5000.0, None),
            ("off", "off", 5000.0, None),
            (None, None, 5000.0, None),
        ],
    )
    def test_in_service_rule(
        self, before: str | None, after: str | None, moved_m: float, rule: str | None
    ) -> None:
        """Only gaps starting occupied, and ending occupied or after moving, are findings."""
        found = detect_tracking_gap(make_pings(_gap_track(before, after, moved_m=moved_m)))
        assert len(found) == (rule is not None)
        if rule is not None:
            assert found.iloc[0]["details"]["rule"] == rule

    @pytest.mark.parametrize(("gap_s", "expected"), [(314.0, 0), (315.0, 0), (316.0, 1)])
    def test_gap_must_exceed_max_gap(self, gap_s: float, expected: int) -> None:
        """A silence of exactly max_gap_s beyond a 15 s cadence is not a gap; 1 s more is."""
        points = [(0, 0, 0), (15, 10, 0), (15 + gap_s, 900, 0)]
        track = make_track("T1", points, meter="occupied")
        assert len(detect_tracking_gap(make_pings(track))) == expected

    @pytest.mark.parametrize(("gap_s", "expected"), [(320.0, 0), (600.0, 0), (601.0, 1)])
    def test_a_first_fix_s_cadence_is_unknown(self, gap_s: float, expected: int) -> None:
        """A vehicle's first step, no cadence seen before it, is given the most a cadence may
        be (max_gap_s): a tracker at Traccar Client's 300 s would be a gap at its first report
        a few seconds late."""
        track = make_track("T1", [(0, 0, 0), (gap_s, 900, 0)], meter="occupied")
        assert len(detect_tracking_gap(make_pings(track))) == expected

    def test_vehicles_are_not_joined(self) -> None:
        """The last fix of one vehicle and the first of the next are not a gap."""
        rows = make_track("A", [(0, 0, 0), (15, 100, 0)], meter="occupied") + make_track(
            "B", [(5000, 5000, 0), (5015, 5100, 0)], meter="occupied"
        )
        assert detect_tracking_gap(make_pings(rows)).empty

    def test_confidence_grows_with_gap_and_displacement(self) -> None:
        """Longer silences and larger displacements give higher confidence, never 1."""
        rows = (
            _gap_track("occupied", "occupied", gap_s=400, moved_m=600, vehicle="A")
            + _gap_track("occupied", "occupied", gap_s=3600, moved_m=6000, vehicle="B")
            + _gap_track("occupied", "occupied", gap_s=7000, moved_m=14_000, vehicle="C")
        )
        conf = detect_tracking_gap(make_pings(rows)).set_index("vehicle_id")["confidence"]
        assert 0.5 < conf["A"] < conf["B"] < conf["C"] < 1.0

    def test_a_silence_for_review_has_half_the_confidence(self) -> None:
        """A ``still`` or ``after_ride`` gap is halved, below every proposal floor: an
        8-hour night is no stronger evidence than a 20-minute silence."""
        rows = (
            _gap_track("occupied", "occupied", gap_s=3600, moved_m=6000, vehicle="D")
            + _gap_track("occupied", "occupied", gap_s=3600, moved_m=0, vehicle="S")
            + _gap_track("occupied", "free", gap_s=8 * 3600, moved_m=50_000, vehicle="N")
        )
        found = detect_tracking_gap(make_pings(rows)).set_index("vehicle_id")
        conf = found["confidence"]
        assert conf["D"] > 0.5 > max(conf["S"], conf["N"])
        assert conf["S"] == pytest.approx((0.5 + 0.3 * (1 - 300 / 3600)) * 0.5)
        assert found.loc["N", "details"]["after_ride"] and not found.loc["N", "details"]["still"]

    def test_speed_flagged_fix_lowers_confidence(self) -> None:
        """A gap ending at a speed-flagged fix (doubtful position) gets less confidence."""
        rows = _gap_track("occupied", "occupied", gap_s=400, moved_m=50_000)
        flagged = detect_tracking_gap(make_pings(rows)).iloc[0]
        assert flagged["details"]["fixes"][1]["speed_flag"] is True
        clean = detect_tracking_gap(make_pings(rows, max_speed_kmh=1000)).iloc[0]
        assert flagged["confidence"] == pytest.approx(clean["confidence"] * 0.75)

    def test_unsorted_pings_give_the_same_findings(self) -> None:
        """Row order does not change the findings."""
        rows = _gap_track("occupied", "occupied", vehicle="A") + _gap_track(
            "occupied", "free", vehicle="B"
        )
        pings = make_pings(rows)
        shuffled = pings.sample(frac=1.0, random_state=3)
        a, b = detect_tracking_gap(pings), detect_tracking_gap(shuffled)
        assert a["finding_id"].tolist() == b["finding_id"].tolist()
        assert a["details"].tolist() == b["details"].tolist()

    def test_custom_thresholds_are_used_and_shown(self) -> None:
        """A longer max_gap_s drops the gap; a smaller one keeps it and is shown."""
        pings = make_pings(_gap_track("occupied", "occupied", gap_s=900))
        assert detect_tracking_gap(pings, max_gap_s=1000).empty
        found = detect_tracking_gap(
            pings, max_gap_s=600, parked_radius_m=20, still_speed_kmh=9, max_ride_s=800
        )
        assert found.iloc[0]["details"]["thresholds"] == {
            "max_gap_s": 600.0,
            "parked_radius_m": 20.0,
            "still_speed_kmh": 9.0,
            "max_ride_s": 800.0,
        }
        assert found.iloc[0]["details"]["still"] is True  # 8 km/h < 9

    @pytest.mark.parametrize(
        ("after", "gap_s", "moved_m", "still"),
        [
            ("free", 720, 193, True),  # drop-off in an underground car park: 1 km/h
            ("occupied", 900, 0, True),  # a wait with the meter on, a distance-filter tracker
            ("free", 8 * 3600, 12_000, True),  # ride's end, then home for the night: 1.5 km/h
            ("free", 720, 4000, False),  # a ride driven with the tracker silent: 20 km/h
            ("occupied", 1800, 2600, False),  # 5.2 km/h: slow traffic is still driving
        ],
    )
    def test_a_silence_the_car_mostly_stood_is_still(
        self, after: str, gap_s: float, moved_m: float, still: bool
    ) -> None:
        """Under a walk's speed in a straight line across the silence the car stood most of it:
        the finding says so (``still``), whatever the meter after it."""
        pings = make_pings(_gap_track("occupied", after, gap_s=gap_s, moved_m=moved_m))
        found = detect_tracking_gap(pings)
        assert found.iloc[0]["details"]["still"] is still
        assert _replay(pings)["details"].tolist() == found["details"].tolist()

    @pytest.mark.parametrize(
        ("after", "gap_s", "after_ride"),
        [
            ("free", 7201, True),  # the ride's end, then the night: however far the car went
            ("off", 5 * 3600, True),
            (None, 5 * 3600, True),  # no meter after: the passenger's leaving is unknown too
            ("free", 7200, False),
            ("occupied", 5 * 3600, False),  # the passenger is still aboard after the silence
        ],
    )
    def test_a_silence_longer_than_a_ride_ending_without_passenger_is_after_ride(
        self, after: str | None, gap_s: float, after_ride: bool
    ) -> None:
        """A silence ending without a passenger, longer than ``max_ride_s``, is read as the
        shift's end after the ride (``after_ride``), even at 40 km/h in a straight line."""
        moved_m = gap_s * 40 / 3.6
        pings = make_pings(_gap_track("occupied", after, gap_s=gap_s, moved_m=moved_m))
        d = detect_tracking_gap(pings).iloc[0]["details"]
        assert (d["after_ride"], d["still"]) == (after_ride, False)

    @pytest.mark.parametrize(
        ("refs", "expected"),
        [
            (["r1", "r1", "r2", "r2"], 0),  # a new trip record: the meter cycled
            (["r1", "r1", "r1", "r1"], 1),
            (["r1", "r1", None, None], 1),  # unknown record: the rule's other conditions apply
        ],
    )
    def test_trip_records(self, refs: list[str | None], expected: int) -> None:
        """Silences between two trip records (trip_ref) are meter cycles, not gaps."""
        pings = make_pings(_gap_track("occupied", "occupied"))
        pings["trip_ref"] = pd.Series(refs, dtype=object)
        assert len(detect_tracking_gap(pings)) == expected
        assert len(_replay(pings)) == expected

    def test_pings_without_meter_give_no_finding(self) -> None:
        """Without the meter a silence cannot be told from the end of a shift."""
        pings = make_pings(_gap_track("occupied", "occupied")).drop(columns=["meter"])
        assert detect_tracking_gap(pings).empty

    def test_empty_pings_give_typed_empty_frame(self) -> None:
        """No pings, no findings, with the contract's columns."""
        found = detect_tracking_gap(make_pings([]))
        assert found.empty
        assert list(found.columns) == list(FINDING_COLUMNS)
        validate_findings(found)

    @pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf])
    def test_bad_threshold_raises(self, value: float) -> None:
        """Thresholds must be finite and positive."""
        with pytest.raises(DetectorThresholdError, match="max_gap_s"):
            detect_tracking_gap(make_pings([]), max_gap_s=value)

    def test_naive_timestamps_raise(self) -> None:
        """Naive instants are refused."""
        pings = make_pings(_gap_track("occupied", "occupied"))
        pings["timestamp"] = pings["timestamp"].dt.tz_localize(None)
        with pytest.raises(DetectorInputError, match="fuso"):
            detect_tracking_gap(pings)

    def test_missing_column_raises(self) -> None:
        """A pings frame without lat is refused, naming the column."""
        pings = make_pings(_gap_track("occupied", "occupied")).drop(columns=["lat"])
        with pytest.raises(DetectorInputError, match="lat"):
            detect_tracking_gap(pings)

    def test_unknown_meter_raises(self) -> None:
        """A meter value other than free/occupied/off is refused."""
        pings = make_pings(_gap_track("occupied", "occupied"))
        pings["meter"] = pings["meter"].astype(object)
        pings.loc[0, "meter"] = "busy"
        with pytest.raises(DetectorInputError, match="busy"):
            detect_tracking_gap(pings)


class TestTrackingGapKernel:
    def test_pieces_give_the_batch_findings(self) -> None:
        """Fix by fix or in random pieces, the findings are the batch's, byte for byte."""
        rng = np.random.default_rng(5)
        rows = []
        for v in range(6):
            t, north = 0.0, 0.0
            points, meters = [], []
            for _ in range(60):
                t += float(rng.choice([15, 15, 15, 400, 1200]))
                north += float(rng.choice([0, 20, 300, 3000]))
                points.append((t, north, 0.0))
                meters.append(str(rng.choice(["free", "occupied", "occupied", "off"])))
            rows += make_track(f"V{v}", points, meter=meters)
        assert_pieces_give_batch(KERNEL, make_pings(rows), min_findings=5)

    def test_finding_is_emitted_when_the_next_fix_arrives(self) -> None:
        """Nothing is emitted during the silence; the fix after it emits the gap."""
        pings = make_pings(_gap_track("occupied", "occupied"))
        states: dict[str, Any] = {}
        out = []
        for k in range(len(pings)):
            states, found = advance(KERNEL, states, pings.iloc[k : k + 1])
            out.append(len(found))
        assert out == [0, 0, 1, 0]
        # the last fix, and the three before it: the tracker's cadence before a gap
        assert len(states["T1"]["tail"]["timestamp"]) == 4

    def test_state_is_plain_data_and_input_is_not_modified(self) -> None:
        """The state is JSON-serialisable and a new dict each call."""
        pings = make_pings(_gap_track("occupied", "occupied"))
        state, _ = advance(KERNEL, {}, pings.iloc[:1])
        before = json.dumps(state)
        new_state, _ = advance(KERNEL, state, pings.iloc[1:2])
        assert json.dumps(state) == before
        assert new_state is not state
        json.dumps(new_state)

    def test_late_fix_is_ignored(self) -> None:
        """A fix not later than the last one leaves the state as it was."""
        pings = make_pings(_gap_track("occupied", "occupied"))
        state, _ = advance(KERNEL, {}, pings.iloc[1:2])
        again, found = advance(KERNEL, state, pings.iloc[:1])
        assert len(found) == 0
        assert again == state

    def test_naive_ping_raises(self) -> None:
        """A live ping without timezone is refused."""
        pings = make_pings(_gap_track("occupied", "occupied")).iloc[:1].copy()
        pings["timestamp"] = pd.Series(["2024-03-04T12:00:00"], dtype=object)
        with pytest.raises(DetectorInputError, match="fuso"):
            advance(KERNEL, {}, pings)


@pytest.mark.slow
class TestDetectTrackingGapOnPorto:
    DATA = Path(__file__).resolve().parents[3] / "data" / "porto" / "derived"

    def test_porto_silences_between_trip_records_are_not_gaps(self) -> None:
        """Porto polylines have a fix every 15 s and each record is one passenger trip: the
        silences between records (1,625 of them over 5 min, all fixes 'occupied') are meter
        cycles carried by ``trip_ref``, not tracking gaps; without ``trip_ref`` they would be
        (1,620: five are less than 5 min beyond the 15 s cadence)."""
        from tracking.porto import read_porto_trips

        pings, _, _ = read_porto_trips(self.DATA / "trips_combined.csv")
        assert len(detect_tracking_gap(pings)) == 0
        found = detect_tracking_gap(pings.drop(columns=["trip_ref"]))
        assert len(found) == 1620
        rows = found["details"].map(lambda d: (d["fixes"][0]["row"], d["fixes"][1]["row"]))
        assert all(a != b for a, b in rows)
