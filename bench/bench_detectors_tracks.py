"""Benchmark: tracking_gap, gps_anomaly, illegal_stand_formation, presence, habitual_absence.

Synthetic Porto Alegre fleet: ``--vehicles`` taxis over ``--days`` days (15 % days off), a fix
every 60 s for 10 h a day; each day alternates waits (5–40 min, meter free, GPS jitter σ = 4 m;
reached by driving at 40 km/h) — at the vehicle's licensed stand (one vehicle in five almost
never goes), at one of 4 free-taxi hang-outs outside every stand, or anywhere — with trips
(meter occupied, 20–50 km/h) and free cruising; 1 % of fixes are followed by a 5–20 min silence
and 0.1 % are GPS outliers 2–20 km away. Defaults give about 0.92M fixes.

Measured (one core, shared machine, 916,200 fixes): tracking_gap 0.75 s (1.2M pings/s, 2,750
findings); gps_anomaly 0.59 s (1.5M/s, 820); illegal_stand_formation 0.55 s given the stops
(1.7M/s, 5 places: the 4 hang-outs with all 60 taxis, and 3 taxis that happened to wait within
90 m of each other on 3 days); presence over 30 days 0.38 s (2.4M/s); habitual_absence 0.29 s
(3.1M/s, 12 findings: the 12 planted absentees).

Times are wall-clock on one run each (the machine is shared: repeat for stable figures);
``detect_stops`` and the stand matching/visits, which the detectors consume, are timed too.
The live rows feed the first ``--live-n`` fixes, in time order, to the kernels
(``tracking.detectors.kernel.advance``) in pieces of ``--live-batch`` fixes, as the live
engine does with each ingest batch, then close at the end of the input.

Usage::

    taskset -c 1 .venv/bin/python bench/bench_detectors_tracks.py [--vehicles 60] [--days 30]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import geopandas as gpd  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from geo.cover import build_stand_cover, match_stands  # noqa: E402
from geo.crs import buffer_points_m  # noqa: E402
from stands.presence import presence  # noqa: E402
from stands.visits import detect_visits  # noqa: E402
from tracking.detectors import gps_anomaly, tracking_gap  # noqa: E402
from tracking.detectors.gps_anomaly import detect_gps_anomaly  # noqa: E402
from tracking.detectors.habitual_absence import detect_habitual_absence  # noqa: E402
from tracking.detectors.illegal_stand_formation import (  # noqa: E402
    detect_illegal_stand_formation,
)
from tracking.detectors.kernel import State, advance  # noqa: E402
from tracking.detectors.tracking_gap import detect_tracking_gap  # noqa: E402
from tracking.stops import detect_stops  # noqa: E402
from tracking.validate import speed_flags  # noqa: E402

POA = (-30.03, -51.20)
M_PER_DEG = 111_195.0
STEP_S = 60.0


def _xy_to_latlon(north: np.ndarray, east: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lat = POA[0] + north / M_PER_DEG
    lon = POA[1] + east / (M_PER_DEG * np.cos(np.radians(POA[0])))
    return lat, lon


def synthetic_fleet(
    n_vehicles: int, n_days: int, *, seed: int
) -> tuple[pd.DataFrame, gpd.GeoDataFrame, pd.DataFrame]:
    """Return (pings, stands, licences)."""
    rng = np.random.default_rng(seed)
    stand_xy = rng.uniform(-6000, 6000, size=(20, 2))
    hangout_xy = rng.uniform(-6000, 6000, size=(4, 2))
    lat, lon = _xy_to_latlon(stand_xy[:, 0], stand_xy[:, 1])
    stands = buffer_points_m(
        gpd.GeoDataFrame(
            {"stand_id": [f"S{i:02d}" for i in range(20)]},
            geometry=gpd.points_from_xy(lon, lat),
            crs=4326,
        ),
        40.0,
    )
    licensed = rng.integers(0, 20, n_vehicles)
    day0 = pd.Timestamp("2024-03-01T11:00:00Z").value // 1_000_000_000
    parts = []
    for v in range(n_vehicles):
        # Share of waits at the licensed stand; one vehicle in five hardly ever goes there.
        habit = 0.003 if v % 5 == 0 else rng.uniform(0.1, 0.6)
        for d in range(n_days):
            if rng.random() < 0.15:
                continue  # day off
            n = int(10 * 3600 / STEP_S)
            north = np.empty(n)
            east = np.empty(n)
            meter = np.empty(n, dtype=object)
            pos = rng.uniform(-6000, 6000, 2)
            i = 0
            while i < n:
                kind = rng.choice(["wait", "trip", "cruise"], p=[0.4, 0.35, 0.25])
                if kind == "wait":
                    k = int(rng.integers(5, 40))
                    r = rng.random()
                    target = pos
                    if r < habit:
                        target = stand_xy[licensed[v]]
                    elif r < habit + 0.15:
                        target = hangout_xy[rng.integers(0, 4)] + rng.normal(0, 15, 2)
                    # Drive there at 40 km/h (free), then wait.
                    hops = int(np.ceil(np.hypot(*(target - pos)) / (40 / 3.6 * STEP_S)))
                    path = pos + np.outer(np.arange(1, hops + 1) / max(hops, 1), target - pos)
                    pos = np.asarray(target, dtype=float).copy()
                    xy = np.vstack([path, pos + rng.normal(0, 4, (k, 2))])
                    k = len(xy)
                    m = "free"
                else:
                    k = int(rng.integers(5, 30))
                    speed = rng.uniform(20, 50) / 3.6 * STEP_S
                    heading = rng.uniform(0, 2 * np.pi) + np.cumsum(rng.normal(0, 0.3, k))
                    xy = pos + np.cumsum(
                        np.column_stack([np.sin(heading), np.cos(heading)]) * speed, axis=0
                    )
                    pos = xy[-1].copy()
                    m = "occupied" if kind == "trip" else "free"
                k = min(k, n - i)
                north[i : i + k], east[i : i + k] = xy[:k, 0], xy[:k, 1]
                meter[i : i + k] = m
                i += k
            dt_s = STEP_S + rng.uniform(-2, 2, n)
            gap = rng.random(n) < 0.01
            dt_s[gap] += rng.uniform(300, 1200, gap.sum())
            ts = day0 + d * 86_400 + np.cumsum(dt_s)
            outlier = rng.random(n) < 0.001
            north[outlier] += rng.choice([-1, 1], outlier.sum()) * rng.uniform(2000, 20000)
            la, lo = _xy_to_latlon(north, east)
            parts.append(
                pd.DataFrame(
                    {
                        "vehicle_id": f"T{v:04d}",
                        "timestamp": pd.to_datetime(ts, unit="s", utc=True),
                        "lat": la,
                        "lon": lo,
                        "meter": meter,
                    }
                )
            )
    pings = pd.concat(parts, ignore_index=True)
    pings["meter"] = pings["meter"].astype("str")
    pings["timestamp"] = pings["timestamp"].astype("datetime64[ns, UTC]")
    pings["row"] = np.arange(1, len(pings) + 1, dtype=np.int64)
    codes = pd.factorize(pings["vehicle_id"])[0]
    ts_ns = pings["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    pings["speed_flag"] = speed_flags(
        codes, ts_ns, pings["lat"].to_numpy(), pings["lon"].to_numpy(), max_speed_kmh=250.0
    )
    licences = pd.DataFrame(
        {
            "vehicle_id": [f"T{v:04d}" for v in range(n_vehicles)],
            "stand_id": [f"S{s:02d}" for s in licensed],
        }
    )
    return pings, stands, licences


def _timed(label: str, n: int, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    s = time.perf_counter() - t0
    count = len(out) if hasattr(out, "__len__") else "-"
    print(f"{label:<36} {s:7.2f} s  {n / s / 1e6:6.2f} M pings/s  -> {count}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vehicles", type=int, default=60)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--live-n", type=int, default=100_000)
    parser.add_argument("--live-batch", type=int, default=100)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    t0 = time.perf_counter()
    pings, stands, licences = synthetic_fleet(args.vehicles, args.days, seed=args.seed)
    n = len(pings)
    print(
        f"{n} synthetic pings, {args.vehicles} vehicles, {args.days} days "
        f"(built in {time.perf_counter() - t0:.1f} s)"
    )

    _timed("detect_tracking_gap", n, detect_tracking_gap, pings)
    _timed("detect_gps_anomaly", n, detect_gps_anomaly, pings)
    stops = _timed("(detect_stops)", n, detect_stops, pings)
    _timed(
        "detect_illegal_stand_formation", n, detect_illegal_stand_formation, stops, pings, stands
    )
    t = time.perf_counter()
    ping, stand = match_stands(
        pings["lat"].to_numpy(), pings["lon"].to_numpy(), build_stand_cover(stands)
    )
    memberships = pd.DataFrame(
        {"ping_index": ping, "stand_id": stands["stand_id"].to_numpy()[stand]}
    )
    visits = detect_visits(pings, memberships)
    print(
        f"{'(match_stands + detect_visits)':<36} {time.perf_counter() - t:7.2f} s  "
        f"-> {len(visits)} visits"
    )
    end = dt.date(2024, 3, 1) + dt.timedelta(days=args.days - 1)
    _timed(
        "presence (30-day window)",
        n,
        presence,
        visits,
        licences,
        pings,
        start=end - dt.timedelta(days=29),
        end=end,
    )
    _timed(
        "detect_habitual_absence",
        n,
        detect_habitual_absence,
        visits,
        licences,
        pings,
        as_of=end,
        stands=stands,
    )

    live = pings.sort_values("timestamp", kind="stable").iloc[: args.live_n]
    for label, kernel in (
        ("tracking_gap (live, advance)", tracking_gap.KERNEL),
        ("gps_anomaly (live, advance)", gps_anomaly.KERNEL),
    ):
        states: dict[str, State] = {}
        t = time.perf_counter()
        found = 0
        for lo in range(0, len(live), args.live_batch):
            states, f = advance(kernel, states, live.iloc[lo : lo + args.live_batch])
            found += len(f)
        states, f = advance(kernel, states, live.iloc[:0], final=True)
        found += len(f)
        s = time.perf_counter() - t
        print(f"{label:<36} {s:7.2f} s  {len(live) / s / 1e3:6.1f} k pings/s  -> {found}")


if __name__ == "__main__":
    main()
