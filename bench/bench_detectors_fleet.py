"""Benchmark: the fleet/stand detectors (unlicensed_stand_use, queue_jump, operating_while_barred,
inactivity, outside_municipality, flag2_misuse) on ~1M synthetic pings.

Synthetic Porto Alegre taxis, a fix every 15 s: each vehicle cycles through waiting free at a
random stand (5–20 min, 3 m jitter), a ride (occupied, 10–30 min at ~8 m/s, tariff 2 on 30 % of
rides), and free cruising (2–10 min); 2 % of rides start across the municipal boundary. 200
stands of 30 m radius; a fleet with one licensed stand per vehicle, 5 % accessible, 10 %
suspended or with an expired alvará. Upstream frames (stand matching, visits, stops, trips) are
built once and not timed: each row times one detector call, best of ``--repeat``, and reports
pings per second (input pings / seconds), the issue's measure (>= 500k pings/s on 2 cores).

Usage::

    taskset -c 1 .venv/bin/python bench/bench_detectors_fleet.py [--n 1000000] [--repeat 3]

Run of 2026-11-30 (one core, load average 1.7 on 2 CPUs): 998,400 pings, 416 vehicles, 13,195
visits, 6,621 trips.

| detector | findings | best of 3 (s) | pings/s |
|---|---:|---:|---:|
| unlicensed_stand_use | 6,435 | 0.649 | 1,539,209 |
| queue_jump | 3,212 | 0.453 | 2,204,887 |
| operating_while_barred | 42 | 0.069 | 14,540,175 |
| inactivity (pings) | 0 | 0.450 | 2,216,648 |
| outside_municipality | 365 | 0.164 | 6,100,322 |
| flag2_misuse | 1,974 | 0.408 | 2,448,615 |

Most of the time of the stand detectors is building the findings' evidence (about 0.1 ms per
finding); the synthetic data boards at a random stand, so most boardings are unlicensed. Live
runs the same batch functions per call (``tracking.detectors.kernel``); its figures are in
``bench/bench_live_replay.py``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import geopandas as gpd  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import shapely  # noqa: E402

from geo.cover import build_stand_cover, match_stands  # noqa: E402
from geo.crs import buffer_points_m  # noqa: E402
from stands.licences import licence_frame_from_fleet  # noqa: E402
from stands.visits import detect_visits  # noqa: E402
from tracking.detectors.flag2_misuse import detect_flag2_misuse  # noqa: E402
from tracking.detectors.inactivity import detect_inactivity  # noqa: E402
from tracking.detectors.operating_while_barred import detect_operating_while_barred  # noqa: E402
from tracking.detectors.outside_municipality import detect_outside_municipality  # noqa: E402
from tracking.detectors.queue_jump import detect_queue_jump  # noqa: E402
from tracking.detectors.unlicensed_stand_use import detect_unlicensed_stand_use  # noqa: E402
from tracking.stops import detect_stops  # noqa: E402
from tracking.trips import detect_trips  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BOUNDARIES = ROOT / "data" / "brazil" / "boundaries" / "municipios_poa_pvh_pintobandeira.geojson"
CENTRE = (-30.035, -51.20)  # inside Porto Alegre
M_PER_DEG = 111_195.0
STEP_S = 15
FIXES_PER_VEHICLE = 2400  # 10 h


def _offset(lat: np.ndarray, lon: np.ndarray, north: np.ndarray, east: np.ndarray):
    return lat + north / M_PER_DEG, lon + east / (M_PER_DEG * np.cos(np.radians(lat)))


def synthetic(n: int, *, seed: int) -> tuple[pd.DataFrame, gpd.GeoDataFrame, pd.DataFrame]:
    """Pings (sorted), stands and fleet."""
    rng = np.random.default_rng(seed)
    n_stands = 200
    s_lat, s_lon = _offset(
        np.full(n_stands, CENTRE[0]),
        np.full(n_stands, CENTRE[1]),
        rng.uniform(-6000, 6000, n_stands),
        rng.uniform(-5000, 5000, n_stands),
    )
    points = gpd.GeoDataFrame(
        {"stand_id": [f"S{i:03d}" for i in range(n_stands)]},
        geometry=gpd.points_from_xy(s_lon, s_lat),
        crs=4326,
    )
    stands = buffer_points_m(points, 30.0)
    stands["name"] = stands["stand_id"]
    stands["capacity"] = pd.array([5] * n_stands, dtype="Int64")
    stands["municipality"] = "4314902"

    n_vehicles = max(1, n // FIXES_PER_VEHICLE)
    t0 = pd.Timestamp("2024-03-04T11:00:00Z").value
    vid, ts, lat, lon, meter, tariff = [], [], [], [], [], []
    for v in range(n_vehicles):
        m = FIXES_PER_VEHICLE
        phases, lengths = [], []
        total = 0
        while total < m:
            for phase, lo, hi in (("wait", 20, 80), ("ride", 40, 120), ("cruise", 8, 40)):
                k = int(rng.integers(lo, hi))
                phases.append(phase)
                lengths.append(k)
                total += k
        phase = np.repeat(np.array(phases), lengths)[:m]
        seg = np.repeat(np.arange(len(phases)), lengths)[:m]
        # Position: waits at a stand; rides and cruises move in a straight line.
        stand_of_seg = rng.integers(0, n_stands, len(phases))
        heading = rng.uniform(0, 2 * np.pi, len(phases))
        step = np.where(phase == "wait", 0.0, 8.0 * STEP_S)
        north = np.cumsum(step * np.cos(heading[seg]))
        east = np.cumsum(step * np.sin(heading[seg]))
        start = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        base = np.repeat(start, np.diff(np.r_[start, m]))
        north = north - north[base] + rng.normal(0, 3, m)
        east = east - east[base] + rng.normal(0, 3, m)
        la, lo_ = _offset(s_lat[stand_of_seg[seg]], s_lon[stand_of_seg[seg]], north, east)
        outside = (phase == "ride") & (rng.random(len(phases)) < 0.02)[seg]
        lo_ = np.where(outside, lo_ + 0.25, lo_)  # ~24 km east: another municipality
        mt = np.where(phase == "ride", "occupied", "free").astype(object)
        tf = np.where(phase == "ride", np.where(rng.random(len(phases)) < 0.3, 2, 1)[seg], 0)
        vid.append(np.full(m, f"V{v:05d}", dtype=object))
        ts.append(t0 + STEP_S * 1_000_000_000 * np.arange(m) + rng.integers(-1, 2, m) * 10**9)
        lat.append(la)
        lon.append(lo_)
        meter.append(mt)
        tariff.append(tf)
    tariff_all = np.concatenate(tariff)
    pings = pd.DataFrame(
        {
            "vehicle_id": pd.Series(np.concatenate(vid), dtype="str"),
            "timestamp": pd.to_datetime(np.concatenate(ts), unit="ns", utc=True),
            "lat": np.concatenate(lat),
            "lon": np.concatenate(lon),
            "speed_kmh": np.nan,
            "heading_deg": np.nan,
            "accuracy_m": np.nan,
            "meter": pd.Series(np.concatenate(meter), dtype="str"),
            "tariff": pd.array(np.where(tariff_all > 0, tariff_all, 0), dtype="Int8"),
            "driver_id": pd.Series([None] * len(tariff_all), dtype="str"),
        }
    )
    pings["tariff"] = pings["tariff"].mask(tariff_all == 0)
    pings["row"] = np.arange(1, len(pings) + 1, dtype=np.int64)
    pings["speed_flag"] = False
    ids = [f"V{v:05d}" for v in range(n_vehicles)]
    r = rng.random(n_vehicles)
    fleet = pd.DataFrame(
        {
            "vehicle_id": ids + [f"GHOST{i}" for i in range(20)],
            "accessible": list(rng.random(n_vehicles) < 0.05) + [False] * 20,
            "stands": [(f"S{int(s):03d}",) for s in rng.integers(0, n_stands, n_vehicles)]
            + [()] * 20,
            "stand_names": [()] * (n_vehicles + 20),
            "status": list(np.where(r < 0.05, "suspended", "active")) + ["active"] * 20,
            "status_since": [dt.date(2024, 3, 1)] * (n_vehicles + 20),
            "status_until": [None] * (n_vehicles + 20),
            "alvara_valid_until": [dt.date(2024, 3, 1) if x > 0.95 else None for x in r]
            + [None] * 20,
            "inspection_valid_until": [None] * (n_vehicles + 20),
        }
    )
    return pings, stands, fleet


def best_of(repeat: int, fn: Callable[[], pd.DataFrame]) -> tuple[float, int]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), len(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    t = time.perf_counter()
    pings, stands, fleet = synthetic(args.n, seed=args.seed)
    cover = build_stand_cover(stands)
    p_idx, s_idx = match_stands(pings["lat"].to_numpy(), pings["lon"].to_numpy(), cover)
    memberships = pd.DataFrame(
        {"ping_index": p_idx, "stand_id": stands["stand_id"].to_numpy()[s_idx]}
    )
    visits = detect_visits(
        pings, memberships, licences=licence_frame_from_fleet(fleet), max_gap_s=300.0
    )
    stops = detect_stops(pings)
    trips = detect_trips(pings, stops=stops, max_gap_s=300.0)
    boundary = gpd.read_file(BOUNDARIES)
    boundary = boundary.loc[boundary["cod_ibge"].astype(str) == "4314902"]
    poa = shapely.union_all(boundary.geometry.to_numpy())
    n = len(pings)
    print(
        f"{n:,} pings, {pings['vehicle_id'].nunique():,} vehicles, {len(visits):,} visits "
        f"({int(visits['boarded'].sum()):,} boarded), {len(trips):,} trips; "
        f"setup {time.perf_counter() - t:.1f} s"
    )
    runs: list[tuple[str, Callable[[], pd.DataFrame]]] = [
        ("unlicensed_stand_use", lambda: detect_unlicensed_stand_use(visits, pings, fleet=fleet)),
        ("queue_jump", lambda: detect_queue_jump(visits, pings, fleet=fleet)),
        (
            "operating_while_barred",
            lambda: detect_operating_while_barred(trips, fleet, pings=pings),
        ),
        (
            "inactivity (pings)",
            lambda: detect_inactivity(pings, fleet, as_of=dt.date(2024, 3, 4)),
        ),
        (
            "outside_municipality",
            lambda: detect_outside_municipality(trips, poa, pings=pings),
        ),
        ("flag2_misuse", lambda: detect_flag2_misuse(pings)),
    ]
    print(f"| detector | findings | best of {args.repeat} (s) | pings/s |")
    print("|---|---:|---:|---:|")
    for name, fn in runs:
        secs, found = best_of(args.repeat, fn)
        print(f"| {name} | {found:,} | {secs:.3f} | {n / secs:,.0f} |")


if __name__ == "__main__":
    main()
