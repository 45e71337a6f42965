"""bench/bench_tracking_gap.py: each scenario builds the silence it says, from a real trip.

The evaluation's truth is the scenario: a positive must hide part of a real trip's movement with
the meter occupied at its start, a look-alike must be a silence of the kind it names.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from geo.crs import haversine_m

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_tracking_gap as bench  # noqa: E402


def _silence(case: pd.DataFrame) -> tuple[float, float, str, str]:
    """The case's longest silence: seconds, metres, meter before and after."""
    steps = case["timestamp"].diff().dt.total_seconds().to_numpy()
    i = int(np.nanargmax(steps))
    a, b = case.iloc[i - 1], case.iloc[i]
    metres = float(haversine_m(a["lat"], a["lon"], b["lat"], b["lon"]))
    return float(steps[i]), metres, str(a["meter"]), str(b["meter"])


def test_each_scenario_is_the_silence_it_names() -> None:
    trips = bench.real_trips()
    rng = np.random.default_rng(3)
    for _ in range(20):
        gap, _, before, after = _silence(bench.hidden_stretch(trips, rng, "P"))
        assert 360 <= gap <= 1215 and (before, after) == ("occupied", "occupied")
        gap, metres, before, after = _silence(bench.underground_dropoff(trips, rng, "U"))
        assert (
            360 <= gap <= 1200
            and 45 <= metres <= 405
            and (before, after)
            == (
                "occupied",
                "free",
            )
        )
        gap, metres, _, _ = _silence(bench.night_after_ride(trips, rng, "N"))
        assert 4 * 3600 <= gap <= 12 * 3600 and 1900 <= metres <= 60_100
        gap, _, before, after = _silence(bench.wait_meter_on(trips, rng, "W"))
        assert gap >= 360 and (before, after) == ("occupied", "occupied")
        slow = bench.slow_tracker_late(trips, rng, "S")
        steps = slow["timestamp"].diff().dt.total_seconds().dropna()
        assert set(steps) - {60.0} and 315 <= steps.max() <= 345 and steps.min() == 60
        steps = bench.default_300s(trips, rng, "D")["timestamp"].diff().dt.total_seconds()
        assert set(steps.dropna()) <= {300.0, 315.0}


def test_no_look_alike_is_proposed_and_a_driven_silence_is() -> None:
    trips = bench.real_trips()
    rng = np.random.default_rng(4)
    books = {"bundled": bench.POA, "without the rules": bench.without_rules(bench.POA)}
    for name in (
        "underground_dropoff",
        "wait_meter_on",
        "night_after_ride",
        "slow_tracker_late",
        "default_300s",
    ):
        for k in range(15):
            verdict = bench.judge(bench.SCENARIOS[name][1](trips, rng, f"L{k}"), books)
            assert verdict["bundled"] == 0.0
    driven = [bench.judge(bench.hidden_stretch(trips, rng, f"P{k}"), books) for k in range(15)]
    assert sum(v["bundled"] for v in driven) >= 10
    assert all(v["without the rules"] == 1.0 for v in driven)
