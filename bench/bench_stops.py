"""Benchmark: stop detection (tracking.stops) against MovingPandas' TrajectoryStopDetector.

Synthetic Porto Alegre-sized tracks: many taxis, a fix every 15 s (±1 s), alternating drives
(15–60 km/h, wandering heading) and stops (1–30 min, GPS jitter σ = 4 m), with occasional
silences (1 % of fixes followed by a 2–10 min gap). Ours runs on all N pings; MovingPandas on
the first vehicles up to a subsample, in a metric CRS (SIRGAS 2000 / UTM 22S, EPSG:31982), with
the same thresholds, and its rate is extrapolated. Both run on one core. Agreement is measured on
the subsample with ``max_gap_s=None`` (MovingPandas has no gap rule): stop counts, stops matched
one-to-one by time overlap, and the overlap of total stop time (intersection over union).

Usage::

    taskset -c 1 .venv/bin/python bench/bench_stops.py [--n 1000000] [--mp-n 30000] [--seed 7]

MovingPandas' time excludes building its TrajectoryCollection; ours includes everything
``detect_stops`` does (checks, sorting test, projection, output frame).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from datetime import timedelta

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tracking.stops import detect_stops  # noqa: E402

MAX_DIAMETER_M = 50.0
MIN_DURATION_S = 180.0
FIXES_PER_VEHICLE = 2500  # about 10 h of 15-s fixes
POA = (-30.03, -51.22)


def synthetic_pings(n: int, *, seed: int) -> pd.DataFrame:
    """Return ``n`` synthetic fixes of ``n / 2500`` taxis, sorted by (vehicle, time)."""
    rng = np.random.default_rng(seed)
    n_vehicles = max(1, n // FIXES_PER_VEHICLE)
    per = np.full(n_vehicles, n // n_vehicles)
    per[: n - per.sum()] += 1
    frames = []
    t0 = pd.Timestamp("2024-03-04T09:00:00Z").value // 1_000_000_000
    for v, m in enumerate(per):
        # Episodes: stop / drive alternating, lengths in fixes.
        kinds, lengths = [], []
        total = 0
        moving = bool(rng.integers(2))
        while total < m:
            k = int(rng.integers(8, 80)) if moving else int(rng.integers(4, 120))
            kinds.append(moving)
            lengths.append(k)
            total += k
            moving = not moving
        is_moving = np.repeat(kinds, lengths)[:m]
        speed = np.repeat(rng.uniform(15, 60, len(kinds)) / 3.6, lengths)[:m]
        dt = 15.0 + rng.uniform(-1, 1, m)
        gap = rng.random(m) < 0.01
        dt[gap] += rng.uniform(120, 600, gap.sum())
        heading = np.cumsum(rng.normal(0, 0.3, m))
        step = np.where(is_moving, speed * 15.0, 0.0)
        east = np.cumsum(step * np.cos(heading))
        north = np.cumsum(step * np.sin(heading))
        east += rng.normal(0, 4, m)
        north += rng.normal(0, 4, m)
        lat = POA[0] + rng.uniform(-0.05, 0.05) + north / 111_195.0
        lon = POA[1] + rng.uniform(-0.05, 0.05) + east / (111_195.0 * np.cos(np.radians(POA[0])))
        ts = t0 + np.cumsum(dt)
        frames.append(
            pd.DataFrame(
                {
                    "vehicle_id": f"T{v:05d}",
                    "timestamp": pd.to_datetime(ts, unit="s", utc=True).astype(
                        "datetime64[ns, UTC]"
                    ),
                    "lat": lat,
                    "lon": lon,
                }
            )
        )
    pings = pd.concat(frames, ignore_index=True)
    pings["vehicle_id"] = pings["vehicle_id"].astype("str")
    return pings


def run_ours(
    pings: pd.DataFrame, *, max_gap_s: float | None, repeat: int = 3
) -> tuple[float, pd.DataFrame]:
    best = float("inf")
    stops = pd.DataFrame()
    for _ in range(repeat):
        t = time.perf_counter()
        stops = detect_stops(
            pings, max_diameter_m=MAX_DIAMETER_M, min_duration_s=MIN_DURATION_S, max_gap_s=max_gap_s
        )
        best = min(best, time.perf_counter() - t)
    return best, stops


def run_movingpandas(pings: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import geopandas as gpd
        import movingpandas as mpd

    gdf = gpd.GeoDataFrame(
        pings[["vehicle_id", "timestamp"]].copy(),
        geometry=gpd.points_from_xy(pings["lon"], pings["lat"]),
        crs="EPSG:4326",
    ).to_crs("EPSG:31982")
    gdf["t"] = gdf["timestamp"].dt.tz_convert(None)
    tc = mpd.TrajectoryCollection(gdf, traj_id_col="vehicle_id", t="t")  # not timed
    t = time.perf_counter()
    ranges = mpd.TrajectoryStopDetector(tc).get_stop_time_ranges(
        max_diameter=MAX_DIAMETER_M, min_duration=timedelta(seconds=MIN_DURATION_S)
    )
    elapsed = time.perf_counter() - t
    out = pd.DataFrame(
        {
            "vehicle_id": [str(r.traj_id) for r in ranges],
            "started_at": pd.to_datetime([r.t_0 for r in ranges]).tz_localize("UTC"),
            "ended_at": pd.to_datetime([r.t_n for r in ranges]).tz_localize("UTC"),
        }
    )
    return elapsed, out.sort_values(["vehicle_id", "started_at"], ignore_index=True)


def agreement(ours: pd.DataFrame, theirs: pd.DataFrame) -> dict[str, float]:
    """Stops matched by time overlap (one-to-one, greedy) and total-time IoU."""
    matched = 0
    inter = 0.0
    union = 0.0
    for vehicle in sorted(set(ours["vehicle_id"]) | set(theirs["vehicle_id"])):
        a = ours[ours["vehicle_id"] == vehicle][["started_at", "ended_at"]].to_numpy()
        b = theirs[theirs["vehicle_id"] == vehicle][["started_at", "ended_at"]].to_numpy()
        used = set()
        for s, e in a:
            for k, (s2, e2) in enumerate(b):
                if k not in used and min(e, e2) > max(s, s2):
                    used.add(k)
                    matched += 1
                    break
        ia = _total(a)
        ib = _total(b)
        both = sum(
            max(0.0, (min(e, e2) - max(s, s2)).total_seconds()) for s, e in a for s2, e2 in b
        )
        inter += both
        union += ia + ib - both
    return {"matched": matched, "time_iou": inter / union if union else 1.0}


def _total(intervals: np.ndarray) -> float:
    return float(sum((e - s).total_seconds() for s, e in intervals))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="pings for ours")
    parser.add_argument("--mp-n", type=int, default=30_000, help="pings for MovingPandas")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    pings = synthetic_pings(args.n, seed=args.seed)
    ours_s, ours_stops = run_ours(pings, max_gap_s=600.0)
    sub_vehicles = pings["vehicle_id"].unique()[: max(1, args.mp_n // FIXES_PER_VEHICLE)]
    sub = pings[pings["vehicle_id"].isin(sub_vehicles)].reset_index(drop=True)
    sub_s, sub_stops = run_ours(sub, max_gap_s=None)
    mp_s, mp_stops = run_movingpandas(sub)
    agree = agreement(sub_stops, mp_stops)

    ours_rate = len(pings) / ours_s
    mp_rate = len(sub) / mp_s
    n_vehicles = pings["vehicle_id"].nunique()
    print(f"pings: {len(pings):,} ({n_vehicles} vehicles), stops found: {len(ours_stops):,}")
    print(f"thresholds: max_diameter_m={MAX_DIAMETER_M}, min_duration_s={MIN_DURATION_S}\n")
    rows = [
        ("tracking.stops (ours)", len(pings), ours_s, f"{ours_rate / mp_rate:,.0f}×"),
        ("tracking.stops on the subsample", len(sub), sub_s, ""),
        (f"MovingPandas {_mp_version()} (EPSG:31982)", len(sub), mp_s, "1×"),
    ]
    print("| detector | pings | seconds | pings/s | speedup |")
    print("|---|---:|---:|---:|---:|")
    for name, n, secs, speedup in rows:
        print(f"| {name} | {n:,} | {secs:.3f} | {n / secs:,.0f} | {speedup} |")
    print()
    print("| agreement on the subsample | ours | MovingPandas |")
    print("|---|---:|---:|")
    print(f"| stops | {len(sub_stops)} | {len(mp_stops)} |")
    print(f"| matched one-to-one by time overlap | {agree['matched']} | {agree['matched']} |")
    print(f"| stop time, intersection over union | {agree['time_iou']:.3f} | |")


def _mp_version() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import movingpandas as mpd
    return str(mpd.__version__)


if __name__ == "__main__":
    main()
