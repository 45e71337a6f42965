"""bench/bench_flag2.py: the rides are placed as they say and judged by the real rulebook."""

from __future__ import annotations

import sys
from pathlib import Path

import geopandas as gpd
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_flag2 as bench  # noqa: E402


def test_a_ride_in_town_is_proposed_and_the_same_ride_moved_out_is_not() -> None:
    """A real Porto trip on a Monday at 10:00 with Bandeira 2 throughout: proposed as misuse;
    moved whole 84 km east (out of the district), found but not proposed."""
    boundary = gpd.read_file(bench.BOUNDARY).to_crs(4326).geometry.union_all()
    trip = next(
        t for t in bench.real_trips() if len(t) >= 20 and t["lon"].between(-8.62, -8.58).all()
    )
    away = trip.assign(lon=trip["lon"] + 1.0)
    at = bench.WEEKDAY + pd.Timedelta(hours=10)
    pings = bench.placed([trip, away], [at, at])
    assert set(pings.groupby("vehicle_id")["timestamp"].min()) == {at.tz_convert("UTC")}
    assert (pings["tariff"] == 2).all() and (pings["meter"] == "occupied").all()
    verdict = bench.judged(pings, boundary)
    assert verdict.loc["T0000"].tolist() == [True, True, True]
    assert verdict.loc["T0001"].tolist() == [True, False, True]
