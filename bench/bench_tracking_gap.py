"""tracking_gap (POA art. 58, IX) on real Porto trips: silences that hide a ride, and look-alikes.

A tracker silent while a passenger is aboard is proposed under art. 58, IX ("deixar
disponibilizar de forma plena ... o Subsistema de Rastreamento"). Silences that hide no
trajectory look the same to a rule that reads only the meter and the clock. Each case here is a
real trip of ``data/porto/derived/trips_combined.csv`` (its fixes, speeds and GPS errors as
recorded, every 15 s, meter occupied), changed in one way:

positives (the tracking hid the car's movement)
    - ``hidden_stretch``: 6–20 min of the trip's own fixes removed from its middle;
    - ``hidden_to_end``: the fixes removed from the middle of the trip to its end, the car then
      free where the trip ended 1–5 min later, driving off (the passenger left during the
      silence).
look-alikes (nothing hidden)
    - ``underground_dropoff``: after the trip's last fix, 6–20 min of silence (a car park under
      the destination), then free fixes 50–400 m away, driving off;
    - ``wait_meter_on``: the trip stops for 6–40 min at one of its fixes with the meter on
      (art. 26: the passenger asked the taxi to wait) and a tracker that sends only when it
      moves (a distance filter); the trip's next fixes come after the wait;
    - ``night_after_ride``: after the trip's last fix, 4–12 h of silence, then free fixes 2–60
      km away (the car parked for the night at the driver's home, driven to the next shift);
    - ``slow_tracker_late``: the trip as a tracker reporting every 60 s sends it, one report
      315–345 s after the one before (a few reports lost: under 5 min without tracking);
    - ``default_300s``: the trip as Traccar Client's default sends it, a report every 300 or
      315 s (the interval the app ships with; nothing is hidden between two reports).

Each case goes through :func:`detect_tracking_gap` and :func:`propose_all` under the bundled
Porto Alegre rulebook, and under the same rulebook without its ``still`` and ``after_ride``
conditions and with the confidence not halved for them (every finding above the floor
proposed, as before those rules). Reported per
scenario: the cases with a finding, with a proposal, and listed for review; and the ROC of the
silence's straight-line speed (``implied_speed_kmh``), which the ``still`` rule thresholds.

Usage::

    .venv/bin/python bench/bench_tracking_gap.py [--cases 300] [--seed 4]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gps_days import real_trips  # noqa: E402
from bench_gps_two_tracks import M_PER_DEG, POA, START, TZ, _case  # noqa: E402
from bench_longer_route_eval import roc_auc, roc_curve  # noqa: E402

from enforcement.proposals import propose_all  # noqa: E402
from enforcement.rulebook import Rulebook  # noqa: E402
from tracking.detectors.tracking_gap import (  # noqa: E402
    DEFAULT_STILL_SPEED_KMH,
    REVIEW_CONFIDENCE_FACTOR,
    detect_tracking_gap,
)

Trip = pd.DataFrame
Maker = Callable[[list[Trip], np.random.Generator, str], pd.DataFrame]
COLUMNS = ["vehicle_id", "timestamp", "lat", "lon", "meter"]


def _retimed(trip: Trip, vehicle: str) -> pd.DataFrame:
    part = trip[["lat", "lon", "meter"]].copy()
    part["vehicle_id"] = vehicle
    part["timestamp"] = START + (trip["timestamp"] - trip["timestamp"].iloc[0])
    return part[COLUMNS]


def _free_fixes(
    lat: float, lon: float, at: pd.Timestamp, vehicle: str, rng: np.random.Generator
) -> pd.DataFrame:
    """Four free fixes 15 s apart from (lat, lon), driving off at 20–40 km/h."""
    step_m, angle = rng.uniform(80, 170), rng.uniform(0, 2 * np.pi)
    k = np.arange(4)
    return pd.DataFrame(
        {
            "vehicle_id": vehicle,
            "timestamp": [at + pd.Timedelta(seconds=15 * int(i)) for i in k],
            "lat": lat + k * step_m * np.sin(angle) / M_PER_DEG,
            "lon": lon + k * step_m * np.cos(angle) / (M_PER_DEG * np.cos(np.radians(lat))),
            "meter": "free",
        }
    )


def _offset(lat: float, lon: float, metres: float, rng: np.random.Generator) -> tuple[float, float]:
    angle = rng.uniform(0, 2 * np.pi)
    return (
        lat + metres * np.sin(angle) / M_PER_DEG,
        lon + metres * np.cos(angle) / (M_PER_DEG * np.cos(np.radians(lat))),
    )


def _long_trip(trips: list[Trip], rng: np.random.Generator, min_s: float) -> Trip:
    while True:
        trip = trips[int(rng.integers(len(trips)))]
        if (trip["timestamp"].iloc[-1] - trip["timestamp"].iloc[0]).total_seconds() >= min_s:
            return trip


def hidden_stretch(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(_long_trip(trips, rng, 8.5 * 60), vehicle)
    elapsed = (trip["timestamp"] - START).dt.total_seconds()
    silence = rng.uniform(360, min(1200, elapsed.iloc[-1] - 120))
    start = rng.uniform(60, elapsed.iloc[-1] - 60 - silence)
    return _case([trip[(elapsed <= start) | (elapsed >= start + silence)]])


def hidden_to_end(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(_long_trip(trips, rng, 6 * 60), vehicle)
    elapsed = (trip["timestamp"] - START).dt.total_seconds()
    start = rng.uniform(60, elapsed.iloc[-1] - 240)
    end = trip.iloc[-1]
    after = _free_fixes(end["lat"], end["lon"], end["timestamp"], vehicle, rng)
    after["timestamp"] += pd.Timedelta(seconds=rng.uniform(60, 300))
    return _case([trip[elapsed <= start], after])


def underground_dropoff(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(trips[int(rng.integers(len(trips)))], vehicle)
    end = trip.iloc[-1]
    lat, lon = _offset(end["lat"], end["lon"], rng.uniform(50, 400), rng)
    at = end["timestamp"] + pd.Timedelta(seconds=rng.uniform(360, 1200))
    return _case([trip, _free_fixes(lat, lon, at, vehicle, rng)])


def wait_meter_on(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(_long_trip(trips, rng, 4 * 60), vehicle)
    cut = int(rng.integers(4, len(trip) - 4))
    later = trip.iloc[cut + 1 :].copy()
    later["timestamp"] += pd.Timedelta(seconds=rng.uniform(360, 2400))
    return _case([trip.iloc[: cut + 1], later])


def night_after_ride(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(trips[int(rng.integers(len(trips)))], vehicle)
    end = trip.iloc[-1]
    lat, lon = _offset(end["lat"], end["lon"], rng.uniform(2000, 60_000), rng)
    at = end["timestamp"] + pd.Timedelta(hours=rng.uniform(4, 12))
    return _case([trip, _free_fixes(lat, lon, at, vehicle, rng)])


def slow_tracker_late(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(_long_trip(trips, rng, 16 * 60), vehicle)
    at = int(rng.integers(2, (len(trip) - 30) // 4)) * 4  # a report of the 60 s cadence
    late = at + int(rng.integers(21, 24))  # 315–345 s later
    keep = list(range(0, at + 1, 4)) + list(range(late, len(trip), 4))
    return _case([trip.iloc[keep]])


def default_300s(trips: list[Trip], rng: np.random.Generator, vehicle: str) -> pd.DataFrame:
    trip = _retimed(_long_trip(trips, rng, 25 * 60), vehicle)
    steps = rng.choice([20, 20, 21], size=len(trip))  # 300 or 315 s
    keep = np.cumsum(np.r_[0, steps])
    return _case([trip.iloc[keep[keep < len(trip)]]])


SCENARIOS: dict[str, tuple[bool, Maker]] = {
    "hidden_stretch": (True, hidden_stretch),
    "hidden_to_end": (True, hidden_to_end),
    "underground_dropoff": (False, underground_dropoff),
    "wait_meter_on": (False, wait_meter_on),
    "night_after_ride": (False, night_after_ride),
    "slow_tracker_late": (False, slow_tracker_late),
    "default_300s": (False, default_300s),
}


def without_rules(book: Rulebook) -> Rulebook:
    """The rulebook with tracking_gap's rule for every finding and no review case for it."""
    rules = tuple(
        r.model_copy(update={"when": {}}) if r.kind == "tracking_gap" else r for r in book.rules
    )
    review = tuple(c for c in book.review if c.kind != "tracking_gap")
    return book.model_copy(update={"rules": rules, "review": review})


