from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from factories import make_pings, make_track, offset_m

from geo.crs import haversine_m
from stands.visits import detect_visits
from tracking.detectors._errors import DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.queue_jump import detect_queue_jump

STAND = (0.0, 0.0, 30.0)  # north_m, east_m, radius_m of stand "S1"


def visits_for(pings: pd.DataFrame) -> pd.DataFrame:
    lat, lon = offset_m(STAND[0], STAND[1])
    inside = np.flatnonzero(haversine_m(pings["lat"], pings["lon"], lat, lon) <= STAND[2])
    memberships = pd.DataFrame({"ping_index": inside.astype(np.int64), "stand_id": "S1"})
    return detect_visits(pings, memberships, max_gap_s=300.0)


def at_stand(
    vehicle: str,
    arrive: int,
    leave: int,
    *,
    meter: str | None = "free",
    board_at: int | None = None,
) -> list[dict]:
    """Approach from the south, stay at the stand (a fix every 30 s), leave north."""
    points = [(arrive - 60, -300.0, 0.0), (arrive - 30, -150.0, 0.0)]
    points += [(t, 1.0, 0.0) for t in range(arrive, leave + 1, 30)]
    points += [(leave + 30, 150.0, 0.0), (leave + 60, 300.0, 0.0)]
    meters = [meter] * len(points)
    if board_at is not None:
        meters = [("occupied" if t >= board_at else meter) for t, _, _ in points]
    return make_track(vehicle, points, meter=meters)


def detect(rows: list[dict], **kw: object):
    pings = make_pings(rows)
    return detect_queue_jump(visits_for(pings), pings, **kw)


class TestDetectQueueJump:
    def test_leaving_ahead_of_waiting_vehicle_is_found(self) -> None:
        """v2 arrives after v1, boards while v1 still waits free: one finding for v2."""
        found = detect(at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600))
        assert len(found) == 1
        f = found.iloc[0]
        assert (f["kind"], f["vehicle_id"], f["stand_id"]) == ("queue_jump", "v2", "S1")
        assert f["started_at"] == pd.Timestamp("2024-03-04T12:05:00Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-04T12:10:00Z")
        d = f["details"]
        assert d["n_ahead"] == 1 and d["ahead"][0]["vehicle_id"] == "v1"
        assert d["ahead"][0]["wait_s"] == 600.0
        assert d["ahead"][0]["queue_position"] == 1 and d["queue_position"] == 2
        assert d["ahead"][0]["fix_at_our_boarding"]["timestamp"] == "2024-03-04T12:10:00Z"
        assert d["thresholds"] == {"min_wait_ahead_s": 120.0, "tolerance_s": 30.0}
        json.dumps(d)
        assert 0.5 < f["confidence"] < 1.0
        validate_findings(found)

    def test_two_vehicles_passed_raise_confidence(self) -> None:
        """Passing two waiting vehicles is one finding naming both, with more confidence."""
        one = detect(at_stand("v1", 0, 1200) + at_stand("v3", 400, 600, board_at=600))
        two = detect(
            at_stand("v1", 0, 1200)
            + at_stand("v2", 60, 1200)
            + at_stand("v3", 400, 600, board_at=600)
        )
        assert len(two) == 1
        assert [a["vehicle_id"] for a in two.iloc[0]["details"]["ahead"]] == ["v1", "v2"]
        assert two.iloc[0]["confidence"] > one.iloc[0]["confidence"]

    def test_waiting_vehicle_boarding_later_counts(self) -> None:
        """The vehicle ahead boarding 60 s after us (beyond the tolerance) was still passed."""
        found = detect(
            at_stand("v1", 0, 660, board_at=660) + at_stand("v2", 300, 600, board_at=600)
        )
        assert found["vehicle_id"].tolist() == ["v2"]
        assert found.iloc[0]["details"]["ahead"][0]["boarded_at"] == "2024-03-04T12:11:00Z"

    @pytest.mark.parametrize(
        "rows",
        [
            at_stand("v1", 290, 1200) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 1200, meter="off") + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 1200, meter=None) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 480) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 450, board_at=450) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 0, 630, board_at=630) + at_stand("v2", 300, 600, board_at=600),
            at_stand("v1", 500, 1200) + at_stand("v2", 540, 600, board_at=600),
        ],
        ids=[
            "arrived-within-tolerance",
            "ahead-meter-off",
            "ahead-meter-unknown",
            "ahead-left-before",
            "ahead-boarded-before",
            "ahead-boarded-at-once",
            "ahead-waited-too-little",
        ],
    )
    def test_no_jump_cases_are_not_found(self, rows: list[dict]) -> None:
        """Cases that would wrongly accuse the driver who boarded give no finding."""
        assert detect(rows).empty

    def test_min_wait_threshold_is_applied(self) -> None:
        """A vehicle ahead that waited 100 s is passed only when the threshold is lower."""
        rows = at_stand("v1", 500, 1200) + at_stand("v2", 540, 600, board_at=600)
        found = detect(rows, min_wait_ahead_s=60.0)
        assert len(found) == 1
        assert found.iloc[0]["details"]["max_wait_ahead_s"] == 100.0

    def test_vehicle_away_is_not_waiting(self) -> None:
        """A vehicle that left the stand for 6 min (beyond the exit grace) was not in the queue."""
        rows = make_track(
            "v1",
            [(t, 1.0, 0.0) for t in range(0, 301, 30)]
            + [(t, 400.0, 0.0) for t in range(330, 691, 30)]
            + [(t, 1.0, 0.0) for t in range(720, 1201, 30)],
            meter="free",
        )
        assert detect(rows + at_stand("v2", 350, 600, board_at=600)).empty

    def test_accessible_vehicle_is_not_judged(self) -> None:
        """A Táxi Acessível chosen out of order is excused (priority of PcD)."""
        rows = at_stand("acc", 300, 600, board_at=600) + at_stand("v1", 0, 1200)
        fleet = pd.DataFrame({"vehicle_id": ["acc", "v1"], "accessible": [True, False]})
        assert len(detect(rows)) == 1
        assert detect(rows, fleet=fleet).empty

    def test_without_meter_nothing_is_found(self) -> None:
        """Pings without a meter column give an empty, typed frame."""
        rows = at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600)
        pings = make_pings(rows)
        visits = visits_for(pings)
        found = detect_queue_jump(visits, pings.drop(columns=["meter"]))
        assert found.empty and list(found.columns) == list(FINDING_COLUMNS)

    def test_unsorted_pings_give_the_same_findings(self) -> None:
        """Visits built on shuffled pings point at the right fixes."""
        rows = at_stand("v1", 0, 1200) + at_stand("v2", 300, 600, board_at=600)
        pings = make_pings(rows).sample(frac=1.0, random_state=3).reset_index(drop=True)
        found = detect_queue_jump(visits_for(pings), pings)
        assert found["vehicle_id"].tolist() == ["v2"]
        assert found.iloc[0]["details"]["ahead"][0]["fix_at_our_boarding"]["row"] is not None

    @pytest.mark.parametrize(("option", "value"), [("min_wait_ahead_s", -1.0), ("tolerance_s", -5)])
    def test_bad_thresholds_raise(self, option: str, value: float) -> None:
        """Negative thresholds are refused by name."""
        with pytest.raises(DetectorThresholdError, match=option):
            detect(at_stand("v1", 0, 1200), **{option: value})
