"""Evaluation of ``gps_anomaly`` on real Porto trips: two receivers under one id, and real failures.

Built from the real trips of ``data/porto/derived/trips_combined.csv`` (fixes every 15 s), not
from the detector's own assumptions:

- **two receivers** (negatives for an accusation under POA art. 58, IX): two real trips of
  different taxis re-timed to run at the same time under one vehicle id, the second one's
  fixes between the first one's. ``even``: the second receiver reports as often as the first
  (strict alternation, offset ``7.5 s``); ``uneven``: it reports every 30 s (A B A A B A …).
- **one receiver failing**: a real trip with a stretch of 2–10 fixes thrown 3–12 km away and
  back (multipath or a receiver fault), once, three or five times (each stretch to its own
  place); the rulebook proposes only the five (5 within an hour, ``bench_gps_days.py``).

Each case goes through :func:`detect_gps_anomaly` and the bundled Porto Alegre rulebook
(:func:`propose_all`, with its repetition rule). Reported: the share of cases with a finding,
with a proposal, and the patterns found; the same with the two-tracks reading switched off
(``MIN_TWO_TRACK_SWITCHES`` out of reach: the detector as it was before it).

Usage::

    .venv/bin/python bench/bench_gps_two_tracks.py [--pairs 300] [--seed 5]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from enforcement.proposals import propose_all  # noqa: E402
from enforcement.rulebook import bundled_rulebooks  # noqa: E402
from tracking.arrays import epoch_ns  # noqa: E402
from tracking.detectors import gps_anomaly  # noqa: E402
from tracking.porto import read_porto_trips  # noqa: E402
from tracking.validate import speed_flags  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "porto" / "derived" / "trips_combined.csv"
POA = bundled_rulebooks()[("4314902", "taxi")]
TZ = "America/Sao_Paulo"
START = pd.Timestamp("2025-03-04T10:00:00Z")
M_PER_DEG = 111_320.0


def _trips(pings: pd.DataFrame, min_fixes: int) -> list[pd.DataFrame]:
    """Real trips with at least ``min_fixes`` fixes and no impossible step of their own."""
    out = []
    for _, trip in pings.groupby("row", sort=True):
        if len(trip) >= min_fixes and not trip["speed_flag"].any():
            out.append(trip.sort_values("timestamp").reset_index(drop=True))
    return out


def _retimed(trip: pd.DataFrame, vehicle: str, start: pd.Timestamp, every_s: float) -> pd.DataFrame:
    out = trip[["lat", "lon", "meter"]].copy()
    out["vehicle_id"] = vehicle
    out["timestamp"] = start + pd.to_timedelta(np.arange(len(out)) * every_s, unit="s")
    return out


def _case(parts: list[pd.DataFrame]) -> pd.DataFrame:
    df = pd.concat(parts, ignore_index=True).sort_values("timestamp", ignore_index=True)
    df["row"] = np.arange(1, len(df) + 1)
    codes = np.zeros(len(df), dtype=np.int64)
    ts = epoch_ns(df["timestamp"])
    df["speed_flag"] = speed_flags(
        codes, ts, df["lat"].to_numpy(), df["lon"].to_numpy(), max_speed_kmh=250.0
    )
    return df


def two_receivers(
    trips: list[pd.DataFrame], rng: np.random.Generator, n: int, *, even: bool
) -> Iterator[pd.DataFrame]:
    """Pairs of real trips of different taxis under one id, interleaved."""
    for k in range(n):
        a, b = rng.choice(len(trips), 2, replace=False)
        vid = f"P{k}"
        first = _retimed(trips[a], vid, START, 15.0)
        second = _retimed(trips[b], vid, START + pd.Timedelta(seconds=7.5), 15.0 if even else 30.0)
        yield _case([first, second])


def one_receiver_failing(
    trips: list[pd.DataFrame], rng: np.random.Generator, n: int, *, times: int = 1
) -> Iterator[pd.DataFrame]:
    """A real trip with ``times`` stretches of 2–10 fixes, each thrown 3–12 km away (its own
    direction) and back, at least two fixes apart."""
    long_enough = [t for t in trips if len(np.arange(2, len(t) - 2, 13)) >= times]
    for k in range(n):
        trip = _retimed(long_enough[int(rng.integers(len(long_enough)))], f"F{k}", START, 15.0)
        lat0 = float(trip["lat"].iloc[0])
        slots = np.sort(rng.choice(np.arange(2, len(trip) - 2, 13), times, replace=False))
        for at in slots:
            idx = trip.index[at : at + int(rng.integers(2, 11))]
            away_m, angle = rng.uniform(3000, 12_000), rng.uniform(0, 2 * np.pi)
            trip.loc[idx, "lat"] += away_m * np.sin(angle) / M_PER_DEG
            trip.loc[idx, "lon"] += away_m * np.cos(angle) / (M_PER_DEG * np.cos(np.radians(lat0)))
        yield _case([trip])


def evaluate(cases: list[pd.DataFrame]) -> dict[str, object]:
    """Share of cases with a finding and with a proposal; the patterns found."""
    found_any = proposed = 0
    patterns: Counter[str] = Counter()
    for pings in cases:
        found = gps_anomaly.detect_gps_anomaly(pings)
        if found.empty:
            continue
        found_any += 1
        patterns.update(d["pattern"] for d in found["details"])
        done = propose_all(found, {"taxi": POA}, timezone=TZ)
        proposed += bool(done.proposals)
    return {"cases": len(cases), "with a finding": found_any, "proposed": proposed,
            "patterns": dict(sorted(patterns.items()))}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    pings, _, _ = read_porto_trips(DATA, now=pd.Timestamp("2030-01-01", tz="UTC"))
    trips = _trips(pings, min_fixes=40)  # 10 min or more
    print(f"{len(trips)} real Porto trips of 40 fixes or more without an impossible step")

    def rng() -> np.random.Generator:
        return np.random.default_rng(a.seed)

    sets = {
        "two receivers, even": list(two_receivers(trips, rng(), a.pairs, even=True)),
        "two receivers, uneven": list(two_receivers(trips, rng(), a.pairs, even=False)),
        "one receiver failing once": list(one_receiver_failing(trips, rng(), a.pairs)),
        "one receiver failing 3 times": list(one_receiver_failing(trips, rng(), a.pairs, times=3)),
        "one receiver failing 5 times": list(one_receiver_failing(trips, rng(), a.pairs, times=5)),
    }
    print("\n| set | reading | cases | with a finding | proposed (art. 58, IX) | patterns |")
    print("|---|---|---:|---:|---:|---|")
    for name, cases in sets.items():
        for reading, patch in (("two tracks", None), ("before (no two-tracks reading)", True)):
            if patch:
                with mock.patch.object(gps_anomaly, "MIN_TWO_TRACK_SWITCHES", 10**9):
                    r = evaluate(cases)
            else:
                r = evaluate(cases)
            print(f"| {name} | {reading} | {r['cases']} | {r['with a finding']} | "
                  f"{r['proposed']} | {r['patterns']} |")  # fmt: skip


if __name__ == "__main__":
    main()
