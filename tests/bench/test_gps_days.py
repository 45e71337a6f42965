"""bench/bench_gps_days.py: its days of real trips add no GPS error of their own.

The healthy days are the negatives of the repetition rule's evaluation: every anomaly in them
must be one of the real trips', none made where two trips are joined.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from enforcement.proposals import propose_all
from tracking.detectors.gps_anomaly import detect_gps_anomaly

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_gps_days as days  # noqa: E402


def test_a_day_has_its_trips_anomalies_and_no_more() -> None:
    trips = days.real_trips()
    day = days.healthy_day(trips, np.random.default_rng(1), "H1", hours=6)
    # a real trip's fixes are 15 s apart: any other step is a join
    joins = np.flatnonzero(day["timestamp"].diff() != pd.Timedelta(seconds=15))
    starts = day["timestamp"].iloc[np.r_[0, joins]]
    assert len(starts) >= 20  # many joins between trips
    found = detect_gps_anomaly(day)
    own = 0
    for k, t0 in enumerate(starts):
        end = starts.iloc[k + 1] if k + 1 < len(starts) else pd.Timestamp.max.tz_localize("UTC")
        trip = day.loc[(day["timestamp"] >= t0) & (day["timestamp"] < end)]
        own += len(detect_gps_anomaly(days._case([trip.drop(columns=["row", "speed_flag"])])))
    assert len(found) == own


def test_a_failing_receiver_is_proposed_and_a_working_one_is_not() -> None:
    trips = days.real_trips()
    rng = np.random.default_rng(2)
    failing = detect_gps_anomaly(days.failing_day(trips, rng, "F1", hours=2, rate=8.0))
    healthy = detect_gps_anomaly(days.healthy_day(trips, rng, "H2", hours=2))
    book = {"taxi": days.POA}
    assert propose_all(failing, book, timezone=days.TZ).proposals
    assert not propose_all(healthy, book, timezone=days.TZ).proposals
