from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import shapely
from factories import make_pings, make_track
from kernel_checks import assert_pieces_give_batch

from enforcement.proposals import propose_all
from enforcement.rulebook import bundled_rulebooks
from tracking.detectors._errors import DetectorInputError, DetectorThresholdError
from tracking.detectors.findings import FINDING_COLUMNS, validate_findings
from tracking.detectors.gps_anomaly import KERNEL, MAX_LISTED, detect_gps_anomaly
from tracking.detectors.kernel import advance


def _steady(vehicle: str, points: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """Fixes every 15 s at the given (north_m, east_m) positions."""
    return make_track(vehicle, [(15.0 * k, n, e) for k, (n, e) in enumerate(points)])


class TestDetectGpsAnomaly:
    def test_single_outlier_is_reported_as_the_outlier_fix(self) -> None:
        """A → B → A' with B 5 km away is one finding naming B as the outlier."""
        pings = make_pings(_steady("T1", [(0, 0), (100, 0), (5100, 0), (200, 0), (300, 0)]))
        found = detect_gps_anomaly(pings)
        assert len(found) == 1
        f = found.iloc[0]
        d = f["details"]
        assert d["pattern"] == "outlier"
        assert [x["row"] for x in d["outlier_fixes"]] == [3]
        assert [x["row"] for x in d["fixes"]] == [2, 3, 4]
        assert d["n_steps"] == 2
        assert d["distance_m"] == pytest.approx(5000, abs=5)
        assert d["dt_s"] == 15.0
        assert d["implied_speed_kmh"] == pytest.approx(1200, abs=2)
        assert d["return_step"]["distance_m"] == pytest.approx(100, abs=1)
        assert d["thresholds"] == {
            "max_speed_kmh": 250.0,
            "min_jump_m": 500.0,
            "max_excursion_s": 300.0,
        }
        assert f["started_at"] == pd.Timestamp("2024-03-04T12:00:15Z")
        assert f["ended_at"] == pd.Timestamp("2024-03-04T12:00:45Z")
        assert f["vehicle_id"] == "T1"
        assert isinstance(f["geometry"], shapely.LineString)
        json.dumps(d)

    @pytest.mark.parametrize(("accuracy_m", "found"), [(None, 1), (20.0, 1), (800.0, 0)])
    def test_a_fix_within_its_own_accuracy_is_no_jump(self, accuracy_m: Any, found: int) -> None:
        """Out of a tunnel the first fix is 1.4 km off, 15 s from the last: at a reported
        accuracy of 800 m the receiver says it may be less than 600 m off, a pace it may keep,
        no failure of the tracking; at 20 m it is a jump, the evidence showing both accuracies."""
        rows = _steady("T1", [(0, 0), (100, 0), (1500, 0), (200, 0), (300, 0)])
        for row in rows:
            row["accuracy_m"] = 10.0 if accuracy_m is not None else None
        rows[2]["accuracy_m"] = accuracy_m
        out = detect_gps_anomaly(make_pings(rows))
        assert len(out) == found
        if found and accuracy_m is not None:
            assert out.iloc[0]["details"]["steps"][0]["accuracy_m"] == [10.0, accuracy_m]

    def test_a_claimed_accuracy_excuses_no_jump_of_kilometres(self) -> None:
        """Each fix's accuracy counts at most 1 km: a 5 km outlier stays one."""
        rows = _steady("T1", [(0, 0), (100, 0), (5100, 0), (200, 0), (300, 0)])
        for row in rows:
            row["accuracy_m"] = 50_000.0
        assert len(detect_gps_anomaly(make_pings(rows))) == 1

    def test_jump_without_return(self) -> None:
        """A position that moves 8 km in 15 s and stays there is one 'jump'."""
        pings = make_pings(_steady("T1", [(0, 0), (100, 0), (8100, 0), (8200, 0)]))
        found = detect_gps_anomaly(pings)
        assert len(found) == 1
        d = found.iloc[0]["details"]
        assert d["pattern"] == "jump"
        assert d["outlier_fixes"] == []
        assert d["return_step"] is None
        assert [x["row"] for x in d["fixes"]] == [2, 3]

    def test_displaced_stretch_is_one_outlier_finding(self) -> None:
        """A jump away, three consistent fixes there, and a jump back: one finding, 4 outliers."""
        track = [(0, 0), (100, 0), (3000, 0), (3100, 0), (3200, 0), (3300, 0), (250, 0), (350, 0)]
        found = detect_gps_anomaly(make_pings(_steady("T1", track)))
        assert len(found) == 1
        d = found.iloc[0]["details"]
        assert d["pattern"] == "outlier"
        assert [x["row"] for x in d["outlier_fixes"]] == [3, 4, 5, 6]
        assert [s["anomalous"] for s in d["steps"]] == [True, False, False, False, True]
        assert d["n_anomalous_steps"] == 2
        assert d["return_step"]["distance_m"] == pytest.approx(150, abs=1)

    def test_jumps_farther_apart_than_max_excursion_are_two_findings(self) -> None:
        """A jump back after more than max_excursion_s is a second, separate jump."""
        away = [(3000.0 + 100 * k, 0.0) for k in range(25)]  # 6 min displaced
        track = [(0.0, 0.0), (100.0, 0.0), *away, (250.0, 0.0), (350.0, 0.0)]
        pings = make_pings(_steady("T1", track))
        found = detect_gps_anomaly(pings)
        assert found["details"].map(lambda d: d["pattern"]).tolist() == ["jump", "jump"]
        assert len(detect_gps_anomaly(pings, max_excursion_s=600)) == 1

    def test_stale_first_fixes_do_not_make_the_true_track_an_outlier(self) -> None:
        """Stale fixes, a jump to the true track, and later a brief outlier nearer the stale
        place (real Porto trip 1372637610620000497): the jump pairs both with the outlier's
        leaving step and that one with its coming back. The shorter excursion is the outlier:
        a jump, then the outlier fixes, never the 16 true fixes between them."""
        stale = [(0, 0), (100, 0), (200, 0)]
        true = [(4000.0 + 100 * k, 0.0) for k in range(16)]
        outlier = [(1500, 0), (1600, 0)]
        track = stale + true + outlier + [(5800.0 + 100 * k, 0.0) for k in range(10)]
        found = detect_gps_anomaly(make_pings(_steady("T1", track)))
        assert found["details"].map(lambda d: d["pattern"]).tolist() == ["jump", "outlier"]
        assert [x["row"] for x in found.iloc[1]["details"]["outlier_fixes"]] == [20, 21]

    def test_jump_back_elsewhere_is_not_an_excursion(self) -> None:
        """Jumping away and then to a third far place is two jumps, not a return."""
        track = [(0, 0), (100, 0), (3000, 0), (3100, 0), (3100, 6000), (3100, 6100)]
        found = detect_gps_anomaly(make_pings(_steady("T1", track)))
        assert found["details"].map(lambda d: d["pattern"]).tolist() == ["jump", "jump"]

    def test_consecutive_anomalous_steps_make_one_finding(self) -> None:
        """Three impossible steps in a row are grouped into one finding."""
        pings = make_pings(
            _steady("T1", [(0, 0), (5000, 0), (0, 5000), (5000, 5000), (5050, 5000)])
        )
        found = detect_gps_anomaly(pings)
        assert len(found) == 1
        assert found.iloc[0]["details"]["n_steps"] == 3

    def test_separate_outliers_make_separate_findings(self) -> None:
        """Two outliers separated by normal steps are two findings."""
        track = [(0, 0), (5000, 0), (50, 0), (100, 0), (150, 0), (6000, 0), (200, 0)]
        found = detect_gps_anomaly(make_pings(_steady("T1", track)))
        assert len(found) == 2
        assert set(found["details"].map(lambda d: d["pattern"])) == {"outlier"}

    def test_two_receivers_under_one_vehicle_are_two_tracks(self) -> None:
        """Two receivers alternating for 9 h under one id (a car driving north, a second
        receiver parked 6 km east) are one 'two_tracks' finding, not a 9-hour outlier: its
        evidence lists 40 steps and 40 fixes of the 4,320, its geometry is the two tracks, and
        the bundled rulebook lists it for review and proposes nothing."""
        n = 4320
        rows = make_track(
            "T1",
            [(7.5 * k, 75.0 * k, 0.0) if k % 2 == 0 else (7.5 * k, 0.0, 6000.0) for k in range(n)],
        )
        found = detect_gps_anomaly(make_pings(rows))
        assert len(found) == 1
        f = found.iloc[0]
        d = f["details"]
        assert d["pattern"] == "two_tracks"
        assert (d["n_steps"], d["n_anomalous_steps"], d["n_fixes"]) == (n - 1, n - 1, n)
        assert len(d["steps"]) == MAX_LISTED and len(d["fixes"]) == MAX_LISTED
        assert [x["row"] for x in d["fixes"]][19:21] == [20, n - 19]  # rows count from 1
        assert d["outlier_fixes"] == [] and d["return_step"] is None
        assert [t["n_fixes"] for t in d["tracks"]] == [n // 2, n // 2]
        assert [(t["first"]["row"], t["last"]["row"]) for t in d["tracks"]] == [
            (1, n - 1),
            (2, n),
        ]
        assert isinstance(f["geometry"], shapely.MultiLineString)
        assert [len(g.coords) for g in f["geometry"].geoms] == [n // 2, n // 2]
        assert len(json.dumps(d)) < 20_000
        done = propose_all(
            found, {"taxi": bundled_rulebooks()[("4314902", "taxi")]}, timezone="America/Sao_Paulo"
        )
        assert done.proposals == [] and done.uncovered == {}
        (item,) = done.for_review  # listed for review, never proposed
        assert item["provision"] == "art. 59, VI"
        assert "dois rastreadores sob o mesmo prefixo" in item["reason"]

    def test_two_receivers_at_different_rates_are_two_tracks(self) -> None:
        """A second receiver reporting every 30 s between a car's fixes every 15 s makes short
        outliers (A B A A B A …): chained, they are one 'two_tracks' finding, not 60 outliers
        that the repetition rule would propose."""
        car = [(15.0 * k, 150.0 * k, 0.0) for k in range(120)]
        other = [(7.5 + 30.0 * k, 20.0 * k, 6000.0) for k in range(60)]
        found = detect_gps_anomaly(make_pings(make_track("T1", car + other)))
        (d,) = found["details"]
        assert d["pattern"] == "two_tracks"
        assert [t["n_fixes"] for t in d["tracks"]] == [120, 60]
        done = propose_all(
            found, {"taxi": bundled_rulebooks()[("4314902", "taxi")]}, timezone="America/Sao_Paulo"
        )
        assert done.proposals == []

    def test_outliers_to_different_places_stay_apart(self) -> None:
        """Five outliers a minute apart, each to another far place (no second track), are
        five outliers, proposable together under the repetition rule (5 in 1 h)."""
        track = [(0, 0), (5000, 0), *_ahead(0, 3), (0, 9000), *_ahead(300, 3)]
        track += [(-7000, 0), *_ahead(600, 3), (900, -9000), *_ahead(900, 3)]
        track += [(-6000, 8000), *_ahead(1200, 3)]
        found = detect_gps_anomaly(make_pings(_steady("T1", track)))
        assert found["details"].map(lambda d: d["pattern"]).tolist() == ["outlier"] * 5
        done = propose_all(
            found, {"taxi": bundled_rulebooks()[("4314902", "taxi")]}, timezone="America/Sao_Paulo"
        )
        assert len(done.proposals) == 1

    def test_a_reflection_that_recurs_stays_an_outlier(self) -> None:
        """A → B → A → B → A (four impossible steps, fewer than MIN_TWO_TRACK_SWITCHES) is
        multipath recurring, not a second receiver: one outlier finding."""
        track = [(0, 0), (100, 0), (5100, 0), (200, 0), (5150, 0), (300, 0), (400, 0)]
        (d,) = detect_gps_anomaly(make_pings(_steady("T1", track)))["details"]
        assert d["pattern"] == "outlier" and d["n_anomalous_steps"] == 4
        assert "tracks" not in d

    def test_alternation_with_a_third_place_is_not_two_tracks(self) -> None:
        """Six impossible steps whose second side is not one plausible track (it jumps between
        two far places) are a receiver failing: an outlier, proposable under art. 58, IX."""
        away = [(5000, 0), (5000, 20_000), (5000, 0)]
        track = [(0, 0), away[0], (100, 0), away[1], (200, 0), away[2], (300, 0), (400, 0)]
        (d,) = detect_gps_anomaly(make_pings(_steady("T1", track)))["details"]
        assert d["n_anomalous_steps"] == 6
        assert d["pattern"] == "outlier"

    def test_a_long_failing_run_lists_bounded_evidence(self) -> None:
        """A receiver throwing every fix to a far place for an hour (no two places a plausible
        step apart): one finding whose details list the first and last 20 steps and fixes,
        counting all."""
        points = [((-1) ** k * (5000.0 + 3000.0 * (k % 7)), 0.0) for k in range(241)]
        (d,) = detect_gps_anomaly(make_pings(_steady("T1", points)))["details"]
        assert d["pattern"] in {"jump", "outlier"} and "tracks" not in d
        assert d["n_fixes"] == d["n_steps"] + 1 > 200
        assert len(d["steps"]) == MAX_LISTED == len(d["fixes"])
        assert len(d["outlier_fixes"]) <= MAX_LISTED
        assert d["steps"][-1]["to_row"] == d["fixes"][-1]["row"]

    @pytest.mark.parametrize(
        ("dt_s", "distance_m"),
        [
            (1.0, 100.0),  # 360 km/h but jitter: shorter than min_jump_m
            (2.0, 499.0),  # 898 km/h, still shorter
            (60.0, 4000.0),  # long but 240 km/h
            (15.0, 1000.0),  # 240 km/h
        ],
    )
    def test_not_anomalous(self, dt_s: float, distance_m: float) -> None:
        """A step needs both speed above the limit and distance above min_jump_m."""
        pings = make_pings(make_track("T1", [(0, 0, 0), (dt_s, distance_m, 0)]))
        assert detect_gps_anomaly(pings).empty

    def test_steps_across_vehicles_do_not_count(self) -> None:
        """One vehicle's last fix and the next vehicle's first fix are not a step."""
        rows = _steady("A", [(0, 0), (100, 0)]) + _steady("B", [(50_000, 0), (50_100, 0)])
        assert detect_gps_anomaly(make_pings(rows)).empty

    def test_anomalous_steps_end_at_speed_flagged_fixes(self) -> None:
        """With the ingest limit, each anomalous step ends at a fix flagged at ingest."""
        rng = np.random.default_rng(11)
        north = np.cumsum(rng.normal(150, 40, 400))
        jumps = rng.random(400) < 0.05
        north[jumps] += rng.uniform(2000, 20000, jumps.sum())
        pings = make_pings(_steady("T1", [(float(n), 0.0) for n in north]))
        found = detect_gps_anomaly(pings)
        assert len(found) > 5
        flagged = set(pings.loc[pings["speed_flag"], "row"])
        for d in found["details"]:
            assert {s["to_row"] for s in d["steps"]} <= flagged

    def test_confidence_grows_past_the_thresholds(self) -> None:
        """A farther, faster outlier gets more confidence; a single outlier never gets 1."""
        rows = _steady("A", [(0, 0), (1200, 0), (0, 0)]) + _steady(
            "B", [(0, 0), (30_000, 0), (0, 0)]
        )
        conf = detect_gps_anomaly(make_pings(rows)).set_index("vehicle_id")["confidence"]
        assert 0.5 < conf["A"] < conf["B"] < 1.0

    def test_custom_thresholds_are_used_and_shown(self) -> None:
        """A lower speed limit catches a 200 km/h step; thresholds are in the evidence."""
        pings = make_pings(make_track("T1", [(0, 0, 0), (15, 840, 0)]))
        assert detect_gps_anomaly(pings).empty
        found = detect_gps_anomaly(pings, max_speed_kmh=150, min_jump_m=300)
        assert found.iloc[0]["details"]["thresholds"] == {
            "max_speed_kmh": 150.0,
            "min_jump_m": 300.0,
            "max_excursion_s": 300.0,
        }

    def test_unsorted_pings_give_the_same_findings(self) -> None:
        """Row order does not change the findings."""
        pings = make_pings(_steady("T1", [(0, 0), (100, 0), (5100, 0), (200, 0)]))
        shuffled = pings.iloc[::-1]
        assert (
            detect_gps_anomaly(pings)["finding_id"].tolist()
            == detect_gps_anomaly(shuffled)["finding_id"].tolist()
        )

    def test_empty_pings_give_typed_empty_frame(self) -> None:
        """No pings, no findings, with the contract's columns."""
        found = detect_gps_anomaly(make_pings([]))
        assert list(found.columns) == list(FINDING_COLUMNS)
        validate_findings(found)

    @pytest.mark.parametrize("name", ["max_speed_kmh", "min_jump_m", "max_excursion_s"])
    @pytest.mark.parametrize("value", [0, -5.0, math.nan])
    def test_bad_threshold_raises(self, name: str, value: float) -> None:
        """Thresholds must be finite and positive."""
        with pytest.raises(DetectorThresholdError, match=name):
            detect_gps_anomaly(make_pings([]), **{name: value})

    def test_missing_column_raises(self) -> None:
        """Pings without a timestamp are refused."""
        pings = make_pings(_steady("T1", [(0, 0)])).drop(columns=["timestamp"])
        with pytest.raises(DetectorInputError, match="timestamp"):
            detect_gps_anomaly(pings)


def _feed(pings: pd.DataFrame) -> tuple[list[list[str]], dict[str, Any]]:
    """Advance fix by fix: the finding ids each fix emits, and the last states."""
    states: dict[str, Any] = {}
    emitted = []
    for k in range(len(pings)):
        states, found = advance(KERNEL, states, pings.iloc[k : k + 1])
        emitted.append(found["finding_id"].tolist())
    return emitted, states


def _ahead(north_m: float, n: int) -> list[tuple[float, float]]:
    """``n`` plausible positions after ``north_m``, 100 m apart."""
    return [(north_m + 100.0 * k, 0.0) for k in range(1, n + 1)]


def _random_tracks(seed: int, vehicles: int, n: int) -> list[dict[str, Any]]:
    """Noisy tracks with 6 % of fixes thrown 0.6–30 km away, fixes 1–60 s apart."""
    rng = np.random.default_rng(seed)
    rows = []
    for v in range(vehicles):
        north = np.cumsum(rng.normal(120, 60, n))
        bad = rng.random(n) < 0.06
        north[bad] += rng.choice([-1, 1], bad.sum()) * rng.uniform(600, 30_000, bad.sum())
        t = np.cumsum(rng.choice([1.0, 5.0, 15.0, 15.0, 60.0], n))
        rows += make_track(
            f"V{v}", [(float(a), float(b), 0.0) for a, b in zip(t, north, strict=True)]
        )
    return rows


class TestGpsAnomalyKernel:
    def test_pieces_give_the_batch_findings(self) -> None:
        """Fix by fix or in random pieces, the findings are the batch's, byte for byte."""
        away = [(3000.0 + 100 * k, 0.0) for k in range(19)]
        cases = [
            # A jump away, then a run of two impossible steps whose second one brings it back.
            [(0, 0), (100, 0), (3000, 0), (3100, 0), (20_000, 0), (300, 0)],
            # A jump that comes back exactly at max_excursion_s, and one 15 s later.
            [(0, 0), (100, 0), *away, (250, 0), (350, 0)],
            [(0, 0), (100, 0), *away, (4900, 0), (250, 0), (350, 0)],
            # A jump, an outlier, a jump back (the outlier is not the jump's return).
            [(0, 0), (100, 0), (30000, 0), (30100, 0), (30200, 0), (40000, 0), (30300, 0)]
            + [(30400, 0), (200, 0), (300, 0)],
            # Stale fixes, a jump, and an outlier nearer them: a jump, then the outlier.
            [(0, 0), (100, 0), (200, 0), *[(4000.0 + 100 * k, 0.0) for k in range(16)]]
            + [(1500, 0), (1600, 0), *[(5800.0 + 100 * k, 0.0) for k in range(3)]],
            # The same until the coming back goes on to a far place: then the jump's return.
            [(0, 0), (100, 0), (200, 0), *[(4000.0 + 100 * k, 0.0) for k in range(16)]]
            + [(1500, 0), (1600, 0), (5800, 0), (5800, 20_000), (5900, 20_000)],
        ]
        points = [  # one vehicle, each case an hour after the one before
            (3600.0 * c + 15.0 * k, float(n), float(e))
            for c, case in enumerate(cases)
            for k, (n, e) in enumerate(case)
        ]
        two = [(7.5 * k, 75.0 * k, 6000.0 * (k % 2)) for k in range(60)]
        uneven = [(15.0 * k, 150.0 * k, 0.0) for k in range(40)]
        uneven += [(7.5 + 30.0 * k, 20.0 * k, 6000.0) for k in range(12)]
        uneven += [(900.0 + 15.0 * k, 6000.0 + 100 * k, 0.0) for k in range(30)]
        rows = _random_tracks(7, 1, 80) + make_track("E", points) + make_track("W", two)
        rows += make_track("U", uneven)
        batch = assert_pieces_give_batch(KERNEL, make_pings(rows), seeds=2, min_findings=10)
        patterns = set(batch["details"].map(lambda d: d["pattern"]))
        assert patterns == {"jump", "outlier", "two_tracks"}
        rng = np.random.default_rng(3)  # receivers that report their accuracy, some poor
        for row in rows:
            row["accuracy_m"] = float(rng.choice([5.0, 30.0, 600.0, 2000.0]))
        assert_pieces_give_batch(KERNEL, make_pings(rows), seeds=2, min_findings=5)

    def test_thresholds_are_passed_to_the_rule(self) -> None:
        """With other thresholds, pieces still give that batch's findings."""
        pings = make_pings(_random_tracks(3, 1, 60))
        params = {"max_speed_kmh": 150.0, "min_jump_m": 300.0, "max_excursion_s": 120.0}
        batch = assert_pieces_give_batch(KERNEL, pings, seeds=1, min_findings=3, **params)
        assert batch["details"].iloc[0]["thresholds"] == params

    def test_outlier_is_emitted_once_nothing_can_chain_with_it(self) -> None:
        """A → B → A' (A' at 30 s) is emitted by the first fix more than max_excursion_s after
        A' (fix 23, at 345 s): until then a later outlier could chain with it into two tracks."""
        track = [(0, 0), (5000, 0), (50, 0), *_ahead(100, 23)]
        emitted, states = _feed(make_pings(_steady("T1", track)))
        assert [k for k, e in enumerate(emitted) if e] == [23]
        assert len(states["T1"]["tail"]["timestamp"]) == 1

    def test_jump_is_held_until_it_cannot_return(self) -> None:
        """A jump is emitted by the first fix after which no jump back, nor a chained event,
        can come in time."""
        track = [(0, 0), (100, 0), (3000, 0)] + [(3000 + 100 * k, 0) for k in range(1, 25)]
        emitted, states = _feed(make_pings(_steady("T1", track)))
        # The jump's first fix is at 15 s: a return must end by 315 s (fix 21); it ends at
        # 30 s: a chained event must start by 330 s (fix 22).
        assert [k for k, e in enumerate(emitted) if e] == [23]
        assert len(states["T1"]["tail"]["timestamp"]) == 1  # settled: only the last fix kept

    def test_run_that_may_bring_back_a_jump_holds_it(self) -> None:
        """While a run is open, the jump before it is held: the run's end decides the pattern."""
        track = [(0, 0), (100, 0), (3000, 0), (3100, 0), (20_000, 0), (300, 0), *_ahead(300, 21)]
        pings = make_pings(_steady("T1", track))
        emitted, _ = _feed(pings)
        assert [k for k, e in enumerate(emitted) if e] == [26]  # 315 s after the return
        assert emitted[-1] == detect_gps_anomaly(pings)["finding_id"].tolist()
        assert detect_gps_anomaly(pings).iloc[0]["details"]["pattern"] == "outlier"

    def test_a_held_jump_is_settled_by_the_next_event(self) -> None:
        """A held jump is returned by the fix that settles the outlier after it (neither its
        return nor one chain with it); the outlier, once nothing can chain with it."""
        track = [(0, 0), (100, 0), (30000, 0), (30100, 0), (30200, 0), (40000, 0), (30300, 0)]
        pings = make_pings(_steady("T1", [*track, *_ahead(30300, 22)]))
        batch = detect_gps_anomaly(pings)
        assert batch["details"].map(lambda d: d["pattern"]).tolist() == ["jump", "outlier"]
        emitted, _ = _feed(pings)
        assert [(k, e) for k, e in enumerate(emitted) if e] == [
            (7, batch["finding_id"].tolist()[:1]),
            (27, batch["finding_id"].tolist()[1:]),
        ]

    def test_end_of_input_emits_the_open_run(self) -> None:
        """A jump at the end of the input is emitted when the input ends, as in batch."""
        pings = make_pings(_steady("T1", [(0, 0), (100, 0), (9000, 0)]))
        emitted, states = _feed(pings)
        assert not any(emitted)
        assert len(states["T1"]["tail"]["timestamp"]) == 2  # the open run
        _, found = advance(KERNEL, states, pings.iloc[:0], final=True)
        assert found["finding_id"].tolist() == detect_gps_anomaly(pings)["finding_id"].tolist()

    def test_state_is_plain_data_and_late_fix_is_ignored(self) -> None:
        """The state is JSON; a fix not later than the last one changes nothing."""
        pings = make_pings(_steady("T1", [(0, 0), (100, 0), (5000, 0)]))
        state, _ = advance(KERNEL, {}, pings)
        assert json.loads(json.dumps(state)) == state
        again, found = advance(KERNEL, state, pings.iloc[:1])
        assert len(found) == 0
        assert again == state


@pytest.mark.slow
class TestDetectGpsAnomalyOnPorto:
    DATA = Path(__file__).resolve().parents[3] / "data" / "porto" / "derived"

    def test_porto_jumps(self) -> None:
        """Real Porto fixes: 147 steps of 15 s imply > 250 km/h over > 500 m (0.15 % of steps;
        PROVENANCE: 0.37 % above 150 km/h). They make 83 findings, 64 of them a displaced
        stretch that comes back; every one lies inside a single trip, and each anomalous step
        ends at a fix that ingest speed-flagged."""
        from tracking.porto import read_porto_trips

        pings, _, _ = read_porto_trips(self.DATA / "trips_combined.csv")
        found = detect_gps_anomaly(pings)
        patterns = found["details"].map(lambda d: d["pattern"])
        assert len(found) == 83
        assert (patterns == "outlier").sum() == 64
        assert found["details"].map(lambda d: d["n_anomalous_steps"]).sum() == 147
        hit = pings.loc[pings["speed_flag"]]
        flagged = set(zip(hit["row"], hit["timestamp"], strict=True))
        for d in found["details"]:
            assert len({f["row"] for f in d["fixes"]}) == 1  # one trip
            for k, step in enumerate(d["steps"]):
                if step["anomalous"]:
                    to = d["fixes"][k + 1]
                    assert (to["row"], pd.Timestamp(to["timestamp"])) in flagged
