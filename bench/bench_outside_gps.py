"""outside_municipality under GPS errors, on days of real Porto trips.

A pickup outside the municipality is accused under POA art. 19 (c/c art. 57, XI). A receiver
that throws a stretch of fixes kilometres away at a meter switch would put a ride begun in the
city outside it. This measures what the detector does with such receivers:

- **clean days**: a taxi's day of real trips of ``data/porto/derived/trips_combined.csv`` with
  their own GPS errors (``bench_gps_days.healthy_day``); the drop-off fix of each ride shows the
  meter free, as a tracker between rides does. The pickups outside the Porto district
  (``data/porto/network/porto_boundary.geojson``, standing in for a municipality) found on it
  are the truth;
- **failing days**: the same day with stretches of 2–10 fixes thrown 3–12 km away and back,
  ``r`` per tracked hour (``bench_gps_days.thrown``).

Each day is validated (``validate_pings``), cut into trips (``detect_trips``) and judged
(``detect_outside_municipality`` with the fixes). A finding of a failing day that the clean day
lacks is a false accusation; a finding of the clean day missing from the failing one, a miss.

Usage::

    .venv/bin/python bench/bench_outside_gps.py [--days 300] [--hours 12] [--seed 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gps_days import healthy_day, real_trips, thrown  # noqa: E402

from tracking.detectors.outside_municipality import detect_outside_municipality  # noqa: E402
from tracking.trips import detect_trips  # noqa: E402
from tracking.validate import validate_pings  # noqa: E402

BOUNDARY = Path(__file__).resolve().parents[1] / "data/porto/network/porto_boundary.geojson"
RATES = (0.0, 1.0, 2.0, 4.0)
"""Stretches thrown away per tracked hour (0: the clean days themselves)."""
RIDE_GAP_S = 170.0
"""``healthy_day`` leaves 180 s or more between rides: the fix before such a gap is a drop-off."""


def validated(day: pd.DataFrame) -> pd.DataFrame:
    """The day as ``pontual analyze`` reads it, each ride's drop-off fix showing the meter free."""
    gap = day["timestamp"].diff().dt.total_seconds().to_numpy()
    dropoff = np.flatnonzero(np.r_[gap[1:] >= RIDE_GAP_S, False])
    day = day[["vehicle_id", "timestamp", "lat", "lon", "meter"]].astype({"meter": object})
    day.loc[day.index[dropoff], "meter"] = "free"
    pings, _ = validate_pings(
        day.assign(row=np.arange(1, len(day) + 1)), now=pd.Timestamp("2030-01-01", tz="UTC")
    )
    return pings


def pickups_outside(day: pd.DataFrame, boundary: gpd.GeoDataFrame) -> tuple[dict[int, float], int]:
    """The rides accused (start instant in ns → confidence), and the rides judged."""
    pings = validated(day)
    trips = detect_trips(pings)
    found = detect_outside_municipality(trips, boundary, pings=pings)
    accused = dict(
        zip(found["started_at"].astype("int64").tolist(), found["confidence"].tolist(), strict=True)
    )
    return accused, int((trips["source"] == "meter").sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=300)
    ap.add_argument("--hours", type=float, default=12.0)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    boundary = gpd.read_file(BOUNDARY)
    trips = real_trips()
    rng = np.random.default_rng(args.seed)
    print(
        "| thrown stretches per hour | days | rides | outside pickups (clean days) | found | "
        "false accusations | of them ≥ 0.5 confidence |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for rate in RATES:
        rides = truth = found = false = false_prop = 0
        for i in range(args.days):
            clean = healthy_day(trips, rng, f"v{i}", args.hours)
            day = thrown(clean, rng, args.hours, rate) if rate else clean
            truth_k, _ = pickups_outside(clean, boundary)
            accused, n_rides = pickups_outside(day, boundary)
            rides += n_rides
            truth += len(truth_k)
            found += len(accused.keys() & truth_k.keys())
            wrong = [c for t, c in accused.items() if t not in truth_k]
            false += len(wrong)
            false_prop += sum(c >= 0.5 for c in wrong)
        print(
            f"| {rate:g} | {args.days} | {rides:,} | {truth} | {found} | {false} | {false_prop} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