def as_before(found: pd.DataFrame) -> pd.DataFrame:
    """The findings with the confidence they had before the two rules (not halved)."""
    review = found["details"].map(lambda d: bool(d["still"] or d["after_ride"])).to_numpy(bool)
    factor = np.where(review, REVIEW_CONFIDENCE_FACTOR, 1.0)
    return found.assign(confidence=found["confidence"].to_numpy(dtype=float) / factor)


def judge(case: pd.DataFrame, books: dict[str, Rulebook]) -> dict[str, float]:
    found = detect_tracking_gap(case)
    out: dict[str, float] = {
        "finding": float(len(found) > 0),
        "speed": max((float(d["implied_speed_kmh"]) for d in found["details"]), default=np.nan),
    }
    for name, book in books.items():
        judged = found if book is POA else as_before(found)
        done = propose_all(judged, {"taxi": book}, timezone=TZ) if len(found) else None
        out[name] = float(bool(done and done.proposals))
        out[f"{name} review"] = float(bool(done and done.for_review))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300, help="cases per scenario")
    ap.add_argument("--seed", type=int, default=4)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    trips = real_trips()
    books = {"bundled": POA, "without the rules": without_rules(POA)}
    rows = []
    for name, (positive, make) in SCENARIOS.items():
        for k in range(a.cases):
            verdict = judge(make(trips, rng, f"{name[:2].upper()}{k}"), books)
            rows.append({"scenario": name, "positive": positive, **verdict})
    df = pd.DataFrame(rows)
    print(f"{len(trips):,} real Porto trips; {a.cases} cases per scenario, seed {a.seed}\n")
    print(
        "| scenario | truth | cases | finding | proposed | for review "
        "| proposed without the two rules |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for scenario, g in df.groupby("scenario", sort=False):
        truth = "positive" if g["positive"].iloc[0] else "look-alike"
        print(
            f"| `{scenario}` | {truth} | {len(g)} | {int(g['finding'].sum())} | "
            f"{int(g['bundled'].sum())} | {int(g['bundled review'].sum())} | "
            f"{int(g['without the rules'].sum())} |"
        )
    pos, neg = df[df["positive"]], df[~df["positive"]]
    for name in books:
        tp, fp = int(pos[name].sum()), int(neg[name].sum())
        precision = tp / (tp + fp) if tp + fp else float("nan")
        print(
            f"\n{name}: precision {precision:.3f}, recall {tp / len(pos):.3f}, "
            f"FPR {fp / len(neg):.3f} (proposals)"
        )
    # The still rule's score: the silence's straight-line speed; a case without a finding scores 0.
    ps, ns = pos["speed"].fillna(0).to_numpy(), neg["speed"].fillna(0).to_numpy()
    print(f"\nROC of implied_speed_kmh (no finding = 0): AUC {roc_auc(ps, ns):.3f}")
    curve = roc_curve(ps, ns)
    print("\n| speed ≥ (km/h) | recall | FPR |\n|---:|---:|---:|")
    for t in (1.0, 2.0, 3.0, DEFAULT_STILL_SPEED_KMH, 8.0, 10.0, 15.0):
        row = curve[curve["threshold"] >= t].iloc[-1] if (curve["threshold"] >= t).any() else None
        tpr, fpr = (row["tpr"], row["fpr"]) if row is not None else (0.0, 0.0)
        print(f"| {t:g} | {tpr:.3f} | {fpr:.3f} |")


if __name__ == "__main__":
    main()
